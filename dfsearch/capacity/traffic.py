"""Traffic: when requests arrive and how many prompt and output tokens each has.

An arrival process (:class:`Poisson` or a replayed :class:`TraceArrivals` file) and two
length distributions (:class:`Fixed`, :class:`Uniform`, :class:`LogNormal`, or
:class:`FromTrace`, drawn from a trace's column) make a :class:`Traffic`;
:func:`requests` draws ``n`` requests from it. The draw is seeded and deterministic: the
arrival times, the prompt lengths and the output lengths each come from their own stream of
``numpy.random.SeedSequence(seed).spawn(3)``, so changing one distribution leaves the other
two draws unchanged.

>>> r = requests(Traffic(Poisson(2.0), Fixed(512), Uniform(1, 4)), 3, seed=7)
>>> r.prompt_tokens.tolist(), bool((r.output_tokens <= 4).all()), len(r)
([512, 512, 512], True, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsearch.capacity._checks import is_int, is_real, require
from dfsearch.capacity.trace import Trace, read_trace
from dfsearch.errors import Issue, SpecError

__all__ = [
    "Poisson", "TraceArrivals", "Fixed", "Uniform", "LogNormal", "FromTrace", "Traffic",
    "Requests", "requests",
]


@dataclass(frozen=True, slots=True)
class Poisson:
    """Poisson arrivals: independent exponential gaps of mean 1 / ``rate_per_s``, the first
    request one gap after time 0."""

    rate_per_s: float

    def __post_init__(self) -> None:
        require(is_real(self.rate_per_s) and self.rate_per_s > 0, "traffic.arrivals.rate_per_s", "> 0", self.rate_per_s)


@dataclass(frozen=True, slots=True)
class TraceArrivals:
    """The arrival times of a trace file's first ``n`` rows, in the file's order
    (:mod:`dfsearch.capacity.trace` gives the format)."""

    path: str


@dataclass(frozen=True, slots=True)
class Fixed:
    """Every request has ``n`` tokens."""

    n: int

    def __post_init__(self) -> None:
        require(is_int(self.n) and self.n >= 1, "traffic.length.n", "an integer >= 1", self.n)


@dataclass(frozen=True, slots=True)
class Uniform:
    """Integers from ``lo`` to ``hi``, both included, equally likely."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        require(is_int(self.lo) and self.lo >= 1, "traffic.length.lo", "an integer >= 1", self.lo)
        require(is_int(self.hi) and self.hi >= self.lo, "traffic.length.hi", f"an integer >= lo ({self.lo})", self.hi)


@dataclass(frozen=True, slots=True)
class LogNormal:
    """``round(median * exp(sigma * Z))`` with Z standard normal, clipped to [lo, hi]: the
    logarithm of the length is normal with mean ln(median) and standard deviation sigma."""

    median: float
    sigma: float
    lo: int = 1
    hi: int = 1 << 20

    def __post_init__(self) -> None:
        require(is_real(self.median) and self.median > 0, "traffic.length.median", "> 0", self.median)
        require(is_real(self.sigma) and self.sigma >= 0, "traffic.length.sigma", ">= 0", self.sigma)
        require(is_int(self.lo) and self.lo >= 1, "traffic.length.lo", "an integer >= 1", self.lo)
        require(is_int(self.hi) and self.hi >= self.lo, "traffic.length.hi", f"an integer >= lo ({self.lo})", self.hi)


@dataclass(frozen=True, slots=True)
class FromTrace:
    """Lengths drawn uniformly, with replacement, from one column of a trace file
    (``prompt_tokens`` for prompts, ``output_tokens`` for outputs)."""

    path: str


Arrivals = Poisson | TraceArrivals
Length = Fixed | Uniform | LogNormal | FromTrace


@dataclass(frozen=True, slots=True)
class Traffic:
    """An arrival process and the prompt and output length distributions. A length left
    ``None`` is the trace's own column, row by row (only with :class:`TraceArrivals`)."""

    arrivals: Arrivals
    prompt: Length | None = None
    output: Length | None = None

    def __post_init__(self) -> None:
        for name in ("prompt", "output"):
            if getattr(self, name) is None and not isinstance(self.arrivals, TraceArrivals):
                raise SpecError(Issue(f"traffic.{name}", "must be given: only a trace's arrivals "
                                      "bring their own lengths."))


@dataclass(frozen=True, slots=True)
class Requests:
    """``n`` requests, sorted by arrival: numpy arrays of one entry per request."""

    arrival_s: np.ndarray  #: float64, non-decreasing
    prompt_tokens: np.ndarray  #: int64, >= 1
    output_tokens: np.ndarray  #: int64, >= 1 (the first one comes out of the prefill)

    def __len__(self) -> int:
        return len(self.arrival_s)


def requests(traffic: Traffic, n: int, seed: int) -> Requests:
    """``n`` requests drawn from ``traffic``; the same arguments give the same arrays."""
    require(is_int(n) and n >= 1, "requests.n", "an integer >= 1", n)
    require(is_int(seed) and seed >= 0, "requests.seed", "an integer >= 0", seed)
    streams = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(3)]
    traces: dict[str, Trace] = {}

    def trace(path: str) -> Trace:
        if path not in traces:
            traces[path] = read_trace(path)
        return traces[path]

    arrival_s = _arrivals(traffic.arrivals, n, streams[0], trace)
    columns = {}
    for name, dist, rng in (("prompt", traffic.prompt, streams[1]), ("output", traffic.output, streams[2])):
        if dist is None:
            columns[name] = _trace_rows(trace(traffic.arrivals.path), name, n)
        else:
            columns[name] = _lengths(dist, n, rng, trace, f"{name}_tokens")
    return Requests(arrival_s, columns["prompt"], columns["output"])


def _arrivals(arrivals: Arrivals, n: int, rng: np.random.Generator, trace) -> np.ndarray:
    if isinstance(arrivals, Poisson):
        return np.cumsum(rng.exponential(1.0 / arrivals.rate_per_s, n))
    return _trace_rows(trace(arrivals.path), "arrival", n).astype(np.float64)


def _trace_rows(t: Trace, name: str, n: int) -> np.ndarray:
    if n > len(t):
        raise SpecError(Issue("requests.n", f"must be <= the trace's {len(t)} rows. Got {n} instead."), file=t.path)
    column = {"arrival": t.arrival_s, "prompt": t.prompt_tokens, "output": t.output_tokens}[name]
    return column[:n].copy()


def _lengths(dist: Length, n: int, rng: np.random.Generator, trace, column: str) -> np.ndarray:
    if isinstance(dist, Fixed):
        return np.full(n, int(dist.n), dtype=np.int64)
    if isinstance(dist, Uniform):
        return rng.integers(int(dist.lo), int(dist.hi), size=n, endpoint=True, dtype=np.int64)
    if isinstance(dist, LogNormal):
        x = np.rint(dist.median * np.exp(dist.sigma * rng.standard_normal(n)))
        return np.clip(x, dist.lo, dist.hi).astype(np.int64)
    values = getattr(trace(dist.path), column)
    return values[rng.integers(0, len(values), size=n)].astype(np.int64)
