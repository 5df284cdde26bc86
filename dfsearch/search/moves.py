"""Boundary moves: kernels moved one configuration forward or back across the boundary
between two adjacent configurations of an incumbent assignment (docs/design.md, "Boundary
moves").

The large-neighbourhood search re-solves runs of configurations that hold at most a few
dozen kernels; where one configuration alone holds more, its boundaries are never re-solved.
Here every boundary c | c + 1 is visited in turn. A kernel of c whose successors all sit
after c may move to c + 1; a kernel of c + 1 whose predecessors all sit before c + 1 may
move to c (each where ``allowed`` lets it). Each move is screened by the IIs of the two
configurations it changes (``evaluate.set_cost``, the only IIs a move across c | c + 1
changes); the moves they say lower the summed IIs are scored by the evaluator on the whole
problem, most promising first (at most ``VERIFIED`` of them), and the first that lowers the
final time is kept; the boundary is then visited again. When none does, each move that
keeps the two IIs (a kernel whose side does not matter, which may free SRAM for another) is
screened with every second move at the same boundary, and the pairs are scored the same
way. Every costing, screening or scoring, counts as one evaluation. The search stops
after a sweep over the boundaries without improvement, after ``SWEEPS`` sweeps, or when its
work budget (evaluations) is spent. It is deterministic, keeps only strict improvements
(the assignment returned is the incumbent itself when nothing improves) and never reads a
clock except for the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dfsearch.cost.evaluate import set_cost
from dfsearch.cost.layout import NUM_SET, Control, SetSlot
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator

__all__ = ["SWEEPS", "Moved", "move_boundaries"]

#: sweeps over the boundaries at most
SWEEPS = 3
#: a move is kept when it lowers the final time by this (relative); one that changes the
#: summed IIs by less keeps them (a second move may follow)
IMPROVEMENT = 1e-12
#: moves (or pairs) scored on the whole problem per visit of a boundary at most
VERIFIED = 4


@dataclass(frozen=True, slots=True)
class Moved:
    """The result of :func:`move_boundaries`."""

    config: tuple[int, ...]  #: the best assignment found (the incumbent when none is better)
    value_ns: float  #: its summed configuration IIs, scored by the evaluator
    evaluations: int  #: whole-problem scorings spent
    moves: int  #: kernels moved in the assignment returned (pairs count two)
    stopped: bool  #: the control array (deadline, stop flag) stopped it


def move_boundaries(problem: Problem, config: tuple[int, ...], allowed: np.ndarray, bw: float,
                    live_cap: float, control: np.ndarray, *, budget: float) -> Moved:  # fmt: skip
    """Boundary moves from ``config`` (module docstring) within ``budget`` evaluations;
    ``allowed[k, c]`` (pins, FWD/BWD rule) holds for every move; ``bw`` and ``live_cap``
    are the DRAM regime the moves are screened in."""
    ev = Evaluator(problem)
    cfg = np.asarray(config, np.int64)
    work = _Work(problem, ev, bw, live_cap, budget)
    best = work.score(cfg)
    moves = 0
    for _ in range(SWEEPS):
        gained = False
        for c in range(problem.num_config - 1):
            while True:
                if work.spent() or _clock_or_flag(control):
                    return _result(ev, cfg, work, moves, _clock_or_flag(control))
                new, value, count = _improve_boundary(problem, cfg, c, allowed, best, work)
                if new is None:
                    break
                cfg, best, gained, moves = new, value, True, moves + count
        if not gained:
            break
    return _result(ev, cfg, work, moves, False)


class _Work:
    """The costings of one problem, counted against a budget: whole-problem scorings
    (``score``) and the II of one configuration (``ii``)."""

    def __init__(self, problem, ev: Evaluator, bw: float, live_cap: float, budget: float):
        self.problem, self.ev, self.bw, self.live_cap = problem, ev, bw, live_cap
        self.budget, self.used = budget, 0
        n = problem.num_kernels
        self.scratch = (np.zeros(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
                        np.zeros(n, np.int64), np.zeros(NUM_SET))  # fmt: skip

    def spent(self) -> bool:
        return self.used >= self.budget

    def score(self, cfg: np.ndarray) -> float:
        """The final time of ``cfg`` (inf where infeasible)."""
        self.used += 1
        finals, _, _ = self.ev.batch(cfg[None, :])
        return float(finals[0])

    def pair(self, cfg: np.ndarray, c: int) -> float:
        """The summed IIs of configurations c and c + 1 of ``cfg`` (inf where one does not
        fit), each costed on its own with the lone weight kernels before it marked."""
        return self.ii(cfg, c) + self.ii(cfg, c + 1)

    def ii(self, cfg: np.ndarray, c: int) -> float:
        self.used += 1
        kt = self.problem.kernels
        where = np.where(cfg < c, 2, np.where(cfg == c, 1, 0)).astype(np.int8)
        counts = np.bincount(cfg, minlength=self.problem.num_config)
        where[(where == 2) & (kt.is_weight == 1) & (counts[cfg] == 1)] = 3
        members, k_pl, k_ps, zero, out = self.scratch
        set_cost(kt, self.problem.edges, self.problem.constants, where, self.bw, self.live_cap, 2,
                 members, k_pl, k_ps, zero, out)  # fmt: skip
        return float(out[SetSlot.II])


def _improve_boundary(problem, cfg, c, allowed, best, work):
    """(the assignment, its final time, kernels moved) of the first screened single move
    across the boundary c | c + 1 that lowers ``best``, else of the first pair of a move that
    keeps the two IIs and a second move; (None, best, 0) when none does."""
    base = work.pair(cfg, c)
    if not np.isfinite(base):
        return None, best, 0
    tol = IMPROVEMENT * base
    firsts, lower, keeps = [], [], []
    for k, to in _movable(problem, cfg, c, allowed):
        if work.spent():
            break
        row = _moved(cfg, k, to)
        delta = work.pair(row, c) - base
        firsts.append(row)
        (lower if delta < -tol else keeps if delta <= tol else []).append((delta, len(firsts) - 1))
    new, value = _verified([firsts[i] for _, i in sorted(lower)], best, work)
    if new is not None:
        return new, value, 1
    pairs = []
    for _, i in keeps:
        if work.spent():
            break
        first = firsts[i]
        for k, to in _movable(problem, first, c, allowed):
            if work.spent():
                break
            row = _moved(first, k, to)
            if not np.array_equal(row, cfg):  # not the first move undone
                delta = work.pair(row, c) - base
                if delta < -tol:
                    pairs.append((delta, len(pairs), row))
    new, value = _verified([row for _, _, row in sorted(pairs, key=lambda t: t[:2])], best, work)
    return (new, value, 2) if new is not None else (None, best, 0)


def _verified(rows, best, work):
    """(the first of ``rows``, at most ``VERIFIED``, whose final time is below ``best``, that
    time), or (None, best)."""
    for row in rows[:VERIFIED]:
        if work.spent():
            break
        value = work.score(row)
        if value < best * (1 - IMPROVEMENT):
            return row, value
    return None, best


def _movable(problem, cfg, c, allowed) -> list[tuple[int, int]]:
    """(kernel, new configuration) of every move across the boundary c | c + 1 that keeps
    each edge's order and the allowed configurations, by kernel index."""
    src, dst = problem.edges.src, problem.edges.dst
    out = []
    latest_pred = np.full(len(cfg), -1, np.int64)
    np.maximum.at(latest_pred, dst, cfg[src])
    earliest_succ = np.full(len(cfg), problem.num_config, np.int64)
    np.minimum.at(earliest_succ, src, cfg[dst])
    for k in np.flatnonzero((cfg == c) | (cfg == c + 1)):
        if cfg[k] == c and earliest_succ[k] > c and allowed[k, c + 1]:
            out.append((int(k), c + 1))
        elif cfg[k] == c + 1 and latest_pred[k] < c + 1 and allowed[k, c]:
            out.append((int(k), c))
    return out


def _moved(cfg: np.ndarray, k: int, to: int) -> np.ndarray:
    out = cfg.copy()
    out[k] = to
    return out


def _clock_or_flag(control: np.ndarray) -> bool:
    """The control array's stop flag is set or its deadline has passed."""
    return bool(control[Control.FLAG] != 0.0 or time.perf_counter() > control[Control.DEADLINE])


def _result(ev: Evaluator, cfg: np.ndarray, work: _Work, moves: int,
            stopped: bool) -> Moved:  # fmt: skip
    config = tuple(int(c) for c in cfg)
    value = float(ev.full(config).all_config_ii_ns)
    return Moved(config, value, work.used, moves, stopped)
