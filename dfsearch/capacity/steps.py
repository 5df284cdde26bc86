"""Step times: how long one iteration of a replica takes for the work it does.

An iteration (one forward pass of the replica's model) computes ``prefill_tokens`` prompt
tokens (whole prompts or chunks of them) and one token for each of ``decode_seqs``
generating sequences; ``context_tokens`` is the sum, over the sequences of the iteration,
of the tokens in each one's KV cache after the iteration (what the attention reads). The
simulator asks a :class:`StepTimes` for that time, and for the bytes one token's KV cache
takes (to turn a replica's KV memory into a number of tokens).

Two implementations:

* :class:`AffineSteps`: ``base_s + per_token_s x (prefill_tokens + decode_seqs) +
  per_context_token_s x context_tokens``, a closed form (the tests' known service times).
* :class:`TabulatedSteps`: times measured on a grid of (tokens computed, context tokens)
  points, bilinear in between, never extrapolated: a point outside the grid is an error.

The seam for dfsearch's own step times: a later adapter fills a :class:`TabulatedSteps`
grid point (n tokens, C context tokens) with the step latency of the optimised mapping of
the matching serving step (a prefill of n tokens, or a decode step of batch n at a context
of C / n tokens per sequence), searched once per grid point and cached; this module only
reads the table.

>>> AffineSteps(base_s=0.01, per_token_s=0.001).step_s(100, 4, 0)
0.114
>>> t = TabulatedSteps(tokens=(1, 101), contexts=(0, 1000), seconds=((1.0, 2.0), (3.0, 4.0)))
>>> float(t.step_s(51, 0, 500))
2.5
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

import numpy as np

from dfsearch.capacity._checks import is_real, require
from dfsearch.errors import Issue, SpecError

__all__ = ["StepTimes", "AffineSteps", "TabulatedSteps"]


class StepTimes(Protocol):
    """What the simulator needs to know of a replica's model and mapping."""

    kv_bytes_per_token: float

    def step_s(self, prefill_tokens, decode_seqs, context_tokens):
        """Seconds of one iteration; arguments are ints or numpy arrays (broadcast)."""


@dataclass(frozen=True, slots=True)
class AffineSteps:
    """A step time affine in the tokens computed and the context tokens read."""

    base_s: float
    per_token_s: float
    per_context_token_s: float = 0.0
    kv_bytes_per_token: float = 1.0

    def __post_init__(self) -> None:
        for name in ("base_s", "per_token_s", "per_context_token_s"):
            value = getattr(self, name)
            require(is_real(value) and value >= 0, f"steps.{name}", ">= 0", value)
        require(is_real(self.kv_bytes_per_token) and self.kv_bytes_per_token > 0, "steps.kv_bytes_per_token",
                "> 0", self.kv_bytes_per_token)
        if not self.base_s + self.per_token_s > 0:
            raise SpecError(Issue("steps", "must give every iteration a positive time: base_s + per_token_s > 0."))

    def step_s(self, prefill_tokens, decode_seqs, context_tokens):
        return (self.base_s + self.per_token_s * (prefill_tokens + decode_seqs)
                + self.per_context_token_s * context_tokens)


@dataclass(frozen=True, slots=True)
class TabulatedSteps:
    """Step times on a grid: ``seconds[i][j]`` is the time of an iteration computing
    ``tokens[i]`` tokens (prefill tokens + decode sequences) with ``contexts[j]`` context
    tokens. Between grid points the time is bilinear (linear in the tokens, linear in the
    context); outside the grid there is no time: :class:`SpecError`. A one-point axis
    admits only its own value."""

    tokens: tuple[int, ...]
    contexts: tuple[int, ...]
    seconds: tuple[tuple[float, ...], ...]
    kv_bytes_per_token: float = 1.0

    def __post_init__(self) -> None:
        require(is_real(self.kv_bytes_per_token) and self.kv_bytes_per_token > 0, "steps.kv_bytes_per_token",
                "> 0", self.kv_bytes_per_token)
        for name in ("tokens", "contexts"):
            axis = getattr(self, name)
            if not axis or any(b <= a for a, b in pairwise(axis)):
                raise SpecError(Issue(f"steps.{name}", f"must be increasing and not empty. Got {axis!r} instead."))
        grid = np.asarray(self.seconds, dtype=np.float64)
        if grid.shape != (len(self.tokens), len(self.contexts)) or not (grid > 0).all():
            raise SpecError(Issue("steps.seconds", f"must be {len(self.tokens)} x {len(self.contexts)} "
                                  f"positive times. Got shape {grid.shape} instead."))

    def step_s(self, prefill_tokens, decode_seqs, context_tokens):
        n, c = np.add(prefill_tokens, decode_seqs), context_tokens
        if np.ndim(n) == 0 and np.ndim(c) == 0:
            return self._scalar(int(n), int(c))
        n, c = np.broadcast_arrays(np.asarray(n, dtype=np.float64), np.asarray(c, dtype=np.float64))
        self._check(n.min(), c.min())
        self._check(n.max(), c.max())
        if n.min() == n.max():  # one token count (a run of decode steps): two rows at most
            i, f = _cell(self.tokens, int(n.flat[0]))
            low = np.interp(c, self.contexts, self.seconds[i])  # linear in the context
            return low if f == 0 else (1 - f) * low + f * np.interp(c, self.contexts, self.seconds[i + 1])
        tokens = np.asarray(self.tokens, dtype=np.float64)
        rows = [np.interp(c, self.contexts, r) for r in self.seconds]
        flat = n.ravel()
        i = np.searchsorted(tokens, flat, side="right") - 1
        j = np.minimum(i + 1, len(tokens) - 1)
        width = tokens[j] - tokens[i]
        f = np.where(width > 0, (flat - tokens[i]) / np.where(width > 0, width, 1.0), 0.0)
        grid, cols = np.stack(rows).reshape(len(tokens), -1), np.arange(flat.size)
        return ((1 - f) * grid[i, cols] + f * grid[j, cols]).reshape(n.shape)

    def _check(self, n: float, c: float) -> None:
        if not (self.tokens[0] <= n <= self.tokens[-1] and self.contexts[0] <= c <= self.contexts[-1]):
            raise SpecError(Issue("steps", f"has no time for {n:g} tokens at {c:g} context tokens: the "
                                  f"table covers tokens {self.tokens[0]}..{self.tokens[-1]} and context "
                                  f"{self.contexts[0]}..{self.contexts[-1]} and is never extrapolated."))

    def _scalar(self, n: int, c: int) -> float:
        self._check(n, c)
        i, fi = _cell(self.tokens, n)
        j, fj = _cell(self.contexts, c)
        row = self.seconds[i]
        t = row[j] if fj == 0 else (1 - fj) * row[j] + fj * row[j + 1]
        if fi == 0:
            return t
        row = self.seconds[i + 1]
        return (1 - fi) * t + fi * (row[j] if fj == 0 else (1 - fj) * row[j] + fj * row[j + 1])


def _cell(axis: tuple[int, ...], x: int) -> tuple[int, float]:
    """The grid interval holding ``x``: its lower index and the fraction of the way across
    (0 at a grid point, so a one-point axis never reads past its end)."""
    i = bisect_right(axis, x) - 1
    if axis[i] == x:
        return i, 0.0
    return i, (x - axis[i]) / (axis[i + 1] - axis[i])

