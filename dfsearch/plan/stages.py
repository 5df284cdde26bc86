"""The plan kind ``stages`` and its search (docs/model.md, "Pipeline stages of a whole model").

A whole model in pipeline pieces (``cost/stages.py``: the ends before the layers, the layer
graph, the ends after them, over PP stages that do not all run the same program) is searched
by composing exact sub-searches, like the speculative-decoding search:

1. *Outer choices* are (shape, placement, micro-batch size). Each gets a lower bound from the
   layers alone (``lower_bound_ns`` of the layer graph, its E executions spread as evenly as
   the stages allow, the ends free); they are solved best bound first, and once the next
   bound reaches the incumbent the rest are pruned.
2. *One outer choice*: each piece is searched on the pinned shape (``engine.search(...,
   pinned=...)``: the ordinary search of a small graph) as one execution alone in a stage.
3. *The split* of the executions over the stages minimises the slowest stage within each
   stage's DRAM (``cost.stages.best_split``, exact).
4. *Check*: the pieces' mappings are evaluated again in their stages (``StageModel.compose``).
   With one DRAM tier a piece's time does not depend on its stage, the times agree and the
   composition is exact. Where they do not (two DRAM tiers blend their bandwidth by the
   stage's total), the piece is searched again in its stage and the result is not claimed
   optimal.

Proven optimal when every piece search was, no piece changed time in its stage, and every
other outer choice was pruned by its bound. Every sub-search counts evaluations against one
work budget.

With ``search.stage_cuts`` (docs/model.md, "Stage cuts inside a layer") step 2 also searches
the two parts of the layer graph at each cut point (``cost/stage_cuts.py``), step 3 also
tries every split over whole executions and cut points (``StageModel.cut_split``, exact) and
keeps it when it beats the whole-layer split, and the bounds of step 1 (and, once a choice's
pieces are solved, ``_cuts_bound``) also hold for splits with cuts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dfsearch.codes import RunStatus, Status
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluation, outer_status
from dfsearch.cost.stage_cuts import cut_points
from dfsearch.cost.stages import (
    LABELS,
    StageModel,
    StagePlan,
    batch_ns,
    bubble,
    evaluate_staged,
    is_staged,
    members_of,
    piece_spec,
)
from dfsearch.mapping import load_staged_mapping
from dfsearch.plan.base import Max, Phase, Plan, Pool
from dfsearch.report import stage_lines, stage_timing
from dfsearch.result import NO_SECTION, PhaseResult, PlanSection, RunResult, SearchStats, Violation
from dfsearch.search import outer as outer_mod
from dfsearch.search.engine import GAP_STOP, PROOF_REL_TOL, outer_sharding, search
from dfsearch.search.objective import objective_of
from dfsearch.search.strategies.base import Progress, SearchProgress
from dfsearch.search.warmup import warm_up
from dfsearch.spec import AUTO, Spec

__all__ = ["STAGES", "Stages", "StagesSection", "search_stages"]


@dataclass
class _Run:
    """What the stage search has learnt (mutable, private to one ``search_stages`` call)."""

    spec: Spec
    seed: int | None
    budget: int
    deadline: float  #: perf_counter() time of the wall-clock stop (inf: none)
    used: int = 0
    solved: int = 0
    pruned: int = 0
    best: tuple[float, Evaluation, StagePlan] | None = None
    proven: bool = True  #: every solved choice was solved exactly
    open_bound: float = math.inf
    stop: str = ""
    violations: dict[str, Violation] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    methods: set[str] = field(default_factory=set)
    #: sharding caches per piece graph and the parts' floors (``_floors``, ``_part_floor``)
    caches: dict = field(default_factory=dict)
    #: the current outer choice's piece searches (id of the evaluation -> (piece, result);
    #: the results keep the evaluations alive) and the best choice's pieces as plan phases
    searched: dict[int, tuple[str, RunResult]] = field(default_factory=dict)
    phases: tuple[PhaseResult, ...] = ()

    def remaining_s(self) -> float | None:
        if not math.isfinite(self.deadline):
            return None
        return max(1e-3, self.deadline - time.perf_counter())

    def unproven(self, bound: float) -> None:
        """A solved choice was not solved exactly: its bound stays open."""
        self.proven = False
        self.open_bound = min(self.open_bound, bound)


def search_stages(
    spec: Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    max_evaluations: int | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """The best whole-model pipeline mapping of ``spec`` (module docstring); the result's
    evaluation is the whole model's (its decision the layer graph's), ``result.stages`` the
    stages and the pieces' own results."""

    limit = spec.search.time_limit_s if time_limit_s is None else time_limit_s
    if limit:
        warm_up()  # compilation never counts against the time limit
    t0 = time.perf_counter()
    budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
    run = _Run(spec, seed, budget, t0 + limit if limit else math.inf)
    objective = objective_of(spec)
    choices: list = []
    try:  # Ctrl-C between the sub-searches (inside one, it ends that one): the best so far
        choices = _choices(spec, members_of(spec)["layers"], run.deadline, run.caches)
        _explore(run, choices, objective, progress)
    except KeyboardInterrupt:
        run.stop, run.open_bound = "interrupted", 0.0
    return _result(run, len(choices), time.perf_counter() - t0, objective.kind)


def _explore(run: _Run, choices: list, objective: Any, progress: Progress | None) -> None:
    """Solve the outer choices best bound first until a bound reaches the incumbent."""
    members = members_of(run.spec)
    for i, (bound, shape, pl, mbs) in enumerate(choices):
        if run.best is not None and bound >= run.best[0]:
            run.pruned += len(choices) - i
            break
        if _out_of_budget(run):
            run.open_bound = min(run.open_bound, bound)
            break
        run.solved += 1
        found = _solve_choice(run, members, shape, pl, mbs, bound)
        if found is not None:
            value = objective.value(found[0])
            if run.best is None or value < run.best[0]:
                run.best = (value, *found)
                run.phases = _phases(run, found[1])
        run.searched.clear()
        if progress is not None:  # the progress line shows seconds (run.best[0] is in ns)
            progress(SearchProgress(i + 1, len(choices), run.best[1].final_s if run.best else None,
                                    evaluations=run.used, budget=run.budget))  # fmt: skip
    if progress is not None and choices:  # pruned choices count as done, as in best_first
        done = len(choices) if not run.stop else run.solved + run.pruned
        progress(SearchProgress(done, len(choices), run.best[1].final_s if run.best else None,
                                evaluations=run.used, budget=run.budget))  # fmt: skip


def _out_of_budget(run: _Run) -> bool:
    if run.used >= run.budget:
        run.stop = f"work budget of {run.budget:,} evaluations used up"
    elif time.perf_counter() > run.deadline:
        run.stop = "time limit reached"
    return bool(run.stop)


def _choices(spec: Spec, layers: tuple[int, ...], deadline: float = math.inf,
             caches: dict | None = None) -> list[tuple[float, tuple, Any, int]]:
    """Every (bound, shape, placement, micro-batch size), best bound first (ties: in
    enumeration order): the bound lets the layers alone run E executions over the stages
    as evenly as they can, the ends free (module docstring); with ``search.stage_cuts`` the
    lesser of that and ``_cut_bound``. Past ``deadline`` (``time.perf_counter``) the
    remaining choices get bound 0 (not bounded)."""

    wl = spec.workload
    executions = wl.num_layer // wl.num_layer_in_graph
    cuts = cut_points(spec, layers) if spec.search.stage_cuts else ()
    caches = {} if caches is None else caches
    out = []
    for shape in outer_mod.shapes(spec):
        for pl in outer_mod.placements(spec, shape):
            for mbs in outer_mod.micro_batch_sizes(spec, shape, pl):
                best = math.inf if time.perf_counter() <= deadline else 0.0
                rows = _floors(spec, layers, shape, pl, mbs, caches) if best > 0 else []
                for t_lb, problem in rows:
                    k = problem.constants
                    per_stage = -(-executions // problem.pp)  # the slowest stage runs >= this
                    beta = bubble(spec, per_stage, problem.pp)
                    whole = (
                        problem.num_micro_batch * per_stage * t_lb
                        + beta * (executions - per_stage) * t_lb
                        + k.p2p_ns
                    )
                    best = min(best, whole / k.num_copy)
                if spec.search.stage_cuts and rows and rows[0][1].pp > 1:  # PP 1: no cut
                    best = min(best, _cut_bound(spec, rows, cuts, shape, pl, mbs, caches))
                out.append((best, shape, pl, mbs))
    order = sorted(range(len(out)), key=lambda i: (out[i][0], i))
    return [out[i] for i in order]


def _floors(spec: Spec, members: tuple[int, ...], shape: tuple, pl: Any, mbs: int,
            caches: dict) -> list[tuple[float, Any]]:
    """(a lower bound of one execution's time per micro-batch, the lowered problem) of a
    piece alone on every feasible tile count of (shape, placement, micro-batch size)."""

    piece = piece_spec(spec, members, mbs)
    c_max = max(outer_mod.config_counts(piece))
    cache = caches.setdefault(members, {})  # the sharding cache is per graph
    rows = []
    for t in outer_mod.tile_counts(piece):
        sharding = outer_sharding(piece, shape, t, pl, cache)
        outer = Outer(shape, sharding, mbs, t, min(c_max, len(members)), pl)
        if outer_status(piece, outer)[0] is not Status.OK:
            continue
        problem = lower(piece, outer)
        k = problem.constants
        ii = (outer_mod.lower_bound_ns(problem) * k.num_copy - k.p2p_ns) / k.batch_mult
        rows.append((max(ii, 0.0) * mbs, problem))
    return rows


def _part_floor(spec: Spec, members: tuple[int, ...], shape: tuple, pl: Any, mbs: int,
                caches: dict) -> float:
    """The least ``_floors`` of a part over its tile counts (inf: none feasible), cached."""
    key = ("floor", members, shape, pl, mbs)
    if key not in caches:
        caches[key] = min((t for t, _ in _floors(spec, members, shape, pl, mbs, caches)),
                          default=math.inf)  # fmt: skip
    return caches[key]


def _cut_bound(spec: Spec, rows: list[tuple[float, Any]], cuts: tuple, shape: tuple, pl: Any,
               mbs: int, caches: dict) -> float:
    """A lower bound of every split with cuts or end stages without whole layers: each
    layer costs at least w = min(its floor, the least sum of its two parts' floors over the
    cut points), so the stages sum to >= E x w, the slowest >= E x w / PP, the batch
    (nmb - beta) T_max + beta sum T_s + p2p (a cut adds p2p, the ends add time) >= that."""
    wl = spec.workload
    executions = wl.num_layer // wl.num_layer_in_graph
    w = min(t for t, _ in rows)
    for cut in cuts:
        w = min(w, sum(_part_floor(spec, part, shape, pl, mbs, caches)
                       for part in (cut.first, cut.second)))
    best = math.inf
    for _, problem in rows:
        k = problem.constants
        beta = bubble(spec, -(-executions // problem.pp), problem.pp)
        t_max = executions * w / problem.pp
        total = (problem.num_micro_batch - beta) * t_max + beta * executions * w + k.p2p_ns
        best = min(best, total / k.num_copy)
    return best


def _solve_choice(
    run: _Run, members: dict[str, tuple[int, ...]], shape: tuple[int, ...], pl: Any, mbs: int,
    bound: float,
) -> tuple[Evaluation, StagePlan] | None:
    """The best whole-model mapping on one (shape, placement, micro-batch size), or None
    (steps 2-4 of the module docstring)."""
    pinned = (shape, pl)
    alone: dict[str, Evaluation] = {}
    all_exact = True
    for name in ("layers", "before", "after"):
        if members[name]:
            spec = piece_spec(run.spec, members[name], mbs, end=name != "layers")
            ev, exact = _search_piece(run, spec, name, pinned, bound)
            if ev is None:
                return None
            alone[name] = ev
            all_exact &= exact
            if name == "layers" and exact and not run.spec.search.stage_cuts and _beaten(run, ev, mbs):
                return None
    model = StageModel(run.spec, members, mbs, alone)
    split, cuts = model.split(), ()
    if run.spec.search.stage_cuts and model.pp > 1:
        found_cut = _best_cut(run, model, members, mbs, pinned, bound, split, all_exact)
        if found_cut is not None:
            model, split, cuts = found_cut
    if split is None:
        d = model.lay.decision
        _note(run, Violation.of(run.spec, Status.DRAM.label, max(model.least_dram() - model.cap, 0.0),
                                d.shape, d.num_tile, d.num_config))  # fmt: skip
        return None

    def restage(name: str, role: Spec, ev: Evaluation) -> Evaluation | None:
        return _search_piece(run, role, name, pinned, bound)[0]

    found = model.compose(split, restage, cuts)
    if found is not None and not found[1].split_exact:
        run.unproven(bound)
        run.notes.append(f"shape {shape}, micro-batch {mbs}: a piece is slower in its stage "
                         "than alone (two DRAM tiers); the split is not proven optimal")  # fmt: skip
    return found


def _best_cut(run: _Run, whole: StageModel, members: dict[str, tuple[int, ...]], mbs: int,
              pinned: tuple, bound: float, split: tuple[int, ...] | None, exact: bool) -> Any:
    """With ``search.stage_cuts``: the better of the whole-layer split and the best split
    whose stages may cut a layer at the cut points (both parts of each searched on the
    pinned shape) and whose end stages may hold no whole layer: (model, runs, cuts), or
    None when the whole-layer split stays best (ties: it) or, given ``exact`` pieces,
    ``_cuts_bound`` shows that no such split beats it or the incumbent."""

    def value(m: StageModel, runs: tuple[int, ...], cuts: tuple[int, ...]) -> float:
        beta = bubble(run.spec, -(-m.executions // m.pp), m.pp)
        times = [sum(m.ii[n] * (runs[s] if n == "layers" else 1) * m.mbs
                     for n in m.holds(s, runs, cuts)) for s in range(m.pp)]  # fmt: skip
        return batch_ns(times, m.lay.num_micro_batch, beta, sum(m.cut_p2p_ns(i) for i in cuts))

    tried = cut_points(run.spec, members["layers"])
    whole.space = "whole layer-graph executions, end stages without any" + "".join(
        f", cuts after {c.after}" for c in tried)
    if exact and split is not None:
        beat = value(whole, split, ()) + whole.lay.p2p_ns
        if run.best is not None:
            beat = min(beat, run.best[0] * run.spec.num_copy)
        if _cuts_bound(run, whole, tried, mbs, pinned) >= beat:
            return None
    alone, points = dict(whole.alone), []
    for cut in tried:
        found = _parts(run, cut, mbs, pinned, bound)
        if found is not None:
            alone |= {f"first:{cut.after}": found[0], f"second:{cut.after}": found[1]}
            points.append(cut)
    extra = {f"{w}:{c.after}": (c.first if w == "first" else c.second)
             for c in points for w in ("first", "second")}  # fmt: skip
    model = StageModel(run.spec, members | extra, mbs, alone)
    model.cut_points, model.space = tuple(points), whole.space
    cs = model.cut_split()
    if cs is None or (split is not None and value(model, cs.runs, cs.cuts)
                      >= value(whole, split, ()) * (1 - 1e-12)):  # fmt: skip
        return None
    return model, cs.runs, cs.cuts


def _cuts_bound(run: _Run, whole: StageModel, cuts: tuple, mbs: int, pinned: tuple) -> float:
    """A lower bound of the batch time (per pipeline copy, ns) of every split of this choice
    with cuts or end stages without whole layers, given its pieces' exact times: a layer
    costs at least w = min(T_layer, the least sum of a cut point's parts' floors), the
    stages sum to >= ends + E x w, the slowest holds >= that / PP and >= each end, and the
    batch is (nmb - beta) T_max + beta sum T_s + p2p (cuts add p2p). 0 (no bound) with two
    DRAM tiers (times change in the stages)."""
    if run.spec.system.memory.second_dram_bytes > 0:
        return 0.0
    shape, pl = pinned
    w = whole.ii["layers"] * mbs
    for cut in cuts:
        w = min(w, sum(_part_floor(run.spec, part, shape, pl, mbs, run.caches)
                       for part in (cut.first, cut.second)))
    ends = [whole._ends(s, whole.ii) * mbs for s in range(whole.pp)]
    total = sum(ends) + whole.executions * w
    beta = bubble(run.spec, -(-whole.executions // whole.pp), whole.pp)
    t_max = max(total / whole.pp, *ends)
    return (whole.lay.num_micro_batch - beta) * t_max + beta * total + whole.lay.p2p_ns


def _parts(run: _Run, cut: Any, mbs: int, pinned: tuple, bound: float
           ) -> tuple[Evaluation, Evaluation] | None:
    """The two parts of a layer cut at ``cut``, each searched on the pinned shape, with
    c and C + 1 - c configurations (C: the layer graph's count): the layer's program cut at
    one point splits at most one of its configurations in two. c is C + 1 shared in
    proportion to the parts' kernels (rounded, each part at least 1 and at most one per
    kernel), or the nearest c (ties: the smaller) with both parts feasible. ``auto``: both
    searched freely; 0 (one per kernel): both 0. None: no c has both parts feasible."""

    c = run.spec.execution.num_config
    if c in (AUTO, 0):
        pairs = [(c, c)]
    else:
        want = (c + 1) * len(cut.first) / (len(cut.first) + len(cut.second))
        ok = [a for a in range(1, c + 1) if a <= len(cut.first) and c + 1 - a <= len(cut.second)]
        pairs = [(a, c + 1 - a) for a in sorted(ok, key=lambda a: (abs(a - want), a))]
    for counts in pairs:
        evs = []
        for which, members, n in zip(("first", "second"), (cut.first, cut.second), counts):
            piece = piece_spec(run.spec, members, mbs, configs=n)
            evs.append(_search_piece(run, piece, f"{which}:{cut.after}", pinned, bound, note=False)[0])
            if evs[-1] is None:
                break
        if len(evs) == 2 and evs[1] is not None:
            return evs[0], evs[1]
    return None


def _beaten(run: _Run, layers: Evaluation, mbs: int) -> bool:
    """True when the incumbent beats every mapping of this choice, given the layer graph's
    optimum alone: ends free, the executions spread as evenly as the stages allow. Its time
    in any stage is no less with one DRAM tier (more bytes beside it only constrain it)."""
    mem = run.spec.system.memory
    if run.best is None or mem.second_dram_bytes > 0:
        return False
    wl = run.spec.workload
    executions = wl.num_layer // wl.num_layer_in_graph
    per_stage = -(-executions // layers.pp)
    t = layers.all_config_ii_ns * mbs
    beta = bubble(run.spec, per_stage, layers.pp)
    whole = layers.num_micro_batch * per_stage * t + beta * (executions - per_stage) * t
    return (whole + layers.p2p_ns) / run.spec.num_copy >= run.best[0]


def _phases(run: _Run, plan: StagePlan) -> tuple[PhaseResult, ...]:
    """The pieces of ``plan`` as plan phases: each piece's own pinned search."""
    found = (run.searched.get(id(ev)) for ev in plan.pieces.values())
    return tuple(PhaseResult(name, "piece", r) for name, r in (f for f in found if f is not None))


def _search_piece(run: _Run, piece: Spec, name: str, pinned: tuple, bound: float,
                  note: bool = True) -> tuple[Evaluation | None, bool]:
    """One piece's pinned search: (its mapping or None, its violations noted unless not
    ``note``: a part of a cut layer that does not fit only drops that cut; whether the
    search was exact)."""

    r = search(piece, seed=run.seed, time_limit_s=run.remaining_s() or 0,
               max_evaluations=max(1, run.budget - run.used), pinned=pinned)  # fmt: skip
    run.used += r.search.evaluations
    if r.evaluation is not None:
        run.searched[id(r.evaluation)] = (name, r)
    run.methods.update(m for part in r.search.method.split("+")[1:] for m in part.split("/")
                       if m != "none")  # fmt: skip
    if r.search.stopped_by and r.search.stopped_by != GAP_STOP:  # a gap stop: not exact, below
        run.stop = r.search.stopped_by
    exact = r.status in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE)
    if not exact or any(n.startswith("not proven") for n in r.search.notes):
        run.unproven(bound)
    if r.evaluation is None and note:
        label = ("the " + LABELS[name] + (" piece" if name != "layers" else "") if name in LABELS
                 else f"the layer graph's part {'up to' if name.startswith('first') else 'after'} "
                      f"{name.split(':', 1)[1]}")  # fmt: skip
        for v in r.violations:
            _note(run, replace(v, detail=f"{label}: {v.detail}" if v.detail else label))
    return r.evaluation, exact and not r.search.notes


def _note(run: _Run, v: Violation) -> None:
    old = run.violations.get(v.constraint)
    if old is None or v.excess < old.excess:
        run.violations[v.constraint] = v


def _result(run: _Run, total: int, seconds: float, kind: Any) -> RunResult:

    best = run.best
    value = best[0] if best else math.inf
    bound = min(run.open_bound, value)
    met = best is not None and not run.stop and (bound >= value - PROOF_REL_TOL * abs(value))
    status = RunStatus.of_search(found=best is not None, proven=met and run.proven,
                                 interrupted=run.stop == "interrupted", stopped=bool(run.stop))
    notes = list(dict.fromkeys(run.notes))
    if run.stop and run.stop != "interrupted":
        notes.append(f"{run.stop} after {run.solved + run.pruned} of {total} outer choices")
    if best is None and not run.proven and status is RunStatus.INFEASIBLE:
        notes.append("not proven infeasible: some pieces were searched heuristically")
    seed = run.spec.search.seed if run.seed is None else run.seed
    stats = SearchStats(
        method="stages+" + ("/".join(sorted(run.methods)) or "none"),
        seconds=seconds, evaluations=run.used, seed=seed, status=status, objective=kind,
        lower_bound=bound if (best is not None and bound > 0) else None,
        lower_bound_s=bound / 1e9 if (best is not None and bound > 0 and kind.minimises_time) else None,
        candidates=total, solved=run.solved, pruned=run.pruned, stopped_by=run.stop,
        notes=tuple(notes),
    )  # fmt: skip
    viol = tuple(run.violations[k] for k in sorted(run.violations)) if best is None else ()
    return RunResult(spec=run.spec, evaluation=best[1] if best else None, search=stats,
                     violations=viol, stages=best[2] if best else None,
                     phases=run.phases if best else (),
                     section=StagesSection(best[2]) if best else PlanSection())  # fmt: skip


@dataclass(frozen=True, slots=True)
class StagesSection(PlanSection):
    """The stages' part of the report and the JSON: the layer graph's kernels, the ends'
    mappings and ``stage_layers``, the stages' table (``report.stage_lines``)."""

    plan: StagePlan

    def names(self) -> tuple[str, ...]:
        return self.plan.names["layers"]

    def mapping(self, spec: Spec) -> dict[str, Any]:
        return self.plan.mapping()

    def headline(self) -> dict[str, Any]:
        return {"stages": len(self.plan.stages), "slowest_stage_s": self.plan.slowest_ns / 1e9}

    def to_json(self) -> dict[str, Any]:
        return {"pipeline_stages": self.plan.to_json()}

    def timing(self) -> str:
        return stage_timing(self.plan)

    def evaluation_lines(self) -> list[str]:
        return stage_lines(self.plan)


@dataclass(frozen=True, slots=True)
class Stages:
    name: str = "stages"
    summary: str = ("a whole model in pipeline pieces (ends before and after the layers) over "
                    "stages that do not all run the same program")  # fmt: skip

    def applies(self, spec: Spec) -> bool:
        return is_staged(spec)

    def plan(self, spec: Spec) -> Plan:
        """One phase per piece present; a piece's own spec depends on the micro-batch size
        each outer choice pins (``_solve_choice`` builds it), so the phase holds the
        whole-model spec."""
        phases = tuple(Phase(name, spec, role="piece")
                       for name, members in members_of(spec).items() if members)  # fmt: skip
        return Plan(self.name, spec.system, (Pool.of("all", spec.system),), phases, Max())

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        return search_stages(spec, seed=seed, time_limit_s=time_limit_s,
                             max_evaluations=max_evaluations, progress=progress)  # fmt: skip

    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, StagePlan]:
        """The mapping file's pieces and ``stage_layers`` evaluated on ``spec``."""
        m = load_staged_mapping(mapping, spec)
        return evaluate_staged(spec, m.decisions, m.stage_layers)

    def mapping_result(self, spec: Spec, evaluation: Evaluation, record: StagePlan | None,
                       stats: SearchStats) -> RunResult:
        """``record`` is None when the mapping is infeasible (no stages were composed)."""
        section = NO_SECTION if record is None else StagesSection(record)
        return RunResult(spec, evaluation, stats, stages=record, plan=self.name,
                         section=section)  # fmt: skip


STAGES = Stages()


