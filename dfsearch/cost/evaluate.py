"""The jitted evaluator: one configuration assignment -> per-configuration times and totals.

The single implementation of the model (docs/model.md) used by every search. It works on the
flat arrays of ``dfsearch.cost.lower.Problem`` (argument order: ``Problem.args()``), returns an
integer status (``codes.Status``) and writes its results into preallocated arrays; it never
raises and never allocates inside batch loops. ``dfsearch.cost.reference`` is its naive twin.

Outputs
-------
``cfg[c, :]``: CFG_COMPUTE, CFG_MEMORY, CFG_NETWORK, CFG_II (ns), CFG_SRAM (bytes),
CFG_TILES (T_c), CFG_CYCLES (slowest kernel, cycle model); ``res``: RES_FINAL (final_ns),
RES_BATCH (ns_per_batch), RES_ALL_II, RES_DRAM (DRAM bytes per chip), RES_DRAM_BW (GB/s in
effect), RES_VIOLATION (by how much the binding constraint is violated, in its unit);
``k_pl``/``k_ps``/``k_tf``: cores and weight tiling factor of every kernel.
"""

from __future__ import annotations

import math

import numpy as np

from dfsearch.cost._jit import jit
from dfsearch.cost.lower import (
    F_AR_LATENCY,
    F_BATCH_MULT,
    F_DRAM2_BW,
    F_DRAM2_CAP,
    F_DRAM_ACT_MULT,
    F_DRAM_BW,
    F_DRAM_CAP,
    F_DRAM_FIXED,
    F_FREQ,
    F_NUM_COPY,
    F_P2P,
    F_SRAM_CAP,
    I_C,
    I_CORES,
    I_CYCLE_MODEL,
    I_FB_B,
    I_FB_F,
    I_FB_RULE,
    I_FIXED_CONFIG,
    I_II_NUM_INPUT,
    I_NUM_INPUT_MIXED,
    I_OVERLAP,
    I_PER_CONFIG_TILES,
    I_SPARSE,
    I_SRAM_CHECK,
    I_T,
    I_TF_DIVIDES,
)

__all__ = ["evaluate_one", "evaluate_batch", "min_cycles", "NUM_CFG", "NUM_RES"]

CFG_COMPUTE, CFG_MEMORY, CFG_NETWORK, CFG_II, CFG_SRAM, CFG_TILES, CFG_CYCLES = range(7)
NUM_CFG = 7
RES_FINAL, RES_BATCH, RES_ALL_II, RES_DRAM, RES_DRAM_BW, RES_VIOLATION = range(6)
NUM_RES = 6

# Status codes (codes.Status; numba freezes module globals as constants)
OK, SRAM, DRAM, CORES, ORDER, CONFIG = 0, 1, 2, 3, 6, 7
_PERFECT, _COMPUTE_MEMORY = 1, 2
_FWD, _BWD = 1, 2
# Integer safety of the cycle model (int64, no overflow checks in numba): validation keeps
# every kernel's single-core cycle count k_a * k_b * k_z <= 2^60 (validate.MAX_KERNEL_WORK,
# also asserted by lower()), cores <= 2^24, and core pairs from a mapping <= cores. Then every
# cycle count, binary-search target and PL * PS below is <= 2^60 < _BIG, the "impossible"
# sentinel, and a sum of core counts stops at free + _BIG < 2^63.
_BIG = 1 << 62
#: weight tiling factors are computed in float and capped here before the int conversion
#: (float64 is exact up to 2^53; a factor that large leaves < 1 byte per tile anyway)
_EXACT = 2.0**53


@jit
def _cdiv(a, b):
    return -(-a // b)


@jit
def min_cycles(a, b, z, budget):
    """Fewest cycles of one kernel, ceil(a/PL) * ceil(b/PS) * z, with PL*PS <= budget.

    Returns (cycles, PL, PS). For a fixed m = ceil(a/PL) the smallest PL is best (it leaves
    the most for PS), so only the O(sqrt(a)) breakpoints of m are visited.
    """
    if a <= 0 or b <= 0 or z <= 0:
        return 0, 1, 1
    if b == 1:  # one stage (SIMD): every core on lanes
        pl = min(a, budget)
        return _cdiv(a, pl) * z, pl, 1
    best, bpl, bps = _BIG, 1, 1
    pl = 1
    while pl <= budget:
        m = _cdiv(a, pl)
        ps = budget // pl
        if ps > b:
            ps = b
        cyc = m * _cdiv(b, ps) * z
        if cyc < best:
            best, bpl, bps = cyc, pl, ps
        if m == 1:
            break
        pl = _cdiv(a, m - 1)
    return best, bpl, bps


@jit
def _min_cores(a, b, z, tau):
    """Fewest cores PL*PS with ceil(a/PL) * ceil(b/PS) * z <= tau; _BIG if impossible."""
    if a <= 0 or b <= 0 or z <= 0:
        return 1, 1, 1
    r = tau // z
    if r < 1:
        return _BIG, 1, 1
    if b == 1:  # one stage (SIMD): the smallest PL with ceil(a/PL) <= r
        pl = _cdiv(a, r)
        return pl, pl, 1
    best, bpl, bps = _BIG, 1, 1
    pl = 1
    while pl < best:
        m = _cdiv(a, pl)
        nmax = r // m
        if nmax >= 1:
            ps = _cdiv(b, nmax)
            if pl * ps < best:
                best, bpl, bps = pl * ps, pl, ps
        if m == 1:
            break
        pl = _cdiv(a, m - 1)
    return best, bpl, bps


@jit
def _allocate(members, lo_i, hi_i, k_a, k_b, k_z, budget, pl_in, ps_in, k_pl, k_ps):
    """Exact core allocation of one configuration: minimise the slowest kernel's cycles
    subject to the sum of PL*PS <= budget (binary search on the cycle target).
    Kernels with explicit pl_in/ps_in keep them. Returns (max cycles, status, cores the
    configuration needs at the least: fixed cores + one per free kernel)."""
    floor = 0
    free = budget
    nfree = 0
    for j in range(lo_i, hi_i):
        k = members[j]
        if pl_in[k] > 0 and ps_in[k] > 0:
            k_pl[k], k_ps[k] = pl_in[k], ps_in[k]
            # a pair larger than the chip cannot fit: saturate it so the product cannot wrap
            free -= min(pl_in[k], budget + 1) * min(ps_in[k], budget + 1)
            cyc = _cdiv(k_a[k], pl_in[k]) * _cdiv(k_b[k], ps_in[k]) * k_z[k]
            if k_a[k] <= 0 or k_b[k] <= 0:
                cyc = 0
            if cyc > floor:
                floor = cyc
        else:
            nfree += 1
    if free < nfree:
        return 0, CORES, budget - free + nfree
    if nfree == 0:
        return floor, OK, budget - free
    lo, hi = floor, floor
    for j in range(lo_i, hi_i):
        k = members[j]
        if not (pl_in[k] > 0 and ps_in[k] > 0):
            best, _, _ = min_cycles(k_a[k], k_b[k], k_z[k], free)
            if best > lo:
                lo = best
            one = k_a[k] * k_b[k] * k_z[k]
            if one > hi:
                hi = one
    while lo < hi:
        mid = lo + (hi - lo) // 2
        need = 0
        for j in range(lo_i, hi_i):
            k = members[j]
            if not (pl_in[k] > 0 and ps_in[k] > 0):
                c, _, _ = _min_cores(k_a[k], k_b[k], k_z[k], mid)
                need += c
                if need > free:
                    break
        if need <= free:
            hi = mid
        else:
            lo = mid + 1
    for j in range(lo_i, hi_i):
        k = members[j]
        if not (pl_in[k] > 0 and ps_in[k] > 0):
            _, pl, ps = _min_cores(k_a[k], k_b[k], k_z[k], lo)
            k_pl[k], k_ps[k] = pl, ps
    return lo, OK, budget - free + nfree


@jit
def _eval_rows(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
    configs, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf, finals, statuses, violations,
    cnt, start, members, fill, net_t, net_1, chan, arcnt, memb, memk, act, div, ndiv, numin,
    nset, nunset,
):  # fmt: skip
    """Evaluate every row of ``configs``; the full outputs (cfg, res, cores, weight tiling)
    are those of the last row. The loop body is the model: no per-row call (a call with this
    many array arguments would cost more than the evaluation itself)."""
    n = configs.shape[1]
    ne = e_src.shape[0]
    nc = si[I_C]
    fixed = si[I_FIXED_CONFIG] == 1
    fb = si[I_FB_RULE] == 1
    fb_f = si[I_FB_F]
    fb_b = si[I_FB_B]
    sparse = si[I_SPARSE] == 1
    weights = np.empty(n, np.int64)
    nw = 0
    for k in range(n):
        if k_isw[k] == 1:
            weights[nw] = k
            nw += 1
    for i in range(configs.shape[0]):
        config = configs[i]
        status = OK
        while True:
            for j in range(NUM_RES):
                res[j] = 0.0
            for c in range(nc):
                cnt[c] = 0
                net_t[c] = 0.0
                net_1[c] = 0.0
                chan[c, 0] = 0.0
                chan[c, 1] = 0.0
                chan[c, 2] = 0.0
                arcnt[c] = 0
                memb[c] = 0.0
                memk[c] = 0.0
                act[c] = 0.0
                div[c] = 0.0
                ndiv[c] = 0
                numin[c] = 1
                nset[c] = 0
                nunset[c] = 0
                for j in range(NUM_CFG):
                    cfg[c, j] = 0.0
            act[nc] = 0.0
            # ---- one pass over kernels: rules of the assignment and per-config sums
            for k in range(n):
                c = config[k]
                k_pl[k] = 1
                k_ps[k] = 1
                k_tf[k] = 1
                if c < 0 or c >= nc:
                    res[RES_VIOLATION] = c
                    status = CONFIG
                    break
                if fixed and c != k:
                    res[RES_VIOLATION] = c - k
                    status = CONFIG
                    break
                if k_pin[k] >= 0 and c != k_pin[k]:
                    res[RES_VIOLATION] = c - k_pin[k]
                    status = CONFIG
                    break
                if fb:
                    if k_phase[k] == _FWD and c > fb_f:
                        res[RES_VIOLATION] = c - fb_f
                        status = CONFIG
                        break
                    if k_phase[k] == _BWD and c < fb_b:
                        res[RES_VIOLATION] = fb_b - c
                        status = CONFIG
                        break
                cnt[c] += 1
                cfg[c, CFG_COMPUTE] += k_tc[k]
                net_t[c] += k_net_t[k]
                arcnt[c] += k_ar[k]
                if sparse:
                    cfg[c, CFG_SRAM] += k_sram_extra[k]
                    net_1[c] += k_net_1[k]
                    chan[c, 0] += k_chan[k, 0]
                    chan[c, 1] += k_chan[k, 1]
                    chan[c, 2] += k_chan[k, 2]
                    memk[c] += k_mem[k]
                    if k_num_input[k] > 0:
                        nset[c] += 1
                        if k_num_input[k] > numin[c]:
                            numin[c] = k_num_input[k]
                    else:
                        nunset[c] += 1
            if status != OK:
                break
            # weights: a weight kernel alone in its configuration may tile them (docs/model.md)
            for j in range(nw):
                k = weights[j]
                c = config[k]
                if cnt[c] == 1:
                    if k_wsram[k] > 0.0:
                        div[c] += k_wsram[k]
                        ndiv[c] += 1
                else:
                    cfg[c, CFG_SRAM] += k_wsram[k]
            # ---- one pass over edges: order, collectives, SRAM, DRAM traffic and lifetime
            for e in range(ne):
                s = e_src[e]
                cs = config[s]
                cd = config[e_dst[e]]
                if cs > cd:
                    res[RES_VIOLATION] = cs - cd
                    status = ORDER
                    break
                net_t[cs] += e_net_t[e]
                arcnt[cs] += e_ar[e]
                if cs == cd:
                    cfg[cs, CFG_SRAM] += e_sram_b[e] * e_sram_depth[e]
                else:
                    b = e_b[e]
                    memb[cs] += b
                    memb[cd] += b
                    act[cs] += b
                    act[cd + 1] -= b
                    fp = 2.0 * e_sram_b[e]
                    if k_isw[s] == 1 and cnt[cs] == 1:
                        if fp > 0.0:
                            div[cs] += fp
                            div[cd] += fp
                            ndiv[cs] += 1
                            ndiv[cd] += 1
                    else:
                        cfg[cs, CFG_SRAM] += fp
                        cfg[cd, CFG_SRAM] += fp
            if status != OK:
                break
            if si[I_NUM_INPUT_MIXED] == 1:
                for c in range(nc):
                    if nset[c] > 0 and nunset[c] > 0:
                        res[RES_VIOLATION] = c
                        status = CONFIG
                        break
            if status != OK:
                break
            # ---- SRAM capacity, with weight tiling only where it is needed
            if si[I_SRAM_CHECK] == 1:
                cap = sc[F_SRAM_CAP]
                worst = 0.0
                bad = False
                tiling = False
                for c in range(nc):
                    over = cfg[c, CFG_SRAM] - cap
                    if over > 0.0 or (div[c] > 0.0 and over >= 0.0):
                        if over + div[c] > worst:
                            worst = over + div[c]
                        bad = True
                    elif over + div[c] > 0.0:
                        tiling = True
                if bad:
                    res[RES_VIOLATION] = worst
                    status = SRAM
                    break
                if tiling:
                    _weight_tiling(config, cnt, k_isw, k_wsram, e_src, e_dst, e_sram_b, cfg, div, ndiv,
                                   cap, si[I_TF_DIVIDES], k_tf)  # fmt: skip
                    # v2: no divisor of the weight bytes may be large enough
                    for c in range(nc):  # tolerance: a tiled sum may hit the cap exactly
                        if cfg[c, CFG_SRAM] - cap > max(worst, 1e-9 * cap):
                            worst = cfg[c, CFG_SRAM] - cap
                            bad = True
                    if bad:
                        res[RES_VIOLATION] = worst
                        status = SRAM
                        break
                else:
                    for c in range(nc):
                        cfg[c, CFG_SRAM] += div[c]
            else:
                for c in range(nc):
                    cfg[c, CFG_SRAM] += div[c]
            # ---- DRAM capacity: weights x layers per stage + the widest live activations
            per_tiles = si[I_PER_CONFIG_TILES] == 1
            t_all = float(si[I_T])
            peak = 0.0
            run = 0.0
            for c in range(nc):
                tcc = 1.0 if (per_tiles and nset[c] > 0) else t_all
                cfg[c, CFG_TILES] = tcc
                run += act[c]
                live = run * tcc
                if live > peak:
                    peak = live
            total = sc[F_DRAM_FIXED] + sc[F_DRAM_ACT_MULT] * peak
            res[RES_DRAM] = total
            cap1 = sc[F_DRAM_CAP]
            bw = sc[F_DRAM_BW]
            cap2 = sc[F_DRAM2_CAP]
            if cap2 > 0.0:
                if total > cap1:
                    if total > cap1 + cap2:
                        res[RES_VIOLATION] = total - cap1 - cap2
                        status = DRAM
                        break
                    bw = (cap1 * sc[F_DRAM_BW] + cap2 * sc[F_DRAM2_BW]) / (cap1 + cap2)
            elif total > cap1:
                res[RES_VIOLATION] = total - cap1
                status = DRAM
                break
            res[RES_DRAM_BW] = bw
            # ---- compute
            freq = sc[F_FREQ]
            cores = si[I_CORES]
            if si[I_CYCLE_MODEL] == 1:
                pos = 0
                for c in range(nc):
                    start[c] = pos
                    fill[c] = pos
                    pos += cnt[c]
                start[nc] = pos
                for k in range(n):
                    c = config[k]
                    members[fill[c]] = k
                    fill[c] += 1
                for c in range(nc):
                    if cnt[c] == 0:
                        continue
                    cyc, st, need = _allocate(
                        members, start[c], start[c + 1], k_a, k_b, k_z, cores, pl_in, ps_in, k_pl, k_ps
                    )
                    if st != OK:
                        res[RES_VIOLATION] = need - cores
                        status = CORES
                        break
                    cfg[c, CFG_CYCLES] = cyc
                    cfg[c, CFG_COMPUTE] = cfg[c, CFG_TILES] * cyc / freq
            else:
                for c in range(nc):
                    if cnt[c] > cores:
                        res[RES_VIOLATION] = cnt[c] - cores
                        status = CORES
                        break
                    cfg[c, CFG_COMPUTE] = cfg[c, CFG_TILES] * cfg[c, CFG_COMPUTE]
            if status != OK:
                break
            # ---- memory, network, II
            all_ii = 0.0
            overlap = si[I_OVERLAP]
            lat = sc[F_AR_LATENCY]
            ii_numin = si[I_II_NUM_INPUT] == 1
            for c in range(nc):
                tcc = cfg[c, CFG_TILES]
                tc = cfg[c, CFG_COMPUTE]
                tm = (tcc * memb[c] + memk[c]) / bw
                ch = chan[c, 0]
                if chan[c, 1] > ch:
                    ch = chan[c, 1]
                if chan[c, 2] > ch:
                    ch = chan[c, 2]
                tn = tcc * net_t[c] + net_1[c] + ch + lat * arcnt[c]
                if overlap == _PERFECT:
                    ii = max(tc, tm, tn)
                elif overlap == _COMPUTE_MEMORY:
                    ii = max(tc, tm) + tn
                else:
                    ii = tc + tm + tn
                if ii_numin:
                    ii *= numin[c]
                cfg[c, CFG_MEMORY] = tm
                cfg[c, CFG_NETWORK] = tn
                cfg[c, CFG_II] = ii
                all_ii += ii
            batch = all_ii * sc[F_BATCH_MULT] + sc[F_P2P]
            res[RES_ALL_II] = all_ii
            res[RES_BATCH] = batch
            res[RES_FINAL] = batch / sc[F_NUM_COPY]
            status = OK
            break
        statuses[i] = status
        violations[i] = res[RES_VIOLATION]
        finals[i] = res[RES_FINAL] if status == OK else np.inf


@jit
def _smallest_divisor_at_least(value, lo):
    """The smallest divisor of ``value`` that is >= lo (``value`` itself at worst)."""
    if lo >= value:
        return value
    best = value
    d = 1
    while d * d <= value:
        if value % d == 0:
            if d >= lo and d < best:
                best = d
            q = value // d
            if q >= lo and q < best:
                best = q
        d += 1
    return best


@jit
def _weight_tiling(config, cnt, k_isw, k_wsram, e_src, e_dst, e_sram_b, cfg, div, ndiv, cap,
                   divides, k_tf):  # fmt: skip
    """Smallest weight tiling factors of lone weight kernels that make every configuration fit
    (each divisible contribution gets an equal share of its configuration's slack), then the
    tiled SRAM footprints."""
    n = config.shape[0]
    ne = e_src.shape[0]
    for k in range(n):
        c = config[k]
        if k_isw[k] == 1 and cnt[c] == 1:
            tf = 1
            if div[c] > 0.0 and cfg[c, CFG_SRAM] + div[c] > cap:
                need = k_wsram[k] * ndiv[c] / (cap - cfg[c, CFG_SRAM])
                tf = max(2, int(math.ceil(min(need, _EXACT))))
            for e in range(ne):
                if e_src[e] == k:
                    cd = config[e_dst[e]]
                    for cc in (c, cd):
                        if cfg[cc, CFG_SRAM] + div[cc] > cap:
                            need = 2.0 * e_sram_b[e] * ndiv[cc] / (cap - cfg[cc, CFG_SRAM])
                            tf = max(tf, max(2, int(math.ceil(min(need, _EXACT)))))
            if divides == 1 and tf > 1 and 0.0 < k_wsram[k] <= _EXACT:
                tf = _smallest_divisor_at_least(int(k_wsram[k]), tf)
            k_tf[k] = tf
    for k in range(n):
        c = config[k]
        if k_isw[k] == 1 and cnt[c] == 1:
            cfg[c, CFG_SRAM] += k_wsram[k] / k_tf[k]
    for e in range(ne):
        s = e_src[e]
        cs, cd = config[s], config[e_dst[e]]
        if cs != cd and k_isw[s] == 1 and cnt[cs] == 1:
            cfg[cs, CFG_SRAM] += 2.0 * e_sram_b[e] / k_tf[s]
            cfg[cd, CFG_SRAM] += 2.0 * e_sram_b[e] / k_tf[s]


@jit
def _scratch(n, nc):
    return (
        np.zeros(nc + 1, np.int64),  # cnt
        np.zeros(nc + 1, np.int64),  # start
        np.zeros(n, np.int64),  # members
        np.zeros(nc + 1, np.int64),  # fill
        np.zeros(nc, np.float64),  # net_t
        np.zeros(nc, np.float64),  # net_1
        np.zeros((nc, 3), np.float64),  # chan
        np.zeros(nc, np.int64),  # arcnt
        np.zeros(nc, np.float64),  # memb
        np.zeros(nc, np.float64),  # memk
        np.zeros(nc + 1, np.float64),  # act
        np.zeros(nc, np.float64),  # div
        np.zeros(nc, np.int64),  # ndiv
        np.zeros(nc, np.int64),  # numin
        np.zeros(nc, np.int64),  # nset
        np.zeros(nc, np.int64),  # nunset
    )


@jit
def evaluate_one(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
    config, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf,
):  # fmt: skip
    """Evaluate one assignment with full outputs. Returns the status code."""
    n = config.shape[0]
    s = _scratch(n, si[I_C])
    finals = np.zeros(1)
    statuses = np.zeros(1, np.int64)
    viol = np.zeros(1)
    configs = np.empty((1, n), np.int64)
    configs[0, :] = config
    _eval_rows(
        k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
        k_pin, k_num_input, k_sram_extra,
        e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
        configs, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf, finals, statuses, viol,
        s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12],
        s[13], s[14], s[15],
    )  # fmt: skip
    return statuses[0]


@jit
def evaluate_batch(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
    configs, finals, statuses, violations,
):  # fmt: skip
    """Evaluate every row of ``configs`` (cores chosen optimally); write final_ns (inf when
    infeasible), the status and the violated amount of each row."""
    n = configs.shape[1]
    nc = si[I_C]
    s = _scratch(n, nc)
    zero = np.zeros(n, np.int64)
    _eval_rows(
        k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
        k_pin, k_num_input, k_sram_extra,
        e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
        configs, zero, zero, np.zeros((nc, NUM_CFG)), np.zeros(NUM_RES),
        np.ones(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
        finals, statuses, violations,
        s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12],
        s[13], s[14], s[15],
    )  # fmt: skip


# --------------------------------------------------------------------------- one configuration
SET_II, SET_SRAM, SET_LIVE, SET_STATUS, SET_VIOLATION, SET_HIDDEN = range(6)
NUM_SET = 6


@jit
def set_cost(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si,
    where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero, out,
):  # fmt: skip
    """II of one configuration: ``where[k]`` is 1 for its kernels, 2 for kernels of earlier
    configurations (3: an earlier weight kernel alone in its configuration, whose output
    buffers are weight-tiled), 0 for later ones (the DP over order ideals, docs/design.md).

    The same equations as ``_eval`` restricted to one configuration: set-local except the
    SRAM read-side footprint of buffers produced by a lone weight kernel of another
    configuration, when the caller does not mark it with 3: counted untiled (``relax`` = 0, an
    over-estimate; ``out[SET_HIDDEN]`` = 1 when a rejection might be due to it), or free
    (``relax`` = 1, which turns a DP into a lower bound); ``relax`` = 2: the caller marks
    lone weight kernels exactly. ``live_cap`` bounds T_c * live activation bytes (DRAM).
    Writes out[SET_II] (inf if infeasible), SET_SRAM, SET_LIVE, SET_STATUS, SET_VIOLATION.
    """
    n = k_a.shape[0]
    ne = e_src.shape[0]
    cnt = 0
    tc = 0.0
    sram = 0.0
    net_t = 0.0
    net_1 = 0.0
    ch0 = 0.0
    ch1 = 0.0
    ch2 = 0.0
    arc = 0
    memk = 0.0
    memb = 0.0
    nset = 0
    numin = 1
    lone_w = -1
    for k in range(n):
        if where[k] == 1:
            members[cnt] = k
            cnt += 1
            tc += k_tc[k]
            sram += k_sram_extra[k]
            net_t += k_net_t[k]
            net_1 += k_net_1[k]
            ch0 += k_chan[k, 0]
            ch1 += k_chan[k, 1]
            ch2 += k_chan[k, 2]
            arc += k_ar[k]
            memk += k_mem[k]
            if k_num_input[k] > 0:
                nset += 1
                if k_num_input[k] > numin:
                    numin = k_num_input[k]
    out[SET_HIDDEN] = 0.0
    if cnt == 1 and k_isw[members[0]] == 1:
        lone_w = members[0]
    div = 0.0
    if lone_w >= 0:
        div += k_wsram[lone_w]
    elif cnt > 0:
        for j in range(cnt):
            sram += k_wsram[members[j]]
    live = 0.0
    hidden = 0.0
    for e in range(ne):
        s, d = e_src[e], e_dst[e]
        s_in = where[s] == 1
        d_in = where[d] == 1
        if s_in:
            net_t += e_net_t[e]
            arc += e_ar[e]
        if s_in and d_in:
            sram += e_sram_b[e] * e_sram_depth[e]
        elif s_in or d_in:
            memb += e_b[e]
            fp = 2.0 * e_sram_b[e]
            if (s_in and lone_w >= 0) or (d_in and where[s] == 3):
                div += fp
            elif d_in and k_isw[s] == 1 and relax == 1:
                pass
            else:
                sram += fp
                if d_in and k_isw[s] == 1 and relax == 0:
                    hidden += fp
        if where[s] != 0 and where[d] < 2 and not (s_in and d_in):
            live += e_b[e]
    tcc = si[I_T]
    if si[I_PER_CONFIG_TILES] == 1 and nset > 0:
        tcc = 1
    out[SET_LIVE] = live * tcc
    out[SET_II] = np.inf
    if si[I_NUM_INPUT_MIXED] == 1 and nset > 0 and nset < cnt:
        out[SET_STATUS] = CONFIG
        out[SET_VIOLATION] = 0.0
        return
    if si[I_SRAM_CHECK] == 1:
        cap = sc[F_SRAM_CAP]
        over = sram - cap
        if over > 0.0 or (div > 0.0 and over >= 0.0):
            out[SET_STATUS] = SRAM
            out[SET_VIOLATION] = over + div
            if hidden > 0.0 and over - hidden < 0.0:
                out[SET_HIDDEN] = 1.0
            return
        out[SET_SRAM] = sram + (div if sram + div <= cap else cap - sram)
    else:
        out[SET_SRAM] = sram + div
    if live * tcc > live_cap:
        # live_cap = (DRAM capacity - fixed bytes) / act_mult: the DRAM overflow in bytes is
        # act_mult times the excess of live bytes
        out[SET_STATUS] = DRAM
        out[SET_VIOLATION] = (live * tcc - live_cap) * sc[F_DRAM_ACT_MULT]
        return
    freq = sc[F_FREQ]
    cores = si[I_CORES]
    if si[I_CYCLE_MODEL] == 1:
        if cnt > 0:
            cyc, st, _ = _allocate(members, 0, cnt, k_a, k_b, k_z, cores, zero, zero, k_pl, k_ps)
            if st != OK:
                out[SET_STATUS] = CORES
                out[SET_VIOLATION] = cnt - cores
                return
            tc = tcc * cyc / freq
        else:
            tc = 0.0
    else:
        if cnt > cores:
            out[SET_STATUS] = CORES
            out[SET_VIOLATION] = cnt - cores
            return
        tc = tcc * tc
    tm = (tcc * memb + memk) / dram_bw
    chm = ch0
    if ch1 > chm:
        chm = ch1
    if ch2 > chm:
        chm = ch2
    tn = tcc * net_t + net_1 + chm + sc[F_AR_LATENCY] * arc
    overlap = si[I_OVERLAP]
    if overlap == _PERFECT:
        ii = max(tc, tm, tn)
    elif overlap == _COMPUTE_MEMORY:
        ii = max(tc, tm) + tn
    else:
        ii = tc + tm + tn
    if si[I_II_NUM_INPUT] == 1:
        ii *= numin
    out[SET_II] = ii
    out[SET_STATUS] = OK
    out[SET_VIOLATION] = 0.0


# ---- admissible lower bound of a set's II (used to prune the assignment search) ----------
BND_TC, BND_FLOOR, BND_TM, BND_TN, BND_CH0, BND_CH1, BND_CH2 = range(7)
NUM_BND = 7


@jit
def bound_terms(
    k_a, k_b, k_z, k_tc, k_wsram, k_isw, k_mem, k_net_t, k_net_1, k_chan, k_ar, k_phase,
    k_pin, k_num_input, k_sram_extra,
    e_src, e_dst, e_b, e_sram_b, e_sram_depth, e_net_t, e_ar, sc, si, dram_bw,
):  # fmt: skip
    """Per-kernel terms of a lower bound of ``set_cost``'s II that is additive over kernels.

    For any set S of kernels placed in one configuration, ``set_bound`` of these terms over S
    is <= the II ``set_cost`` computes for S, whatever the other configurations hold:
    T_c >= t_min (1 when configurations holding a num_input kernel run one tile, else T);
    compute: the FLOP model sums per-kernel times; the cycle model's slowest kernel needs at
    least sum(a*b*z) / cores cycles (p * ceil(a/PL) * ceil(b/PS) * z >= a*b*z for p = PL*PS
    cores) and at least each kernel's cycles on all cores; memory: the per-kernel DRAM bytes
    plus the activations of every edge with exactly one end in S (read or written through
    DRAM by S's configuration; when S spans several configurations, each such edge still
    crosses into or out of one of them); network: every term is per kernel or per edge in
    its source's configuration, the channel maximum >= each channel's sum. Each term is a
    sum over S (BND_FLOOR: a maximum), so the bound splits over configurations.
    Returns (per-kernel terms [n, NUM_BND], per-edge memory time [E]).
    """
    n = k_a.shape[0]
    out = np.zeros((n, NUM_BND))
    edge_tm = np.zeros(e_src.shape[0])
    t = si[I_T]
    tmin = min(t, 1) if si[I_PER_CONFIG_TILES] == 1 else t
    freq = sc[F_FREQ]
    cores = si[I_CORES]
    for k in range(n):
        if si[I_CYCLE_MODEL] == 1:
            if k_a[k] > 0 and k_b[k] > 0 and k_z[k] > 0:
                work = float(k_a[k]) * float(k_b[k]) * float(k_z[k])
                out[k, BND_TC] = tmin * work / (cores * freq)
                cyc, _, _ = min_cycles(k_a[k], k_b[k], k_z[k], cores)
                out[k, BND_FLOOR] = tmin * cyc / freq
        else:
            out[k, BND_TC] = tmin * k_tc[k]
        out[k, BND_TM] = k_mem[k] / dram_bw
        out[k, BND_TN] = tmin * k_net_t[k] + k_net_1[k] + sc[F_AR_LATENCY] * k_ar[k]
        out[k, BND_CH0] = k_chan[k, 0]
        out[k, BND_CH1] = k_chan[k, 1]
        out[k, BND_CH2] = k_chan[k, 2]
    for e in range(e_src.shape[0]):
        s = e_src[e]
        out[s, BND_TN] += tmin * e_net_t[e] + sc[F_AR_LATENCY] * e_ar[e]
        edge_tm[e] = tmin * e_b[e] / dram_bw
    return out, edge_tm


@jit
def set_bound(mask, terms, edge_tm, overlap, e_src, e_dst):
    """Lower bound of the summed II of any split of the kernels in bitmask ``mask`` over
    configurations (one or more): the additive terms of ``bound_terms`` combined the way
    ``set_cost`` combines compute, memory and network for ``overlap``."""
    tc = 0.0
    fl = 0.0
    tm = 0.0
    tn = 0.0
    c0 = 0.0
    c1 = 0.0
    c2 = 0.0
    rest = mask
    k = 0
    while rest != 0:
        if rest & 1:
            tc += terms[k, BND_TC]
            if terms[k, BND_FLOOR] > fl:
                fl = terms[k, BND_FLOOR]
            tm += terms[k, BND_TM]
            tn += terms[k, BND_TN]
            c0 += terms[k, BND_CH0]
            c1 += terms[k, BND_CH1]
            c2 += terms[k, BND_CH2]
        rest >>= 1
        k += 1
    for e in range(e_src.shape[0]):
        if ((mask >> e_src[e]) ^ (mask >> e_dst[e])) & 1:
            tm += edge_tm[e]
    if fl > tc:
        tc = fl
    tn += max(c0, c1, c2)
    if overlap == _PERFECT:
        return max(tc, tm, tn)
    if overlap == _COMPUTE_MEMORY:
        return max(tc, tm) + tn
    return tc + tm + tn
