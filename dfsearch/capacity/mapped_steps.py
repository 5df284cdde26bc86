"""Step times from dfsearch's own mappings: the adapter between ``dfsearch run`` (one
serving step at a fixed batch) and the request-level simulation (docs/serving.md,
"Capacity search").

For one replica shape (TP x PP chips) a :class:`MappedSteps` holds two tables, each point
the step latency of the optimised mapping of one serving step, searched once
(:class:`StepCache`):

* **prefill**: a prefill of n prompt tokens (batch 1, ``prompt_len = n``), at the token
  counts of :func:`prefill_grid`;
* **decode**: a decode step of batch b at c context tokens per sequence (``prompt_len = c -
  1``, ``output_len = 1``: the model reads the KV cache at the mean context ``prompt_len +
  ceil(output_len / 2) = c``), at the batches of :func:`batch_grid` x the contexts of
  :func:`context_grid`.

Interpolation: prefill time linear in the tokens between the two neighbouring grid counts;
decode time bilinear in (batch, context per sequence) between the neighbouring grid points.
Neither is ever extrapolated: a token count or a batch outside its grid is a
:class:`SpecError`. The context per sequence is clipped to its grid, which spans the
shortest prompt + 1 to the longest prompt + output of the requests: no decode reads less or
more (the excess of the iteration's context, see below, belongs to prompts still being
prefilled).

Composition of one iteration that computes ``p`` prefill tokens and ``d`` decodes with
``C`` context tokens: ``prefill(p) + decode(d, (C - p) / d)`` -- the two passes back to
back. It is an upper bound on a fused pass, which reads the weights once (the saving is at
most one weight read, ``weight bytes / DRAM bandwidth`` per chip); ``C - p`` also counts the
earlier chunks of a prompt in prefill, hence the clip above. A prefill of p tokens is
timed as one prompt of p tokens: several short prompts in one iteration (less attention
work) and a later chunk of a long prompt (more: it reads the earlier chunks) are
approximated by it. :class:`FreePrefill` (a decode pool, whose prompts' KV comes from a
prefill pool) drops the prefill term.

A replica is timed as one step at a time through all its pipeline stages (the step
latency), so PP adds memory, not pipelined throughput: an upper bound on a pipelined
replica's step time.

>>> import numpy as np
>>> from dfsearch.capacity.steps import TabulatedSteps
>>> dec = TabulatedSteps(tokens=(1, 4), contexts=(100, 300), seconds=((1.0, 2.0), (4.0, 5.0)))
>>> s = MappedSteps((1, 11), (0.5, 1.5), dec, kv_bytes_per_token=2.0)
>>> float(s.step_s(6, 0, 6)), float(s.step_s(0, 1, 200)), float(s.step_s(6, 1, 206))
(1.0, 1.5, 2.5)
>>> prefill_grid([2048, 512]), batch_grid([32, 256]), context_grid(64, 4352)
((1, 8, 32, 128, 512, 2048), (1, 4, 16, 32, 64, 256), (64, 4352))
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dfsearch.capacity.steps import TabulatedSteps
from dfsearch.codes import ServingPhase
from dfsearch.errors import Issue, SpecError

__all__ = ["Shape", "StepPoint", "Measured", "StepCache", "MappedSteps", "FreePrefill", "ReplicaModel", "replica_model",
           "prefill_grid", "batch_grid", "context_grid", "digest"]


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """A replica's mapping shape: ``tp`` x ``pp`` chips (DP 1 inside a replica) of the chip
    named ``chip`` ("" when the spec offers one chip), at ``dollars_per_chip_hour`` (not
    part of the shape's identity)."""

    tp: int
    pp: int
    chip: str = ""
    dollars_per_chip_hour: float = field(default=0.0, compare=False)

    @property
    def chips(self) -> int:
        return self.tp * self.pp

    @property
    def dollars_per_hour(self) -> float:
        """One replica's price."""
        return self.chips * self.dollars_per_chip_hour

    def __str__(self) -> str:
        return f"TP {self.tp} x PP {self.pp}" + (f" {self.chip}" if self.chip else "")


@dataclass(frozen=True, slots=True)
class StepPoint:
    """One serving step to search: its phase, shape, batch and ``prompt_len``."""

    phase: ServingPhase
    shape: Shape
    batch: int
    prompt_len: int


@dataclass(frozen=True, slots=True)
class Measured:
    """What one search gives: the step latency and the per-chip weight and KV bytes."""

    seconds: float
    weight_bytes_per_chip: float
    kv_bytes_per_chip: float


#: searches one step; a string says why no mapping fits (e.g. the weights exceed the DRAM)
Measure = Callable[[StepPoint], "Measured | str"]


def digest(data: object) -> str:
    """A short stable hash of JSON-able data (a base spec's tables): the cache's spec key."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


class StepCache:
    """Each (spec digest, step point) searched once: later asks read the memo.
    ``searches`` counts the searches run. Local to one caller (no global state)."""

    def __init__(self, measure: Measure, spec_digest: str) -> None:
        self._measure, self._digest = measure, spec_digest
        self._memo: dict[tuple[str, StepPoint], Measured | str] = {}
        self.searches = 0

    def get(self, point: StepPoint) -> Measured | str:
        key = (self._digest, point)
        if key not in self._memo:
            self.searches += 1
            self._memo[key] = self._measure(point)
        return self._memo[key]

    @property
    def digest(self) -> str:
        return self._digest

    def entries(self) -> dict[StepPoint, Measured | str]:
        """The points of this spec known so far (searched or preloaded)."""
        return {p: m for (d, p), m in self._memo.items() if d == self._digest}

    def preload(self, entries: dict[StepPoint, Measured | str]) -> None:
        """Points searched before (a step store): not searched again."""
        for p, m in entries.items():
            self._memo[(self._digest, p)] = m


@dataclass(frozen=True, slots=True)
class MappedSteps:
    """Step times of one replica shape (module docstring: the tables, interpolation and
    composition rules). ``prefill_tokens``/``prefill_s``: the prefill table (empty with
    :class:`FreePrefill`); ``decode``: batch x context-per-sequence table."""

    prefill_tokens: tuple[int, ...]
    prefill_s: tuple[float, ...]
    decode: TabulatedSteps
    kv_bytes_per_token: float

    #: an iteration's time is its prefill's plus its decodes' (the composition rule), so a
    #: replica's busy time is at least the sum of the two works (the search's bound)
    additive = True

    def prefill_time(self, tokens):
        if np.ndim(tokens) == 0 and self.prefill_tokens[0] <= tokens <= self.prefill_tokens[-1]:
            i = bisect_right(self.prefill_tokens, tokens) - 1
            if self.prefill_tokens[i] == tokens:
                return self.prefill_s[i]
            x0, x1 = self.prefill_tokens[i], self.prefill_tokens[i + 1]
            return self.prefill_s[i] + (tokens - x0) / (x1 - x0) * (self.prefill_s[i + 1] - self.prefill_s[i])
        lo, hi = np.min(tokens), np.max(tokens)
        if lo < self.prefill_tokens[0] or hi > self.prefill_tokens[-1]:
            raise SpecError(Issue("steps.prefill", f"has no time for {hi if hi > self.prefill_tokens[-1] else lo} "
                                  f"tokens: the table covers {self.prefill_tokens[0]}..{self.prefill_tokens[-1]} "
                                  "and is never extrapolated."))
        return np.interp(tokens, self.prefill_tokens, self.prefill_s)

    def decode_time(self, decodes, context_per_seq):
        lo, hi = self.decode.contexts[0], self.decode.contexts[-1]
        if np.ndim(decodes) == 0 and np.ndim(context_per_seq) == 0:
            return self.decode.step_s(int(decodes), 0, min(max(round(context_per_seq), lo), hi))
        return self.decode.step_s(decodes, 0, np.clip(np.rint(context_per_seq), lo, hi).astype(np.int64))

    def step_s(self, prefill_tokens, decode_seqs, context_tokens):
        if np.ndim(prefill_tokens) == 0 and np.ndim(decode_seqs) == 0:
            t = self.prefill_time(prefill_tokens) if prefill_tokens > 0 else 0.0
            if decode_seqs > 0:
                t = t + self.decode_time(decode_seqs, (context_tokens - prefill_tokens) / decode_seqs)
            return t
        p, d, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in
                                        (prefill_tokens, decode_seqs, context_tokens)))
        t = np.where(p > 0, self.prefill_time(np.maximum(p, 1)) if (p > 0).any() else 0.0, 0.0)
        if (d > 0).any():
            safe = np.maximum(d, 1)
            t = t + np.where(d > 0, self.decode_time(safe, (c - p) / safe), 0.0)
        return t


@dataclass(frozen=True, slots=True)
class FreePrefill:
    """The step times of ``steps`` with the prefill work free: ``step_s(p, d, C) =
    steps.step_s(0, d, C - p)`` when ``d > 0``, else 0 (a decode replica admitting a request
    whose KV cache was computed elsewhere)."""

    steps: object

    @property
    def kv_bytes_per_token(self) -> float:
        return self.steps.kv_bytes_per_token

    def step_s(self, prefill_tokens, decode_seqs, context_tokens):
        if np.ndim(decode_seqs) == 0 and np.ndim(prefill_tokens) == 0:
            return self.steps.step_s(0, decode_seqs, context_tokens - prefill_tokens) if decode_seqs > 0 else 0.0
        d = np.asarray(decode_seqs)
        t = self.steps.step_s(0, np.maximum(d, 1), np.subtract(context_tokens, prefill_tokens))
        return np.where(d > 0, t, 0.0)


@dataclass(frozen=True, slots=True)
class ReplicaModel:
    """One replica shape, ready to simulate: step times with and without the prefill cost
    and the bytes it can give the KV cache."""

    shape: Shape
    steps: object  #: a StepTimes: MappedSteps from dfsearch, or a closed form
    decode_only: object  #: the same, prefill free (FreePrefill): a decode pool
    kv_capacity_bytes: float
    weight_bytes_per_chip: float
    max_batch: int = 2**62  #: the largest decode batch the tables hold
    max_prefill_tokens: int = 2**62  #: the most prefill tokens of one iteration they hold
    watts_per_chip: float = float("nan")  #: the chip's power (NaN: no figure): energy per token


def prefill_grid(chunks) -> tuple[int, ...]:
    """Prefill token counts: 1 and, for each chunk size c, c / 4^k down to 8."""
    out = {1}
    for c in chunks:
        while c >= 8:
            out.add(int(c))
            c //= 4
    return tuple(sorted(out))


def batch_grid(caps) -> tuple[int, ...]:
    """Decode batches: 1, the powers of 4 below the largest cap, and every cap."""
    top = max(caps)
    return tuple(sorted({1, *caps, *(4**k for k in range(1, 20) if 4**k < top)}))


def context_grid(lo: int, hi: int) -> tuple[int, ...]:
    """Context per sequence: the shortest and the longest (a decode step's time is linear in
    the KV bytes it reads while its bound and mapping do not change; benchmarks/serve.py
    --interpolation measures the error where they do)."""
    return tuple(sorted({lo, hi}))


def replica_model(cache: StepCache, shape: Shape, *, prefills: tuple[int, ...], batches: tuple[int, ...],
                  contexts: tuple[int, ...], usable_bytes_per_chip: float,
                  watts_per_chip: float = float("nan")) -> ReplicaModel | str:
    """The step tables of ``shape`` (each point from ``cache``), or why it cannot serve: no
    mapping fits even the smallest step, or no memory is left for the KV cache. The tables
    stop before the first prefill count, or the first batch (at any context), that no mapping
    fits (``ReplicaModel.max_prefill_tokens``, ``max_batch``): larger chunks and batch caps
    are not served by this shape."""
    pre = _prefix([cache.get(StepPoint(ServingPhase.PREFILL, shape, 1, n))] for n in prefills)
    if isinstance(pre, str):
        return pre
    weights = pre[0][0].weight_bytes_per_chip
    kv_capacity = shape.chips * (usable_bytes_per_chip - weights)
    if kv_capacity <= 0:
        return (f"the weights take {weights / 1e9:.4g} GB per chip, the usable DRAM is "
                f"{usable_bytes_per_chip / 1e9:.4g} GB: no room for a KV cache")
    dec = _prefix([cache.get(StepPoint(ServingPhase.DECODE, shape, b, c - 1)) for c in contexts]
                  for b in batches)
    if isinstance(dec, str):
        return dec
    n = prefills[len(pre) - 1]
    kv_per_token = pre[-1][0].kv_bytes_per_chip * shape.chips / (n + 1)  # prompt n + output 1
    table = TabulatedSteps(batches[: len(dec)], contexts, tuple(tuple(m.seconds for m in row) for row in dec),
                           kv_per_token)
    steps = MappedSteps(prefills[: len(pre)], tuple(row[0].seconds for row in pre), table, kv_per_token)
    return ReplicaModel(shape, steps, FreePrefill(steps), kv_capacity, weights, max_batch=table.tokens[-1],
                        max_prefill_tokens=steps.prefill_tokens[-1], watts_per_chip=watts_per_chip)


def _prefix(rows) -> list[list[Measured]] | str:
    """The rows (made one at a time) before the first with a point no mapping fits; that
    point's reason if it is the first row."""
    out = []
    for r in rows:
        bad = next((m for m in r if isinstance(m, str)), None)
        if bad is not None:
            return out or bad
        out.append(r)
    return out
