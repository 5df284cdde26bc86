"""Lower bounds of the summed IIs of every configuration assignment of one lowered problem
(docs/design.md, "Wide graphs"): what a result that the exact search did not prove states as
its bound, and what proves it optimal when the bound meets it.

* ``graph_bound_ns``: the additive terms of the whole graph, the edges that must cross
  configurations, the kernels that can only sit alone, forward and backward apart;
* ``overlap_bound_ns``: how much compute can overlap network or memory time, given which
  kernels fit in one configuration together (a maximum flow).
"""

from __future__ import annotations

import math

import numpy as np

from dfsearch.codes import Overlap, Phase
from dfsearch.cost.evaluate import bound_terms, set_cost
from dfsearch.cost.layout import NUM_SET, BoundCol, SetSlot
from dfsearch.cost.lower import Problem
from dfsearch.cost.overlap import combine_overlap
from dfsearch.search import _dp

__all__ = ["boundary_bound_ns", "crowded_bound_ns", "graph_bound_ns", "min_configs",
           "overlap_bound_ns", "sram_excess_by_count", "sram_floors"]


def graph_bound_ns(problem: Problem, dram_bw: float, allowed: np.ndarray) -> float:
    """A lower bound of the summed IIs of every feasible assignment of ``problem`` (one DRAM
    regime), in three parts:

    * A kernel whose weights (plus extra SRAM) exceed the SRAM can share no configuration
      (a configuration of two or more kernels holds every member's weights untiled), so its
      configuration holds it alone, every edge of it crosses configurations and its II is
      known exactly (``set_cost`` of the kernel alone, which reads nothing from other
      configurations but the SRAM footprint, a capacity and not a time).
    * The other kernels: the II combined from their summed additive terms
      (``evaluate.bound_terms``: compute, kernel memory, network, all-to-all channels via the
      maximum of their sums; max and sum are sub-additive, so a combination of sums is at
      most the sum of the combinations), plus the DRAM traffic of every edge that *must*
      cross configurations, once per end among them: an edge to or from a lone kernel, or one
      whose producer may only sit in configurations before every one its consumer may sit in
      (``allowed``: the FWD/BWD rule, pins). A crossing edge is written in one configuration
      and read in another (``set_cost``).
    * Kernels that can never share a configuration are bounded apart: with the FWD/BWD rule
      and no configuration open to both, forward and backward kernels sit in disjoint sets of
      configurations, so their bounds add up (at least the bound of both together).
    """
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    terms, edge_tm = bound_terms(kt, et, cn, dram_bw)
    if terms.shape[0] == 0:
        return 0.0
    alone, alone_ii = _lone_kernels(problem, dram_bw)
    last = np.array([np.flatnonzero(row).max(initial=-1) for row in allowed])
    first = np.array([np.flatnonzero(row).min(initial=allowed.shape[1]) for row in allowed])
    must = (last[et.src] < first[et.dst]) | alone[et.src] | alone[et.dst]
    rest = ~alone
    whole = _group_bound(terms, edge_tm, rest, must, et, cn.overlap)
    fwd, bwd = rest & (kt.phase == Phase.FWD), rest & (kt.phase == Phase.BWD)
    if cn.fb_rule and fwd.any() and bwd.any() and last[fwd].max() < first[bwd].min():
        split = sum(_group_bound(terms, edge_tm, g, must, et, cn.overlap) for g in (fwd, bwd))
        whole = max(whole, split)
    return alone_ii + whole


def boundary_bound_ns(problem: Problem, dram_bw: float, allowed: np.ndarray) -> float:
    """``graph_bound_ns`` plus the DRAM traffic that the configurations' boundaries force
    (docs/design.md, "The boundary bound"): the kernels of a group (all of them, or forward
    and backward apart as in ``graph_bound_ns``) need at least ``min_configs`` configurations
    (the SRAM holds every member's weights in a configuration of two or more kernels); each
    configuration has a *source*, a member with no predecessor inside it, whose in-edges from
    the group are all read from DRAM, and a *sink* whose out-edges into the group are all
    written to DRAM. Sources (sinks) of different configurations are different kernels, so
    the group's crossing traffic is at least the sum of the ``min_configs`` smallest per-kernel
    in-traffic values plus the same for out-traffic, over edges not already counted as
    must-cross. Returns 0 when the SRAM is not checked (nothing forces a second configuration
    beyond the ones ``graph_bound_ns`` sees)."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    if not cn.sram_check or problem.num_kernels < 2:
        return 0.0
    terms, edge_tm = bound_terms(kt, et, cn, dram_bw)
    alone, alone_ii = _lone_kernels(problem, dram_bw)
    last = np.array([np.flatnonzero(row).max(initial=-1) for row in allowed])
    first = np.array([np.flatnonzero(row).min(initial=allowed.shape[1]) for row in allowed])
    must = (last[et.src] < first[et.dst]) | alone[et.src] | alone[et.dst]
    rest = ~alone
    splits = [[rest]]
    fwd, bwd = rest & (kt.phase == Phase.FWD), rest & (kt.phase == Phase.BWD)
    if cn.fb_rule and fwd.any() and bwd.any() and last[fwd].max() < first[bwd].min():
        splits.append([fwd, bwd])  # disjoint sets of configurations: their bounds add up
    w = kt.weight_sram + kt.sram_extra
    best = 0.0
    for groups in splits:
        total = 0.0
        for g in groups:
            if g.any():
                extra = _boundary_traffic(g, w, edge_tm, must, et, cn.sram_cap)
                total += _group_bound(terms, edge_tm, g, must, et, cn.overlap, extra)
        best = max(best, total)
    return alone_ii + best


def crowded_bound_ns(problem: Problem, dram_bw: float, allowed: np.ndarray) -> float:
    """A lower bound of the summed IIs that sees that a configuration holds at most ``cores``
    kernels (docs/design.md, "The crowded bound"): in a group G of kernels (all, or forward
    and backward apart as in ``graph_bound_ns``), the configuration c* of a kernel h with
    network time N_h (its own and its out-edges' network terms plus its largest channel
    term) has II >= max(its compute, N_h), every other configuration II >= its compute, and
    c*'s compute (the additive terms of ``bound_terms``) is at most X(h), h's own plus the
    ``cores`` - 1 largest others of G. So the sum is >= TC(G) + max(0, N_h - X(h)), for
    every h; for the two kernels of largest N, the lesser of the same argument with both in
    one configuration and with both apart; groups that share no configuration add up."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    if n == 0:
        return 0.0
    terms, _ = bound_terms(kt, et, cn, dram_bw)
    last = np.array([np.flatnonzero(row).max(initial=-1) for row in allowed])
    first = np.array([np.flatnonzero(row).min(initial=allowed.shape[1]) for row in allowed])
    splits = [[np.ones(n, bool)]]
    fwd, bwd = kt.phase == Phase.FWD, kt.phase == Phase.BWD
    if cn.fb_rule and fwd.any() and bwd.any() and last[fwd].max() < first[bwd].min():
        splits.append([fwd, bwd])
    best = 0.0
    for groups in splits:
        best = max(best, sum(_crowded(terms[g], int(cn.cores)) for g in groups if g.any()))
    return best


def _crowded(terms: np.ndarray, cores: int) -> float:
    """The bound of ``crowded_bound_ns`` for one group (its rows of ``bound_terms``)."""
    tc = terms[:, BoundCol.TC]
    ch = np.ascontiguousarray(terms[:, BoundCol.CH0 :])
    net = terms[:, BoundCol.TN] + ch.max(axis=1)
    total = float(tc.sum())
    v = np.sort(tc)[::-1]

    def top(m: int) -> float:
        return float(v[: max(m, 0)].sum())

    if cores < 1 or len(tc) <= cores:
        x = np.full(len(tc), total)  # every kernel may share h's configuration
    else:
        x = np.where(tc >= v[cores - 2], top(cores), tc + top(cores - 1)) if cores >= 2 else tc
    single = max(0.0, float((net - x).max()))
    if len(tc) < 2 or cores < 1:
        return total + single
    h1, h2 = (int(i) for i in np.argsort(net)[::-1][:2])
    apart = max(0.0, float(net[h1] + net[h2]) - top(2 * cores))
    joint = float(terms[h1, BoundCol.TN] + terms[h2, BoundCol.TN] + (ch[h1] + ch[h2]).max())
    together = max(0.0, joint - top(cores))
    return total + max(single, min(apart, together))


def sram_excess_by_count(problem: Problem, allowed: np.ndarray) -> float:
    """Bytes by which the SRAM is proven too small for the configurations the problem has
    (0 when the count argument proves nothing): a group of kernels (all of them, and under
    the FWD/BWD rule forward and backward apart) needs at least ``min_configs`` of its
    weights' configurations, and it may use only the configurations ``allowed`` opens to
    its kernels. When it needs more, no assignment fits; the value returned is how far the
    average weights of the shared configurations exceed the SRAM at the best split into
    lone and shared kernels (some configuration holds at least the average). When the
    weights prove nothing, the same with each kernel's share of its buffers added
    (``sram_floors``)."""
    kt, cn = problem.kernels, problem.constants
    if not cn.sram_check or problem.num_kernels < 2:
        return 0.0
    groups = [np.ones(problem.num_kernels, bool)]
    if cn.fb_rule:
        groups += [kt.phase == Phase.FWD, kt.phase == Phase.BWD]
    excess = _count_excess(kt.weight_sram + kt.sram_extra, groups, allowed, cn.sram_cap)
    if excess > 0:
        return excess
    return _count_excess(sram_floors(problem), groups, allowed, cn.sram_cap)


def _count_excess(floor: np.ndarray, groups, allowed: np.ndarray, cap: float) -> float:
    """The largest ``_average_excess`` of the groups whose kernels, of SRAM floors
    ``floor``, need more configurations (``min_configs``) than ``allowed`` opens to them;
    0 when none does."""
    excess = 0.0
    for g in groups:
        open_configs = int(allowed[g].any(axis=0).sum()) if g.any() else 0
        if g.any() and min_configs(floor[g], cap) > open_configs:
            excess = max(excess, _average_excess(floor[g], cap, open_configs))
    return excess


def sram_floors(problem: Problem) -> np.ndarray:
    """Per kernel, bytes that every configuration of two or more kernels holding it has in
    SRAM on its account (docs/design.md, "Too few configurations"): its weights and extra
    bytes, and for each of its edges the lesser of half the on-chip buffer (bytes x depth,
    when both ends share the configuration; half to each end) and the two-buffer footprint
    of a spilled buffer on its side (2 x bytes; 0 for an edge read from a weight kernel,
    whose spilled buffer is divisible when that kernel sits alone). The floors of the
    members of such a configuration add up to at most its SRAM bytes."""
    kt, et = problem.kernels, problem.edges
    floor = np.asarray(kt.weight_sram + kt.sram_extra, np.float64).copy()
    half = et.sram_bytes * et.sram_depth / 2.0
    spilled = 2.0 * et.sram_bytes
    np.add.at(floor, et.src, np.minimum(half, spilled))
    np.add.at(floor, et.dst, np.minimum(half, np.where(kt.is_weight[et.src] == 1, 0.0, spilled)))
    return floor


def _average_excess(weights: np.ndarray, cap: float, configs: int) -> float:
    """The least, over how many of the heaviest kernels sit alone (j < ``configs``), of the
    other kernels' weights per remaining configuration minus ``cap`` (> 0 when
    ``min_configs`` exceeds ``configs``); ``cap`` when there is no configuration at all."""
    heavy_first = np.sort(np.asarray(weights, float))[::-1]
    rest = float(heavy_first.sum()) - np.concatenate(([0.0], np.cumsum(heavy_first)))
    if configs <= 0:
        return cap
    return max(min(rest[j] / (configs - j) - cap for j in range(min(configs, len(weights)))), 0.0)


def min_configs(weights: np.ndarray, cap: float) -> int:
    """Fewest configurations that can hold kernels of SRAM weights ``weights`` (each >= 0):
    a configuration of two or more kernels holds every member's weights, so with the set A
    of kernels alone (a lone kernel may tile its weights) at least |A| + ceil(W(rest) / cap);
    the minimum over |A| = j takes the j heaviest alone. The evaluator accepts a sum up to
    1e-9 relative above the capacity, so the division uses that slack."""
    n = len(weights)
    if n == 0:
        return 0
    heavy_first = np.sort(np.asarray(weights, float))[::-1]
    rest = float(heavy_first.sum()) - np.concatenate(([0.0], np.cumsum(heavy_first)))
    room = cap * (1 + 1e-9)
    best = n
    for j in range(n + 1):
        shared = 0 if j == n else max(1, math.ceil(rest[j] / room - 1e-9))
        best = min(best, j + shared)
    return max(best, 1)


def _boundary_traffic(group, w, edge_tm, must, et, cap) -> float:
    """Smallest DRAM time of the group's edges (not must-cross) read by the sources plus
    written by the sinks of ``min_configs`` configurations of the group's kernels."""
    inner = group[et.src] & group[et.dst] & ~must
    n = len(group)
    into, out_of = np.zeros(n), np.zeros(n)
    np.add.at(into, et.dst[inner], edge_tm[inner])
    np.add.at(out_of, et.src[inner], edge_tm[inner])
    k = min_configs(w[group], cap)
    return float(np.sort(into[group])[:k].sum() + np.sort(out_of[group])[:k].sum())


def _lone_kernels(problem: Problem, dram_bw: float) -> tuple[np.ndarray, float]:
    """(kernels that must sit alone in their configuration, their summed exact II)."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    alone = np.zeros(n, bool)
    if not cn.sram_check or n < 2:
        return alone, 0.0
    total = 0.0
    out = np.zeros(NUM_SET)
    pos = np.empty(n, np.int64)
    pos[_dp.topological_order(kt, et)] = np.arange(n)
    for k in np.flatnonzero(kt.weight_sram + kt.sram_extra > cn.sram_cap):
        where = np.where(pos < pos[k], 2, 0).astype(np.int8)  # its producers run before it
        where[k] = 1
        set_cost(kt, et, cn, where, dram_bw, math.inf, 1, np.zeros(n, np.int64),
                 np.ones(n, np.int64), np.ones(n, np.int64), np.zeros(n, np.int64), out)  # fmt: skip
        if math.isfinite(out[SetSlot.II]):
            alone[k] = True
            total += float(out[SetSlot.II])
    return alone, total


def _group_bound(terms, edge_tm, group, must, et, overlap, extra_tm: float = 0.0) -> float:
    """The additive bound of the kernels in ``group`` (one side of each must-cross edge with
    an end in it, plus ``extra_tm`` of other DRAM time the caller proved)."""
    if not group.any():
        return 0.0
    t = terms[group]
    tc = max(float(t[:, BoundCol.TC].sum()), float(t[:, BoundCol.FLOOR].max()))
    ends = group[et.src].astype(int) + group[et.dst].astype(int)
    tm = float(t[:, BoundCol.TM].sum()) + float((edge_tm * ends)[must].sum()) + extra_tm
    channels = np.ascontiguousarray(t[:, BoundCol.CH0 :]).sum(axis=0)
    tn = float(t[:, BoundCol.TN].sum()) + float(channels.max())
    return combine_overlap(tc, tm, tn, overlap)


def overlap_bound_ns(problem: Problem, dram_bw: float, allowed: np.ndarray) -> float:
    """A lower bound of the summed IIs that sees which kernels can overlap (perfect and
    compute-memory overlap; 0 otherwise).

    With perfect overlap, sum_c II(c) >= sum_c max(tc_c, tn_c) = TC + TN - sum_c min(tc_c,
    tn_c), TC and TN the summed additive compute and network terms (``bound_terms``; a
    configuration's own terms are at least the sums of its kernels'). Inside configuration c,
    min(tc_c, tn_c) is a flow from the compute of c's kernels to their network time, and
    kernels in one configuration are pairwise *compatible*: allowed in a common configuration
    (FWD/BWD rule, pins) and, with the SRAM checked, w_j + w_k <= SRAM where w is a kernel's
    weights plus extra bytes (a configuration of two or more kernels holds every member's
    weights). So sum_c min(tc_c, tn_c) <= the maximum flow from compute to network over the
    compatible pairs (a kernel with itself included), and the bound is TC + TN - that flow;
    likewise compute with memory (kernel DRAM bytes and the must-cross edges of
    ``graph_bound_ns``, one end each) and memory with network. Compute-memory overlap
    (II = max(tc, tm) + tn) uses the compute-memory pair plus TN. The flow runs on a graph
    with O(n) arcs (``_max_flow``)."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    if cn.overlap == Overlap.NONE or problem.num_kernels == 0:
        return 0.0
    terms, edge_tm = bound_terms(kt, et, cn, dram_bw)
    last = np.array([np.flatnonzero(row).max(initial=-1) for row in allowed])
    first = np.array([np.flatnonzero(row).min(initial=allowed.shape[1]) for row in allowed])
    must = last[et.src] < first[et.dst]
    tc = terms[:, BoundCol.TC].copy()
    channels = np.ascontiguousarray(terms[:, BoundCol.CH0 :])
    tn = terms[:, BoundCol.TN] + channels[:, int(channels.sum(axis=0).argmax())]
    tm = terms[:, BoundCol.TM].copy()
    np.add.at(tm, et.src[must], edge_tm[must])
    np.add.at(tm, et.dst[must], edge_tm[must])
    w = kt.weight_sram + kt.sram_extra
    cap = cn.sram_cap if cn.sram_check else math.inf
    groups = _compatible_groups(problem, last, first)

    def paired(a: np.ndarray, b: np.ndarray) -> float:
        flow = sum(_max_flow(a[g], b[g], w[g], cap) for g in groups)
        return float(a.sum() + b.sum()) - flow

    cm = paired(tc, tm)
    if cn.overlap == Overlap.COMPUTE_MEMORY:
        return cm + float(tn.sum())
    return max(cm, paired(tc, tn), paired(tm, tn))


def _compatible_groups(problem: Problem, last: np.ndarray, first: np.ndarray) -> list[np.ndarray]:
    """Kernels of different groups never share a configuration: forward and backward under
    the FWD/BWD rule when no configuration is open to both, else one group."""
    kt, cn = problem.kernels, problem.constants
    fwd, bwd = kt.phase == Phase.FWD, kt.phase == Phase.BWD
    if cn.fb_rule and fwd.any() and bwd.any() and last[fwd].max() < first[bwd].min():
        return [np.flatnonzero(~bwd), np.flatnonzero(bwd)]
    return [np.arange(problem.num_kernels)]


def _max_flow(supply: np.ndarray, demand: np.ndarray, w: np.ndarray, cap: float) -> float:
    """An upper bound (exact up to one unit of 1e-15 of the total per arc) of the maximum
    flow from ``supply`` to ``demand`` over the pairs (k, j) with k = j or w_k + w_j <= cap.

    A *light* kernel (2 w <= cap) reaches every kernel up to its threshold in the order of w,
    itself included, so light kernels of equal w are one node (their union reaches exactly
    what each does); a *heavy* one reaches a prefix of light kernels and itself. A chain of
    prefix nodes encodes the prefixes with O(n) arcs. Capacities are rounded up to integer
    units (a larger capacity never lowers the flow), so networkx's flow is exact."""
    import networkx as nx

    total = float(supply.sum() + demand.sum())
    if total <= 0 or supply.max(initial=0) <= 0 or demand.max(initial=0) <= 0:
        return 0.0
    unit = total * 1e-15

    def units(x: float) -> int:
        return math.ceil(x / unit)

    light = 2 * w <= cap
    values = np.unique(w[light])  # one node per distinct light weight, in order of w
    heavy = np.flatnonzero(~light)
    g = nx.DiGraph()
    for i in range(1, len(values)):
        g.add_edge(("p", i), ("p", i - 1))
    for i, v in enumerate(values):
        members = light & (w == v)
        if demand[members].sum() > 0:
            g.add_edge(("p", i), ("d", i))
            g.add_edge(("d", i), "t", capacity=units(float(demand[members].sum())))
        if supply[members].sum() > 0:
            g.add_edge("s", ("s", i), capacity=units(float(supply[members].sum())))
            g.add_edge(("s", i), ("p", i))  # 2 v <= cap: its own weight is within reach
            reach = int(np.searchsorted(values, cap - v, side="right")) - 1
            g.add_edge(("s", i), ("p", reach))
            for h in heavy:  # light -> heavy pairs that fit
                if w[h] + v <= cap and demand[h] > 0:
                    g.add_edge(("s", i), ("h", int(h)))
    for h in heavy:
        h = int(h)
        if demand[h] > 0:
            g.add_edge(("h", h), "t", capacity=units(float(demand[h])))
        if supply[h] > 0:
            g.add_edge("s", ("sh", h), capacity=units(float(supply[h])))
            if demand[h] > 0:
                g.add_edge(("sh", h), ("h", h))
            reach = int(np.searchsorted(values, cap - w[h], side="right")) - 1
            if reach >= 0:
                g.add_edge(("sh", h), ("p", reach))
    if "s" not in g or "t" not in g:
        return 0.0
    return nx.maximum_flow_value(g, "s", "t") * unit
