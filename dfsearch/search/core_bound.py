"""The core-allocation bound (docs/design.md, "The core-allocation bound"): in the cycle
model, a lower bound of the summed compute times of every configuration assignment that
sees the integral core allocation of each configuration.

A configuration's compute is T_c x tau_c / f, with tau_c the fewest cycles of its slowest
kernel over the allocations of the chip's P cores (``evaluate._allocate``): kernel k then
holds at least m_k(tau_c) cores, the fewest with which it reaches tau_c cycles, and the
m_k sum to at most P. The configurations of a group of kernels are the steps of a chain of
order ideals (as in ``chain_bound``), at most as many as the group has configurations; a
step S costs tau(S), its exact core allocation, or when some kernels D of the group are
left out (too many ideals) the least of tau - X_S(tau) / P over tau >= tau(S), X_S(tau)
the most one-core work w = a b z of D that fits the cores S leaves at tau; D then adds
w(D) / P. The shortest path is at most the summed tau_c of every feasible assignment.
"""

from __future__ import annotations

import math

import numpy as np

from dfsearch.codes import Status
from dfsearch.cost.evaluate import _allocate, min_cycles
from dfsearch.cost.lower import Problem
from dfsearch.search import _dp
from dfsearch.search.chain_bound import _bits, _choices, _ideals, phase_groups

__all__ = ["MAX_CORES", "MAX_STEPS", "core_bound_ns", "core_table"]

#: configurations (steps of the shortest path) enumerated per group and choice of kept
#: kernels before the next choice is tried (then the bound gives up)
MAX_STEPS = 400_000
#: chips with more cores are not bounded (each kernel type's table visits every budget)
MAX_CORES = 16_384


def core_bound_ns(problem: Problem, allowed: np.ndarray) -> float:
    """The core-allocation bound of ``problem``'s summed IIs (every II is at least its
    compute, in every overlap mode); 0 outside the cycle model, on chips of more than
    ``MAX_CORES`` cores, or when a group's ideals or steps exceed the budgets
    (``chain_bound.MAX_IDEALS``, ``MAX_STEPS``) for every choice of kept kernels."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    if n == 0 or not cn.cycle_model or not 1 <= cn.cores <= MAX_CORES:
        return 0.0
    topo = _dp.topological_order(kt, et)
    types, tables = _types(problem)
    total = 0.0
    for g in phase_groups(problem, allowed):
        configs = int(allowed[g].any(axis=0).sum())  # the configurations its kernels may use
        part = _group_cycles(problem, g, topo, types, tables, configs)
        if part is None:
            return 0.0
        total += part
    tmin = min(cn.num_tile, 1) if cn.per_config_tiles else cn.num_tile
    return tmin * total / cn.freq_GHz


def core_table(a: int, b: int, z: int, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """(tau ascending, m descending): a kernel of ``a`` x ``b`` x ``z`` reaches tau[j]
    cycles with m[j] cores and needs m[j] cores for any target in [tau[j], tau[j+1]), none
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


def _group_cycles(problem, group, topo, types, tables, configs: int) -> float | None:
    """The summed-cycles bound of one group whose kernels may use ``configs``
    configurations: the first choice of kept kernels (``chain_bound._choices``) whose
    ideals and steps fit the budgets."""
    et = problem.edges
    for keep in _choices(problem, group, topo):
        ideals = _ideals(keep, et, group[et.src] & group[et.dst])
        if ideals is None:
            continue
        left = _LeftOut(problem, group & ~keep, types, tables)
        path = _shortest_path(problem, keep, ideals, types, tables, left, configs)
        if path is not None:
            return path + left.total / left.cores
    return None


class _LeftOut:
    """The kernels D of a group that the chain leaves out, by (a, b, z) type: a step of
    kept kernels S whose exact allocation takes tau(S) cycles costs the least of
    tau - X_S(tau) / P over tau >= tau(S), where X_S(tau) is the most one-core work of D
    that fits the cores S leaves at tau (a fractional knapsack: a kernel of D takes its
    m(tau) cores and brings its work w; whole kernels take a multiple of the greatest
    common divisor of those m(tau)); without D, tau(S) itself."""

    def __init__(self, problem, left_out, types, tables):
        kt = problem.kernels
        self.cores = int(problem.constants.cores)
        ids, counts = np.unique(types[left_out], return_counts=True)
        self.tables = [tables[t] for t in ids]
        self.counts = counts.astype(np.float64)
        ks = np.flatnonzero(left_out)
        self.work = np.array([_work(kt, ks[types[ks] == t][0]) for t in ids], np.float64)
        self.total = float((self.counts * self.work).sum())

    def step(self, tau0: float, tables, counts) -> float:
        """The cost of a step of kept kernels (``counts[i]`` of ``tables[i]``) whose exact
        allocation takes ``tau0`` cycles. Between two targets where some m drops, tau grows
        and X does not, so only ``tau0`` and the targets above it are candidates; since
        X <= w(D), none at or above tau0 + w(D) / P can win."""
        if not len(self.tables):
            return tau0
        limit = tau0 + self.total / self.cores
        cand = [np.array([tau0])] + [t[(t > tau0) & (t < limit)] for t, _ in tables + self.tables]
        taus = np.unique(np.concatenate(cand))
        return float((taus - self._fill(taus, tables, counts) / self.cores).min())

    def _fill(self, taus, tables, counts) -> np.ndarray:
        """X(tau) per target: D's kernels (value w, size m(tau), ``self.counts`` of each)
        into the cores the kept kernels (``counts`` of ``tables``) leave, greedily by value
        per core, the last one in part (the fractional knapsack's optimum)."""
        room = np.full(len(taus), float(self.cores))
        for (t, m), c in zip(tables, counts):
            room -= c * m[np.searchsorted(t, taus, side="right") - 1]
        size = np.stack([m[np.maximum(np.searchsorted(t, taus, side="right") - 1, 0)]
                         for t, m in self.tables], axis=1)  # fmt: skip
        fits = taus[:, None] >= np.array([t[0] for t, _ in self.tables])[None, :]
        size = np.where(fits, size, 0.0)  # below its fewest cycles a kernel cannot join
        ratio = np.where(fits, self.work[None, :] / np.maximum(size, 1.0), 0.0)
        # whole kernels take a multiple of the sizes' greatest common divisor
        unit = np.maximum(np.gcd.reduce(size.astype(np.int64), axis=1), 1)
        room = np.floor(np.maximum(room, 0.0) / unit) * unit
        order = np.argsort(-ratio, axis=1, kind="stable")
        sizes = np.take_along_axis(size * self.counts[None, :], order, axis=1)
        rates = np.take_along_axis(ratio, order, axis=1)
        before = np.cumsum(sizes, axis=1) - sizes
        taken = np.clip(room[:, None] - before, 0.0, sizes)
        return (taken * rates).sum(axis=1)


def _work(kt, k: int) -> float:
    """Kernel k's cycles on one core, a b z (0 without work)."""
    a, b, z = int(kt.a[k]), int(kt.b[k]), int(kt.z[k])
    return float(a) * b * z if a > 0 and b > 0 and z > 0 else 0.0


def _shortest_path(problem, keep, ideals, types, tables, left, configs) -> float | None:
    """Least summed step costs (``_LeftOut.step``) from the empty ideal to all kept kernels
    (local index i = the i-th kept kernel) in at most ``configs`` steps (each step is a
    configuration of its own); None beyond ``MAX_STEPS`` steps. A step is taken only where
    a configuration can be: at most ``cores`` kernels, and with two or more kernels their
    weights (and extra bytes) within the SRAM (1e-9 tolerance)."""
    preds, succs, order = ideals
    kt, cn = problem.kernels, problem.constants
    ks = np.flatnonzero(keep)
    w = (kt.weight_sram + kt.sram_extra)[ks].astype(float)
    room = cn.sram_cap * (1 + 1e-9) if cn.sram_check else math.inf
    cores = int(cn.cores)
    shift = cores.bit_length() + 1  # a type's count in one step never reaches 2**shift
    unit = [1 << (shift * int(types[k])) for k in ks]
    cost = _StepCost(problem, ks, types, tables, left)
    index = {mask: i for i, (mask, _) in enumerate(order)}
    best = np.full((len(order), configs + 1), math.inf)  # [ideal, steps taken]
    best[0, 0] = 0.0
    steps = 0
    for a, front in order:
        ends, costs = [], []  # the steps from a (each to a different ideal)
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
                ends.append(index[b])
                costs.append(cost(key2, s2))
                if cnt2 < cores and w2 <= room:
                    grown = tuple(j for j in fr if j != k) + tuple(
                        j for j in succs[k] if preds[j] & ~b == 0)
                    stack.append((s2, grown, cnt2, w2, key2))
        if ends:  # ideals grow along a step, so a's row is final when its turn comes
            rows = np.array(ends)
            via = best[index[a], :-1][None, :] + np.array(costs)[:, None]
            best[rows, 1:] = np.minimum(best[rows, 1:], via)
    end = float(best[-1].min())
    return end if math.isfinite(end) else None  # (a feasible assignment is such a path)


class _StepCost:
    """The cost of one step (``_LeftOut.step`` of its exact allocation), cached by the
    counts of its kernels' (a, b, z) types (``key``)."""

    def __init__(self, problem, ks, types, tables, left):
        self.kt, self.ks, self.types, self.tables = problem.kernels, ks, types, tables
        self.cores = int(problem.constants.cores)
        self.left = left
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
        if status != Status.OK:  # never for a step of at most ``cores`` free kernels
            return 0.0
        ids, counts = np.unique(self.types[members], return_counts=True)
        return self.left.step(float(tau), [self.tables[t] for t in ids], counts)
