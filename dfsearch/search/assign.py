"""Configuration assignment for fixed outer choices (docs/design.md).

``assign_configs(problem)`` returns the best assignment of kernels to configurations:

* forced assignments (kernel-by-kernel, ``num_config`` = #kernels) need no search;
* otherwise the exact shortest path over chains of order ideals (``_dp.ideal_search``,
  best-first with an admissible bound) when the graph has at most 62 kernels and the states
  it needs fit the budget — the result is then proven optimal;
* otherwise the DP over contiguous blocks of topological orders (``_dp.order_dp``), improved by
  simulated annealing over the orders with precedence-preserving moves; not proven optimal.

The FWD/BWD rule, pinned configurations and the DRAM capacity are constraints of the DP;
tiered DRAM is handled by solving each bandwidth regime and keeping the better.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dfsearch.codes import Status
from dfsearch.cost.evaluate import set_cost
from dfsearch.cost.layout import NUM_SET, Control, SetSlot, Stat, new_stats, no_control
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator
from dfsearch.search import _dp
from dfsearch.search.chain_bound import chain_bound_ns
from dfsearch.search.core_bound import core_bound_ns
from dfsearch.search.core_pack import core_pack
from dfsearch.search.crowded_split import crowded_split
from dfsearch.search.graph_bound import (
    boundary_bound_ns,
    crowded_bound_ns,
    graph_bound_ns,
    overlap_bound_ns,
    sram_excess_by_count,
)
from dfsearch.search.layered import composed_order, layer_of, layered_split, repeated_layer
from dfsearch.search.lns import improve
from dfsearch.search.moves import move_boundaries

__all__ = ["Assignment", "assign_configs", "lone_misfits", "MAX_IDEAL_KERNELS"]

#: bitmask states: graphs with more kernels use the contiguous-order DP
MAX_IDEAL_KERNELS = 62
#: states (and 16x as many queued candidates) before the exact search gives up and the
#: order DP takes over
MAX_STATES = 200_000
#: larger graphs, and stacked layers, skip the contiguous-order DP and annealing (time ~
#: n^4) for the layered split alone (``search/layered.py``)
MAX_ANNEAL_KERNELS = 128
#: graphs from this many kernels get the large-neighbourhood search after their first
#: unproven answer in "auto" (``search/lns.py``), with this many evaluations per kernel
LNS_KERNELS = MAX_IDEAL_KERNELS + 1
LNS_EVALS_PER_KERNEL = 2_000
#: evaluations per kernel that the boundary moves may spend after it (``search/moves.py``)
MOVE_EVALS_PER_KERNEL = 200


@dataclass(frozen=True, slots=True)
class Assignment:
    """Result of one assignment search."""

    config: tuple[int, ...] | None  #: None when nothing is feasible
    value_ns: float  #: sum of configuration IIs (inf if infeasible)
    method: str  #: "forced", "ideal-dp", "order-dp" or "anneal"
    exhaustive: bool  #: proven optimal over all assignments for these outer choices
    evaluations: int
    violations: dict[str, float]  #: smallest violation seen per binding constraint
    bound_ns: float = 0.0  #: lower bound of value_ns over all assignments (= value if exhaustive)
    stopped: bool = False  #: the control array (time, work budget, Ctrl-C) stopped the search


def _allowed(problem: Problem) -> np.ndarray:
    """allowed[k, c] = 1 when kernel k may sit in configuration c (pins, FWD/BWD rule)."""
    return _dp.allowed_configs(problem.kernels, problem.constants)


def _topo(problem: Problem) -> np.ndarray:
    """A topological order that keeps the file order where it can and puts forward kernels
    before backward ones (so that contiguous blocks can respect the FWD/BWD rule)."""
    return _dp.topological_order(problem.kernels, problem.edges)


def _regimes(problem: Problem) -> list[tuple[float, float]]:
    """(DRAM bandwidth, cap on T_c * live activation bytes) per DRAM regime; a negative cap
    is minus the bytes by which weights and fixed data alone overflow the DRAM."""
    k = problem.constants
    fixed, mult = k.dram_fixed, k.dram_act_mult

    def live_cap(cap: float) -> float:
        if cap == math.inf:
            return math.inf
        if fixed > cap:
            return cap - fixed  # negative: by how much the fixed part alone overflows
        return (cap - fixed) / mult if mult > 0 else math.inf

    out = [(k.dram_bw, live_cap(k.dram_cap))]
    cap2 = k.dram2_cap
    if cap2 > 0:
        cap1, bw1, bw2 = k.dram_cap, k.dram_bw, k.dram2_bw
        out.append(((cap1 * bw1 + cap2 * bw2) / (cap1 + cap2), live_cap(cap1 + cap2)))
    return out


METHODS = ("auto", "ideal-dp", "order-dp", "anneal")


def assign_configs(
    problem: Problem,
    *,
    method: str = "auto",
    max_states: int = MAX_STATES,
    seed: int = 0,
    anneal_iterations: int = 200,
    control: np.ndarray | None = None,
    tick: Callable[[], None] | None = None,
) -> Assignment:
    """Best configuration assignment for one lowered problem (see module docstring).

    ``method``: "auto" (ideal DP, falling back to order DP + annealing), "ideal-dp",
    "order-dp" (contiguous blocks of one topological order) or "anneal" (order DP inside
    simulated annealing over topological orders, seeded). ``control`` (``layout.Control``
    slots: deadline, evaluations each search may spend, stop flag) stops every search early;
    the assignment is then ``stopped`` and not exhaustive. ``tick`` (progress display only)
    is called between the jitted searches of a long assignment (each DRAM regime, each split
    of the layered search, each annealing move); it must not change the search.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}. Got {method!r} instead.")
    if control is None:
        control = no_control()
    tick = _no_tick if tick is None else tick
    n, nc = problem.num_kernels, problem.num_config
    if (fixed := problem.constants.fixed_config) or nc == 1:
        cfg = tuple(range(n)) if fixed else (0,) * n
        return _evaluate_forced(problem, cfg)
    allowed = _allowed(problem)
    topo = _topo(problem)
    best: Assignment | None = None
    total_evals = 0
    viol: dict[str, float] = {}
    regime_bounds: list[float] = []
    stopped = False
    for bw, live_cap in _regimes(problem):
        if stopped:
            regime_bounds.append(0.0)
            continue
        if live_cap < 0:
            viol["dram_fixed"] = min(viol.get("dram_fixed", math.inf), -live_cap)
            regime_bounds.append(math.inf)
            continue
        stats = new_stats()
        value, assign, used, exhaustive, bound = _solve_regime(
            problem, bw, live_cap, topo, allowed, stats, method, max_states, seed,
            anneal_iterations, control, tick,
        )  # fmt: skip
        tick()
        stopped = bool(stats[Stat.STOPPED] > 0)
        total_evals += int(stats[Stat.EVALS])
        _keep_violations(viol, stats)
        regime_bounds.append(bound)
        if value < math.inf and (best is None or value < best.value_ns):
            best = Assignment(tuple(int(c) for c in assign), float(value), used, exhaustive, 0, {})
    lb = float(min(regime_bounds)) if regime_bounds else math.inf
    if best is None:
        proven = all(b == math.inf for b in regime_bounds)
        return Assignment(None, math.inf, method, proven, total_evals, viol, lb, stopped)
    # the neighbourhood search: on wide graphs, and where A* ran out of its share of the
    # budget (the only way "auto" answers with the order DP alone on a graph it may search)
    wide = n >= LNS_KERNELS or best.method == "order-dp"
    if method == "auto" and wide and not stopped and lb < best.value_ns * (1 - 1e-12):
        best, used, stopped = _neighbourhoods(problem, best, allowed, control, seed, total_evals)
        total_evals += used
        if not stopped and lb < best.value_ns * (1 - 1e-12):  # then single kernels across
            best, used, stopped = _boundary_moves(problem, best, allowed, control, total_evals)
            total_evals += used
        if not stopped and lb < best.value_ns * (1 - 1e-12) and problem.constants.cycle_model:
            best, used, stopped = _core_pack(problem, best, allowed, control, total_evals)
            total_evals += used
    # proven optimal: by the exact search, or by a lower bound that meets the answer
    exhaustive = lb >= best.value_ns * (1 - 1e-12)
    return Assignment(best.config, best.value_ns, best.method, exhaustive, total_evals, viol,
                      min(lb, best.value_ns), stopped)  # fmt: skip


def _neighbourhoods(problem, best, allowed, control, seed, spent):
    """The large-neighbourhood search (``search/lns.py``) from ``best`` within
    ``LNS_EVALS_PER_KERNEL`` evaluations per kernel and what the work budget has left after
    ``spent``. Returns (the better assignment, evaluations, stopped)."""
    budget = min(LNS_EVALS_PER_KERNEL * problem.num_kernels, float(control[Control.MAX_EVALS]) - spent)
    if budget <= 0:
        return best, 0, False
    bw, live_cap = _regimes(problem)[0]
    r = improve(problem, best.config, allowed, bw, live_cap, control, seed=seed, budget=budget)
    if r.accepted and r.value_ns < best.value_ns:
        best = Assignment(r.config, r.value_ns, f"{best.method}+lns", False, 0, {})
    return best, r.evaluations, r.stopped


def _boundary_moves(problem, best, allowed, control, spent):
    """The boundary moves (``search/moves.py``) from ``best`` within
    ``MOVE_EVALS_PER_KERNEL`` evaluations per kernel and what the work budget has left after
    ``spent``. Returns (the better assignment, evaluations, stopped)."""
    budget = min(MOVE_EVALS_PER_KERNEL * problem.num_kernels, float(control[Control.MAX_EVALS]) - spent)
    if budget <= 0:
        return best, 0, False
    bw, live_cap = _regimes(problem)[0]
    r = move_boundaries(problem, best.config, allowed, bw, live_cap, control, budget=budget)
    if r.moves and r.value_ns < best.value_ns:
        best = Assignment(r.config, r.value_ns, f"{best.method}+moves", False, 0, {})
    return best, r.evaluations, r.stopped


def _core_pack(problem, best, allowed, control, spent):
    """The core-aware re-packing (``search/core_pack.py``, cycle model) from ``best`` within
    what the work budget has left after ``spent``. Returns (the better assignment,
    evaluations, stopped)."""
    budget = float(control[Control.MAX_EVALS]) - spent
    if budget <= 0:
        return best, 0, False
    r = core_pack(problem, best.config, allowed, control, budget=budget)
    if r.improved and r.value_ns < best.value_ns:
        best = Assignment(r.config, r.value_ns, f"{best.method}+pack", False, 0, {})
    return best, r.evaluations, r.stopped


def _no_tick() -> None:
    """No progress display."""


def _solve_regime(problem, bw, live_cap, topo, allowed, stats, method, max_states, seed,
                  anneal_iterations, control, tick=_no_tick):  # fmt: skip
    """The best assignment in one DRAM regime (bandwidth ``bw``, cap ``live_cap`` on T_c x
    live activation bytes): the exact search over order ideals (graphs of at most
    ``MAX_IDEAL_KERNELS`` kernels), and when it overflows its budget in "auto" (or is not
    tried) the order DP, improved by annealing in "auto" and "anneal". A search the control
    array stops gets no fallback. Returns (value, assignment, method used, exhaustive,
    lower bound of the regime); ``stats`` collects evaluations, stops and violations."""
    n = problem.num_kernels
    assign = np.full(n, -1, dtype=np.int64)
    value, exhaustive, bound, overflow = math.inf, False, 0.0, True
    if n <= MAX_IDEAL_KERNELS and method in ("auto", "ideal-dp"):
        preds, succs, am, must = _dp.ideal_masks(problem.edges, allowed)
        search_args = (
            problem.kernels, problem.edges, problem.constants, preds, succs, topo, am, must,
            allowed, bw, live_cap, max_states,
        )  # fmt: skip
        reserve = _incumbent_reserve(problem, control) if method == "auto" else 0.0
        control[Control.MAX_EVALS] -= reserve  # A* leaves the reserve to the order DP
        try:
            value = _dp.ideal_search(*search_args, 1, assign, stats, control)
        finally:
            control[Control.MAX_EVALS] += reserve
        cut = reserve > 0 and stats[Stat.STOPPED] > 0 and not _dp.must_stop(stats, control)
        if cut:  # A* spent its share of the budget: the order DP maps the graph, the
            # large-neighbourhood search (``assign_configs``) improves it with the rest
            stats[Stat.STOPPED] = 0.0
            value, assign = _order(problem, topo, allowed, bw, live_cap, stats, control)
            bound = max(graph_bound_ns(problem, bw, allowed), 0.0)
            return value, assign, "order-dp", False, min(bound, value)
        exhaustive = stats[Stat.OVERFLOW] == 0
        if value == math.inf and exhaustive:
            _violations_unpruned(problem, search_args, stats, control)
        bound = value if exhaustive else 0.0
        overflow = stats[Stat.OVERFLOW] > 0 and method == "auto"
    if stats[Stat.STOPPED] > 0 or not overflow:
        return value, assign, "ideal-dp", exhaustive, bound
    excess = sram_excess_by_count(problem, allowed)
    if excess > 0:  # the SRAM needs more configurations than there are: proven infeasible
        stats[Stat.VIOL_SRAM] = min(stats[Stat.VIOL_SRAM], excess)
        return math.inf, assign, "layered", False, math.inf
    bound = graph_bound_ns(problem, bw, allowed)
    used = "order-dp"
    value2, assign2 = math.inf, None
    stacked = layer_of(problem.names)[0].max(initial=0) >= 2
    if method == "auto":
        value2, assign2 = _layered(problem, topo, allowed, bw, live_cap, stats, control, tick)
        used = "layered"
    small = n <= MAX_ANNEAL_KERNELS
    if stats[Stat.STOPPED] == 0 and (
        method != "auto" or (small and (not stacked or value2 == math.inf))
    ):  # order DP + annealing: asked for, or up to 128 kernels (stacked: when the split failed)
        value3, assign3 = _order(problem, topo, allowed, bw, live_cap, stats, control)
        tick()
        used3 = "order-dp"
        if method in ("auto", "anneal") and anneal_iterations > 0:
            used3 = "anneal"
            value4, assign4 = _anneal(problem, topo, allowed, bw, live_cap, stats, value3, seed,
                                      anneal_iterations, control, tick)  # fmt: skip
            if value4 < value3:
                value3, assign3 = value4, assign4
        if value3 < value2:
            value2, assign2, used = value3, assign3, used3
    if value2 < value:
        value, assign = value2, assign2
    if value > bound * (1 + 1e-12):  # not met (or nothing found): try a sharper bound
        bound = max(bound, overlap_bound_ns(problem, bw, allowed))
    if value > bound * (1 + 1e-12):  # still not met: the traffic at configuration boundaries
        bound = max(bound, boundary_bound_ns(problem, bw, allowed))
    if value > bound * (1 + 1e-12):  # and the network a crowded configuration cannot hide
        value, assign, used, bound = _crowded(problem, topo, allowed, bw, live_cap, stats, control,
                                              method, (value, assign, used), bound)  # fmt: skip
    if value > bound * (1 + 1e-12) and method == "auto" and stacked and stats[Stat.STOPPED] == 0:
        value5, assign5 = repeated_layer(problem, topo, allowed, bw, live_cap, stats, control,
                                         assign=assign_configs)  # fmt: skip
        if value5 < value:  # the one-layer mapping repeated beats the split
            value, assign, used = value5, assign5, "repeated-layer"
    if value > bound * (1 + 1e-12):  # each configuration on its own: its cores, its chain
        bound = _configuration_bounds(problem, bw, allowed, value, bound)
    return value, assign, used, False, bound


def _crowded(problem, topo, allowed, bw, live_cap, stats, control, method, answer, bound):
    """The crowded bound (``graph_bound.crowded_bound_ns``) and, in "auto" where it rises
    above ``bound``, the crowded split (``search/crowded_split.py``), kept when it beats
    ``answer`` = (value, assignment, method used). Returns (value, assignment, method used,
    bound)."""
    value, assign, used = answer
    crowded = crowded_bound_ns(problem, bw, allowed)
    if crowded > bound and method == "auto" and stats[Stat.STOPPED] == 0:
        value6, assign6 = crowded_split(problem, topo, allowed, bw, live_cap, stats, control)
        if value6 < value:  # configurations crowded around the network-heavy kernels
            value, assign, used = value6, assign6, "crowded-split"
    return value, assign, used, max(bound, crowded)


def _configuration_bounds(problem, bw, allowed, value, bound):
    """``bound`` raised by the bounds that follow the configurations themselves, while none
    meets ``value``: in the cycle model each configuration's integral core allocation
    (``core_bound``), then the chain of configurations, each costed on its own
    (``chain_bound``)."""
    bound = max(bound, core_bound_ns(problem, allowed))
    if value > bound * (1 + 1e-12):
        bound = max(bound, chain_bound_ns(problem, bw, allowed))
    return bound


def _incumbent_reserve(problem: Problem, control: np.ndarray) -> float:
    """Evaluations the exact search leaves under a finite work budget, so that running out
    of budget in A* still returns a good mapping: what the contiguous-order DP may spend on
    this graph (twice: with its relaxed re-run) plus the large-neighbourhood search's
    budget, at most half the allowance; 0 without a budget."""
    allowance = float(control[Control.MAX_EVALS])
    if not math.isfinite(allowance):
        return 0.0
    n, nc = problem.num_kernels, problem.num_config
    return float(min(nc * (n + 1) * (n + 2) + LNS_EVALS_PER_KERNEL * n, allowance // 2))


def _keep_violations(viol: dict[str, float], stats: np.ndarray) -> None:
    """Keep in ``viol`` the smallest violation per constraint seen so far."""
    for name, slot in (
        ("sram", Stat.VIOL_SRAM),
        ("dram", Stat.VIOL_DRAM),
        ("cores", Stat.VIOL_CORES),
        ("config", Stat.VIOL_CONFIG),
    ):
        if stats[slot] < math.inf:
            viol[name] = min(viol.get(name, math.inf), float(stats[slot]))


#: state budget of the unpruned search that only words the "nothing fits" message
MESSAGE_STATES = 20_000


def _violations_unpruned(problem, search_args, stats, control) -> None:
    """Nothing fits: search again without the SRAM pruning (a smaller state budget), so that
    the smallest violation of each constraint (the error message) comes from real
    candidates; only its evaluations and violations are kept."""
    st = _fresh_stats(stats)
    args = (*search_args[:-1], min(search_args[-1], MESSAGE_STATES))
    _dp.ideal_search(*args, 0, np.full(problem.num_kernels, -1, np.int64), st, control)
    _merge_stats(stats, st)


def _evaluate_forced(problem: Problem, cfg: tuple[int, ...]) -> Assignment:
    finals, status, viol = Evaluator(problem).batch(np.asarray([cfg], dtype=np.int64))
    if not np.isfinite(finals[0]):
        label = Status(int(status[0])).label
        return Assignment(None, math.inf, "forced", True, 1, {label: float(viol[0])}, math.inf)
    ii = Evaluator(problem).full(cfg).all_config_ii_ns
    return Assignment(cfg, ii, "forced", True, 1, {}, ii)



def _fresh_stats(stats: np.ndarray) -> np.ndarray:
    """A stats array for a helper run whose evaluations are added to ``stats`` later."""
    return new_stats()


def _merge_stats(stats: np.ndarray, st: np.ndarray) -> None:
    """Add a helper run's evaluations, stop flag and smallest violations to ``stats``."""
    stats[Stat.EVALS] += st[Stat.EVALS]
    stats[Stat.STOPPED] = max(stats[Stat.STOPPED], st[Stat.STOPPED])
    for j in range(Stat.VIOL_SRAM, len(Stat)):
        stats[j] = min(stats[j], st[j])


def _take_relaxed(problem, value, assign, relaxed_value, relaxed_assign):
    """The relaxed optimum when it is exactly feasible and better, else the conservative one."""
    if not math.isfinite(relaxed_value) or relaxed_value >= value:
        return value, assign
    finals, _, _ = Evaluator(problem).batch(relaxed_assign[None, :])
    if math.isfinite(finals[0]):
        return float(relaxed_value), relaxed_assign
    return value, assign


def _order(problem, order, allowed, bw, live_cap, stats, control):
    """The contiguous-order DP on ``order`` (relaxed re-run when it may have hidden a better
    split); above ``MAX_ANNEAL_KERNELS`` kernels (its evaluations grow as configurations x
    n^2) the linear window DP's split of the same order (``_split``)."""
    if problem.num_kernels > MAX_ANNEAL_KERNELS:
        return _split(problem, order, allowed, bw, live_cap, stats, control)
    st = _fresh_stats(stats)
    assign = np.full(problem.num_kernels, -1, dtype=np.int64)
    p = problem
    value = _dp.order_dp(p.kernels, p.edges, p.constants, order, allowed, bw, live_cap, 0, assign,
                         st, control)  # fmt: skip
    if st[Stat.HIDDEN] > 0 and st[Stat.STOPPED] == 0:
        st2 = _fresh_stats(stats)
        tmp = np.full(problem.num_kernels, -1, dtype=np.int64)
        relaxed = _dp.order_dp(p.kernels, p.edges, p.constants, order, allowed, bw, live_cap, 1,
                               tmp, st2, control)  # fmt: skip
        st[Stat.EVALS] += st2[Stat.EVALS]
        st[Stat.STOPPED] = max(st[Stat.STOPPED], st2[Stat.STOPPED])
        value, assign = _take_relaxed(problem, float(value), assign, relaxed, tmp)
    _merge_stats(stats, st)
    return float(value), assign


def _layered(problem, topo, allowed, bw, live_cap, stats, control, tick=_no_tick):
    """The split of the composed order and of ``topo`` (``search/layered.py``), the better;
    with the relaxed read-side footprints when they may have hidden a better split."""
    best_value, best_assign = math.inf, None
    stacked = layer_of(problem.names)[0].max(initial=0) >= 2
    for order in (composed_order(problem, topo, control, stats, assign=assign_configs), topo):
        if stacked and best_assign is not None:
            break  # stacked layers: the default order only when the composed one fails
        tick()
        value, assign = _split(problem, order, allowed, bw, live_cap, stats, control, tick)
        if value < best_value:
            best_value, best_assign = value, assign
        if stats[Stat.STOPPED] > 0:
            break
    return best_value, best_assign


def _split(problem, order, allowed, bw, live_cap, stats, control, tick=_no_tick):
    """The window DP's split of ``order`` (``layered_split``), with the relaxed read-side
    footprints when they may have hidden a better split; its work is added to ``stats``.
    Returns (summed II, assignment) or (inf, None)."""
    st = _fresh_stats(stats)
    value, assign = layered_split(problem, order, allowed, bw, live_cap, 0, st, control, tick)
    if st[Stat.HIDDEN] > 0 and st[Stat.STOPPED] == 0:
        st2 = _fresh_stats(stats)
        relaxed, tmp = layered_split(problem, order, allowed, bw, live_cap, 1, st2, control, tick)
        st[Stat.EVALS] += st2[Stat.EVALS]
        st[Stat.STOPPED] = max(st[Stat.STOPPED], st2[Stat.STOPPED])
        if tmp is not None:
            value, assign = _take_relaxed(problem, value, assign, relaxed, tmp)
    _merge_stats(stats, st)
    return value, assign


def _anneal(problem, topo, allowed, bw, live_cap, stats, start_value, seed, iterations, control,
            tick=_no_tick):  # fmt: skip
    """Simulated annealing over topological orders; each order scored by the order DP.

    Move: shift one kernel to another position inside the window its predecessors and
    successors leave it (precedence-preserving). Metropolis acceptance on the relative
    change, geometric cooling; seeded, so deterministic. Stops when ``control`` says so."""
    n = problem.num_kernels
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for s_, d_ in zip(problem.edges.src, problem.edges.dst):
        preds[int(d_)].append(int(s_))
        succs[int(s_)].append(int(d_))
    rng = np.random.default_rng(seed)
    order = [int(k) for k in topo]
    cur_value, best_value = start_value, start_value
    best_assign = None
    temp = 0.02
    for _ in range(iterations):
        if stats[Stat.STOPPED] > 0 or _dp.must_stop(stats, control):
            stats[Stat.STOPPED] = 1.0
            break
        pos = {k: i for i, k in enumerate(order)}
        k = order[int(rng.integers(n))]
        lo = max((pos[p] for p in preds[k]), default=-1) + 1
        hi = min((pos[q] for q in succs[k]), default=n) - 1
        if hi <= lo:
            continue
        target = int(rng.integers(lo, hi + 1))
        if target == pos[k]:
            continue
        cand = order[:]
        cand.pop(pos[k])
        cand.insert(target, k)
        value, assign = _order(problem, np.asarray(cand, dtype=np.int64), allowed, bw, live_cap, stats, control)
        tick()
        if value < best_value:
            best_value, best_assign = value, assign
        if value < cur_value or (
            math.isfinite(value)
            and math.isfinite(cur_value)
            and rng.random() < math.exp(-(value / cur_value - 1.0) / temp)
        ) or (not math.isfinite(cur_value) and math.isfinite(value)):
            order, cur_value = cand, value
        temp *= 0.98
    if best_assign is None:
        return math.inf, None
    return best_value, best_assign


def lone_misfits(problem: Problem) -> list[tuple[int, str, float]]:
    """Kernels that break a capacity even alone in a configuration: (kernel, constraint,
    excess) with the constraint "sram" (bytes) or "cores". The read side of buffers from
    weight-tiled producers is counted as free, so each excess is a floor."""
    n = problem.num_kernels
    out = np.zeros(NUM_SET)
    members = np.zeros(n, np.int64)
    k_pl, k_ps, zero = np.ones(n, np.int64), np.ones(n, np.int64), np.zeros(n, np.int64)
    bw = _regimes(problem)[-1][0]
    misfits = []
    for k in range(n):
        where = np.zeros(n, np.int8)
        where[:k] = 2  # every other kernel elsewhere; earlier ones in earlier configurations
        where[k] = 1
        set_cost(problem.kernels, problem.edges, problem.constants, where, bw, math.inf, 1, members,
                 k_pl, k_ps, zero, out)  # fmt: skip
        status = Status(int(out[SetSlot.STATUS]))
        if status in (Status.SRAM, Status.CORES):
            misfits.append((k, status.label, float(out[SetSlot.VIOLATION])))
    return misfits
