"""Large-neighbourhood search: windows of an incumbent assignment re-solved exactly
(docs/design.md, "Large-neighbourhood search").

A *window* is a run of consecutive configurations c0..c1 of the incumbent holding at most
``WINDOW_KERNELS`` kernels. The kernels outside it stay where they are; the window's kernels
are assigned to c0..c1 again by the exact search over order ideals (``_dp.ideal_search``) on a
problem of their own: the window's kernels, the edges between them, and each edge that
crosses the window's border folded into its kernel inside the window (its DRAM traffic, its
spilled SRAM footprint, and for an edge leaving the window its re-layout collective), so that
a configuration of the window costs what the whole problem charges it, except for the live
DRAM bytes of crossing edges and the weight tiling of buffers read from outside. The fold
is a model of the border: every new assignment is scored by the evaluator on the whole
problem and kept only when its final time is lower, so the result is never worse than the
incumbent and always feasible.

Windows are visited in a deterministic order: sweeps over the configurations from
``seed`` mod the configuration count, each window starting half a window after the last;
the search stops after a sweep without improvement, after ``SWEEPS`` sweeps, or when its
work budget (evaluations, as every search here) is spent.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from dfsearch.cost.layout import Control, Stat, new_stats
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator
from dfsearch.search import _dp
from dfsearch.search.layered import sub_problem

__all__ = ["Improved", "improve", "WINDOW_KERNELS"]

#: kernels per window at most (the exact search's bitmasks hold 62)
WINDOW_KERNELS = 24
#: configurations per window at most
WINDOW_CONFIGS = 6
#: states of the exact search per window, and the evaluations it may spend (beyond: the
#: window keeps its assignment, the next one is tried)
WINDOW_STATES = 20_000
WINDOW_EVALS = 50_000
#: sweeps over the configurations at most
SWEEPS = 3
#: a new assignment is kept when its final time is below the incumbent's by this (relative)
IMPROVEMENT = 1e-12


@dataclass(frozen=True, slots=True)
class Improved:
    """The result of :func:`improve`."""

    config: tuple[int, ...]  #: the best assignment found (the incumbent when none is better)
    value_ns: float  #: its summed configuration IIs, scored by the evaluator
    evaluations: int  #: work spent (exact searches' costings and whole-problem scorings)
    windows: int  #: windows re-solved
    accepted: int  #: windows whose new assignment was kept
    stopped: bool  #: the control array (deadline, stop flag) stopped it


def improve(problem: Problem, config: tuple[int, ...], allowed: np.ndarray, bw: float,
            live_cap: float, control: np.ndarray, *, seed: int, budget: float) -> Improved:  # fmt: skip
    """Windows of ``config`` re-solved exactly (module docstring) within ``budget``
    evaluations; ``allowed[k, c]`` (pins, FWD/BWD rule) holds for every new assignment;
    ``bw`` and ``live_cap`` are the DRAM regime the windows are solved in."""
    ev = Evaluator(problem)
    cfg = np.asarray(config, np.int64)
    finals, _, _ = ev.batch(cfg[None, :])
    best = float(finals[0])
    used, windows, accepted = 1, 0, 0
    nc = problem.num_config
    for sweep in range(SWEEPS):
        gained = False
        for c0 in _starts(cfg, nc, seed + sweep):
            c1 = _window_end(cfg, c0, nc)
            members = np.flatnonzero((cfg >= c0) & (cfg <= c1))
            if c1 == c0 or len(members) < 2:
                continue
            left = budget - used
            if left <= 0:
                return _result(ev, cfg, used, windows, accepted, False)
            new, spent, halt = _solve_window(problem, cfg, members, c0, c1, allowed, bw, live_cap,
                                             control, left)  # fmt: skip
            used += spent
            windows += 1
            if new is not None:
                finals, _, _ = ev.batch(new[None, :])
                used += 1
                if float(finals[0]) < best * (1 - IMPROVEMENT):
                    cfg, best, gained = new, float(finals[0]), True
                    accepted += 1
            if halt:  # the budget is spent, or the deadline or the stop flag came
                return _result(ev, cfg, used, windows, accepted, _clock_or_flag(control))
        if not gained:
            break
    return _result(ev, cfg, used, windows, accepted, False)


def _clock_or_flag(control: np.ndarray) -> bool:
    """The control array's stop flag is set or its deadline has passed."""
    return bool(control[Control.FLAG] != 0.0 or time.perf_counter() > control[Control.DEADLINE])


def _result(ev: Evaluator, cfg: np.ndarray, used: int, windows: int, accepted: int,
            stopped: bool) -> Improved:  # fmt: skip
    config = tuple(int(c) for c in cfg)
    value = float(ev.full(config).all_config_ii_ns)
    return Improved(config, value, used, windows, accepted, stopped)


def _starts(cfg: np.ndarray, nc: int, seed: int) -> list[int]:
    """First configuration of each window of one sweep: from ``seed`` mod ``nc`` round the
    configurations, each window half a window after the last."""
    out, c, seen = [], seed % nc, 0
    while seen < nc:
        out.append(c)
        step = max(1, (_window_end(cfg, c, nc) - c + 1) // 2)
        c = (c + step) % nc
        seen += step
    return out


def _window_end(cfg: np.ndarray, c0: int, nc: int) -> int:
    """The last configuration of the window from ``c0``: as many as fit ``WINDOW_KERNELS``
    kernels and ``WINDOW_CONFIGS`` configurations (at least c0 itself)."""
    counts = np.bincount(cfg, minlength=nc)
    c1, total = c0, int(counts[c0])
    while c1 + 1 < nc and c1 + 1 - c0 < WINDOW_CONFIGS and total + counts[c1 + 1] <= WINDOW_KERNELS:
        c1 += 1
        total += int(counts[c1])
    return c1


def _solve_window(problem, cfg, members, c0, c1, allowed, bw, live_cap, control, left):
    """The window's kernels ``members`` assigned to ``c0..c1`` by the exact search on the
    folded problem (``_window_problem``) within ``left`` evaluations. Returns (the whole
    new assignment or None, evaluations spent, whether the control array stopped it)."""
    sub = _window_problem(problem, cfg, members, c0, c1)
    sub_allowed = np.ascontiguousarray(allowed[members][:, c0:c1 + 1])
    if not sub_allowed[np.arange(len(members)), cfg[members] - c0].all():
        return None, 0, False  # the incumbent breaks a pin or the FWD/BWD rule here
    preds, succs, am, must = _dp.ideal_masks(sub.edges, sub_allowed)
    topo = _dp.topological_order(sub.kernels, sub.edges)
    stats = new_stats()
    assign = np.full(len(members), -1, np.int64)
    saved = float(control[Control.MAX_EVALS])
    control[Control.MAX_EVALS] = min(saved, left, WINDOW_EVALS)
    try:
        value = _dp.ideal_search(sub.kernels, sub.edges, sub.constants, preds, succs, topo, am,
                                 must, sub_allowed, bw, live_cap, WINDOW_STATES, 1, assign, stats,
                                 control)  # fmt: skip
    finally:
        control[Control.MAX_EVALS] = saved
    spent = int(stats[Stat.EVALS])
    # stopped by the budget, the deadline or the flag; not by the window's own share
    halt = bool(stats[Stat.STOPPED] > 0) and (spent >= min(saved, left) or _clock_or_flag(control))
    if not math.isfinite(value) or (assign < 0).any():
        return None, spent, halt
    new = cfg.copy()
    new[members] = c0 + assign
    return new, spent, halt


def _window_problem(problem: Problem, cfg: np.ndarray, members: np.ndarray, c0: int,
                    c1: int) -> Problem:  # fmt: skip
    """The window's kernels as a problem of ``c1 - c0 + 1`` configurations, with each
    crossing edge folded into its end inside the window (module docstring)."""
    sub = sub_problem(problem, members, c1 - c0 + 1)
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    local = np.full(problem.num_kernels, -1, np.int64)
    local[members] = np.arange(len(members))
    mem = sub.kernels.memory_bytes.astype(np.float64, copy=True)
    net = sub.kernels.net_tile_ns.astype(np.float64, copy=True)
    ar = sub.kernels.all_reduce.astype(np.int64, copy=True)
    extra = sub.kernels.sram_extra.astype(np.float64, copy=True)
    weight = sub.kernels.weight_sram.astype(np.float64, copy=True)
    lone = _lone_weight_configs(kt, cfg)
    for e in range(et.src.shape[0]):
        s, d = int(et.src[e]), int(et.dst[e])
        s_in, d_in = local[s] >= 0, local[d] >= 0
        if s_in == d_in:
            continue
        fp = 2.0 * float(et.sram_bytes[e])
        traffic = cn.num_tile * float(et.buffer_bytes[e])
        if s_in:  # leaves the window: the producer's configuration pays its collective too
            k = local[s]
            net[k] += et.net_tile_ns[e]
            ar[k] += et.all_reduce[e]
            mem[k] += traffic
            if kt.is_weight[s] == 1:
                weight[k] += fp  # divisible exactly when the producer is a lone weight kernel
            else:
                extra[k] += fp
        else:  # enters the window from an earlier configuration
            k = local[d]
            mem[k] += traffic
            if not lone[int(cfg[s])]:
                extra[k] += fp  # a lone weight producer's buffer is tiled: not counted
    cols = {"memory_bytes": mem, "net_tile_ns": net, "all_reduce": ar, "sram_extra": extra,
            "weight_sram": weight}  # fmt: skip
    kt_new = sub.kernels._replace(**cols)
    cn_new = sub.constants._replace(fb_rule=False, sparse=True)
    return replace(sub, kernels=kt_new, constants=cn_new)


def _lone_weight_configs(kt, cfg: np.ndarray) -> np.ndarray:
    """lone[c]: configuration c holds exactly one kernel, a weight kernel."""
    nc = int(cfg.max(initial=0)) + 1
    counts = np.bincount(cfg, minlength=nc)
    weights = np.bincount(cfg, weights=kt.is_weight.astype(np.float64), minlength=nc)
    return (counts == 1) & (weights == 1)
