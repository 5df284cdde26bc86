"""The chain bound (docs/design.md, "The chain bound"): a lower bound of the summed IIs of
every configuration assignment, as a shortest path over the chains of order ideals of a
group of kernels, each step one configuration costed by a lower bound of its own II.

The configurations of a group (all kernels, or forward and backward apart when they never
share a configuration) hold the differences of a chain of down-closed sets. A step from
ideal A to ideal B costs a bound of the II of the configuration B \\ A that depends on
B \\ A only: its additive compute, memory and network terms (``bound_terms``), the DRAM
traffic of every edge that surely crosses it, and in the cycle model its exact core
allocation (``evaluate._allocate``), combined as the overlap mode combines them. Each
step must also satisfy what any configuration does: at most ``cores`` kernels and, with
two or more kernels, their weights within the SRAM. The shortest path is then at most
the summed IIs of every feasible assignment. When a group has too many ideals, kernels
are left out (the bound of the rest is still a bound: every term is non-negative).
"""

from __future__ import annotations

import math

import numpy as np

from dfsearch.codes import Phase, Status
from dfsearch.cost.evaluate import _allocate, bound_terms
from dfsearch.cost.layout import BoundCol
from dfsearch.cost.lower import Problem
from dfsearch.cost.overlap import combine_overlap
from dfsearch.search import _dp

__all__ = ["ALLOCATION_STEPS", "MAX_IDEALS", "MAX_STEPS", "chain_bound_ns", "phase_groups"]

#: ideals of one group beyond which fewer kernels are kept (and then the bound gives up)
MAX_IDEALS = 2_000
#: configurations (steps of the shortest path) costed per choice of kept kernels before the
#: next choice is tried; in the cycle model a step with a core allocation counts as
#: ``ALLOCATION_STEPS`` steps
MAX_STEPS = 30_000
ALLOCATION_STEPS = 10


def chain_bound_ns(problem: Problem, dram_bw: float, allowed: np.ndarray) -> float:
    """The chain bound of ``problem`` in one DRAM regime (0 when a group's ideals or steps
    exceed ``MAX_IDEALS`` / ``MAX_STEPS`` even with kernels left out)."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    if n == 0:
        return 0.0
    terms, edge_tm = bound_terms(kt, et, cn, dram_bw)
    topo = _dp.topological_order(kt, et)
    total = 0.0
    for g in phase_groups(problem, allowed):
        part = _group_bound(problem, g, topo, terms, edge_tm)
        if part is None:
            return 0.0
        total += part
    return total


def phase_groups(problem: Problem, allowed: np.ndarray) -> list[np.ndarray]:
    """Kernel masks whose bounds add up: the forward and the backward kernels when the
    FWD/BWD rule gives them disjoint sets of configurations, else all kernels."""
    kt, cn = problem.kernels, problem.constants
    last = np.array([np.flatnonzero(row).max(initial=-1) for row in allowed])
    first = np.array([np.flatnonzero(row).min(initial=allowed.shape[1]) for row in allowed])
    fwd, bwd = kt.phase == Phase.FWD, kt.phase == Phase.BWD
    if cn.fb_rule and fwd.any() and bwd.any() and last[fwd].max() < first[bwd].min():
        return [~bwd, bwd]
    return [np.ones(problem.num_kernels, bool)]


def _group_bound(problem, group, topo, terms, edge_tm) -> float | None:
    """The bound of one group: the shortest path over the ideals of the kept kernels D,
    and for the memory alone the same plus what the left-out kernels surely read and write;
    the first choice of D (``_choices``) whose ideals and steps fit the budgets."""
    et = problem.edges
    cycle = bool(problem.constants.cycle_model)  # (where a costed step is dearest)
    for keep in _choices(problem, group, topo):
        budget = [MAX_STEPS]
        ideals = _ideals(keep, et, group[et.src] & group[et.dst])
        if ideals is None or (cycle and _steps_over(problem, keep, ideals, MAX_STEPS)):
            continue  # (each step costs at least 1 of the budget: the path would give up)
        full, mem = _shortest_paths(problem, group, keep, ideals, terms, edge_tm, budget)
        if full is None:
            continue
        out = group & ~keep  # left out: their own DRAM bytes and their edges to other groups
        extra = float(terms[out, BoundCol.TM].sum())
        extra += float(edge_tm[(out[et.src] & ~group[et.dst]) | (out[et.dst] & ~group[et.src])].sum())
        return max(full, mem + extra)
    return None


def _choices(problem, group, topo) -> list[np.ndarray]:
    """The kernels to keep, tried in turn: the whole group, the group without its sinks, the
    ancestors of its last kernel in topological order (fewer kernels, fewer ideals)."""
    et = problem.edges
    inner = group[et.src] & group[et.dst]
    has_out = np.zeros(len(group), bool)
    has_out[et.src[inner]] = True
    spine = np.zeros(len(group), bool)
    members = [k for k in topo if group[k]]
    if members:
        spine[members[-1]] = True
        for k in reversed(topo):  # reverse topological order: successors come first
            if spine[k]:
                spine[et.src[inner & (et.dst == k)]] = True
    return [group, group & has_out, spine & group]


def _ideals(keep, et, inner):
    """(predecessor bitmasks, successor lists, every ideal of the kept kernels' DAG as
    (bitmask, tuple of the kernels that may join next) by size), in local indices (the
    i-th kernel of ``np.flatnonzero(keep)``); None beyond ``MAX_IDEALS`` ideals. Edges
    through a left-out kernel are not followed (fewer constraints: still a bound)."""
    ks = np.flatnonzero(keep)
    loc = np.full(len(keep), -1, np.int64)
    loc[ks] = np.arange(len(ks))
    both = inner & keep[et.src] & keep[et.dst]
    preds = [0] * len(ks)
    succs: list[list[int]] = [[] for _ in ks]
    for s, d in zip(loc[et.src[both]], loc[et.dst[both]]):
        preds[d] |= 1 << int(s)
        if int(d) not in succs[s]:
            succs[s].append(int(d))
    start = tuple(i for i in range(len(ks)) if preds[i] == 0)
    level, out, seen = [(0, start)], [(0, start)], {0}
    while level:
        nxt = []
        for mask, front in level:
            for k in front:
                new = mask | (1 << k)
                if new in seen:
                    continue
                seen.add(new)
                grown = tuple(j for j in front if j != k) + tuple(
                    j for j in succs[k] if preds[j] & ~new == 0)
                nxt.append((new, grown))
                if len(seen) > MAX_IDEALS:
                    return None
        out += nxt
        level = nxt
    return preds, succs, out


def _steps_over(problem, keep, ideals, limit: int) -> bool:
    """Whether more than ``limit`` steps fit (``_Step.fits``): the steps that
    ``_shortest_paths`` takes and charges to its budget, enumerated the same way without
    costing them."""
    preds, succs, order = ideals
    kt, cn = problem.kernels, problem.constants
    w = (kt.weight_sram + kt.sram_extra)[np.flatnonzero(keep)]
    room = cn.sram_cap * (1 + 1e-9) if cn.sram_check else math.inf
    cores, steps = int(cn.cores), 0
    for a, front in order:
        stack, seen = [(0, front, 0, 0.0)], set()
        while stack:
            s, fr, cnt, wt = stack.pop()
            for k in fr:
                s2 = s | (1 << k)
                if s2 in seen:
                    continue
                seen.add(s2)
                cnt2, w2 = cnt + 1, wt + float(w[k])
                if cnt2 > cores or (cnt2 > 1 and w2 > room):
                    continue
                steps += 1
                if steps > limit:
                    return True
                if cnt2 < cores and w2 <= room:
                    grown = tuple(j for j in fr if j != k) + tuple(
                        j for j in succs[k] if preds[j] & ~(a | s2) == 0)
                    stack.append((s2, grown, cnt2, w2))
    return False


def _shortest_paths(problem, group, keep, ideals, terms, edge_tm, budget):
    """(shortest path of the combined bounds, of the memory bounds) from the empty ideal to
    the whole of the kept kernels; (None, None) when the steps exceed ``budget[0]`` (which
    is decremented by the steps taken)."""
    preds, succs, order = ideals
    step = _Step(problem, group, keep, terms, edge_tm)
    best = {mask: (math.inf, math.inf) for mask, _ in order}
    best[0] = (0.0, 0.0)
    for a, front in order:
        da, ma = best[a]
        stack = [(0, front, _Sums.empty(step.nch))]
        seen = set()
        while stack:
            s, fr, sums = stack.pop()
            for k in fr:
                s2 = s | (1 << k)
                if s2 in seen:
                    continue
                seen.add(s2)
                sums2 = sums.plus(step, k, s)
                if not step.fits(sums2):
                    continue
                budget[0] -= 1
                if budget[0] < 0:
                    return None, None
                b = a | s2
                db, mb = best[b]
                mem = sums2.memory()
                if ma + mem < mb:
                    mb = ma + mem
                if da + step.cheap(sums2) < db:
                    db = min(db, da + step.cost(sums2, s2))
                    budget[0] -= (ALLOCATION_STEPS - 1) * step.cycle
                best[b] = (db, mb)
                if step.grows(sums2):
                    grown = tuple(j for j in fr if j != k) + tuple(
                        j for j in succs[k] if preds[j] & ~(a | s2) == 0)
                    stack.append((s2, grown, sums2))
    return best[order[-1][0]]


class _Step:
    """What costing one configuration of kept kernels needs (local index i = the i-th kept
    kernel): per-kernel terms, incident edges and the chip's limits."""

    def __init__(self, problem, group, keep, terms, edge_tm):
        kt, et, cn = problem.kernels, problem.edges, problem.constants
        self.ks = np.flatnonzero(keep)
        loc = np.full(len(keep), -1, np.int64)
        loc[self.ks] = np.arange(len(self.ks))
        self.terms = terms[self.ks]
        self.nch = terms.shape[1] - BoundCol.CH0
        self.w = (kt.weight_sram + kt.sram_extra)[self.ks]
        self.room = cn.sram_cap * (1 + 1e-9) if cn.sram_check else math.inf
        self.cores = int(cn.cores)
        self.overlap = cn.overlap
        self.kt, self.cn = kt, cn
        self.cycle = bool(cn.cycle_model)
        self.tmin = min(cn.num_tile, 1) if cn.per_config_tiles else cn.num_tile
        self.zero = np.zeros(len(keep), np.int64)
        # incident edges: (local index of the other end or -1, DRAM ns); an end whose other
        # end is a left-out kernel of the group is not known to cross and is not listed
        self.inc: list[list[tuple[int, float]]] = [[] for _ in self.ks]
        for e in range(len(et.src)):
            s, d = int(et.src[e]), int(et.dst[e])
            for me, other in ((s, d), (d, s)):
                if keep[me] and (keep[other] or not group[other]):
                    self.inc[loc[me]].append((int(loc[other]), float(edge_tm[e])))

    def fits(self, sums) -> bool:
        """Every configuration: a core per kernel; two or more kernels hold their weights."""
        return sums.cnt <= self.cores and (sums.cnt == 1 or sums.w <= self.room)

    def grows(self, sums) -> bool:
        """Whether a larger configuration can still fit (weights and counts only grow)."""
        return sums.cnt < self.cores and sums.w <= self.room

    def cheap(self, sums) -> float:
        """The combined bound with the additive compute terms only."""
        return combine_overlap(max(sums.tc, sums.fl), sums.memory(), sums.network(),
                               self.overlap)  # fmt: skip

    def cost(self, sums, s: int) -> float:
        """The combined bound, in the cycle model with the configuration's exact core
        allocation (the fewest cycles of its slowest kernel)."""
        tc = max(sums.tc, sums.fl)
        if self.cycle:
            members = self.ks[_bits(s)]
            kt = self.kt
            k_pl, k_ps = np.ones(len(self.zero), np.int64), np.ones(len(self.zero), np.int64)
            cyc, status, _ = _allocate(members.astype(np.int64), 0, len(members), kt.a, kt.b,
                                       kt.z, self.cores, self.zero, self.zero, k_pl, k_ps)  # fmt: skip
            if status == Status.OK:
                tc = max(tc, self.tmin * cyc / self.cn.freq_GHz)
        return combine_overlap(tc, sums.memory(), sums.network(), self.overlap)


class _Sums:
    """Running sums of a configuration's terms as kernels join (``plus``)."""

    __slots__ = ("cnt", "w", "tc", "fl", "tm", "tn", "ch", "cut")

    def __init__(self, cnt, w, tc, fl, tm, tn, ch, cut):
        self.cnt, self.w, self.tc, self.fl, self.tm, self.tn = cnt, w, tc, fl, tm, tn
        self.ch, self.cut = ch, cut

    @classmethod
    def empty(cls, nch: int) -> _Sums:
        return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, (0.0,) * nch, 0.0)

    def plus(self, step: _Step, k: int, s: int) -> _Sums:
        """The sums with kept kernel ``k`` joining the configuration ``s`` (a bitmask): an
        edge to a kernel outside the configuration crosses it, one inside no longer does."""
        t = step.terms[k]
        cut = self.cut
        for other, tm in step.inc[k]:
            if other >= 0 and (s >> other) & 1:
                cut -= tm
            else:
                cut += tm
        ch = tuple(a + float(b) for a, b in zip(self.ch, t[BoundCol.CH0 :]))
        return _Sums(self.cnt + 1, self.w + float(step.w[k]), self.tc + float(t[BoundCol.TC]),
                     max(self.fl, float(t[BoundCol.FLOOR])), self.tm + float(t[BoundCol.TM]),
                     self.tn + float(t[BoundCol.TN]), ch, cut)  # fmt: skip

    def memory(self) -> float:
        return self.tm + max(self.cut, 0.0)

    def network(self) -> float:
        return self.tn + max(self.ch)


def _bits(mask: int) -> list[int]:
    """The set bits of ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
