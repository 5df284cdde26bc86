"""Jitted dynamic programs over configuration assignments (DESIGN.md §4 item 3).

An assignment with Config(src) <= Config(dst) on every edge is a chain of order ideals
0 = I_0 <= I_1 <= ... <= I_C = all kernels, configuration c holding I_{c+1} minus I_c, and the
objective is a sum over configurations of a function of (I_c, I_{c+1}) and of which earlier
weight kernels sat alone in their configuration (weight tiling; ``set_cost``). So the
optimum over *all* assignments is a shortest path over chains of ideals: ``ideal_dp``, with
ideals as int64 bitmasks (graphs of at most 62 kernels) and a state budget. ``order_dp`` is the
same recursion restricted to the prefixes of one topological order (contiguous blocks), for
graphs whose ideals are too many; it is exact over contiguous splits of that order.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.typed import Dict

from dfsearch.cost._jit import jit
from dfsearch.cost.evaluate import NUM_SET, SET_HIDDEN, SET_II, SET_STATUS, SET_VIOLATION, set_cost

__all__ = ["ideal_dp", "order_dp", "NUM_STATS"]

# stats array slots
ST_EVALS, ST_OVERFLOW, ST_HIDDEN, ST_VIOL_SRAM, ST_VIOL_DRAM, ST_VIOL_CORES, ST_VIOL_CONFIG = range(7)
NUM_STATS = 7
_SRAM, _DRAM, _CORES, _CONFIG = 1, 2, 3, 7
_STATE_KEY = types.UniTuple(types.int64, 2)  # (ideal, lone weight kernels still read)


@jit
def _record(stats, out):
    st = int(out[SET_STATUS])
    v = out[SET_VIOLATION]
    slot = -1
    if st == _SRAM:
        slot = ST_VIOL_SRAM
    elif st == _DRAM:
        slot = ST_VIOL_DRAM
    elif st == _CORES:
        slot = ST_VIOL_CORES
    elif st == _CONFIG:
        slot = ST_VIOL_CONFIG
    if slot >= 0 and v < stats[slot]:
        stats[slot] = v
    if out[SET_HIDDEN] > 0.0:
        stats[ST_HIDDEN] = 1.0


@jit
def _grow_int(a, cap):
    out = np.zeros((a.shape[0], cap), np.int64)
    out[:, : a.shape[1]] = a
    return out


@jit
def _grow_float(a, cap):
    out = np.full((a.shape[0], cap), np.inf)
    out[:, : a.shape[1]] = a
    return out


@jit
def ideal_dp(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
    preds, succs, topo, allowed, must, dram_bw, live_cap, max_states, assign, stats,
):  # fmt: skip
    """Exact minimum of the sum of configuration IIs over every assignment.

    A state is (ideal I, L): L = the weight kernels of I that sit alone in their
    configuration (so their weight and output buffers are tiled, MODEL.md §3.5) and still
    have consumers outside I. ``preds[k]``/``succs[k]``: bitmasks of k's predecessors /
    successors; ``topo``: a topological order; ``allowed[c]``/``must[c]``: kernels
    configuration c may hold / that must be placed by the end of configuration c. Writes the
    best assignment into ``assign`` and returns its value (inf if none is feasible).
    ``stats[ST_OVERFLOW]`` = 1 when a level exceeded ``max_states`` (then not exhaustive).
    """
    n = k_a.shape[0]
    nc = allowed.shape[0]
    full = (np.int64(1) << n) - 1
    cap = min(max_states, 256)  # states per level; grows geometrically up to max_states
    masks = np.zeros((nc + 1, cap), np.int64)
    lones = np.zeros((nc + 1, cap), np.int64)
    costs = np.full((nc + 1, cap), np.inf)
    parent = np.zeros((nc + 1, cap), np.int64)
    count = np.zeros(nc + 1, np.int64)
    count[0] = 1
    costs[0, 0] = 0.0
    where = np.zeros(n, np.int8)
    members = np.zeros(n, np.int64)
    k_pl = np.ones(n, np.int64)
    k_ps = np.ones(n, np.int64)
    zero = np.zeros(n, np.int64)
    out = np.zeros(NUM_SET)
    st_pos = np.zeros(n + 2, np.int64)
    st_mask = np.zeros(n + 2, np.int64)
    for c in range(nc):
        index = Dict.empty(key_type=_STATE_KEY, value_type=types.int64)
        alw = allowed[c]
        mst = must[c]
        last = c == nc - 1
        for idx in range(count[c]):
            base_mask = masks[c, idx]
            base_lone = lones[c, idx]
            base = costs[c, idx]
            if base == np.inf:
                continue
            sp = 0
            st_pos[0] = 0
            st_mask[0] = base_mask
            while sp >= 0:
                pos = st_pos[sp]
                jm = st_mask[sp]
                sp -= 1
                dead = False
                while pos < n:
                    v = topo[pos]
                    bit = np.int64(1) << v
                    if jm & bit:
                        pos += 1
                        continue
                    if (alw & bit) == 0 or (preds[v] & ~jm) != 0:
                        if mst & bit:
                            dead = True
                            break
                        pos += 1
                        continue
                    if not (mst & bit):  # branch: leave v out
                        sp += 1
                        st_pos[sp] = pos + 1
                        st_mask[sp] = jm
                    jm |= bit
                    pos += 1
                if dead or (last and jm != full):
                    continue
                # evaluate configuration c = jm minus base_mask
                cnt = 0
                one = -1
                for k in range(n):
                    bit = np.int64(1) << k
                    if base_lone & bit:
                        where[k] = 3
                    elif base_mask & bit:
                        where[k] = 2
                    elif jm & bit:
                        where[k] = 1
                        cnt += 1
                        one = k
                    else:
                        where[k] = 0
                set_cost(
                    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan,
                    k_ar, k_phase, k_pin, k_num_input, k_sram_extra,
                    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
                    where, dram_bw, live_cap, 2, members, k_pl, k_ps, zero, out,
                )  # fmt: skip
                stats[ST_EVALS] += 1
                ii = out[SET_II]
                if ii == np.inf:
                    _record(stats, out)
                    continue
                lone = base_lone
                if cnt == 1 and k_isw[one] == 1:
                    lone |= np.int64(1) << one
                # keep only lone kernels whose buffers are still read later
                keep = np.int64(0)
                rest = lone
                while rest != 0:
                    low = rest & -rest
                    k = 0
                    while (np.int64(1) << k) != low:
                        k += 1
                    if succs[k] & ~jm:
                        keep |= low
                    rest &= rest - 1
                key = (jm, keep)
                total = base + ii
                if key in index:
                    j = index[key]
                    if total < costs[c + 1, j]:
                        costs[c + 1, j] = total
                        parent[c + 1, j] = idx
                elif count[c + 1] < max_states:
                    j = count[c + 1]
                    if j == cap:
                        cap = min(2 * cap, max_states)
                        masks = _grow_int(masks, cap)
                        lones = _grow_int(lones, cap)
                        parent = _grow_int(parent, cap)
                        costs = _grow_float(costs, cap)
                    index[key] = j
                    masks[c + 1, j] = jm
                    lones[c + 1, j] = keep
                    costs[c + 1, j] = total
                    parent[c + 1, j] = idx
                    count[c + 1] += 1
                else:
                    stats[ST_OVERFLOW] = 1.0
    best = np.inf
    bj = -1
    for j in range(count[nc]):
        if masks[nc, j] == full and costs[nc, j] < best:
            best = costs[nc, j]
            bj = j
    if bj < 0:
        return np.inf
    j = bj
    for c in range(nc, 0, -1):
        p = parent[c, j]
        cur = masks[c, j]
        prev = masks[c - 1, p]
        for k in range(n):
            bit = np.int64(1) << k
            if (cur & bit) and not (prev & bit):
                assign[k] = c - 1
        j = p
    return best


@jit
def order_dp(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
    order, allowed_at, dram_bw, live_cap, relax, assign, stats,
):  # fmt: skip
    """Exact minimum over contiguous blocks of ``order`` (a topological order): block c is
    order[i:j]. ``allowed_at[k, c]`` = 1 when kernel k may sit in configuration c."""
    n = k_a.shape[0]
    nc = allowed_at.shape[1]
    cost = np.full((nc + 1, n + 1), np.inf)
    parent = np.zeros((nc + 1, n + 1), np.int64)
    cost[0, 0] = 0.0
    where = np.zeros(n, np.int8)
    members = np.zeros(n, np.int64)
    k_pl = np.ones(n, np.int64)
    k_ps = np.ones(n, np.int64)
    zero = np.zeros(n, np.int64)
    out = np.zeros(NUM_SET)
    for c in range(nc):
        for i in range(n + 1):
            if cost[c, i] == np.inf:
                continue
            for j in range(i, n + 1):
                if j > i and allowed_at[order[j - 1], c] == 0:
                    break
                if c == nc - 1 and j != n:
                    continue
                for p in range(n):
                    k = order[p]
                    where[k] = 2 if p < i else (1 if p < j else 0)
                set_cost(
                    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan,
                    k_ar, k_phase, k_pin, k_num_input, k_sram_extra,
                    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
                    where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero, out,
                )  # fmt: skip
                stats[ST_EVALS] += 1
                ii = out[SET_II]
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
