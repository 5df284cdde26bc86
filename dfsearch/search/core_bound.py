"""The core-allocation bound (docs/design.md, "The core-allocation bound"): in the cycle
model, a lower bound of the summed compute times of every configuration assignment that
sees the integral core allocation of each configuration.

A configuration's compute is T_c x tau_c / f, with tau_c the fewest cycles of its slowest
kernel over the allocations of the chip's P cores (``evaluate._allocate``): kernel k then
holds at least m_k(tau_c) cores, the fewest with which it reaches tau_c cycles, and the
m_k sum to at most P. So P tau_c >= sum_k tau_c m_k(tau_c), and tau_c m_k(tau) >= w_k
(w_k = a b z, the kernel's cycles on one core): the rounding of cores that the additive
bound (summed work / P) does not see. The configurations of a group of kernels are the
steps of a chain of order ideals (as in ``chain_bound``); a step S costs tau(S), its exact
core allocation, or when some kernels D of the group are left out (too many ideals) the
least of sum_{k in S} tau m_k(tau) / P over tau >= tau(S), and the left-out kernels add
w(D) / P: a configuration holding S and some of D has P tau_c >= sum_S tau_c m_k(tau_c) +
sum_D w_k. The shortest path is at most the summed tau_c of every feasible assignment.
"""

from __future__ import annotations

import math

import numpy as np

from dfsearch.codes import Phase, Status
from dfsearch.cost.evaluate import _allocate, min_cycles
from dfsearch.cost.lower import Problem
from dfsearch.search import _dp
from dfsearch.search.chain_bound import _bits, _choices, _ideals

__all__ = ["MAX_STEPS", "core_bound_ns", "core_table"]

#: configurations (steps of the shortest path) enumerated per group and choice of kept
#: kernels before the next choice is tried (then the bound gives up)
MAX_STEPS = 400_000


def core_bound_ns(problem: Problem, allowed: np.ndarray) -> float:
    """The core-allocation bound of ``problem``'s summed IIs (every II is at least its
    compute, in every overlap mode); 0 outside the cycle model, or when a group's ideals or
    steps exceed the budgets (``chain_bound.MAX_IDEALS``, ``MAX_STEPS``) for every choice
    of kept kernels."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    if n == 0 or not cn.cycle_model or cn.cores < 1:
        return 0.0
    last = np.array([np.flatnonzero(row).max(initial=-1) for row in allowed])
    first = np.array([np.flatnonzero(row).min(initial=allowed.shape[1]) for row in allowed])
    fwd, bwd = kt.phase == Phase.FWD, kt.phase == Phase.BWD
    groups = [np.ones(n, bool)]
    if cn.fb_rule and fwd.any() and bwd.any() and last[fwd].max() < first[bwd].min():
        groups = [~bwd, bwd]  # disjoint sets of configurations: their bounds add up
    topo = _dp.topological_order(kt, et)
    types, tables = _types(problem)
    total = 0.0
    for g in groups:
        part = _group_cycles(problem, g, topo, types, tables)
        if part is None:
            return 0.0
        total += part
    tmin = min(cn.num_tile, 1) if cn.per_config_tiles else cn.num_tile
    return tmin * total / cn.freq_GHz


def core_table(a: int, b: int, z: int, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """(tau ascending, m descending): a kernel of ``a`` x ``b`` x ``z`` reaches tau[j]
    cycles with m[j] cores and needs m[j] cores for any target in [tau[j], tau[j-1]), none
    fewer (``min_cycles`` of every core budget 1..``cores``); below tau[0] it cannot."""
    taus, ms = [], []
    prev = math.inf
    for p in range(1, cores + 1):
        cyc = int(min_cycles(a, b, z, p)[0])
        if cyc < prev:
            taus.append(cyc)
            ms.append(p)
            prev = cyc
    return np.array(taus[::-1], np.float64), np.array(ms[::-1], np.float64)


def _types(problem: Problem):
    """(type id per kernel, one ``core_table`` per type): kernels of equal (a, b, z)."""
    kt, cn = problem.kernels, problem.constants
    abz = np.stack([kt.a, kt.b, kt.z], axis=1).astype(np.int64)
    abz[(abz <= 0).any(axis=1)] = 0  # no work: 0 cycles on one core
    uniq, types = np.unique(abz, axis=0, return_inverse=True)
    tables = [core_table(int(a), int(b), int(z), int(cn.cores)) for a, b, z in uniq]
    return types.ravel(), tables


def _group_cycles(problem, group, topo, types, tables) -> float | None:
    """The summed-cycles bound of one group: the first choice of kept kernels
    (``chain_bound._choices``) whose ideals and steps fit the budgets."""
    et, kt = problem.edges, problem.kernels
    work = np.where((kt.a > 0) & (kt.b > 0) & (kt.z > 0),
                    kt.a.astype(float) * kt.b.astype(float) * kt.z.astype(float), 0.0)  # fmt: skip
    for keep in _choices(problem, group, topo):
        ideals = _ideals(keep, et, group[et.src] & group[et.dst])
        if ideals is None:
            continue
        left_out = group & ~keep
        path = _shortest_path(problem, keep, ideals, types, tables, bool(left_out.any()))
        if path is not None:
            return path + float(work[left_out].sum()) / int(problem.constants.cores)
    return None


def _shortest_path(problem, keep, ideals, types, tables, lenient) -> float | None:
    """Shortest path of summed step cycles from the empty ideal to all kept kernels (local
    index i = the i-th kept kernel); None beyond ``MAX_STEPS`` steps. A step is taken only
    where a configuration can be: at most ``cores`` kernels, and with two or more kernels
    their weights (and extra bytes) within the SRAM (1e-9 tolerance)."""
    preds, succs, order = ideals
    kt, cn = problem.kernels, problem.constants
    ks = np.flatnonzero(keep)
    w = (kt.weight_sram + kt.sram_extra)[ks].astype(float)
    room = cn.sram_cap * (1 + 1e-9) if cn.sram_check else math.inf
    cores = int(cn.cores)
    shift = cores.bit_length() + 1  # a type's count in one step never reaches 2**shift
    unit = [1 << (shift * int(types[k])) for k in ks]
    cost = _StepCost(problem, ks, types, tables, lenient)
    best = {mask: math.inf for mask, _ in order}
    best[0] = 0.0
    steps = 0
    for a, front in order:
        da = best[a]
        stack = [(0, front, 0, 0.0, 0)]
        seen = set()
        while stack:
            s, fr, cnt, wt, key = stack.pop()
            for k in fr:
                s2 = s | (1 << k)
                if s2 in seen:
                    continue
                seen.add(s2)
                cnt2, w2, key2 = cnt + 1, wt + w[k], key + unit[k]
                if cnt2 > cores or (cnt2 > 1 and w2 > room):
                    continue
                steps += 1
                if steps > MAX_STEPS:
                    return None
                b = a | s2
                db = da + cost(key2, s2)
                if db < best[b]:
                    best[b] = db
                if cnt2 < cores and w2 <= room:
                    grown = tuple(j for j in fr if j != k) + tuple(
                        j for j in succs[k] if preds[j] & ~b == 0)
                    stack.append((s2, grown, cnt2, w2, key2))
    return best[order[-1][0]]


class _StepCost:
    """The cycles bound of one step, cached by the counts of its kernels' (a, b, z) types
    (``key``): the exact core allocation tau(S), or with kernels left out (``lenient``)
    the least of sum_{k in S} tau m_k(tau) / P over tau >= tau(S)."""

    def __init__(self, problem, ks, types, tables, lenient):
        self.kt, self.ks, self.types, self.tables = problem.kernels, ks, types, tables
        self.cores = int(problem.constants.cores)
        self.lenient = lenient
        self.cache: dict[int, float] = {}
        n = len(problem.kernels.a)
        self.zero = np.zeros(n, np.int64)
        self.pl, self.ps = np.ones(n, np.int64), np.ones(n, np.int64)

    def __call__(self, key: int, s: int) -> float:
        got = self.cache.get(key)
        if got is None:
            got = self.cache[key] = self._cost(self.ks[_bits(s)].astype(np.int64))
        return got

    def _cost(self, members: np.ndarray) -> float:
        kt = self.kt
        tau, status, _ = _allocate(members, 0, len(members), kt.a, kt.b, kt.z, self.cores,
                                   self.zero, self.zero, self.pl, self.ps)  # fmt: skip
        if status != Status.OK:
            return 0.0  # never for a step of at most ``cores`` free kernels
        if not self.lenient:
            return float(tau)
        ids, counts = np.unique(self.types[members], return_counts=True)
        return _least_core_cycles(float(tau), [self.tables[t] for t in ids], counts,
                                  self.cores)


def _least_core_cycles(tau0: float, tables, counts, cores: int) -> float:
    """min over tau >= ``tau0`` of sum_k tau m_k(tau) / ``cores`` for ``counts[i]`` kernels
    of table ``tables[i]`` (``core_table``). Between two targets where some m_k drops the
    sum grows with tau, so only ``tau0`` and the tables' targets above it are candidates;
    m_k >= 1, so none at or above best / (kernels) can win."""

    def value(t: np.ndarray) -> np.ndarray:
        used = np.zeros(len(t))
        for (taus, ms), c in zip(tables, counts):
            used += c * ms[np.searchsorted(taus, t, side="right") - 1]
        return t * used

    best = float(value(np.array([tau0]))[0])
    limit = best / float(np.sum(counts))
    cand = np.unique(np.concatenate([taus[(taus > tau0) & (taus < limit)] for taus, _ in tables]))
    if len(cand):
        best = min(best, float(value(cand).min()))
    return best / cores
