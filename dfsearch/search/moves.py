"""Boundary moves: kernels moved one configuration forward or back across the boundary
between two adjacent configurations of an incumbent assignment (docs/design.md, "Boundary
moves").

The large-neighbourhood search re-solves runs of configurations that hold at most a few
dozen kernels; where one configuration alone holds more, its boundaries are never re-solved.
Here every boundary c | c + 1 is visited in turn. A kernel of c whose successors all sit
after c may move to c + 1; a kernel of c + 1 whose predecessors all sit before c + 1 may
move to c (each where ``allowed`` lets it). Every such move is scored by the evaluator on
the whole problem (one batch per boundary); the best move that lowers the final time is
kept and the boundary is visited again. When none does, each move that keeps the final time
(a kernel whose side does not matter, which may free SRAM for another) is tried with every
second move at the same boundary, and the best pair that lowers it is kept. The search stops
after a sweep over the boundaries without improvement, after ``SWEEPS`` sweeps, or when its
work budget (evaluations) is spent. It is deterministic, keeps only strict improvements
(the assignment returned is the incumbent itself when nothing improves) and never reads a
clock except for the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dfsearch.cost.layout import Control
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator

__all__ = ["SWEEPS", "Moved", "move_boundaries"]

#: sweeps over the boundaries at most
SWEEPS = 3
#: a move is kept when it lowers the final time by this (relative); one that changes it by
#: less keeps it (a second move may follow)
IMPROVEMENT = 1e-12


@dataclass(frozen=True, slots=True)
class Moved:
    """The result of :func:`move_boundaries`."""

    config: tuple[int, ...]  #: the best assignment found (the incumbent when none is better)
    value_ns: float  #: its summed configuration IIs, scored by the evaluator
    evaluations: int  #: whole-problem scorings spent
    moves: int  #: kernels moved in the assignment returned (pairs count two)
    stopped: bool  #: the control array (deadline, stop flag) stopped it


def move_boundaries(problem: Problem, config: tuple[int, ...], allowed: np.ndarray,
                    control: np.ndarray, *, budget: float) -> Moved:  # fmt: skip
    """Boundary moves from ``config`` (module docstring) within ``budget`` evaluations;
    ``allowed[k, c]`` (pins, FWD/BWD rule) holds for every move."""
    ev = Evaluator(problem)
    cfg = np.asarray(config, np.int64)
    finals, _, _ = ev.batch(cfg[None, :])
    best = float(finals[0])
    work = _Work(ev, budget, 1)
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
    """The evaluator with a count of the scorings spent against a budget."""

    def __init__(self, ev: Evaluator, budget: float, used: int) -> None:
        self.ev, self.budget, self.used = ev, budget, used

    def spent(self) -> bool:
        return self.used >= self.budget

    def score(self, rows: list[np.ndarray]) -> np.ndarray:
        """Final times of ``rows`` (inf where infeasible)."""
        self.used += len(rows)
        finals, _, _ = self.ev.batch(np.stack(rows))
        return finals


def _improve_boundary(problem, cfg, c, allowed, best, work):
    """(the assignment, its final time, kernels moved) of the best single move across the
    boundary c | c + 1 that lowers ``best``, else of the best pair of a move that keeps it
    and a second move; (None, best, 0) when none does."""
    rows = [_moved(cfg, k, to) for k, to in _movable(problem, cfg, c, allowed)]
    if not rows:
        return None, best, 0
    finals = work.score(rows)
    i = int(np.argmin(finals))
    if finals[i] < best * (1 - IMPROVEMENT):
        return rows[i], float(finals[i]), 1
    pair, value = None, best
    for j in np.flatnonzero(finals <= best * (1 + IMPROVEMENT)):
        if work.spent():
            break
        first = rows[j]
        seconds = [_moved(first, k, to) for k, to in _movable(problem, first, c, allowed)]
        seconds = [r for r in seconds if not np.array_equal(r, cfg)]  # not the move undone
        if not seconds:
            continue
        f2 = work.score(seconds)
        i = int(np.argmin(f2))
        if f2[i] < value * (1 - IMPROVEMENT):
            pair, value = seconds[i], float(f2[i])
    return (pair, value, 2) if pair is not None else (None, best, 0)


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
