"""The search engine: runs the selected strategies, every candidate scored by the evaluator.

An *outer choice* is a network shape x parallelism placement (when the spec leaves one to
the search: ``outer.placements``) x tile count x micro-batch size x configuration count
(the micro-batch size is pinned, or 1 whenever that provably wins: ``outer.micro_batch_sizes``). The engine owns what a search learns (``SearchState``: incumbent, open bound,
proven values, violations, budget) and two strategies from ``search/strategies``
(``spec.search.strategy`` and ``spec.search.assignment``, docs/design.md "Search
strategies"):

* the *outer strategy* decides which outer choices are solved. The default ("auto")
  enumerates them best-bound-first ("enumerate"): for every (shape, tile count) the engine
  solves the inter-chip sharding exactly (pinned choices kept), lowers the problem and
  computes an admissible lower bound of its objective (``search/objective.py``; time per
  batch today); the most promising choice is solved next, and as soon as the next bound
  cannot beat the incumbent every remaining choice is pruned. A solved configuration count
  also bounds the smaller ones of the same (shape, tile count): one more configuration (two
  under the FWD/BWD rule) can always stay empty, so more configurations are never worse.
  Spaces with more than ``BOUND_LIMIT`` (shape, tile count) pairs are sampled by Optuna's
  seeded TPE sampler for ``OPTUNA_TRIALS`` outer choices instead ("optuna", not proven);
* the *assignment strategy* solves one outer choice (default "auto": exact A* over order
  ideals where they fit, contiguous-order DP and annealing otherwise); its winner is
  re-scored by the full evaluator. If every solved choice was solved exactly and the rest
  pruned, the result is proven optimal.

Everything the search does is counted in work, never in seconds, so the result is a
function of (spec, seed) only. A work budget (``search.max_evaluations``) and an optional
wall-clock ``time_limit_s`` are safety stops: when one fires, the result says so
(``RunStatus.STOPPED_BY_LIMIT``); Ctrl-C returns the best mapping so far
(``RunStatus.INTERRUPTED``). ``joint_sharding`` then tries sharding choices that are not
byte-minimal on the best outer choice.

With ``search.jobs`` > 1 the enumeration's next outer choices are solved ahead in worker
processes (``search/speculation.py``); an answer is used only where this search would have
computed the same one, so the result does not depend on the number of processes.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from dfsearch.codes import Dim, ExecutionStyle, RunStatus, Status
from dfsearch.cost.layout import Control, no_control
from dfsearch.cost.lower import Outer, Problem, effective_num_config, lower, with_num_config
from dfsearch.cost.model import Evaluation, evaluate_problem, outer_status
from dfsearch.decision import Decision
from dfsearch.kernels.graph import sharding_choices
from dfsearch.result import RunResult, SearchStats, Violation
from dfsearch.search import outer as outer_mod
from dfsearch.search.assign import lone_misfits
from dfsearch.search.count_bound import count_bound_ns
from dfsearch.search.objective import Objective, objective_of
from dfsearch.search.sharding import solve_spec_sharding
from dfsearch.search.sharding_plan import ShardingPlans
from dfsearch.search.speculation import Speculation, runs_ahead
from dfsearch.search.strategies import assignment_strategy, outer_strategy
from dfsearch.search.strategies.base import (
    AssignmentStrategy,
    OuterSpace,
    Pair,
    Progress,
    SearchProgress,
    stop_requested,
)
from dfsearch.search.warmup import warm_up
from dfsearch.spec import Spec
from dfsearch.system.fabric import Fabric
from dfsearch.system.placement import Placement
from dfsearch.workloads import model_of

__all__ = ["search", "outer_sharding", "full_sharding", "SearchState", "Progress", "SearchProgress",
           "BOUND_LIMIT", "OPTUNA_TRIALS", "GAP_STOP"]

#: (shape, tile count, micro-batch size) pairs above which the "auto" outer strategy samples
#: instead of bounding
BOUND_LIMIT = 10_000
#: outer choices the "optuna" outer strategy solves
OPTUNA_TRIALS = 300
#: a search that ran to its end is "proven optimal" when its lower bound is within this
#: relative distance of the answer: a bound summed in another order than the answer's
#: configurations differs in the last bits
PROOF_REL_TOL = 1e-12
#: lowered problems a search keeps for reuse (``_lowered``; a few KB each)
LOWERED_KEPT = 1024
#: ``stopped_by`` of a search that stopped at a proven gap within ``search.gap``
GAP_STOP = "gap"


@dataclass
class SearchState:
    """What the search has learnt so far (mutable, private to one ``search`` call); the
    ``OuterState`` that outer strategies work on (``strategies/base.py``)."""

    spec: Spec
    seed: int
    max_evaluations: int
    control: np.ndarray  #: shared with the jitted searches: deadline, budget, stop flag
    objective: Objective
    assignment: AssignmentStrategy  #: solves the configuration assignment of one choice
    best: Evaluation | None = None
    evaluations: int = 0
    solved: int = 0
    pruned: int = 0
    open_bound: float = math.inf  #: min objective bound of choices not solved exactly
    #: (shape, tile count, micro-batch size, placement, configuration count, dominance step)
    #: -> bound of
    #: the objective
    #: from the proven optimal final_ns of that outer choice
    exact_values: dict[tuple, float] = field(default_factory=dict)
    violations: dict[str, Violation] = field(default_factory=dict)
    #: the placement of each kept violation's outer choice (a Violation names only the shape)
    violation_placements: dict[str, Placement | None] = field(default_factory=dict)
    methods: set[str] = field(default_factory=set)
    stop: str = ""  #: why the search stopped early ("" = it did not)
    #: sharding solutions by what they depend on (``_sharding``)
    sharding_cache: dict = field(default_factory=dict)
    #: the sharding problem's structure, shared by the solves on the spec's graph
    sharding_plans: ShardingPlans = field(default_factory=ShardingPlans)
    #: lowered problems by outer choice less the configuration count (``_lowered``)
    lowered: dict = field(default_factory=dict)
    #: objective bounds of outer choices that see the configuration count (``_count_bound``)
    count_bounds: dict = field(default_factory=dict)
    progress: Progress | None = None  #: the caller's progress callback (display only)
    total: int = 0  #: outer choices in the space
    last_progress: SearchProgress | None = None  #: the last record sent
    #: the workers solving outer choices ahead (``search.jobs`` > 1), else None
    speculation: Speculation | None = None

    def relay(self, p: SearchProgress) -> None:
        """Send a progress record (what outer strategies call) and keep it for ``tick``."""
        self.last_progress = p
        if self.progress is not None:
            self.progress(p)

    def tick(self) -> None:
        """Between the jitted calls of a long assignment search or bounding loop: the last
        record again with the evaluations counted so far, so that a display can move. It
        changes nothing the search decides."""
        if self.progress is None:
            return
        p = self.last_progress or SearchProgress(self.solved + self.pruned, self.total,
                                                 budget=self.max_evaluations)  # fmt: skip
        self.progress(replace(p, evaluations=self.evaluations))

    def offer(self, ev: Evaluation) -> bool:
        if ev.feasible and self.objective.value(ev) < self.best_value():
            self.best = ev
            return True
        return False

    def best_value(self) -> float:
        """The incumbent's objective (inf without one)."""
        return math.inf if self.best is None else self.objective.value(self.best)

    def note_violation(self, v: Violation, placement: Placement | None = None) -> None:
        old = self.violations.get(v.constraint)
        if old is None or v.excess < old.excess:
            self.violations[v.constraint] = v
            self.violation_placements[v.constraint] = placement

    def out_of_budget(self) -> bool:
        if self.control[Control.FLAG] != 0.0:
            self.stop = "interrupted"
        elif self.evaluations >= self.max_evaluations:
            self.stop = f"work budget of {self.max_evaluations:,} evaluations used up"
        elif time.perf_counter() > self.control[Control.DEADLINE]:
            self.stop = "time limit reached"
        return bool(self.stop)

    # ---- the operations outer strategies use (strategies/base.py, OuterState)
    def bound_pairs(self, pairs: tuple, c_any: int) -> list[Pair] | None:
        try:
            return _bound_pairs(self, pairs, c_any)
        except _Stopped:
            if self.stop != "interrupted":
                self.stop += " while bounding the outer choices"
            self.open_bound = 0.0
            return None

    def unbounded_pair(
        self, shape: tuple[int, ...], num_tile: int, c: int, micro_batch_size: int,
        placement: Placement | None = None,
    ) -> Pair:
        sharding = _sharding(self.spec, shape, num_tile, self.sharding_cache, placement, self.sharding_plans)
        outer = Outer(shape, sharding, micro_batch_size, num_tile, c, placement)
        status, viol = outer_status(self.spec, outer)
        return Pair(shape, num_tile, sharding, 0.0, status, viol, micro_batch_size, placement)

    def solve(self, pair: Pair, c: int) -> float:
        return _solve(self, pair, c)  # looked up at call time (tests wrap engine._solve)

    def dominating_value(self, pair: Pair, c: int) -> float | None:
        return _dominating_value(self, pair, c)

    def note_outer_violation(self, pair: Pair) -> None:
        self.note_violation(_outer_violation(self.spec, pair), pair.placement)

    def progress_record(self, done: int, total: int, frontier: float = math.inf) -> SearchProgress:
        return _progress_record(self, done, total, frontier)

    def lookahead(self, order: list[tuple[Pair, int]]) -> None:
        """The (pair, configuration count) the strategy will visit, in its order: with
        ``search.jobs`` > 1 workers solve them ahead (``search/speculation.py``)."""
        if self.speculation is not None:
            self.speculation.plan(order)

    def problem_for(self, pair: Pair, c: int) -> Problem:
        """The lowered problem of an outer choice (what ``solve`` assigns)."""
        return _lowered(self, _outer(pair, c))

    def must_stop(self) -> bool:
        """The stop flag (Ctrl-C) is set or the deadline has passed."""
        return stop_requested(self.control)

    def gap_reached(self, frontier: float) -> bool:
        gap = self.spec.search.gap
        if gap <= 0 or self.best is None:
            return False
        reached = _gap(self.best_value(), min(self.open_bound, frontier))
        if reached is not None and reached <= gap:
            self.stop = GAP_STOP
            return True
        return False


def search(
    spec: Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    max_evaluations: int | None = None,
    progress: Progress | None = None,
    pinned: tuple[tuple[int, ...], Placement | None] | None = None,
) -> RunResult:
    """Find the best mapping of ``spec`` (see module docstring).

    The outer strategy (``spec.search.strategy``) and the assignment strategy
    (``spec.search.assignment``) come from the registry of ``search/strategies``.
    ``time_limit_s`` (default: the spec's ``search.time_limit_s``; 0 or None = none) is a
    safety stop measured after the evaluator is compiled; ``max_evaluations`` (default: the
    spec's ``search.max_evaluations``) is the work budget. Ctrl-C stops the search and
    returns the best mapping found so far (``RunStatus.INTERRUPTED``). ``pinned`` = (shape,
    placement) searches only the outer choices on that network shape and placement (the
    speculative-decoding search solves its two steps on one shape: ``plan/speculative.py``).

    One phase only: the spec's graph is searched as it is. A whole model in pipeline pieces
    or a graph cut into pipeline partitions is a plan of several searches
    (``dfsearch.plan.run``, which ``dfsearch.api.run`` calls).

    Returns
    -------
    RunResult
        Always; ``result.evaluation`` is None when no feasible mapping was found, and then
        ``result.violations`` says which constraints bind and by how much.

    Raises
    ------
    SolverUnavailableError
        If a selected strategy needs an optional dependency that is not installed (before
        any work is done).
    """
    outer = outer_strategy(spec.search.strategy)
    assignment = assignment_strategy(spec.search.assignment)
    seed = spec.search.seed if seed is None else seed
    limit = spec.search.time_limit_s if time_limit_s is None else time_limit_s
    budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
    if limit:
        _compile_first()  # compilation never counts against the time limit
    t0 = time.perf_counter()
    control = no_control()
    if limit:
        control[Control.DEADLINE] = t0 + limit
    st = SearchState(spec, seed, budget, control, objective_of(spec), assignment, progress=progress)
    if runs_ahead(spec.search.jobs, assignment.name):
        st.speculation = Speculation(spec.search.jobs, assignment.name, seed,
                                     float(control[Control.DEADLINE]))  # fmt: skip
    method = outer.name
    total = 0
    with _ctrl_c_sets_flag(control), _closing(st.speculation):
        try:
            space = OuterSpace(tuple(_pair_space(spec, pinned)), tuple(_config_counts(spec)),
                               bound_limit=BOUND_LIMIT, trials=OPTUNA_TRIALS)  # fmt: skip
            total = st.total = space.total
            method = outer.explore(st, space, st.relay if progress is not None else None)
            if spec.search.joint_sharding and st.best is not None and not st.stop:
                _joint_sharding(st)
        except KeyboardInterrupt:  # outside the main thread, or raised by a callback
            st.stop = "interrupted"
            st.open_bound = 0.0  # the strategy left mid-way: what it had not solved is unbounded
    if control[Control.FLAG] != 0.0 and not st.stop:
        st.stop = "interrupted"  # Ctrl-C came in a part that did not poll (a one-choice search)
    return _result(st, method, total, time.perf_counter() - t0, st.stop == "interrupted")


@contextlib.contextmanager
def _ctrl_c_sets_flag(control: np.ndarray) -> Iterator[None]:
    """While searching, Ctrl-C sets the stop flag that the jitted searches read (it cannot
    raise inside compiled code); the search then returns the best mapping so far."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        control[Control.FLAG] = 1.0

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _closing(speculation: Speculation | None) -> Iterator[None]:
    """Stop the workers when the search ends, however it ends."""
    try:
        yield
    finally:
        if speculation is not None:
            speculation.close()


# --------------------------------------------------------------------------- outer space
def _pair_space(
    spec: Spec, pinned: tuple[tuple[int, ...], Placement | None] | None = None
) -> list[tuple[tuple[int, ...], int, int, Placement | None]]:
    """Every (shape, tile count, micro-batch size, placement) of the spec, shapes outermost,
    then placements (``outer.placements``: the spec's fixed roles alone when it fixes
    every dimension's parallelism); only those of the ``pinned`` (shape, placement) if given."""
    tiles = outer_mod.tile_counts(spec)
    return [
        (s, t, m, pl) for s in outer_mod.shapes(spec) for pl in outer_mod.placements(spec, s)
        if pinned is None or (s, pl) == pinned
        for t in tiles for m in outer_mod.micro_batch_sizes(spec, s, pl)
    ]  # fmt: skip


def _config_counts(spec: Spec) -> list[int]:
    """Distinct effective configuration counts, largest first."""
    return sorted({effective_num_config(spec, c) for c in outer_mod.config_counts(spec)}, reverse=True)


def _dominance_step(spec: Spec, problem: Problem) -> int:
    """k such that C + k configurations are never worse than C (an empty configuration
    costs nothing); 0 when pinned configurations forbid the argument."""
    if spec.execution.style is not ExecutionStyle.DATAFLOW or problem.constants.fixed_config:
        return 0  # one configuration per kernel is a different regime, not a larger count
    if any(k.config >= 0 for k in spec.graph.kernels):
        return 0
    return 2 if problem.constants.fb_rule else 1


def outer_sharding(
    spec: Spec, shape: tuple[int, ...], num_tile: int, placement: Placement | None = None,
    cache: dict | None = None,
) -> tuple[Dim, ...]:
    """The inter-chip sharding the search uses on (shape, tile count, placement): the
    spec's pinned choices, the byte-minimal solution of the sharding pass for the rest."""
    return _sharding(spec, shape, num_tile, {} if cache is None else cache, placement)


def full_sharding(spec: Spec, shape: tuple[int, ...], placement: Placement | None,
                  pinned: dict[int, Dim] | None = None) -> tuple[Dim, ...]:
    """The inter-chip sharding of the whole graph: pinned choices (the spec's, then
    ``pinned``), the byte-minimal solution for the rest (ties by time at the first tile
    count; DFModel's pipeline partitioning cuts the graph under it, ``cost.partition``)."""
    t = outer_mod.tile_counts(spec)[0]
    if pinned:
        ks = tuple(replace(k, sharding=pinned[i]) if i in pinned else k
                   for i, k in enumerate(spec.graph.kernels))  # fmt: skip
        spec = replace(spec, graph=replace(spec.graph, kernels=ks))
    return outer_sharding(spec, shape, t, placement)


def _sharding(
    spec: Spec, shape: tuple[int, ...], num_tile: int, cache: dict,
    placement: Placement | None = None, plans: ShardingPlans | None = None,
) -> tuple[Dim, ...]:
    kernels = spec.graph.kernels
    if not model_of(spec.workload).searches_sharding(spec.execution):
        return tuple(Dim.NO for _ in kernels)
    if all(k.sharding is not None for k in kernels):
        return tuple(k.sharding for k in kernels)  # type: ignore[misc]
    # the sharding depends on the shape only through the TP degree and TP collective ratios
    fabric = Fabric.of(spec, shape, placement)
    ratios = fabric.ratios()
    key = (fabric.groups().tp, ratios.all_reduce, ratios.all_gather, ratios.all_to_all,
           num_tile)  # fmt: skip
    if key not in cache:
        cache[key] = solve_spec_sharding(spec, shape, num_tile, placement, plans).sharding
    return cache[key]


def _bound_pairs(st: SearchState, pairs: tuple, c_any: int) -> list[Pair]:
    """Sharding, outer feasibility and lower bound of every (shape, tile count, micro-batch
    size); the bound does not depend on the configuration count, ``c_any`` is one of them."""
    spec = st.spec
    out = []
    for shape, t, mbs, pl in pairs:
        if st.out_of_budget():
            raise _Stopped
        sharding = _sharding(spec, shape, t, st.sharding_cache, pl, st.sharding_plans)
        outer = Outer(shape, sharding, mbs, t, c_any, pl)
        status, viol = outer_status(spec, outer)
        bound = math.inf
        if status is Status.OK:
            problem = _lowered(st, outer)
            lb = outer_mod.lower_bound_ns(problem)
            bound = st.objective.bound(problem, lb)
            if st.objective.latency_excess_ns(lb) > 0:  # no mapping meets the latency bound
                status, viol = Status.LATENCY, st.objective.latency_excess_ns(lb)
        out.append(Pair(shape, t, sharding, bound, status, viol, mbs, pl))
        st.tick()
    return out


def _lowered(st: SearchState, outer: Outer) -> Problem:
    """``lower(st.spec, outer)``, lowered once per outer choice whatever the configuration
    count (bounding and solving lower the same choice; only the count's constants differ:
    ``cost.lower.with_num_config``). At most ``LOWERED_KEPT`` problems are kept, oldest
    dropped first."""
    key = (outer.shape, outer.sharding, outer.micro_batch_size, outer.num_tile, outer.placement)
    base = st.lowered.get(key)
    if base is None:
        base = lower(st.spec, outer)
        if len(st.lowered) >= LOWERED_KEPT:
            del st.lowered[next(iter(st.lowered))]
        st.lowered[key] = base
    return with_num_config(base, st.spec, outer.num_config)


# --------------------------------------------------------------------------- solving
class _Stopped(Exception):
    """The time limit or Ctrl-C came before every (shape, tile count) had its bound."""


def _dominating_value(st: SearchState, p: Pair, c: int) -> float | None:
    """A bound of the objective of (p, c) known before it is solved: that of a solved larger
    configuration count that dominates c, or the choice's own count bound
    (``_count_bound``), the larger; None when neither is known."""
    dominated = None
    for (shape, t, mbs, pl, c2, step), value in st.exact_values.items():
        same = (shape == p.shape and t == p.num_tile and mbs == p.micro_batch_size
                and pl == p.placement)  # fmt: skip
        if same and c2 > c and step and (c2 - c) % step == 0:
            dominated = value
            break
    own = _count_bound(st, p, c)
    if own is not None and (dominated is None or own > dominated):
        return own
    return dominated


def _count_bound(st: SearchState, p: Pair, c: int) -> float | None:
    """The objective bound of (p, c) from ``count_bound.count_bound_ns`` (wide graphs: the
    additive and crowded bounds of its lowered problem, which see the count), computed once
    per choice; None where it gives none."""
    key = (p.shape, p.num_tile, p.micro_batch_size, p.placement, c)
    if key not in st.count_bounds:
        problem = _lowered(st, _outer(p, c))
        ii = count_bound_ns(problem)
        final = outer_mod.final_from_ii(problem, ii)
        st.count_bounds[key] = None if ii <= 0 else st.objective.bound(problem, final)
    return st.count_bounds[key]


def _outer(p: Pair, c: int) -> Outer:
    """The outer choice of a pair with ``c`` configurations."""
    return Outer(p.shape, p.sharding, p.micro_batch_size, p.num_tile, c, p.placement)


def _solve(st: SearchState, p: Pair, c: int) -> float:
    """Solve one outer choice; update the incumbent, the open bound and the violations."""
    spec = st.spec
    mbs = p.micro_batch_size
    problem = _lowered(st, _outer(p, c))
    left = st.max_evaluations - st.evaluations
    st.control[Control.MAX_EVALS] = left
    tick = st.tick if st.progress is not None else None
    a = None if st.speculation is None else st.speculation.take(p, c, left, st)
    if a is None:  # on one core, or an answer computed ahead that this search would not have
        a = st.assignment.assign(problem, seed=st.seed, control=st.control, tick=tick)
    st.evaluations += a.evaluations
    for name, amount in a.violations.items():
        st.note_violation(Violation.of(spec, name, amount, p.shape, p.num_tile, c), p.placement)
    if a.exhaustive:  # a proof up to the strategy's proof_rel_gap: dominance uses the bound
        ii = min(a.value_ns, a.bound_ns)
        final = outer_mod.final_from_ii(problem, ii) if a.config else math.inf
        key = (p.shape, p.num_tile, mbs, p.placement, c, _dominance_step(spec, problem))
        st.exact_values[key] = st.objective.bound(problem, final)
    else:
        final = outer_mod.final_from_ii(problem, a.bound_ns)
        st.open_bound = min(st.open_bound, max(p.bound, st.objective.bound(problem, final)))
    if a.config is None:
        return math.inf
    st.methods.add(a.method)
    decision = Decision(
        shape=p.shape, sharding=p.sharding, micro_batch_size=mbs, num_tile=p.num_tile,
        config=a.config, num_config=c, placement=p.placement,
    )  # fmt: skip
    ev = evaluate_problem(spec, problem, decision)
    st.evaluations += 1
    st.offer(ev)
    excess = st.objective.latency_excess_ns(ev.final_ns) if ev.feasible else 0.0
    if excess > 0:  # feasible, but slower than search.latency_bound_ms
        st.note_violation(Violation.of(spec, Status.LATENCY.label, excess, p.shape, p.num_tile, c),
                          p.placement)  # fmt: skip
    return st.objective.value(ev) if ev.feasible else math.inf


def _joint_sharding(st: SearchState) -> None:
    """Local search over sharding choices on the best outer choice: change one kernel's
    choice at a time (pinned kernels stay), keep any change that lowers the objective."""
    spec = st.spec
    assert st.best is not None
    improved = True
    while improved and not st.out_of_budget():
        improved = False
        current = st.best
        d = current.decision
        for i, k in enumerate(spec.graph.kernels):
            if k.sharding is not None:
                continue
            for choice in sharding_choices(k):
                if choice is d.sharding[i]:
                    continue
                sh = list(d.sharding)
                sh[i] = choice
                p = Pair(d.shape, d.num_tile, tuple(sh), 0.0, Status.OK, 0.0,
                         d.micro_batch_size, d.placement)  # fmt: skip
                c = effective_num_config(spec, len(current.configs))
                problem = lower(spec, Outer(d.shape, p.sharding, d.micro_batch_size, d.num_tile,
                                            c, d.placement))  # fmt: skip
                bound = st.objective.bound(problem, outer_mod.lower_bound_ns(problem))
                if bound >= st.objective.value(current):
                    continue
                before = st.best
                _solve(st, p, c)
                improved = improved or st.best is not before
    st.open_bound = 0.0  # other sharding choices are not bounded
    st.methods.add("joint-sharding")


# --------------------------------------------------------------------------- progress
def _gap(best: float, bound: float) -> float | None:
    """(best - bound) / best, 0 when the bound meets the incumbent; None when either is
    unknown (no incumbent, or a bound of 0: nothing proven)."""
    if not (math.isfinite(best) and best > 0 and bound > 0):
        return None
    return max(0.0, (best - bound) / best) if math.isfinite(bound) else 0.0


def _progress_record(st: SearchState, done: int, total: int, frontier: float) -> SearchProgress:
    best = st.best_value()
    bound = min(st.open_bound, frontier, best)
    gap = _gap(best, bound)
    bound_s = bound / 1e9 if (gap is not None and st.objective.kind.minimises_time) else None
    return SearchProgress(
        done=done, total=total, best_s=st.best.final_s if st.best is not None else None,
        bound_s=bound_s, gap=gap, evaluations=st.evaluations, budget=st.max_evaluations,
    )  # fmt: skip


# --------------------------------------------------------------------------- result
def _result(st: SearchState, method: str, total: int, seconds: float, interrupted: bool) -> RunResult:
    best = st.best
    bound = min(st.open_bound, st.best_value())
    at_gap = st.stop == GAP_STOP  # a gap stop with a bound that meets the answer is a proof
    met = bound >= st.best_value() or (
        (not st.stop or at_gap) and bound >= st.best_value() - PROOF_REL_TOL * abs(st.best_value()))
    status = RunStatus.of_search(found=best is not None, proven=met, interrupted=interrupted,
                                 stopped=bool(st.stop) and not at_gap)  # fmt: skip
    notes = []
    if at_gap:
        notes.append(f"stopped at a proven gap of {_gap(st.best_value(), bound):.3%} "
                     f"(search.gap {st.spec.search.gap:g}) after {st.solved + st.pruned} of "
                     f"{total} outer choices")  # fmt: skip
    elif st.stop and not interrupted:
        notes.append(f"{st.stop} after {st.solved + st.pruned} of {total} outer choices")
    if status is RunStatus.INFEASIBLE and math.isfinite(bound):
        notes.append(_not_proven_infeasible(st, method))
    if best is not None:
        notes += model_of(st.spec.workload).search_notes(st.spec, best)
    stats = SearchStats(
        method=f"{method}+{'/'.join(sorted(st.methods)) or 'none'}",
        seconds=seconds,
        evaluations=st.evaluations,
        seed=st.seed,
        status=status,
        objective=st.objective.kind,
        lower_bound=bound if (best is not None and bound > 0) else None,
        lower_bound_s=_bound_s(st, best, bound),
        candidates=total,
        solved=st.solved,
        pruned=st.pruned,
        stopped_by=st.stop,
        notes=tuple(notes),
    )
    viol = tuple(
        _explain(st.spec, st.violations[k], st.violation_placements.get(k))
        for k in sorted(st.violations)
    ) if best is None else ()  # fmt: skip
    return RunResult(spec=st.spec, evaluation=best, search=stats, violations=viol)


def _not_proven_infeasible(st: SearchState, method: str) -> str:
    """Why a run that found nothing has not proven that nothing fits."""
    if not outer_strategy(method).proves_optimality:
        return f"not proven infeasible: the outer choices were sampled ({method}), not all searched"
    if not st.assignment.proves_optimality:
        return (f"not proven infeasible: the assignment strategy {st.assignment.name!r} "
                "searches heuristically")  # fmt: skip
    return ("not proven infeasible: some outer choices were searched heuristically "
            "(graphs too wide for the exact assignment search)")  # fmt: skip


def _bound_s(st: SearchState, best: Evaluation | None, bound: float) -> float | None:
    """The lower bound as a time in s (per batch; a serving step's latency), when the
    objective is that time."""
    if best is None or not bound > 0 or not st.objective.kind.minimises_time:
        return None
    return bound / 1e9


def _explain(spec: Spec, v: Violation, placement: Placement | None = None) -> Violation:
    """Name the kernels behind an SRAM or cores violation: those that break it even alone
    in a configuration at the closest outer choice (with its ``placement``)."""
    if v.constraint not in ("sram", "cores") or not v.num_config:
        return v
    sharding = _sharding(spec, v.shape, v.num_tile, {}, placement)
    mbs = outer_mod.micro_batch_size(spec)
    outer = Outer(v.shape, sharding, mbs, v.num_tile, v.num_config, placement)
    problem = lower(spec, outer)
    names = [spec.graph.kernels[k].name for k, c, _ in lone_misfits(problem) if c == v.constraint]
    if names:
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        detail = f"{len(names)} kernel(s) do not fit even alone in a configuration: {shown}"
    else:
        detail = "every kernel fits alone; the configuration count and rules force too many together"
    return replace(v, detail=detail)


def _outer_violation(spec: Spec, p: Pair) -> Violation:
    return Violation.of(spec, p.status.label, abs(p.violation), p.shape, p.num_tile, 0)


def _compile_first() -> None:
    """Compile (or load from the cache) every jitted function before a clock starts."""
    warm_up()
