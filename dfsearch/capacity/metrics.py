"""Serving metrics of a simulation: latency percentiles, throughput, goodput, KV
utilisation, cost and energy (docs/serving.md, "Request-level simulation").

Per request: TTFT = first token - arrival; TPOT = (finish - first token) / (output - 1),
only for requests of two or more output tokens; end-to-end = finish - arrival.
Percentiles are numpy's default (linear interpolation between the order statistics).

The measured requests are all but the first ``warmup`` arrivals; the window runs from the
first measured arrival to the last measured finish, so the drain at the end is inside the
window and every rate below is at most the measured requests' arrival rate. Throughput
and goodput count the measured requests over the window; goodput counts those that meet
both SLOs (a single-token request meets any TPOT SLO). Cost and energy charge every
replica for the whole window, per generated (output) token. KV utilisation is the time
average, over the whole run (first arrival to last finish), of the used over the available
blocks of all replicas.

>>> p = percentiles(np.array([1.0, 2.0, 3.0, 4.0]))
>>> p.p50, p.p90, round(p.p99, 12), p.mean
(2.5, 3.7, 3.97, 2.5)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dfsearch.capacity.simulate import SimResult
from dfsearch.errors import Issue, SpecError

__all__ = ["Slo", "Price", "Percentiles", "Summary", "percentiles", "summarize", "per_request", "kv_utilisation"]


@dataclass(frozen=True, slots=True)
class Slo:
    """Service-level objectives: a request is good when TTFT <= ``ttft_s`` and TPOT <=
    ``tpot_s``."""

    ttft_s: float
    tpot_s: float


@dataclass(frozen=True, slots=True)
class Price:
    """What one replica costs while deployed: dollars per hour and watts (inputs)."""

    dollars_per_hour: float = 0.0
    watts: float = 0.0


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50: float
    p90: float
    p99: float
    mean: float


@dataclass(frozen=True, slots=True)
class Summary:
    """The metrics of a simulation's measured requests (module docstring: definitions)."""

    requests: int  #: measured requests
    window_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles  #: NaN everywhere when no measured request has two output tokens
    e2e_s: Percentiles
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float  #: prompt + output tokens
    goodput_per_s: float  #: measured requests meeting both SLOs, per second of the window
    slo_attainment: float  #: the fraction of the measured requests meeting both SLOs
    kv_utilisation: float
    preemptions: int  #: preemptions of the measured requests
    dollars_per_million_tokens: float  #: per million output tokens
    joules_per_token: float  #: per output token


def percentiles(x: np.ndarray) -> Percentiles:
    if len(x) == 0:
        return Percentiles(*(4 * [float("nan")]))
    p50, p90, p99 = np.percentile(x, [50, 90, 99]).tolist()
    return Percentiles(p50, p90, p99, float(np.mean(x)))


def per_request(result: SimResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT, TPOT (NaN where the output is one token) and end-to-end of every request."""
    r = result.requests
    ttft = result.first_token_s - r.arrival_s
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(r.output_tokens > 1, (result.finish_s - result.first_token_s)
                        / (r.output_tokens - 1), np.nan)
    return ttft, tpot, result.finish_s - r.arrival_s


def kv_utilisation(result: SimResult) -> float:
    """The used over the available KV blocks of all replicas, averaged over the run (its
    first arrival to its last finish)."""
    run = float(result.finish_s.max() - result.requests.arrival_s[0])
    return float(result.kv_block_s.sum() / (result.deployment.replicas * result.kv_blocks * run))


def summarize(result: SimResult, slo: Slo, price: Price = Price(), warmup: int = 0) -> Summary:
    """The metrics of ``result``, leaving out the first ``warmup`` arrivals."""
    n = len(result.requests)
    if not (isinstance(warmup, int) and 0 <= warmup < n):
        raise SpecError(Issue("metrics.warmup", f"must be an integer from 0 to {n - 1}. Got {warmup!r} instead."))
    ttft, tpot, e2e = (x[warmup:] for x in per_request(result))
    r = result.requests
    out_tokens = float(r.output_tokens[warmup:].sum())
    window = float(result.finish_s[warmup:].max() - r.arrival_s[warmup])
    good = (ttft <= slo.ttft_s) & ~(tpot > slo.tpot_s)  # NaN TPOT (one token) meets the SLO
    replicas = result.deployment.replicas
    return Summary(
        requests=n - warmup, window_s=window,
        ttft_s=percentiles(ttft), tpot_s=percentiles(tpot[~np.isnan(tpot)]), e2e_s=percentiles(e2e),
        requests_per_s=(n - warmup) / window, output_tokens_per_s=out_tokens / window,
        total_tokens_per_s=(out_tokens + float(r.prompt_tokens[warmup:].sum())) / window,
        goodput_per_s=int(good.sum()) / window, slo_attainment=float(good.mean()),
        kv_utilisation=kv_utilisation(result),
        preemptions=int(result.preemptions[warmup:].sum()),
        dollars_per_million_tokens=replicas * price.dollars_per_hour * window / 3600 / out_tokens * 1e6,
        joules_per_token=replicas * price.watts * window / out_tokens,
    )
