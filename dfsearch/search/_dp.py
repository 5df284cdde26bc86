"""Jitted exact searches over configuration assignments (docs/design.md).

An assignment with Config(src) <= Config(dst) on every edge is a chain of order ideals
0 = I_0 <= I_1 <= ... <= I_C = all kernels, configuration c holding I_{c+1} minus I_c, and the
objective is a sum over configurations of a function of (I_c, I_{c+1}) and of which earlier
weight kernels sat alone in their configuration (weight tiling; ``set_cost``). So the
optimum over *all* assignments is a shortest path over chains of ideals. ``ideal_search``
finds it best-first (A*, branch-and-bound with the admissible bound ``set_bound``), with
ideals as int64 bitmasks (graphs of at most 62 kernels) and a state budget. ``order_dp`` is
the same recursion as a DP restricted to the prefixes of one topological order (contiguous
blocks), for graphs whose ideals are too many; it is exact over contiguous splits of it.

A state of ``ideal_search`` is (level c, ideal I, L): configurations 0..c-1 hold I; L = the
weight kernels of I alone in their configuration (their weight and output buffers are
tiled, see docs/model.md) that still have consumers outside I. g = the summed II so far;
the priority is f = g + ``set_bound`` of the kernels not in I, a lower bound of the rest
that is admissible and consistent (it splits over configurations). Expanding a state queues
its candidate configurations (``_next_ideal``) lazily: a candidate S enters the queue with
f = g + bound(S) + bound(rest minus S) and is costed by ``set_cost`` only when it reaches
the front (``_cost_candidate``), so most candidates are never costed. Priorities are
quantised to 1e-13 of the root bound (equal priorities: more kernels placed first, then the
newest entry, which dives to a complete assignment), so the value returned is the optimum
to within that.
"""

from __future__ import annotations

import enum
import time
from typing import NamedTuple

import numpy as np
from numba import objmode

from dfsearch.codes import Phase, Status
from dfsearch.cost._jit import jit
from dfsearch.cost.evaluate import bound_terms, set_bound, set_cost
from dfsearch.cost.layout import (
    NUM_SET,
    NUM_STATS,
    Constants,
    Control,
    EdgeTable,
    KernelTable,
    SetSlot,
    Stat,
)

__all__ = ["ideal_search", "order_dp", "must_stop"]


#: loop iterations between two checks of the control array
CHECK_EVERY = 256


@jit(objmode=True)
def must_stop(stats, control):
    """True when the work budget is spent, the stop flag is set or the deadline has passed.

    The clock is read in object mode; running Python there also lets a pending Ctrl-C handler
    run (signal handlers never run inside compiled code), which sets the flag."""
    if stats[Stat.EVALS] >= control[Control.MAX_EVALS] or control[Control.FLAG] != 0.0:
        return True
    with objmode(now="float64"):
        now = time.perf_counter()
    return now > control[Control.DEADLINE] or control[Control.FLAG] != 0.0


@jit(internal=True)
def _record(stats, out):
    st = int(out[SetSlot.STATUS])
    v = out[SetSlot.VIOLATION]
    slot = -1
    if st == Status.SRAM:
        slot = Stat.VIOL_SRAM
    elif st == Status.DRAM:
        slot = Stat.VIOL_DRAM
    elif st == Status.CORES:
        slot = Stat.VIOL_CORES
    elif st == Status.CONFIG:
        slot = Stat.VIOL_CONFIG
    if slot >= 0 and v < stats[slot]:
        stats[slot] = v
    if out[SetSlot.HIDDEN] > 0.0:
        stats[Stat.HIDDEN] = 1.0


@jit
def order_dp(kt, et, cn, order, allowed_at, dram_bw, live_cap, relax, assign, stats, control):
    """Exact minimum over contiguous blocks of ``order`` (a topological order): block c is
    order[i:j]. ``allowed_at[k, c]`` = 1 when kernel k may sit in configuration c. Returns inf
    with ``stats[Stat.STOPPED]`` = 1 when ``control`` stops it (see ``must_stop``)."""
    n = kt.a.shape[0]
    nc = allowed_at.shape[1]
    cost = np.full((nc + 1, n + 1), np.inf)
    parent = np.zeros((nc + 1, n + 1), np.int64)
    cost[0, 0] = 0.0
    where = np.zeros(n, np.int8)
    members = np.zeros(n, np.int64)
    k_pl = np.ones(n, np.int64)
    k_ps = np.ones(n, np.int64)
    zero = np.zeros(n, np.int64)
    out = np.zeros(NUM_SET, np.float64)
    for c in range(nc):
        for i in range(n + 1):
            if cost[c, i] == np.inf:
                continue
            if (i & 15) == 0 and must_stop(stats, control):
                stats[Stat.STOPPED] = 1.0
                return np.inf
            for j in range(i, n + 1):
                if j > i and allowed_at[order[j - 1], c] == 0:
                    break
                if c == nc - 1 and j != n:
                    continue
                for p in range(n):
                    k = order[p]
                    where[k] = 2 if p < i else (1 if p < j else 0)
                set_cost(kt, et, cn, where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero,
                         out)  # fmt: skip
                stats[Stat.EVALS] += 1
                ii = out[SetSlot.II]
                if ii == np.inf:
                    _record(stats, out)
                    continue
                if cost[c, i] + ii < cost[c + 1, j]:
                    cost[c + 1, j] = cost[c, i] + ii
                    parent[c + 1, j] = i
    best = cost[nc, n]
    if best == np.inf:
        return best
    j = n
    for c in range(nc, 0, -1):
        i = parent[c, j]
        for p in range(i, j):
            assign[order[p]] = c - 1
        j = i
    return best


# ---- best-first search over chains of ideals -----------------------------------------------
#: queue entries (candidate configurations) allowed per state of the budget
QUEUE_PER_STATE = 16
#: queued candidates after which ``ideal_search`` computes an incumbent to cut the queue
INCUMBENT_AFTER = 20_000
#: odd 64-bit multipliers (as int64) of the state index's hash of (level, ideal, L)
_MIX_MASK = -7046029254386353131
_MIX_LONE = -4658895280553007687
_MIX_LEVEL = 7640891576956012809


class QueueCol(enum.IntEnum):
    """Columns of the queue's integer array ``hi`` (``hq[i]`` holds the quantised f)."""

    PLACED = 0  #: kernels placed
    SEQ = 1  #: sequence number (newer entries first at equal f and PLACED)
    STATE = 2  #: the state the entry belongs to
    IDEAL = 3  #: candidate ideal, or -1 to expand the state


@jit(internal=True)
def _before(hq, hi, i, j):
    """Heap order: quantised f, then more kernels placed, then the newer entry."""
    if hq[i] != hq[j]:
        return hq[i] < hq[j]
    if hi[i, QueueCol.PLACED] != hi[j, QueueCol.PLACED]:
        return hi[i, QueueCol.PLACED] > hi[j, QueueCol.PLACED]
    return hi[i, QueueCol.SEQ] > hi[j, QueueCol.SEQ]


@jit(internal=True)
def _swap(hq, hi, i, j):
    t = hq[i]
    hq[i] = hq[j]
    hq[j] = t
    for col in range(4):
        u = hi[i, col]
        hi[i, col] = hi[j, col]
        hi[j, col] = u


@jit(internal=True)
def _queue_push(hq, hi, size, limit, q, placed, seq, sid, jm):
    """Insert an entry at index ``size``, growing the arrays up to ``limit`` entries.
    Returns (hq, hi, False) when the queue is full (the entry is dropped)."""
    if size == limit:
        return hq, hi, False
    if size == hq.shape[0]:
        cap = min(2 * size, limit)
        hq = _grow(hq, cap)
        wider = np.zeros((cap, 4), np.int64)
        for i in range(size):
            for col in range(4):
                wider[i, col] = hi[i, col]
        hi = wider
    hq[size] = q
    hi[size, QueueCol.PLACED] = placed
    hi[size, QueueCol.SEQ] = seq
    hi[size, QueueCol.STATE] = sid
    hi[size, QueueCol.IDEAL] = jm
    i = size
    while i > 0:
        up = (i - 1) // 2
        if not _before(hq, hi, i, up):
            break
        _swap(hq, hi, i, up)
        i = up
    return hq, hi, True


@jit(internal=True)
def _queue_pop(hq, hi, size):
    """Move the top to the end (index size - 1) and restore the heap on the rest."""
    last = size - 1
    _swap(hq, hi, 0, last)
    i = 0
    while True:
        left = 2 * i + 1
        if left >= last:
            break
        m = left
        if left + 1 < last and _before(hq, hi, left + 1, left):
            m = left + 1
        if not _before(hq, hi, m, i):
            break
        _swap(hq, hi, i, m)
        i = m
    return last


@jit(internal=True)
def _popcount(x):
    c = 0
    while x != 0:
        x &= x - 1
        c += 1
    return c


class _Search(NamedTuple):
    """What one ``ideal_search`` call reads and never writes."""

    kt: KernelTable
    et: EdgeTable
    cn: Constants
    preds: np.ndarray  #: int64 (n), bitmask of each kernel's predecessors
    succs: np.ndarray  #: int64 (n), bitmask of each kernel's successors
    topo: np.ndarray  #: int64 (n), a topological order
    allowed: np.ndarray  #: int64 (C), bitmask of the kernels configuration c may hold
    must: np.ndarray  #: int64 (C), bitmask of the kernels placed by the end of configuration c
    allowed_at: np.ndarray  #: int64 (n, C), 1 when kernel k may sit in configuration c
    dram_bw: float  #: GB/s of the DRAM regime
    live_cap: float  #: cap on T_c x live activation bytes of the regime
    terms: np.ndarray  #: per-kernel bound terms (``bound_terms``)
    edge_tm: np.ndarray  #: per-edge memory time of the bound (``bound_terms``)
    root: float  #: bound of the whole assignment (``set_bound`` of every kernel)
    quantum: float  #: priorities are quantised to this (1e-13 of ``root``)
    full: int  #: bitmask of every kernel
    sram_cap: float  #: SRAM bytes above which a candidate is pruned (inf: no pruning)
    inc_ptr: np.ndarray  #: CSR offsets of each kernel's edges (``sram_floor``)
    inc_e: np.ndarray  #: the edges of each kernel (``sram_floor``)
    kern_sram: np.ndarray  #: per-kernel SRAM floor terms (``sram_floor``)
    edge_sram: np.ndarray  #: per-edge SRAM floor terms (``sram_floor``)


class _Work(NamedTuple):
    """Work arrays of one ``ideal_search`` call."""

    where: np.ndarray  #: int8 (n), ``set_cost``'s placement of every kernel
    members: np.ndarray  #: int64 (n), ``set_cost``'s members
    k_pl: np.ndarray  #: int64 (n), ``set_cost``'s core allocation (lanes)
    k_ps: np.ndarray  #: int64 (n), ``set_cost``'s core allocation (stages)
    zero: np.ndarray  #: int64 (n), zeros: no fixed core pairs
    out: np.ndarray  #: float64 (NUM_SET), ``set_cost``'s output
    pos: np.ndarray  #: int64 (n + 2), DFS stack of ``_next_ideal``: position in ``topo``
    mask: np.ndarray  #: int64 (n + 2), DFS stack: the ideal so far
    sram: np.ndarray  #: float64 (n + 2), DFS stack: its SRAM floor
    cnt: np.ndarray  #: int64 (n + 2), DFS stack: kernels added to the configuration


class _States(NamedTuple):
    """The states (level c, ideal I, lone kernels L) of ``ideal_search``, one entry each;
    the arrays grow (``_grow_states``)."""

    mask: np.ndarray  #: int64, the ideal I held by configurations 0..c-1
    lone: np.ndarray  #: int64, L: lone weight kernels of I still read outside I
    level: np.ndarray  #: int64, c
    g: np.ndarray  #: float64, summed II of the best path found to the state
    parent: np.ndarray  #: int64, the state that path comes from (-1: the root)
    closed: np.ndarray  #: int8, 1 once expanded


# long: the A* loop stays whole. With the queueing of an expansion's candidates and the
# state update split into functions, it ran 1.3-1.5x slower on the README problem (0.16 ->
# 0.25 ms per search): a call counts every array of its arguments up and down (atomic
# operations; a record counts each of its arrays), and so does reading a record's array in
# this loop, hence the unpacked locals. Its steps without allocation are split out.
@jit
def ideal_search(
    kt, et, cn, preds, succs, topo, allowed, must, allowed_at, dram_bw, live_cap, max_states,
    prune, assign, stats, control,
):  # fmt: skip
    """Exact minimum of the sum of configuration IIs over every assignment (A* over chains of
    order ideals: the module docstring).

    ``preds[k]`` / ``succs[k]``: bitmasks of k's predecessors / successors; ``topo``: a
    topological order; ``allowed[c]`` / ``must[c]``: the kernels configuration c may hold /
    that must be placed by its end; ``prune`` = 1: SRAM pruning of candidates
    (``_next_ideal``). Writes the best assignment into ``assign`` and returns its value (inf
    if none is feasible). On wide graphs (``INCUMBENT_AFTER`` candidates queued, or half the
    queue budget) the contiguous-order DP over ``topo`` gives a known assignment once
    (``_incumbent``; ``allowed_at[k, c]`` = 1: kernel k may sit in configuration c): it is
    returned when it meets the root bound (then optimal), else candidates whose f exceeds
    its value are no longer queued. ``stats[Stat.OVERFLOW]`` = 1 when more than
    ``max_states`` states or ``QUEUE_PER_STATE * max_states`` queued candidates were needed
    (the result is then not proven optimal). ``control`` stops it early (``must_stop``,
    checked every ``CHECK_EVERY`` queue pops): then ``stats[Stat.STOPPED]`` =
    ``stats[Stat.OVERFLOW]`` = 1 and it returns inf."""
    x = _search_inputs(kt, et, cn, preds, succs, topo, allowed, must, allowed_at, dram_bw,
                       live_cap, prune)  # fmt: skip
    w = _work(kt.a.shape[0])
    terms, edge_tm, full, quantum, e_src, e_dst = x.terms, x.edge_tm, x.full, x.quantum, et.src, et.dst
    states, index = _new_states(256)
    s_mask, s_lone, s_lvl, s_g, s_par, s_closed = states
    nstates = 1
    qmax = QUEUE_PER_STATE * max_states
    incumbent_after = min(INCUMBENT_AFTER, qmax // 2)
    cut = np.inf  # candidates with a larger f cannot improve on a known assignment
    have_upper = False
    hq, hi, _ = _queue_push(np.zeros(1024, np.float64), np.zeros((1024, 4), np.int64), 0, qmax,
                            np.floor(x.root / quantum), 0, 0, 0, -1)  # fmt: skip
    size = 1
    seq = 0  # entries queued after the root
    goal = -1
    ticks = 0
    while size > 0:
        ticks += 1
        if ticks % CHECK_EVERY == 0 and must_stop(stats, control):
            stats[Stat.STOPPED] = 1.0
            stats[Stat.OVERFLOW] = 1.0
            break
        top = _queue_pop(hq, hi, size)
        size -= 1
        sid = hi[top, QueueCol.STATE]
        jm = hi[top, QueueCol.IDEAL]
        if jm >= 0:  # a candidate: cost it, reach (add or improve) its state and queue that
            ii, keep = _cost_candidate(x, w, s_mask[sid], s_lone[sid], jm, stats)
            if ii == np.inf:
                continue
            lvl = s_lvl[sid] + 1
            total = s_g[sid] + ii
            slot = _find_state(index, s_lvl, s_mask, s_lone, lvl, jm, keep)
            if index[slot] >= 0:
                j = index[slot]
                if not total < s_g[j]:
                    continue
            else:
                if nstates == max_states:
                    stats[Stat.OVERFLOW] = 1.0
                    continue
                j = nstates
                if j == s_mask.shape[0]:
                    states = _grow_states(states, min(2 * j, max_states))
                    s_mask, s_lone, s_lvl, s_g, s_par, s_closed = states
                    index = _state_index(states, nstates)
                    slot = _find_state(index, s_lvl, s_mask, s_lone, lvl, jm, keep)
                index[slot] = j
                s_mask[j], s_lone[j], s_lvl[j] = jm, keep, lvl
                nstates += 1
            s_g[j], s_par[j], s_closed[j] = total, sid, 0
            f = total + set_bound(full & ~jm, terms, edge_tm, cn.overlap, e_src, e_dst)
            if f > cut:
                continue
            hq, hi, ok = _queue_push(hq, hi, size, qmax, np.floor(f / quantum), _popcount(jm),
                                     seq + 1, j, -1)  # fmt: skip
            if not ok:
                stats[Stat.OVERFLOW] = 1.0
                continue
            size += 1
            seq += 1
            continue
        if s_closed[sid] == 1:  # a state: expand it (once)
            continue
        s_closed[sid] = 1
        if s_lvl[sid] == allowed.shape[0]:
            goal = sid
            break
        # queue its candidates lazily, with f = g + bound(candidate) + bound(the rest)
        base_mask, base_lone, g, c = s_mask[sid], s_lone[sid], s_g[sid], s_lvl[sid]
        sp = _walk_from(w, base_mask)
        while True:
            sp, jm = _next_ideal(x, w, sp, base_mask, base_lone, c)
            if jm < 0:
                break
            f = g + set_bound(jm & ~base_mask, terms, edge_tm, cn.overlap, e_src, e_dst)
            f += set_bound(full & ~jm, terms, edge_tm, cn.overlap, e_src, e_dst)
            if seq >= incumbent_after and not have_upper:
                have_upper = True
                upper, known = _incumbent(x, stats, control)
                if upper <= x.root * (1.0 + 1e-13):  # it meets the lower bound: optimal
                    for k in range(assign.shape[0]):
                        assign[k] = known[k]
                    stats[Stat.STATES] += nstates
                    stats[Stat.QUEUE] += seq
                    return upper
                cut = upper * (1.0 + 1e-9) + quantum
            if f > cut:
                continue
            hq, hi, ok = _queue_push(hq, hi, size, qmax, np.floor(f / quantum), _popcount(jm),
                                     seq + 1, sid, jm)  # fmt: skip
            if not ok:
                stats[Stat.OVERFLOW] = 1.0
                continue
            size += 1
            seq += 1
    stats[Stat.STATES] += nstates
    stats[Stat.QUEUE] += seq
    if goal < 0:
        return np.inf
    _trace_back(states, goal, assign)
    return s_g[goal]


@jit(internal=True)
def _search_inputs(kt, et, cn, preds, succs, topo, allowed, must, allowed_at, dram_bw, live_cap,
                   prune):  # fmt: skip
    """The ``_Search`` record of one call: the bound terms, the root bound and the priority
    quantum, and the SRAM floor terms with the capacity they prune at (``prune`` = 1)."""
    full = (np.int64(1) << kt.a.shape[0]) - 1
    terms, edge_tm = bound_terms(kt, et, cn, dram_bw)
    root = set_bound(full, terms, edge_tm, cn.overlap, et.src, et.dst)
    quantum = root * 1e-13
    if not quantum > 0.0:
        quantum = 1e-300
    cap = cn.sram_cap * (1.0 + 1e-12) if prune == 1 and cn.sram_check else np.inf
    inc_ptr, inc_e, kern_sram, edge_sram = sram_floor(kt, et)
    return _Search(kt, et, cn, preds, succs, topo, allowed, must, allowed_at, dram_bw, live_cap,
                   terms, edge_tm, root, quantum, full, cap, inc_ptr, inc_e, kern_sram,
                   edge_sram)  # fmt: skip


@jit(internal=True)
def _work(n):
    """Fresh ``_Work`` arrays for n kernels."""
    return _Work(np.zeros(n, np.int8), np.zeros(n, np.int64), np.ones(n, np.int64),
                 np.ones(n, np.int64), np.zeros(n, np.int64), np.zeros(NUM_SET, np.float64),
                 np.zeros(n + 2, np.int64), np.zeros(n + 2, np.int64), np.zeros(n + 2, np.float64),
                 np.zeros(n + 2, np.int64))  # fmt: skip


@jit(internal=True)
def _new_states(cap):
    """``_States`` with room for ``cap`` states, holding the root (level 0, empty ideal) as
    state 0, and its index (``_state_index``)."""
    states = _States(np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.int64),
                     np.zeros(cap, np.float64), np.full(cap, -1, np.int64), np.zeros(cap, np.int8))  # fmt: skip
    return states, _state_index(states, 1)


# The index (level, ideal, L) -> state is an open-addressing hash table of state numbers
# (-1: empty slot) with at least twice as many slots as ``states`` has room for, rebuilt when
# the states grow. A typed Dict keyed on tuples did the same, but compiling its hashing and
# dictionary code added seconds to the first run.
@jit(internal=True)
def _state_index(states, n):
    """The index of the first ``n`` states of ``states``."""
    size = 1
    while size < 2 * states.mask.shape[0]:
        size *= 2
    index = np.full(size, -1, np.int64)
    for j in range(n):
        slot = _find_state(index, states.level, states.mask, states.lone, states.level[j],
                           states.mask[j], states.lone[j])  # fmt: skip
        index[slot] = j
    return index


@jit(step=True)
def _find_state(index, s_lvl, s_mask, s_lone, lvl, mask, lone):
    """The slot of ``index`` holding the state (lvl, mask, lone), else the empty slot where it
    belongs (linear probing)."""
    top = index.shape[0] - 1
    h = mask * _MIX_MASK + lone * _MIX_LONE + lvl * _MIX_LEVEL
    slot = (h ^ (h >> 32)) & top
    while True:
        j = index[slot]
        if j < 0 or (s_mask[j] == mask and s_lone[j] == lone and s_lvl[j] == lvl):
            return slot
        slot = (slot + 1) & top


@jit(internal=True)
def _grow_states(states, cap):
    """``states`` with room for ``cap`` states."""
    return _States(_grow(states.mask, cap), _grow(states.lone, cap), _grow(states.level, cap),
                   _grow(states.g, cap), _grow(states.parent, cap), _grow(states.closed, cap))  # fmt: skip


@jit(step=True)
def _walk_from(w, base_mask):
    """Start the walk of ``_next_ideal`` at the ideal ``base_mask``: one branch on the
    stack, at the first position of ``topo``. Returns the stack top."""
    w.pos[0] = 0
    w.mask[0] = base_mask
    w.sram[0] = 0.0
    w.cnt[0] = 0
    return 0


@jit(step=True)
def _next_ideal(x, w, sp, base_mask, base_lone, c):
    """The next candidate of the expansion of a state at level c with ideal ``base_mask``.

    A depth-first walk along ``topo`` adds each kernel it may (allowed in c, predecessors
    placed) and, unless c must hold it, also leaves it out (a branch pushed on the stack
    ``w.pos`` / ``w.mask`` / ``w.sram`` / ``w.cnt``, ``sp`` its top). A branch dies when a
    kernel c must place cannot be, or when the SRAM floor of c (``_sram_with``; it never
    drops as kernels join) exceeds ``x.sram_cap``, unless c holds one weight kernel alone
    (whose weights tiling may divide); pruned candidates are missing from the smallest
    violations in ``stats``. The last configuration takes every kernel left.
    Returns (sp, J): J the candidate ideal, -1 when the walk is done."""
    n = x.topo.shape[0]
    alw = x.allowed[c]
    mst = x.must[c]
    last = c == x.allowed.shape[0] - 1
    while sp >= 0:
        pos = w.pos[sp]
        jm = w.mask[sp]
        sram = w.sram[sp]
        cnt = w.cnt[sp]
        sp -= 1
        dead = False
        while pos < n:
            v = x.topo[pos]
            bit = np.int64(1) << v
            if jm & bit:
                pos += 1
                continue
            if (alw & bit) == 0 or (x.preds[v] & ~jm) != 0:
                if mst & bit:
                    dead = True
                    break
                pos += 1
                continue
            if not (mst & bit):  # branch: leave v out
                sp += 1
                w.pos[sp] = pos + 1
                w.mask[sp] = jm
                w.sram[sp] = sram
                w.cnt[sp] = cnt
            sram = _sram_with(x, v, jm, base_mask, base_lone, sram)
            cnt += 1
            jm |= bit
            pos += 1
            if sram > x.sram_cap and (cnt > 1 or x.kt.is_weight[v] == 0):
                dead = True
                break
        if dead or (last and jm != x.full):
            continue
        return sp, jm
    return sp, np.int64(-1)


@jit(inline=True)
def _sram_with(x, v, jm, base_mask, base_lone, sram):
    """``sram`` plus the SRAM floor terms (``sram_floor``) that kernel v adds to a
    configuration holding ``jm`` minus ``base_mask``: its own, and those of its edges except
    edges to kernels already in it (counted when they joined) and buffers read from a
    weight-tiled producer (in ``base_lone``)."""
    e_src, e_dst = x.et.src, x.et.dst
    sram += x.kern_sram[v]
    for i in range(x.inc_ptr[v], x.inc_ptr[v + 1]):
        e = x.inc_e[i]
        u = e_src[e] if e_dst[e] == v else e_dst[e]
        ub = np.int64(1) << u
        if (jm & ub) and not (base_mask & ub):
            continue  # counted when u joined
        if u == e_src[e] and (base_lone & ub):
            continue  # read from a weight-tiled buffer
        sram += x.edge_sram[e]
    return sram


@jit(internal=True)
def _incumbent(x, stats, control):
    """A known assignment: the best over contiguous blocks of the topological order (always
    feasible, relax 0). Returns (its value, the assignment); its evaluations and a stop are
    added to ``stats``."""
    st = np.zeros(NUM_STATS, np.float64)
    st[Stat.VIOL_SRAM :] = np.inf
    known = np.full(x.topo.shape[0], -1, np.int64)
    upper = order_dp(x.kt, x.et, x.cn, x.topo, x.allowed_at, x.dram_bw, x.live_cap, 0, known, st,
                     control)  # fmt: skip
    stats[Stat.EVALS] += st[Stat.EVALS]
    if st[Stat.STOPPED] > 0.0:
        stats[Stat.STOPPED] = 1.0
    return upper, known


@jit(step=True)
def _cost_candidate(x, w, base_mask, base_lone, jm, stats):
    """II of the configuration holding ``jm`` minus ``base_mask`` after configurations that
    hold ``base_mask`` (``set_cost``, lone weight kernels ``base_lone`` marked exactly: relax
    2); inf when it breaks a rule or a capacity (the violation recorded in ``stats``). Also
    returns the next state's L: the lone weight kernels of ``jm`` still read outside it."""
    cnt = 0
    one = -1
    for k in range(x.kt.a.shape[0]):
        bit = np.int64(1) << k
        if base_lone & bit:
            w.where[k] = 3
        elif base_mask & bit:
            w.where[k] = 2
        elif jm & bit:
            w.where[k] = 1
            cnt += 1
            one = k
        else:
            w.where[k] = 0
    set_cost(x.kt, x.et, x.cn, w.where, x.dram_bw, x.live_cap, 2, w.members, w.k_pl, w.k_ps,
             w.zero, w.out)  # fmt: skip
    stats[Stat.EVALS] += 1
    ii = w.out[SetSlot.II]
    if ii == np.inf:
        _record(stats, w.out)
        return ii, np.int64(0)
    lone = base_lone
    if cnt == 1 and x.kt.is_weight[one] == 1:
        lone |= np.int64(1) << one
    keep = np.int64(0)
    rest = lone
    while rest != 0:
        low = rest & -rest
        k = 0
        while (np.int64(1) << k) != low:
            k += 1
        if x.succs[k] & ~jm:
            keep |= low
        rest &= rest - 1
    return ii, keep


@jit(step=True)
def _trace_back(states, goal, assign):
    """Write the assignment of the best path to state ``goal`` into ``assign``: the kernels a
    state adds to its parent's ideal sit in its last configuration."""
    j = goal
    while states.parent[j] >= 0:
        p = states.parent[j]
        cur = states.mask[j]
        prev = states.mask[p]
        for k in range(assign.shape[0]):
            bit = np.int64(1) << k
            if (cur & bit) and not (prev & bit):
                assign[k] = states.level[j] - 1
        j = p


@jit(internal=True)
def _grow(a, cap):
    """A copy of 1-D ``a`` with room for ``cap`` entries."""
    out = np.zeros(cap, a.dtype)
    for i in range(a.shape[0]):
        out[i] = a[i]
    return out


@jit(internal=True)
def sram_floor(kt, et):
    """A floor of a configuration's SRAM that only grows as kernels join it.

    A configuration of two or more kernels (or one that is not a weight kernel, whose
    weights are never tiled) holds each kernel's weights and extra bytes, and for every edge
    with an end in it either the buffer (bytes x depth, both ends inside) or the two-buffer
    footprint (one end inside), except buffers produced by an earlier weight-tiled kernel:
    at least bytes x min(depth, 2) per edge. Returns the edges of each kernel (CSR:
    ``inc_e[inc_ptr[k]:inc_ptr[k + 1]]``) and the per-kernel and per-edge terms."""
    n = kt.a.shape[0]
    e_src, e_dst = et.src, et.dst
    ne = e_src.shape[0]
    inc_ptr = np.zeros(n + 1, np.int64)
    for e in range(ne):
        inc_ptr[e_src[e] + 1] += 1
        inc_ptr[e_dst[e] + 1] += 1
    for k in range(n):
        inc_ptr[k + 1] += inc_ptr[k]
    fill = inc_ptr[:-1].copy()
    inc_e = np.zeros(2 * ne, np.int64)
    edge = np.zeros(ne, np.float64)
    for e in range(ne):
        inc_e[fill[e_src[e]]] = e
        fill[e_src[e]] += 1
        inc_e[fill[e_dst[e]]] = e
        fill[e_dst[e]] += 1
        edge[e] = et.sram_bytes[e] * min(et.sram_depth[e], 2.0)
    kern = np.zeros(n, np.float64)
    for k in range(n):
        kern[k] = kt.weight_sram[k] + kt.sram_extra[k]
    return inc_ptr, inc_e, kern, edge


# ---- set-up of the searches (jitted: it is most of the time on small graphs) ---------------
@jit
def allowed_configs(kt, cn):
    """allowed[k, c] = 1 when kernel k may sit in configuration c (pins, FWD/BWD rule)."""
    n = kt.pin.shape[0]
    nc = cn.num_config
    out = np.ones((n, nc), np.int64)
    for k in range(n):
        pin = kt.pin[k]
        if pin >= 0:
            out[k, :] = 0
            if pin < nc:
                out[k, pin] = 1
        if cn.fb_rule:
            if kt.phase[k] == Phase.FWD:
                out[k, cn.fb_last_fwd + 1 :] = 0
            elif kt.phase[k] == Phase.BWD:
                out[k, : cn.fb_first_bwd] = 0
    return out


@jit
def topological_order(kt, et):
    """The topological order that takes, among the ready kernels, forward before backward
    and then the lowest index (file order where the edges allow it)."""
    n = kt.phase.shape[0]
    e_src, e_dst, k_phase = et.src, et.dst, kt.phase
    indeg = np.zeros(n, np.int64)
    for e in range(e_src.shape[0]):
        indeg[e_dst[e]] += 1
    done = np.zeros(n, np.bool_)
    order = np.empty(n, np.int64)
    for i in range(n):
        pick = -1
        for k in range(n):
            if (
                not done[k]
                and indeg[k] == 0
                and (pick < 0 or (k_phase[k] != Phase.BWD and k_phase[pick] == Phase.BWD))
            ):
                pick = k
        if pick < 0:  # a cycle: validation rejects those; keep the order total anyway
            return order[:i]
        done[pick] = True
        order[i] = pick
        for e in range(e_src.shape[0]):
            if e_src[e] == pick:
                indeg[e_dst[e]] -= 1
    return order


@jit
def ideal_masks(et, allowed):
    """Bitmasks for ``ideal_search``: predecessors and successors of each kernel, the
    kernels each configuration may hold (``allowed``: ``allowed_configs``), and those that
    must be placed by its end."""
    n, nc = allowed.shape
    e_src, e_dst = et.src, et.dst
    preds = np.zeros(n, np.int64)
    succs = np.zeros(n, np.int64)
    for e in range(e_src.shape[0]):
        preds[e_dst[e]] |= np.int64(1) << e_src[e]
        succs[e_src[e]] |= np.int64(1) << e_dst[e]
    am = np.zeros(nc, np.int64)
    must = np.zeros(nc, np.int64)
    for k in range(n):
        bit = np.int64(1) << k
        latest = -1
        for c in range(nc):
            if allowed[k, c]:
                am[c] |= bit
                latest = c
        for c in range(max(latest, 0), nc):
            must[c] |= bit
    return preds, succs, am, must
