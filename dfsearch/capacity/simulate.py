"""Request-level simulation of replicas behind a router.

:func:`simulate` sends each request, at its arrival, to one replica (:class:`Router`:
round robin, or the replica with the fewest unfinished requests, ties to the lowest
index) and runs each replica's scheduler (:mod:`dfsearch.capacity.scheduler`). The result
holds, per request, its replica, first-token time, finish time and preemption count, and
per replica its KV block-seconds; :mod:`dfsearch.capacity.metrics` turns it into latency
percentiles, throughput, goodput and cost.

>>> from dfsearch.capacity.steps import AffineSteps
>>> from dfsearch.capacity.traffic import Fixed, Poisson, Traffic, requests
>>> reqs = requests(Traffic(Poisson(1.0), Fixed(8), Fixed(3)), 4, seed=0)
>>> out = simulate(reqs, Deployment(AffineSteps(0.1, 0.0), kv_capacity_bytes=64),
...                Scheduler(max_batch=1, token_budget=8, block_tokens=4))
>>> (out.finish_s - out.first_token_s).round(9).tolist()  # two decode steps each
[0.2, 0.2, 0.2, 0.2]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dfsearch.capacity._checks import is_int, is_real, require
from dfsearch.capacity.scheduler import ReplicaEngine, RequestLog, Scheduler
from dfsearch.capacity.steps import StepTimes
from dfsearch.capacity.traffic import Requests
from dfsearch.codes import Router
from dfsearch.errors import Issue, SpecError

__all__ = ["Deployment", "SimResult", "simulate", "kv_blocks"]


@dataclass(frozen=True, slots=True)
class Deployment:
    """``replicas`` identical replicas, each with the step times ``steps`` and
    ``kv_capacity_bytes`` of memory for the KV cache, behind a ``router``."""

    steps: StepTimes
    kv_capacity_bytes: float
    replicas: int = 1
    router: Router = Router.ROUND_ROBIN

    def __post_init__(self) -> None:
        require(is_int(self.replicas) and self.replicas >= 1, "deployment.replicas", "an integer >= 1", self.replicas)
        require(is_real(self.kv_capacity_bytes) and self.kv_capacity_bytes > 0, "deployment.kv_capacity_bytes",
                "> 0", self.kv_capacity_bytes)
        require(isinstance(self.router, Router), "deployment.router", f"one of {Router.labels()}", self.router)


@dataclass(frozen=True, slots=True)
class SimResult:
    """What a simulation gives: per request (arrays in the requests' order) and per replica."""

    requests: Requests
    deployment: Deployment
    scheduler: Scheduler
    kv_blocks: int  #: KV blocks per replica
    replica: np.ndarray  #: int64, the replica that served each request
    first_token_s: np.ndarray  #: float64, when the first output token came out
    finish_s: np.ndarray  #: float64, when the last output token came out
    preemptions: np.ndarray  #: int64, times each request was preempted
    kv_block_s: np.ndarray  #: float64 per replica: the integral of its used KV blocks over time
    peak_kv_blocks: np.ndarray  #: int64 per replica: the most blocks it ever used at once
    iterations: np.ndarray  #: int64 per replica: iterations run


def kv_blocks(deployment: Deployment, scheduler: Scheduler) -> int:
    """KV blocks per replica: the capacity over the bytes of one block, rounded down."""
    per_block = scheduler.block_tokens * deployment.steps.kv_bytes_per_token
    return int(math.floor(deployment.kv_capacity_bytes / per_block))


def simulate(reqs: Requests, deployment: Deployment, scheduler: Scheduler) -> SimResult:
    """Serve ``reqs`` on ``deployment``; deterministic (no randomness at all)."""
    blocks = kv_blocks(deployment, scheduler)
    _check_requests(reqs, blocks, scheduler)
    log = RequestLog(reqs.arrival_s, reqs.prompt_tokens, reqs.output_tokens)
    engines = [ReplicaEngine(deployment.steps, scheduler, blocks, log) for _ in range(deployment.replicas)]
    replica = np.arange(len(reqs), dtype=np.int64) % deployment.replicas
    if deployment.router is Router.ROUND_ROBIN or deployment.replicas == 1:
        for rid, r in enumerate(replica.tolist()):
            engines[r].submit(rid)
    else:
        for rid, a in enumerate(log.arrival):
            for e in engines:
                e.run_until(a)
            loads = [e.unfinished_at(a) for e in engines]
            replica[rid] = loads.index(min(loads))
            engines[replica[rid]].submit(rid)
    for e in engines:
        e.run_until(math.inf)
    return SimResult(
        reqs, deployment, scheduler, blocks, replica,
        np.array(log.first_token_s), np.array(log.finish_s), np.array(log.preemptions, dtype=np.int64),
        np.array([e.kv_block_s for e in engines]), np.array([e.peak_blocks for e in engines], dtype=np.int64),
        np.array([e.k for e in engines], dtype=np.int64),
    )


def _check_requests(reqs: Requests, blocks: int, scheduler: Scheduler) -> None:
    """Arrivals in order, lengths >= 1, and every request fits a replica's KV cache alone
    (else it could never finish)."""
    for name, bad, expected in (
        ("arrival_s", ~(np.diff(reqs.arrival_s) >= 0), "non-decreasing (sorted by arrival)"),
        ("prompt_tokens", reqs.prompt_tokens < 1, ">= 1"),
        ("output_tokens", reqs.output_tokens < 1, ">= 1"),
    ):
        if bad.any():
            i = int(np.argmax(bad)) + (name == "arrival_s")
            raise SpecError(Issue(f"requests.{name}[{i}]", f"must be {expected}. Got "
                                  f"{getattr(reqs, name)[i].item()!r} instead."))
    tokens = reqs.prompt_tokens + reqs.output_tokens - 1
    need = -(-tokens // scheduler.block_tokens)
    bad = np.flatnonzero(need > blocks)
    if len(bad):
        i = int(bad[0])
        raise SpecError(Issue(f"requests[{i}]", f"needs {int(need[i])} KV blocks (prompt "
                              f"{int(reqs.prompt_tokens[i])} + output {int(reqs.output_tokens[i])} - 1 "
                              f"tokens) but a replica holds {blocks} (deployment.kv_capacity_bytes / "
                              f"(scheduler.block_tokens x steps.kv_bytes_per_token)); {len(bad)} "
                              "requests do not fit."))
