"""Training choices as outer choices of a run (docs/design.md, "Outer choices").

A realistic-model LLM training spec that leaves ``training.recompute``,
``sequence_parallel``, ``zero_stage`` or ``interleave`` to the search (``"auto"``, or left
out: ``Training.searched``) is run once per candidate value set, each a concrete spec whose
memory the search checks against the DRAM capacity; the fastest feasible candidate wins
(ties: the first in enumeration order), and its result is the run's, with its spec holding
the chosen values.

Candidates: recompute none / selective / full; sequence parallelism off / on; ZeRO stage
0-3; interleave 1 and the divisors v <= ``MAX_INTERLEAVE`` of the graph executions. With
everything else fixed, more recomputation and a higher ZeRO stage never make a step faster
(a recomputed kernel runs twice; each ZeRO stage adds DP traffic, docs/model.md): so within
one (sequence parallelism, interleave) pair a candidate is bounded out, not searched, when
one with no more recomputation and no higher ZeRO stage already has a feasible mapping
(only where memory cannot buy time otherwise: the objective is a time and no second DRAM
tier is faster than the first). The run is proven optimal only when every searched candidate
is proven (or infeasible) and every skipped one was bounded out by a proven one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import product

from dfsearch.codes import MemoryModel, Recompute, RunStatus
from dfsearch.result import RunResult
from dfsearch.search.objective import objective_of
from dfsearch.spec import Spec
from dfsearch.workloads import model_of
from dfsearch.workloads.base import divisors
from dfsearch.workloads.llm import graph_executions

__all__ = ["MAX_INTERLEAVE", "searches_choices", "candidate_values", "run_choices"]

#: the largest interleave degree the search tries (a stated bound on the space; give
#: ``training.interleave`` to run a larger one)
MAX_INTERLEAVE = 4


def searches_choices(spec: Spec) -> bool:
    """Whether the run searches training choices: some are left to it, the graph is an LLM
    training graph, and the training memory model counts what they change."""
    model = model_of(spec.workload)
    return (bool(spec.training.searched) and spec.graph.is_training
            and model.counts_training_memory
            and model.memory_model(spec) is MemoryModel.TRAINING)


def candidate_values(spec: Spec) -> dict[str, tuple]:
    """The values tried per choice: the searched ones' candidates, the others' given value."""
    t = spec.training
    v_max = graph_executions(spec.workload)
    options = {
        "recompute": (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL),
        "sequence_parallel": (False, True),
        "zero_stage": (0, 1, 2, 3),
        "interleave": tuple(v for v in divisors(v_max) if v <= MAX_INTERLEAVE),
    }
    return {n: options[n] if n in t.searched else (getattr(t, n),) for n in options}


@dataclass(frozen=True, slots=True)
class _Tried:
    rank: tuple[int, int]  #: (recompute index, ZeRO index) in the candidate order
    result: RunResult


def _dominates(spec: Spec) -> bool:
    """Whether less recomputation and a lower ZeRO stage are never slower (docstring)."""
    plain = replace(spec, training=replace(spec.training, zero_stage=0))  # the DRAM tiers only
    return (spec.search.objective.minimises_time
            and model_of(spec.workload).smallest_micro_batch_wins(plain))


def run_choices(spec: Spec, run_one: Callable[[Spec], RunResult]) -> RunResult:
    """The best of ``run_one`` over the training-choice candidates (module docstring), with
    the composed status and a note naming the choices."""
    vals = candidate_values(spec)
    dominance = _dominates(spec)
    tried: dict[tuple, RunResult] = {}
    proven, skipped = True, 0
    for sp, v in product(vals["sequence_parallel"], vals["interleave"]):
        block: list[_Tried] = []
        for (ri, r), (zi, z) in product(enumerate(vals["recompute"]),
                                        enumerate(vals["zero_stage"])):
            cover = [b for b in block if b.rank[0] <= ri and b.rank[1] <= zi
                     and b.result.evaluation is not None] if dominance else []
            if cover:
                skipped += 1
                proven &= any(b.result.status is RunStatus.OPTIMAL for b in cover)
                continue
            training = replace(spec.training, recompute=r, sequence_parallel=sp,
                               zero_stage=z, interleave=v)
            res = run_one(replace(spec, training=training))
            proven &= res.status in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE)
            block.append(_Tried((ri, zi), res))
            tried[sp, v, r, z] = res
    # the candidate that needs the least memory: most recomputation, highest ZeRO stage,
    # sequence parallelism if tried, no interleaving
    loosest = (vals["sequence_parallel"][-1], vals["interleave"][0], vals["recompute"][-1],
               vals["zero_stage"][-1])
    return _compose(spec, tried, loosest, (proven, skipped))


def _compose(spec: Spec, tried: dict[tuple, RunResult], loosest: tuple,
             how: tuple[bool, int]) -> RunResult:
    """The winner among ``tried`` with the run's status and a lower bound over every
    candidate (a bounded-out one is no faster than the one that bounded it); with none
    feasible, the result of the ``loosest`` candidate (the least memory) names the binding
    constraint. ``how``: (every candidate proven, how many were bounded out)."""
    proven, skipped = how
    objective = objective_of(spec)
    results = list(tried.values())
    feasible = [r for r in results if r.evaluation is not None]
    note = (f"training choices searched: {', '.join(spec.training.searched)}; "
            f"{len(results)} candidates searched, {skipped} bounded out")
    if not feasible:
        worst = tried.get(loosest, results[-1])
        return replace(worst, search=replace(worst.search, notes=(*worst.search.notes, note)))
    best = min(feasible, key=lambda r: objective.value(r.evaluation))  # first of equals
    status = best.status
    if status is RunStatus.OPTIMAL and not proven:
        stopped = any(r.status is RunStatus.STOPPED_BY_LIMIT for r in results)
        status = RunStatus.STOPPED_BY_LIMIT if stopped else RunStatus.FEASIBLE_NOT_PROVEN
    if not proven:
        note += "; not proven over every candidate"
    bounded = [r for r in results if r.status is not RunStatus.INFEASIBLE]
    seconds = [r.search.lower_bound_s for r in bounded]
    values = [r.search.lower_bound for r in bounded]
    search = replace(
        best.search, status=status, notes=(*best.search.notes, note),
        evaluations=sum(r.search.evaluations for r in results),
        lower_bound_s=None if None in seconds else min(seconds),
        lower_bound=None if None in values else min(values),
    )  # fmt: skip
    return replace(best, search=search)
