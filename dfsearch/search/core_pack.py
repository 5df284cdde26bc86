"""Core-aware re-packing (docs/design.md, "Core-aware re-packing"), cycle model only: an
incumbent step that re-packs a group of kernels into its configurations so that each
configuration's integral core allocation meets one target cycle count.

A configuration's compute is the cycles of its slowest kernel after an integral core
allocation: a kernel that needs little work still holds a whole core for the whole II. At a
target tau, kernel k needs m_k(tau) cores (``core_bound.core_table``: the fewest with which
it reaches tau), so a configuration whose kernels' m_k(tau) sum to at most the chip's
cores runs in at most tau cycles. The group (the backward kernels, then the forward ones
under the FWD/BWD rule, else every kernel; the other kernels keep their configurations) is
packed greedily along its topological order into its configurations, first to last: each
configuration takes, while the cores last, first every kernel with successors whose
predecessors are placed (in its own or an earlier configuration), then the sinks that are
ready (weight updates, which may wait), oldest first. Targets are the multiples 1 ..
``MULTIPLES`` of the group's least feasible target (the largest of its kernels' fewest
cycles on all cores). Each packing that places every kernel is scored by the evaluator on
the whole problem (one evaluation each, counted against the budget) and the best is kept
when it lowers the final time. It proves nothing, is deterministic, keeps only strict
improvements and never reads a clock except for the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dfsearch.codes import Phase
from dfsearch.cost.layout import Control
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator
from dfsearch.search import _dp
from dfsearch.search.core_bound import MAX_CORES, core_table

__all__ = ["MULTIPLES", "Packed", "core_pack"]

#: targets tried per group: 1 .. MULTIPLES times the group's least feasible target
MULTIPLES = 8
#: a packing is kept when it lowers the final time by this (relative)
IMPROVEMENT = 1e-12


@dataclass(frozen=True, slots=True)
class Packed:
    """The result of :func:`core_pack`."""

    config: tuple[int, ...]  #: the best assignment found (the incumbent when none is better)
    value_ns: float  #: its summed configuration IIs, scored by the evaluator
    evaluations: int  #: whole-problem scorings spent
    improved: bool  #: the assignment returned is not the incumbent
    stopped: bool  #: the control array (deadline, stop flag) stopped it


def core_pack(problem: Problem, config: tuple[int, ...], allowed: np.ndarray, control: np.ndarray,
              *, budget: float) -> Packed:  # fmt: skip
    """Core-aware re-packing from ``config`` (module docstring) within ``budget``
    evaluations; ``allowed[k, c]`` (pins, FWD/BWD rule) holds for every kernel placed."""
    ev = Evaluator(problem)
    best = np.asarray(config, np.int64)
    cn = problem.constants
    if not cn.cycle_model or not 1 <= cn.cores <= MAX_CORES:
        return Packed(tuple(config), float(ev.full(config).all_config_ii_ns), 0, False, False)
    best_final = _final(ev, best)
    used, improved, stopped = 1, False, False
    tables: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}
    for group in _groups(problem, allowed):
        for multiple in range(1, MULTIPLES + 1):
            if used >= budget or _clock_or_flag(control):
                stopped = used < budget
                break
            row = _pack(problem, best, group, allowed, multiple, tables)
            if row is None:
                continue
            used += 1
            final = _final(ev, row)
            if final < best_final * (1 - IMPROVEMENT):
                best, best_final, improved = row, final, True
    out = tuple(int(c) for c in best)
    return Packed(out, float(ev.full(out).all_config_ii_ns), used, improved, stopped)


def _final(ev: Evaluator, row: np.ndarray) -> float:
    """The final time of ``row`` (inf where infeasible)."""
    finals, _, _ = ev.batch(row[None, :])
    return float(finals[0])


def _groups(problem: Problem, allowed: np.ndarray) -> list[np.ndarray]:
    """The groups re-packed in turn: backward, then forward kernels where the FWD/BWD rule
    gives them disjoint configurations; else every kernel."""
    kt, n = problem.kernels, problem.num_kernels
    fwd, bwd = kt.phase == Phase.FWD, kt.phase == Phase.BWD
    if problem.constants.fb_rule and fwd.any() and bwd.any():
        cols_f, cols_b = allowed[fwd].any(axis=0), allowed[bwd].any(axis=0)
        if not (cols_f & cols_b).any() and (fwd | bwd).all():
            return [bwd, fwd]
    return [np.ones(n, bool)]


def _cores_at(problem, k: int, tau: float, tables) -> int:
    """m_k(tau): the fewest cores with which kernel k reaches ``tau`` cycles (a kernel
    without work: 1); more than the chip's cores where it cannot."""
    kt, cores = problem.kernels, int(problem.constants.cores)
    key = (int(kt.a[k]), int(kt.b[k]), int(kt.z[k]))
    if min(key) <= 0:
        return 1
    if key not in tables:
        tables[key] = core_table(*key, cores)
    taus, ms = tables[key]
    j = int(np.searchsorted(taus, tau, side="right")) - 1
    return int(ms[j]) if j >= 0 else cores + 1


def _target(problem, group: np.ndarray, tables) -> float:
    """The least target every kernel of ``group`` reaches on all the chip's cores."""
    cores = int(problem.constants.cores)
    out = 0.0
    for k in np.flatnonzero(group):
        key = (int(problem.kernels.a[k]), int(problem.kernels.b[k]), int(problem.kernels.z[k]))
        if min(key) > 0:
            if key not in tables:
                tables[key] = core_table(*key, cores)
            out = max(out, float(tables[key][0][0]))
    return out


def _pack(problem, config, group, allowed, multiple, tables):
    """``config`` with the kernels of ``group`` re-packed at ``multiple`` x the group's least
    target (module docstring); None when some kernel finds no configuration."""
    et = problem.edges
    tau = multiple * _target(problem, group, tables)
    if tau <= 0:
        return None
    cols = np.flatnonzero(allowed[group].any(axis=0))
    n = problem.num_kernels
    has_succ = np.zeros(n, bool)
    has_succ[et.src] = True
    inner = group[et.src] & group[et.dst]
    waiting = np.zeros(n, np.int64)  # unplaced predecessors in the group
    np.add.at(waiting, et.dst[inner], 1)
    # the latest configuration of a predecessor, the earliest of a successor, outside it
    after = np.full(n, -1, np.int64)
    np.maximum.at(after, et.dst[~group[et.src]], config[et.src[~group[et.src]]])
    before = np.full(n, problem.num_config, np.int64)
    np.minimum.at(before, et.src[~group[et.dst]], config[et.dst[~group[et.dst]]])
    succs: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(et.src[inner], et.dst[inner]):
        succs[int(s)].append(int(d))
    left = [int(k) for k in _dp.topological_order(problem.kernels, et) if group[k]]
    need = {k: _cores_at(problem, k, tau, tables) for k in left}
    placed = np.full(n, -1, np.int64)
    for c in cols:
        room = int(problem.constants.cores)
        for sinks in (False, True):
            for k in left:
                if (has_succ[k] != sinks and waiting[k] == 0 and need[k] <= room
                        and allowed[k, c] and after[k] <= c <= before[k]):  # fmt: skip
                    placed[k] = c
                    room -= need[k]
                    for d in succs[k]:
                        waiting[d] -= 1
            left = [k for k in left if placed[k] < 0]
        if not left:
            return np.where(group, placed, config)
    return None


def _clock_or_flag(control: np.ndarray) -> bool:
    """The control array's stop flag is set or its deadline has passed."""
    return bool(control[Control.FLAG] != 0.0 or time.perf_counter() > control[Control.DEADLINE])
