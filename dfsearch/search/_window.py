"""Jitted split of one long kernel order into configurations (``search/layered.py``).

``window_dp`` is the recursion of ``_dp.order_dp`` without the configuration index: the
cheapest split of a topological order into contiguous blocks, each block one configuration
costed by ``set_cost``, the blocks numbered afterwards. Dropping the index makes it linear
in the order's length times the longest block, so it runs on graphs of thousands of
kernels; the number of blocks is kept within the configurations by a price per block (the
caller raises it until the split fits). A block grows until a monotone floor of its SRAM
(``_dp.sram_floor``) exceeds the chip's, it holds more kernels than the chip has cores, or it
reaches ``max_len`` kernels. Under the FWD/BWD rule no block mixes forward and backward
kernels.
"""

from __future__ import annotations

import numpy as np

from dfsearch.codes import Phase
from dfsearch.cost._jit import jit
from dfsearch.cost.evaluate import bound_terms, combine_overlap, set_cost
from dfsearch.cost.layout import NUM_SET, BoundCol, SetSlot, Stat
from dfsearch.search._dp import _record, must_stop, sram_floor

__all__ = ["window_dp"]


@jit
def window_dp(kt, et, cn, order, dram_bw, live_cap, relax, price, max_len, cache, block, stats,
              control):  # fmt: skip
    """Cheapest split of ``order`` into blocks; ``block[k]`` = block index of kernel k.

    Each block costs its II (``set_cost`` with ``relax``, as in ``_dp.order_dp``) plus
    ``price``; of two splits within 1e-12 of each other the one with fewer blocks wins.
    ``cache[i, j - i - 1]`` holds the II of the block ``order[i:j]`` once costed (NaN: not
    yet): a block's II does not depend on the price, so calls on the same order, bandwidth,
    cap and ``relax`` share it (shape (len(order), max_len); only new costings count as
    evaluations). Returns the summed II without the prices (inf when no split is feasible
    or ``control`` stopped it: then ``stats[Stat.STOPPED]`` = 1)."""
    n = order.shape[0]
    inc_ptr, inc_e, kern, edge = sram_floor(kt, et)
    terms, edge_tm = bound_terms(kt, et, cn, dram_bw)
    pos = np.empty(n, np.int64)
    for p in range(n):
        pos[order[p]] = p
    best = np.full(n + 1, np.inf)
    pure = np.full(n + 1, np.inf)
    parent = np.zeros(n + 1, np.int64)
    count = np.zeros(n + 1, np.int64)  # blocks on the best path (ties: fewer blocks)
    best[0] = 0.0
    pure[0] = 0.0
    where = np.zeros(n, np.int8)
    members = np.zeros(n, np.int64)
    k_pl = np.ones(n, np.int64)
    k_ps = np.ones(n, np.int64)
    zero = np.zeros(n, np.int64)
    out = np.zeros(NUM_SET, np.float64)
    for i in range(n):
        if best[i] == np.inf:
            continue
        if (i & 15) == 0 and must_stop(stats, control):
            stats[Stat.STOPPED] = 1.0
            return np.inf
        for p in range(n):
            where[order[p]] = 2 if p < i else 0
        floor = 0.0
        phase = -1
        # the block's additive bound terms (``evaluate.set_bound``), a column per channel
        lb = np.zeros(terms.shape[1], np.float64)
        for j in range(i + 1, min(n, i + max_len) + 1):
            k = order[j - 1]
            if cn.fb_rule and kt.phase[k] != Phase.NONE:
                if phase >= 0 and kt.phase[k] != phase:
                    break
                phase = kt.phase[k]
            where[k] = 1
            floor += kern[k]
            for q in range(inc_ptr[k], inc_ptr[k + 1]):
                if et.src[inc_e[q]] == k:
                    floor += edge[inc_e[q]]
            size = j - i
            if size > cn.cores or (size >= 2 and cn.sram_check and floor > cn.sram_cap):
                break
            if _skip(lb, terms, edge_tm, et, inc_ptr, inc_e, pos, k, i, cn.overlap,
                     best[i] + price, best[j]):
                continue
            ii = _block_ii(kt, et, cn, where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero,
                           out, cache, i, size, stats)  # fmt: skip
            if ii == np.inf:
                continue
            cand = best[i] + ii + price
            tie = abs(cand - best[j]) <= 1e-12 * cand and count[i] + 1 < count[j]
            if (cand < best[j] and not (abs(cand - best[j]) <= 1e-12 * cand)) or tie:
                best[j] = cand
                pure[j] = pure[i] + ii
                count[j] = count[i] + 1
                parent[j] = i
    if best[n] == np.inf:
        return np.inf
    j = n
    b = count[n]
    while j > 0:
        i = parent[j]
        b -= 1
        for p in range(i, j):
            block[order[p]] = b
        j = i
    return pure[n]


@jit(internal=True)
def _block_ii(kt, et, cn, where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero, out, cache,
              i, size, stats):  # fmt: skip
    """The II of the block of ``size`` kernels from position ``i`` (``where``): from ``cache``,
    else costed (one evaluation; an infeasible block's violation recorded) and cached."""
    ii = cache[i, size - 1]
    if np.isnan(ii):
        set_cost(kt, et, cn, where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero, out)
        stats[Stat.EVALS] += 1
        ii = out[SetSlot.II]
        cache[i, size - 1] = ii
        if ii == np.inf:
            _record(stats, out)
    return ii


@jit(internal=True)
def _skip(lb, terms, edge_tm, et, inc_ptr, inc_e, pos, k, i, overlap, base, best_j):
    """Add kernel k to the block's bound terms ``lb`` (edges with one end in the block count
    once, as in ``evaluate.set_bound``, a lower bound of its II) and say whether the block
    cannot improve ``best_j`` from ``base``: then it need not be costed."""
    lb[BoundCol.TC] += terms[k, BoundCol.TC]
    if terms[k, BoundCol.FLOOR] > lb[BoundCol.FLOOR]:
        lb[BoundCol.FLOOR] = terms[k, BoundCol.FLOOR]
    lb[BoundCol.TM] += terms[k, BoundCol.TM]
    lb[BoundCol.TN] += terms[k, BoundCol.TN]
    for c in range(BoundCol.CH0, terms.shape[1]):
        lb[c] += terms[k, c]
    for q in range(inc_ptr[k], inc_ptr[k + 1]):
        e = inc_e[q]
        if et.src[e] == k:
            lb[BoundCol.TM] += edge_tm[e]  # to a later kernel: crosses until it joins
        elif pos[et.src[e]] >= i:
            lb[BoundCol.TM] -= edge_tm[e]  # from inside the block: no longer crosses
        else:
            lb[BoundCol.TM] += edge_tm[e]  # from an earlier configuration
    if best_j == np.inf:
        return False
    tc = max(lb[BoundCol.TC], lb[BoundCol.FLOOR])
    ch = max(lb[BoundCol.CH0], lb[BoundCol.CH1], lb[BoundCol.CH2])
    for c in range(BoundCol.CH2 + 1, lb.shape[0]):  # a network of more than 3 dimensions
        ch = max(ch, lb[c])
    tn = lb[BoundCol.TN] + ch
    bound = combine_overlap(tc, lb[BoundCol.TM], tn, overlap)
    return base + bound > best_j * (1.0 + 1e-9)
