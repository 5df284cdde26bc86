"""The crowded split: an incumbent for wide graphs whose network-heavy kernels need
configurations crowded with kernels to hide their network time (docs/design.md, "The
crowded split").

The window DP of the layered split (``search/layered.py``) keeps blocks to at most
``MAX_BLOCK`` kernels and never mixes forward and backward kernels in one block, so it cannot
build a configuration of hundreds of kernels around an all-to-all, nor the middle
configuration of an odd count, which the FWD/BWD rule opens to both phases. The crowded
split is the contiguous-order DP with the configuration index (``_dp.order_dp``'s
recursion) over a coarse set of cut points of a topological order:

* orders: the default topological order and the *ready order* (``ready_order``): forward
  kernels first, then each kernel as soon as its inputs are done, so that a kernel waiting
  only on another one follows it closely (a weight update after its gradient);
* cut points: every ``ceil(n / GRID)``-th position, and the positions ``cores``, 2 ``cores``,
  ... kernels from each end and from each change of phase along the order (a configuration
  holds at most ``cores`` kernels, so a full one starts or ends there);
* a block ``order[i:j]`` may be configuration c when each of its kernels may sit in c
  (``allowed``: the FWD/BWD rule, pins) and it holds at most ``cores`` kernels; its cost is
  its II (``set_cost``, read side of weight-tiled buffers counted untiled), cached per
  (i, j); an empty configuration costs nothing.

The best split's assignment is checked by the evaluator; it is only an incumbent and proves
nothing.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from dfsearch.codes import Phase
from dfsearch.cost.evaluate import set_cost
from dfsearch.cost.layout import NUM_SET, SetSlot, Stat
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator
from dfsearch.search import _dp

__all__ = ["GRID", "crowded_split", "cut_points", "ready_order"]

#: cut points of the regular grid along an order (plus those ``cut_points`` adds)
GRID = 64
#: changes of phase along an order that anchor cut points (the first ones; the orders put
#: the forward kernels first, so a training graph has one)
MAX_ANCHORS = 8
#: costings between two looks at the control array
_CHECK_EVERY = 64


def ready_order(problem: Problem) -> np.ndarray:
    """The topological order that takes forward kernels first and otherwise the kernel that
    became ready earliest (ties: the lower index): Kahn's algorithm with a queue ordered by
    (not forward, the step at which the last input was done, index)."""
    kt, et = problem.kernels, problem.edges
    n = problem.num_kernels
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, np.int64)
    for s, d in zip(et.src.tolist(), et.dst.tolist()):
        succ[s].append(d)
        indeg[d] += 1
    later = [int(kt.phase[k] != Phase.FWD) for k in range(n)]
    ready = [(later[k], 0, k) for k in range(n) if indeg[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, k = heapq.heappop(ready)
        out.append(k)
        for d in succ[k]:
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(ready, (later[d], len(out), d))
    return np.asarray(out, np.int64)


def cut_points(phase_along: np.ndarray, cores: int) -> np.ndarray:
    """Sorted cut positions (0 and n included) of an order whose kernels have the phases
    ``phase_along``: the regular grid, and multiples of ``cores`` from both ends and from
    the first ``MAX_ANCHORS`` changes of phase."""
    n = len(phase_along)
    step = max(1, math.ceil(n / GRID))
    cuts = set(range(0, n + 1, step)) | {0, n}
    changes = np.flatnonzero(np.diff(phase_along) != 0)[:MAX_ANCHORS]  # few: forward first
    anchors = {0, n} | {int(i) + 1 for i in changes}
    if cores >= 1:
        for a in anchors:
            cuts.update(range(a % cores, n + 1, cores))  # a, a +- cores, a +- 2 cores, ...
    return np.asarray(sorted(c for c in cuts if 0 <= c <= n), np.int64)


def crowded_split(problem: Problem, topo: np.ndarray, allowed: np.ndarray, bw: float,
                  live_cap: float, stats: np.ndarray, control: np.ndarray) -> tuple[float, np.ndarray | None]:  # fmt: skip
    """The best crowded split over the default and the ready order (module docstring):
    (summed II, assignment) or (inf, None) when no split fits or the control array stopped
    it (then ``stats[Stat.STOPPED]`` = 1). Its costings count in ``stats``."""
    best: tuple[float, np.ndarray | None] = (math.inf, None)
    seen: list[np.ndarray] = []
    for order in (np.asarray(topo, np.int64), ready_order(problem)):
        if any(np.array_equal(order, o) for o in seen):
            continue
        seen.append(order)
        value, cfg = _split(problem, order, allowed, bw, live_cap, stats, control)
        if stats[Stat.STOPPED] > 0:
            return math.inf, None
        if cfg is not None and value < best[0]:
            best = (value, cfg)
    if best[1] is None:
        return best
    finals, _, _ = Evaluator(problem).batch(best[1][None, :])
    stats[Stat.EVALS] += 1
    return best if math.isfinite(finals[0]) else (math.inf, None)


def _split(problem, order, allowed, bw, live_cap, stats, control):
    """The contiguous-order DP with the configuration index over ``cut_points`` of
    ``order``: (summed II, assignment) or (inf, None)."""
    kt, cn = problem.kernels, problem.constants
    n, nc, cores = problem.num_kernels, problem.num_config, int(cn.cores)
    cuts = cut_points(kt.phase[order], cores)
    m = len(cuts)
    # bad[c, p]: kernels among order[:p] that configuration c may not hold
    bad = np.zeros((nc, n + 1), np.int64)
    bad[:, 1:] = np.cumsum(allowed[order].T == 0, axis=1)
    block_ii = _block_costs(problem, order, bw, live_cap, stats, control)
    best = np.full((nc + 1, m), math.inf)
    parent = np.zeros((nc + 1, m), np.int64)
    best[0, 0] = 0.0
    for c in range(nc):
        for b in range(m):
            value, at = best[c, b], b  # configuration c left empty
            for a in range(b - 1, -1, -1):
                size = int(cuts[b] - cuts[a])
                if size > cores or (cores < 1 and size > 0):
                    break
                if best[c, a] == math.inf or bad[c, cuts[b]] - bad[c, cuts[a]] > 0:
                    continue
                ii = block_ii(int(cuts[a]), int(cuts[b]))
                if stats[Stat.STOPPED] > 0:
                    return math.inf, None
                if best[c, a] + ii < value:
                    value, at = best[c, a] + ii, a
            best[c + 1, b], parent[c + 1, b] = value, at
    if best[nc, m - 1] == math.inf:
        return math.inf, None
    cfg = np.full(n, -1, np.int64)
    b = m - 1
    for c in range(nc, 0, -1):
        a = int(parent[c, b])
        cfg[order[cuts[a]:cuts[b]]] = c - 1
        b = a
    return float(best[nc, m - 1]), cfg


def _block_costs(problem, order, bw, live_cap, stats, control):
    """``cost(i, j)``: the II of the configuration holding ``order[i:j]`` after
    ``order[:i]`` (``set_cost``, one evaluation each, cached); inf when it breaks a capacity.
    Sets ``stats[Stat.STOPPED]`` when the control array says stop."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    out = np.zeros(NUM_SET)
    members, zero = np.zeros(n, np.int64), np.zeros(n, np.int64)
    k_pl, k_ps = np.ones(n, np.int64), np.ones(n, np.int64)
    cache: dict[tuple[int, int], float] = {}

    def cost(i: int, j: int) -> float:
        if (i, j) not in cache:
            if len(cache) % _CHECK_EVERY == 0 and _dp.must_stop(stats, control):
                stats[Stat.STOPPED] = 1.0
                return math.inf
            where = np.zeros(n, np.int8)
            where[order[:i]] = 2
            where[order[i:j]] = 1
            set_cost(kt, et, cn, where, bw, live_cap, 0, members, k_pl, k_ps, zero, out)
            stats[Stat.EVALS] += 1
            cache[(i, j)] = float(out[SetSlot.II])
        return cache[(i, j)]

    return cost
