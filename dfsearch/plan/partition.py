"""The plan kind ``partition``: DFModel's pipeline partitioning (``workload.partition_graph``,
``cost/partition.py``). On every (network shape, placement) the graph is cut into PP
partitions (``plan/partition_cut.py``), and the slowest, which every stage runs, is searched
as one phase pinned to the shape (``search.engine.search``); shapes best lower bound first,
pruned once the incumbent beats their bound."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dfsearch.codes import RunStatus, Status
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluation, evaluate, outer_status
from dfsearch.cost.partition import (
    PartitionPlan,
    is_partitioned,
    kept_spec,
    partition_problem,
    plan_of,
)
from dfsearch.mapping import load_partitioned_mapping
from dfsearch.plan.base import Max, Phase, Plan, Pool
from dfsearch.plan.partition_cut import PartitionInfeasible, solve_partition
from dfsearch.report import partition_lines
from dfsearch.result import NO_SECTION, PhaseResult, PlanSection, RunResult, SearchStats, Violation
from dfsearch.search import outer as outer_mod
from dfsearch.search.engine import GAP_STOP, PROOF_REL_TOL, full_sharding, search
from dfsearch.search.objective import objective_of
from dfsearch.search.strategies.base import Progress, SearchProgress
from dfsearch.search.warmup import warm_up
from dfsearch.spec import Spec
from dfsearch.system.ratios import groups

__all__ = ["PARTITION", "Partition", "PartitionSection", "search_partitioned"]


@dataclass
class _Run:
    """What the partitioned search has learnt (mutable, private to one call)."""

    budget: int
    deadline: float
    best: tuple[float, Any, Any, Any] | None = None  #: (objective, evaluation, plan, result)
    used: int = 0
    solved: int = 0
    pruned: int = 0
    open_bound: float = math.inf
    proven: bool = True
    exact_cuts: bool = True
    exact_price: bool = True  #: DFModel's partition price reproduced (the FLOP model)
    stop: str = ""
    violations: dict = field(default_factory=dict)
    methods: set = field(default_factory=set)


def search_partitioned(spec: Any, *, seed: int | None = None, time_limit_s: float | None = None,
                       max_evaluations: int | None = None, progress: Any = None) -> Any:
    """DFModel's two passes on a ``workload.partition_graph`` spec (``cost/partition.py``): on
    every (network shape, placement), the graph cut into PP partitions (``solve_partition``),
    the slowest kept and searched as one pipeline stage of PP (``engine.search`` pinned to
    the shape); shapes best lower bound first, pruned once the incumbent beats their bound.

    Proven optimal when every partitioning was exact, every intra-chip search was, and every
    other shape was pruned by its bound: optimal for DFModel's model, in which the slowest
    partition of its inter-chip price is the one every stage runs.
    """

    limit = spec.search.time_limit_s if time_limit_s is None else time_limit_s
    if limit:
        warm_up()  # compilation never counts against the time limit
    t0 = time.perf_counter()
    budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
    run = _Run(budget, t0 + limit if limit else math.inf)
    objective = objective_of(spec)
    choices: list = []
    try:  # Ctrl-C between the sub-searches (inside one, it ends that one): the best so far
        choices = _choices(spec, run, objective)
        _explore(spec, run, choices, objective, seed, progress)
    except KeyboardInterrupt:
        run.stop, run.open_bound, run.proven = "interrupted", 0.0, False
    return _result(spec, run, len(choices), time.perf_counter() - t0, objective, seed)


def _choices(spec: Any, run: _Run, objective: Any) -> list:
    """Every (bound, shape, placement, plan, kept partition's spec), best bound first."""

    out = []
    for shape in outer_mod.shapes(spec):
        for pl in outer_mod.placements(spec, shape):
            pp = groups(spec.system, shape, pl).pp
            sharding = full_sharding(spec, shape, pl)
            problem, info = partition_problem(spec, shape, pl, sharding)
            try:
                sol = solve_partition(problem)
            except PartitionInfeasible as exc:
                v = Violation.of(spec, "partition", 1.0, shape, 0, pp)
                run.violations.setdefault("partition", replace(v, detail=str(exc)))
                continue
            run.exact_cuts &= sol.exact
            run.exact_price &= info["exact_price"]
            plan = plan_of(spec, problem, info, sharding, sol.part, exact=sol.exact,
                           lower_bound_ns=sol.lower_bound_ns)  # fmt: skip
            sub = kept_spec(spec, plan, pp)
            out.append((_bound(sub, shape, pl, objective), shape, pl, plan, sub))
    order = sorted(range(len(out)), key=lambda i: (out[i][0], i))
    return [out[i] for i in order]


def _explore(spec: Any, run: _Run, choices: list, objective: Any, seed: int | None,
             progress: Any) -> None:
    """Search the kept partition of every choice, best bound first, until a bound reaches the
    incumbent."""

    for i, (bound, shape, pl, plan, sub) in enumerate(choices):
        if run.best is not None and bound >= run.best[0]:
            run.pruned += len(choices) - i
            break
        if run.used >= run.budget or time.perf_counter() > run.deadline:
            run.stop = (f"work budget of {run.budget:,} evaluations used up"
                        if run.used >= run.budget else "time limit reached")  # fmt: skip
            run.open_bound = min(run.open_bound, bound)
            break
        run.solved += 1
        left = max(1e-3, run.deadline - time.perf_counter()) if math.isfinite(run.deadline) else 0
        r = search(sub, seed=seed, time_limit_s=left, max_evaluations=max(1, run.budget - run.used),
                   pinned=(shape, pl))  # fmt: skip
        run.used += r.search.evaluations
        run.methods.update(m for part in r.search.method.split("+")[1:] for m in part.split("/")
                           if m != "none")  # fmt: skip
        if r.search.stopped_by and r.search.stopped_by != GAP_STOP:  # a gap stop: not proven, below
            run.stop = r.search.stopped_by
        if r.status not in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE) or r.search.notes:
            run.proven = False
            run.open_bound = min(run.open_bound, bound)
        if r.evaluation is None:
            for v in r.violations:
                run.violations.setdefault(v.constraint, v)
        else:
            value = objective.value(r.evaluation)
            if run.best is None or value < run.best[0]:
                run.best = (value, r.evaluation, plan, r)
        if progress is not None:
            progress(SearchProgress(i + 1, len(choices), run.best[1].final_s if run.best else None,
                                    evaluations=run.used, budget=run.budget))  # fmt: skip


def _result(spec: Any, run: _Run, total: int, seconds: float, objective: Any,
            seed: int | None) -> Any:

    best = run.best
    value = best[0] if best else math.inf
    bound = min(run.open_bound, value)
    met = best is not None and not run.stop and bound >= value - PROOF_REL_TOL * abs(value)
    proven = met and run.proven and run.exact_cuts and run.exact_price
    status = RunStatus.of_search(found=best is not None, proven=proven,
                                 interrupted=run.stop == "interrupted", stopped=bool(run.stop))
    notes = []
    if not run.exact_cuts:
        notes.append("the graph has too many order ideals for the exact partitioning: the "
                     "partitions were cut along a few topological orders (not proven)")
    if not run.exact_price:
        notes.append("each partition priced by DFModel's additive rule, not the evaluator's "
                     "(the cycle model runs its kernels on all the cores one after another, "
                     "DFModel shares them; or the realistic execution model): the cut is not "
                     "proven")
    if run.stop and run.stop != "interrupted":
        notes.append(f"{run.stop} after {run.solved + run.pruned} of {total} outer choices")
    has_bound = best is not None and bound > 0
    stats = SearchStats(
        method="partition+" + ("/".join(sorted(run.methods)) or "none"), seconds=seconds,
        evaluations=run.used, seed=spec.search.seed if seed is None else seed, status=status,
        objective=objective.kind, lower_bound=bound if has_bound else None,
        lower_bound_s=bound / 1e9 if has_bound and objective.kind.minimises_time else None,
        candidates=total, solved=run.solved, pruned=run.pruned, stopped_by=run.stop,
        notes=tuple(notes),
    )  # fmt: skip
    viol = tuple(run.violations[k] for k in sorted(run.violations)) if best is None else ()
    phases = (PhaseResult("kept partition", "partition", best[3]),) if best else ()
    return RunResult(spec=spec, evaluation=best[1] if best else None, search=stats,
                     violations=viol, partition=best[2] if best else None, phases=phases,
                     section=PartitionSection(best[2]) if best else PlanSection())  # fmt: skip


def _bound(sub: Any, shape: tuple[int, ...], pl: Any, objective: Any) -> float:
    """A lower bound of the kept partition's objective on ``shape`` over its tile counts and
    micro-batch sizes (inf when no outer choice is feasible)."""

    sharding = tuple(k.sharding for k in sub.graph.kernels)
    c_max = max(outer_mod.config_counts(sub))
    best = math.inf
    for mbs in outer_mod.micro_batch_sizes(sub, shape, pl):
        for t in outer_mod.tile_counts(sub):
            outer = Outer(shape, sharding, mbs, t, c_max, pl)
            if outer_status(sub, outer)[0] is not Status.OK:
                continue
            problem = lower(sub, outer)
            best = min(best, objective.bound(problem, outer_mod.lower_bound_ns(problem)))
    return best


@dataclass(frozen=True, slots=True)
class PartitionSection(PlanSection):
    """The partitions' part of the report and the JSON: the kept partition's kernels, the
    partition parts of a mapping file, the partitions' table (``report.partition_lines``)."""

    plan: PartitionPlan

    def names(self) -> tuple[str, ...]:
        return self.plan.names

    def mapping(self, spec: Spec) -> dict[str, Any]:
        return self.plan.mapping(spec)

    def headline(self) -> dict[str, Any]:
        return {"stages": len(self.plan.partitions), "slowest_stage_s": self.plan.slowest_ns / 1e9}

    def to_json(self) -> dict[str, Any]:
        return {"pipeline_partition": self.plan.to_json()}

    def evaluation_lines(self) -> list[str]:
        return partition_lines(self.plan)


@dataclass(frozen=True, slots=True)
class Partition:
    name: str = "partition"
    summary: str = "DFModel's pipeline partitioning: the slowest partition runs on every stage"

    def applies(self, spec: Spec) -> bool:
        return is_partitioned(spec)

    def plan(self, spec: Spec) -> Plan:
        """One phase, the kept partition; its spec depends on the shape (the cut is made per
        shape: ``_choices``), so the phase holds the whole graph's spec."""
        return Plan(self.name, spec.system, (Pool.of("all", spec.system),),
                    (Phase("kept partition", spec, role="partition"),), Max())  # fmt: skip

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        return search_partitioned(spec, seed=seed, time_limit_s=time_limit_s,
                                  max_evaluations=max_evaluations, progress=progress)  # fmt: skip

    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, PartitionPlan]:
        """The mapping file's partition evaluated on ``spec``: its kept partition's decision."""
        d, plan, kept = load_partitioned_mapping(mapping, spec)
        return evaluate(kept, d), plan

    def mapping_result(self, spec: Spec, evaluation: Evaluation, record: PartitionPlan | None,
                       stats: SearchStats) -> RunResult:
        """``record`` is None when the mapping is infeasible (no partition was priced)."""
        section = NO_SECTION if record is None else PartitionSection(record)
        return RunResult(spec, evaluation, stats, partition=record, plan=self.name,
                         section=section)  # fmt: skip


PARTITION = Partition()
