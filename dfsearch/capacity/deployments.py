"""One serving deployment simulated: co-located replicas, or a prefill pool and a decode
pool with the KV cache sent between them (docs/serving.md, "Capacity search").

**Co-located**: ``replicas`` replicas of one shape behind a round-robin router, each a
:class:`~dfsearch.capacity.scheduler.Scheduler` with the batch cap and a token budget of
the chunk size (chunked prefill, decodes first).

**Disaggregated**: every request is prefilled on a prefill replica (batch cap = token budget
= the chunk size, one output token: its first token comes out there, so TTFT is the prefill
pool's alone), its KV cache is sent to a decode replica in

    transfer = KV bytes per token x prompt tokens / (min(prefill chips, decode chips) x
               scale-out GB/s) + scale-out latency

(each chip of the smaller replica sends or receives its share over its own scale-out link;
transfers do not contend with each other -- the seam where a fabric model can price them),
and then joins the decode replica's batch at its next iteration (its prompt's KV blocks
taken at once, no prefill work) and generates its other output - 1 tokens there. TPOT =
(finish - first token) / (output - 1) includes the transfer and the wait to join. Requests
of one output token never reach the decode pool.

Metrics skip the first :data:`~dfsearch.capacity.serve_spec.WARMUP_FRACTION` of the
arrivals. Goodput = the request rate x the fraction of the measured requests meeting both
SLOs; a deployment meets the SLOs when its P99 TTFT and P99 TPOT are within them.
KV utilisation: the used over the available KV blocks of the (decode) replicas, averaged
over their simulation's run (first arrival, or join, to last finish), from the block-seconds
the simulation records (``metrics.kv_utilisation``; a prefill pool's is not counted).
Energy per output token: every chip of the deployment at its chip's watts over the measured
window, per measured output token (NaN when a chip has no power figure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dfsearch.capacity.mapped_steps import ReplicaModel, Shape
from dfsearch.capacity.metrics import kv_utilisation, percentiles
from dfsearch.capacity.scheduler import Scheduler
from dfsearch.capacity.serve_spec import WARMUP_FRACTION
from dfsearch.capacity.simulate import Deployment, simulate
from dfsearch.capacity.traffic import Requests
from dfsearch.codes import ServeMode

__all__ = ["Candidate", "Outcome", "Slos", "run_colocated", "run_prefill_pool", "run_decode_pool",
           "outcome", "pruned", "fits_kv", "transfer_s", "deployment_watts"]


@dataclass(frozen=True, slots=True)
class Slos:
    ttft_p99_s: float
    tpot_p99_s: float
    rate_per_s: float


@dataclass(frozen=True, slots=True)
class Candidate:
    """A deployment: ``replicas`` of ``shape`` (co-located; the decode pool when split) and,
    split, ``prefill_replicas`` of ``prefill_shape``."""

    mode: ServeMode
    shape: Shape
    replicas: int
    batch_cap: int
    chunk_tokens: int
    prefill_shape: Shape | None = None
    prefill_replicas: int = 0

    @property
    def chips(self) -> int:
        extra = self.prefill_replicas * self.prefill_shape.chips if self.prefill_shape else 0
        return self.replicas * self.shape.chips + extra

    @property
    def dollars_per_hour(self) -> float:
        extra = self.prefill_replicas * self.prefill_shape.dollars_per_hour if self.prefill_shape else 0.0
        return self.replicas * self.shape.dollars_per_hour + extra

    def describe(self) -> str:
        if self.mode is ServeMode.COLOCATED:
            return (f"co-located: {self.replicas} x ({self.shape}), batch cap {self.batch_cap}, "
                    f"chunk {self.chunk_tokens} tokens, {self.chips} chips")
        if self.replicas == 0:
            return (f"disaggregated: prefill pool {self.prefill_replicas} x ({self.prefill_shape}) chunk "
                    f"{self.chunk_tokens} tokens (its decode pool not simulated)")
        return (f"disaggregated: prefill {self.prefill_replicas} x ({self.prefill_shape}) chunk "
                f"{self.chunk_tokens} tokens + decode {self.replicas} x ({self.shape}) batch cap "
                f"{self.batch_cap}, {self.chips} chips (P:D {self.prefill_replicas}:{self.replicas})")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A simulated (or pruned) deployment and its serving metrics (NaN when pruned)."""

    candidate: Candidate
    dollars_per_hour: float
    ttft: tuple[float, float]  #: P50, P99 seconds
    tpot: tuple[float, float]
    e2e_p99_s: float
    goodput_per_s: float
    slo_attainment: float
    output_tokens_per_s: float
    preemptions: int
    ttft_excess: float  #: P99 TTFT / SLO - 1 (> 0: broken)
    tpot_excess: float
    note: str = ""  #: why not simulated, if pruned
    kv_utilisation: float = math.nan  #: used / available KV blocks (module docstring)
    joules_per_token: float = math.nan  #: per measured output token (module docstring)

    @property
    def feasible(self) -> bool:
        return self.ttft_excess <= 0 and self.tpot_excess <= 0

    @property
    def binding(self) -> str:
        """The SLO nearest its limit (or furthest past it)."""
        if self.note:
            return self.note
        return "TTFT" if self.ttft_excess >= self.tpot_excess else "TPOT"


def fits_kv(model: ReplicaModel, reqs: Requests, block_tokens: int, prompt_only: bool = False) -> bool:
    """Whether the longest request (its prompt alone with ``prompt_only``) fits a replica's
    KV cache alone."""
    blocks = math.floor(model.kv_capacity_bytes / (block_tokens * model.steps.kv_bytes_per_token))
    tokens = reqs.prompt_tokens if prompt_only else reqs.prompt_tokens + reqs.output_tokens - 1
    need = -(-tokens // block_tokens)
    return int(need.max()) <= blocks


def run_colocated(reqs: Requests, model: ReplicaModel, c: Candidate, block_tokens: int):
    """(first token, finish, preemptions) per request of a co-located deployment, and its
    KV utilisation."""
    sched = Scheduler(c.batch_cap, max(c.chunk_tokens, c.batch_cap), block_tokens)
    out = simulate(reqs, Deployment(model.steps, model.kv_capacity_bytes, c.replicas), sched)
    return out.first_token_s, out.finish_s, out.preemptions, kv_utilisation(out)


def run_prefill_pool(reqs: Requests, model: ReplicaModel, replicas: int, chunk: int, block_tokens: int):
    """(first token, preemptions) per request on a prefill pool."""
    one = Requests(reqs.arrival_s, reqs.prompt_tokens, np.ones_like(reqs.output_tokens))
    out = simulate(one, Deployment(model.steps, model.kv_capacity_bytes, replicas),
                   Scheduler(chunk, chunk, block_tokens))
    return out.first_token_s, out.preemptions


def transfer_s(prefill: ReplicaModel, decode: ReplicaModel, prompt_tokens: np.ndarray,
               bw_GBps: float, latency_s: float) -> np.ndarray:
    """The KV transfer of each request (module docstring: the formula)."""
    chips = min(prefill.shape.chips, decode.shape.chips)
    return prefill.steps.kv_bytes_per_token * prompt_tokens / (chips * bw_GBps * 1e9) + latency_s


def run_decode_pool(reqs: Requests, first_token_s: np.ndarray, transfer: np.ndarray, model: ReplicaModel,
                    replicas: int, cap: int, block_tokens: int):
    """(finish, preemptions) per request: the decode pool fed at first token + transfer; and
    the pool's KV utilisation (NaN when no request reaches it)."""
    finish = first_token_s.copy()
    pre = np.zeros(len(reqs), dtype=np.int64)
    go = np.flatnonzero(reqs.output_tokens > 1)
    if len(go) == 0:
        return finish, pre, math.nan
    ready = first_token_s[go] + transfer[go]
    order = go[np.argsort(ready, kind="stable")]
    joined = Requests(np.sort(ready, kind="stable"), reqs.prompt_tokens[order], reqs.output_tokens[order])
    budget = cap + int(reqs.prompt_tokens.max())
    out = simulate(joined, Deployment(model.decode_only, model.kv_capacity_bytes, replicas),
                   Scheduler(cap, budget, block_tokens))
    finish[order] = out.finish_s
    pre[order] = out.preemptions
    return finish, pre, kv_utilisation(out)


def deployment_watts(c: Candidate, models) -> float:
    """Every chip of ``c`` at its chip's watts (``models``: each shape's ReplicaModel)."""
    watts = c.replicas * c.shape.chips * models[c.shape].watts_per_chip
    if c.prefill_shape is not None:
        watts += c.prefill_replicas * c.prefill_shape.chips * models[c.prefill_shape].watts_per_chip
    return watts


def outcome(c: Candidate, reqs: Requests, first: np.ndarray, finish: np.ndarray, preempt: np.ndarray,
            slos: Slos, kv_used: float = math.nan, watts: float = math.nan) -> Outcome:
    """The metrics of one simulation (module docstring: the definitions); ``kv_used``: its KV
    utilisation, ``watts``: the deployment's (``deployment_watts``)."""
    w = int(WARMUP_FRACTION * len(reqs))
    arrival, out = reqs.arrival_s[w:], reqs.output_tokens[w:]
    ttft, fin = first[w:] - arrival, finish[w:]
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(out > 1, (fin - first[w:]) / (out - 1), np.nan)
    good = (ttft <= slos.ttft_p99_s) & ~(tpot > slos.tpot_p99_s)
    t, p = percentiles(ttft), percentiles(tpot[~np.isnan(tpot)])
    window = float(fin.max() - arrival[0])
    return Outcome(c, c.dollars_per_hour, (t.p50, t.p99), (p.p50, p.p99),
                   percentiles(fin - arrival).p99, slos.rate_per_s * float(good.mean()), float(good.mean()),
                   float(out.sum()) / window, int(preempt[w:].sum()),
                   t.p99 / slos.ttft_p99_s - 1, (p.p99 / slos.tpot_p99_s - 1) if not math.isnan(p.p99) else -1.0,
                   kv_utilisation=kv_used,
                   joules_per_token=math.nan if math.isnan(watts) else watts * window / float(out.sum()))


def pruned(c: Candidate, slos: Slos, note: str, ttft_excess: float = math.inf,
           tpot_excess: float = math.inf) -> Outcome:
    """A deployment not simulated: ``note`` says why."""
    nan = float("nan")
    return Outcome(c, c.dollars_per_hour, (nan, nan), (nan, nan), nan, nan, nan, nan, 0,
                   ttft_excess, tpot_excess, note)
