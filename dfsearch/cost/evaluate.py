"""The jitted evaluator: one configuration assignment -> per-configuration times and totals.

The single implementation of the model (docs/model.md) used by every search. Every entry
point takes the three records of a lowered problem (``dfsearch.cost.layout``: ``kt`` the
``KernelTable``, ``et`` the ``EdgeTable``, ``cn`` the ``Constants``; docs/design.md, "The
Numba boundary"), returns a ``codes.Status`` and writes its results into preallocated
arrays; it never raises and never allocates inside batch loops. ``dfsearch.cost.reference``
is its naive twin.

Outputs
-------
``cfg[c, :]``: the ``ConfigCol`` columns COMPUTE, MEMORY, NETWORK, II (ns), SRAM (bytes),
TILES (T_c), CYCLES (slowest kernel, cycle model); ``res``: the ``ResultSlot`` slots FINAL
(final_ns), BATCH (ns_per_batch), ALL_II, DRAM (DRAM bytes per chip), DRAM_BW (GB/s in
effect), VIOLATION (by how much the binding constraint is violated, in its unit);
``k_pl``/``k_ps``/``k_tf``: cores and weight tiling factor of every kernel.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from dfsearch.codes import Phase, Status
from dfsearch.cost import overlap as _overlap
from dfsearch.cost._jit import jit
from dfsearch.cost.layout import (
    NUM_CFG,
    NUM_RES,
    BoundCol,
    ConfigCol,
    ResultSlot,
    SetSlot,
)

__all__ = [
    "evaluate_one",
    "evaluate_batch",
    "set_cost",
    "bound_terms",
    "set_bound",
    "min_cycles",
    "combine_overlap",
]


#: the II rule of ``codes.Overlap`` (one definition: ``dfsearch.cost.overlap``), compiled
combine_overlap = jit(_overlap.combine_overlap)

# Integer safety of the cycle model (int64, no overflow checks in numba): validation keeps
# every kernel's single-core cycle count a * b * z <= 2^60 (validate.MAX_KERNEL_WORK,
# also asserted by lower()), cores <= 2^24, and core pairs from a mapping <= cores. Then every
# cycle count, binary-search target and PL * PS below is <= 2^60 < _BIG, the "impossible"
# sentinel, and a sum of core counts stops at free + _BIG < 2^63.
_BIG = 1 << 62
#: weight tiling factors are computed in float and capped here before the int conversion
#: (float64 is exact up to 2^53; a factor that large leaves < 1 byte per tile anyway)
_EXACT = 2.0**53


@jit(internal=True)
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


@jit(internal=True)
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
        return 0, Status.CORES, budget - free + nfree
    if nfree == 0:
        return floor, Status.OK, budget - free
    # a kernel's cycles and cores depend on its (a, b, z) alone: members listed next to one
    # another with the same work (the layers of a stack) reuse the last answer
    lo, hi = floor, floor
    pa, pb, pz, best = -1, -1, -1, 0
    for j in range(lo_i, hi_i):
        k = members[j]
        if not (pl_in[k] > 0 and ps_in[k] > 0):
            if k_a[k] != pa or k_b[k] != pb or k_z[k] != pz:
                pa, pb, pz = k_a[k], k_b[k], k_z[k]
                best, _, _ = min_cycles(pa, pb, pz, free)
            if best > lo:
                lo = best
            one = k_a[k] * k_b[k] * k_z[k]
            if one > hi:
                hi = one
    while lo < hi:
        mid = lo + (hi - lo) // 2
        need = 0
        pa, pb, pz, c = -1, -1, -1, 0
        for j in range(lo_i, hi_i):
            k = members[j]
            if not (pl_in[k] > 0 and ps_in[k] > 0):
                if k_a[k] != pa or k_b[k] != pb or k_z[k] != pz:
                    pa, pb, pz = k_a[k], k_b[k], k_z[k]
                    c, _, _ = _min_cores(pa, pb, pz, mid)
                need += c
                if need > free:
                    break
        if need <= free:
            hi = mid
        else:
            lo = mid + 1
    pa, pb, pz, pl, ps = -1, -1, -1, 1, 1
    for j in range(lo_i, hi_i):
        k = members[j]
        if not (pl_in[k] > 0 and ps_in[k] > 0):
            if k_a[k] != pa or k_b[k] != pb or k_z[k] != pz:
                pa, pb, pz = k_a[k], k_b[k], k_z[k]
                _, pl, ps = _min_cores(pa, pb, pz, lo)
            k_pl[k], k_ps[k] = pl, ps
    return lo, Status.OK, budget - free + nfree


# --------------------------------------------------------------------------- whole assignments
# One row = one assignment, evaluated by ``_eval_row`` in the order of docs/model.md: the
# rules of the assignment and the per-configuration sums (kernels, weights, edges), the SRAM,
# DRAM and core capacities, then the compute, memory and network times and the II. Each step
# that can reject the row writes ``res[ResultSlot.VIOLATION]`` and returns its ``Status``; the
# steps share the per-configuration work arrays of ``_Scratch``. ``_eval_row`` is
# ``jit(step=True)`` and its steps ``jit(inline=True)``: inlined and free of reference
# counting, so the split costs no throughput (cost/_jit.py); spliced into ``_eval_row``'s
# Numba IR, they cost the first run no argument passing either.
# ``set_cost`` below computes the same terms for one configuration, added in the same order.
@jit(internal=True)
def _eval_rows(kt, et, cn, configs, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf, finals, statuses,
               violations, scratch):  # fmt: skip
    """Evaluate every row of ``configs``: final_ns (inf when infeasible), status and violated
    amount per row. The full outputs (cfg, res, cores, weight tiling) are those of the last
    row."""
    for i in range(configs.shape[0]):
        status = _eval_row(kt, et, cn, configs[i], pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf,
                           scratch)  # fmt: skip
        statuses[i] = status
        violations[i] = res[ResultSlot.VIOLATION]
        finals[i] = res[ResultSlot.FINAL] if status == Status.OK else np.inf


@jit(step=True)
def _eval_row(kt, et, cn, config, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf, s):
    """Evaluate one assignment ``config`` into ``cfg`` / ``res`` / ``k_pl`` / ``k_ps`` /
    ``k_tf``; returns its ``Status`` (the first rule or capacity it breaks, else OK)."""
    _reset_row(cn.num_config, cfg, res, s)
    status = _kernel_pass(kt, cn, config, cfg, res, k_pl, k_ps, k_tf, s)
    if status != Status.OK:
        return status
    _weight_pass(kt, config, cfg, s)
    status = _edge_pass(kt, et, config, cfg, res, s)
    if status != Status.OK:
        return status
    status = _num_input_rule(cn, res, s)
    if status != Status.OK:
        return status
    status = _sram_fit(kt, et, cn, config, cfg, res, k_tf, s)
    if status != Status.OK:
        return status
    status = _dram_fit(cn, cfg, res, s)
    if status != Status.OK:
        return status
    if cn.cycle_model:
        status = _cycle_compute(kt, cn, config, pl_in, ps_in, cfg, res, k_pl, k_ps, s)
    else:
        status = _flop_compute(cn, cfg, res, s)
    if status != Status.OK:
        return status
    _times_and_totals(cn, cfg, res, s)
    return Status.OK


@jit(inline=True)
def _reset_row(nc, cfg, res, s):
    """Zero the outputs and the per-configuration sums before a row."""
    for j in range(NUM_RES):
        res[j] = 0.0
    for c in range(nc):
        s.cnt[c] = 0
        s.net_t[c] = 0.0
        s.net_1[c] = 0.0
        for j in range(s.chan.shape[1]):
            s.chan[c, j] = 0.0
        s.arcnt[c] = 0
        s.memb[c] = 0.0
        s.memk[c] = 0.0
        s.act[c] = 0.0
        s.div[c] = 0.0
        s.ndiv[c] = 0
        s.numin[c] = 1
        s.nset[c] = 0
        s.nunset[c] = 0
        for j in range(NUM_CFG):
            cfg[c, j] = 0.0
    s.act[nc] = 0.0


@jit(inline=True)
def _kernel_pass(kt, cn, config, cfg, res, k_pl, k_ps, k_tf, s):
    """One pass over the kernels: the rules of the assignment (configuration in range, kernel
    by kernel, pins, FWD/BWD split; Status.CONFIG) and the per-configuration kernel sums
    (members, per-tile compute ns, network ns, all-reduces and, when some kernel has them,
    extra SRAM, per-execution network, channel and memory terms, num_input)."""
    fixed = cn.fixed_config
    fb = cn.fb_rule
    fb_f = cn.fb_last_fwd
    fb_b = cn.fb_first_bwd
    sparse = cn.sparse
    nc = cn.num_config
    for k in range(config.shape[0]):
        c = config[k]
        k_pl[k] = 1
        k_ps[k] = 1
        k_tf[k] = 1
        if c < 0 or c >= nc:
            res[ResultSlot.VIOLATION] = c
            return Status.CONFIG
        if fixed and c != k:
            res[ResultSlot.VIOLATION] = c - k
            return Status.CONFIG
        if kt.pin[k] >= 0 and c != kt.pin[k]:
            res[ResultSlot.VIOLATION] = c - kt.pin[k]
            return Status.CONFIG
        if fb:
            if kt.phase[k] == Phase.FWD and c > fb_f:
                res[ResultSlot.VIOLATION] = c - fb_f
                return Status.CONFIG
            if kt.phase[k] == Phase.BWD and c < fb_b:
                res[ResultSlot.VIOLATION] = fb_b - c
                return Status.CONFIG
        s.cnt[c] += 1
        cfg[c, ConfigCol.COMPUTE] += kt.compute_ns[k]
        s.net_t[c] += kt.net_tile_ns[k]
        s.arcnt[c] += kt.all_reduce[k]
        if sparse:
            cfg[c, ConfigCol.SRAM] += kt.sram_extra[k]
            s.net_1[c] += kt.net_once_ns[k]
            for j in range(kt.channel_ns.shape[1]):
                s.chan[c, j] += kt.channel_ns[k, j]
            s.memk[c] += kt.memory_bytes[k]
            if kt.num_input[k] > 0:
                s.nset[c] += 1
                if kt.num_input[k] > s.numin[c]:
                    s.numin[c] = kt.num_input[k]
            else:
                s.nunset[c] += 1
    return Status.OK


@jit(inline=True)
def _weight_pass(kt, config, cfg, s):
    """Weight bytes in SRAM: a weight kernel alone in its configuration may tile them (they
    go to the divisible sums ``div`` / ``ndiv``, docs/model.md), any other counts in full."""
    for j in range(s.weights.shape[0]):
        k = s.weights[j]
        c = config[k]
        if s.cnt[c] == 1:
            if kt.weight_sram[k] > 0.0:
                s.div[c] += kt.weight_sram[k]
                s.ndiv[c] += 1
        else:
            cfg[c, ConfigCol.SRAM] += kt.weight_sram[k]


@jit(inline=True)
def _edge_pass(kt, et, config, cfg, res, s):
    """One pass over the edges: the order rule (Config(src) <= Config(dst); Status.ORDER),
    re-layout collectives in the source's configuration, and the buffers: on chip (bytes x
    depth in SRAM) or spilled (DRAM traffic in both configurations, the two-buffer SRAM
    footprint, divisible when the producer is a lone weight kernel, live activation bytes
    from the source's to the destination's configuration as a difference array)."""
    for e in range(et.src.shape[0]):
        src = et.src[e]
        cs = config[src]
        cd = config[et.dst[e]]
        if cs > cd:
            res[ResultSlot.VIOLATION] = cs - cd
            return Status.ORDER
        s.net_t[cs] += et.net_tile_ns[e]
        s.arcnt[cs] += et.all_reduce[e]
        if cs == cd:
            cfg[cs, ConfigCol.SRAM] += et.sram_bytes[e] * et.sram_depth[e]
        else:
            b = et.buffer_bytes[e]
            s.memb[cs] += b
            s.memb[cd] += b
            s.act[cs] += b
            s.act[cd + 1] -= b
            fp = 2.0 * et.sram_bytes[e]
            if kt.is_weight[src] == 1 and s.cnt[cs] == 1:
                if fp > 0.0:
                    s.div[cs] += fp
                    s.div[cd] += fp
                    s.ndiv[cs] += 1
                    s.ndiv[cd] += 1
            else:
                cfg[cs, ConfigCol.SRAM] += fp
                cfg[cd, ConfigCol.SRAM] += fp
    return Status.OK


@jit(inline=True)
def _num_input_rule(cn, res, s):
    """When some kernels set num_input and some do not, no configuration mixes the two
    (Status.CONFIG, violation: the first such configuration)."""
    if cn.num_input_mixed:
        for c in range(cn.num_config):
            if s.nset[c] > 0 and s.nunset[c] > 0:
                res[ResultSlot.VIOLATION] = c
                return Status.CONFIG
    return Status.OK


@jit(inline=True)
def _sram_fit(kt, et, cn, config, cfg, res, k_tf, s):
    """SRAM capacity, with weight tiling only where it is needed; adds the (tiled) divisible
    bytes to ``cfg[:, SRAM]``. Status.SRAM with the largest excess in bytes when even the
    untiled rest overflows, or (v2) when no divisor of the weight bytes is large enough."""
    nc = cn.num_config
    if not cn.sram_check:
        for c in range(nc):
            cfg[c, ConfigCol.SRAM] += s.div[c]
        return Status.OK
    cap = cn.sram_cap
    worst = 0.0
    bad = False
    tiling = False
    for c in range(nc):
        over = cfg[c, ConfigCol.SRAM] - cap
        if over > 0.0 or (s.div[c] > 0.0 and over >= 0.0):
            if over + s.div[c] > worst:
                worst = over + s.div[c]
            bad = True
        elif over + s.div[c] > 0.0:
            tiling = True
    if bad:
        res[ResultSlot.VIOLATION] = worst
        return Status.SRAM
    if not tiling:
        for c in range(nc):
            cfg[c, ConfigCol.SRAM] += s.div[c]
        return Status.OK
    _weight_tiling(config, s.cnt, kt, et, cfg, s.div, s.ndiv, cap, cn.tf_divides, k_tf)
    # v2: no divisor of the weight bytes may be large enough
    for c in range(nc):  # tolerance: a tiled sum may hit the cap exactly
        if cfg[c, ConfigCol.SRAM] - cap > max(worst, 1e-9 * cap):
            worst = cfg[c, ConfigCol.SRAM] - cap
            bad = True
    if bad:
        res[ResultSlot.VIOLATION] = worst
        return Status.SRAM
    return Status.OK


@jit(inline=True)
def _dram_fit(cn, cfg, res, s):
    """Tiles per configuration (``cfg[:, TILES]``), the DRAM bytes (weights x layers per
    stage + the widest live activations) and the bandwidth in effect (the second tier's
    blend when the first overflows). Status.DRAM with the excess in bytes."""
    per_tiles = cn.per_config_tiles
    t_all = float(cn.num_tile)
    peak = 0.0
    run = 0.0
    for c in range(cn.num_config):
        tcc = 1.0 if (per_tiles and s.nset[c] > 0) else t_all
        cfg[c, ConfigCol.TILES] = tcc
        run += s.act[c]
        live = run * tcc
        if live > peak:
            peak = live
    total = cn.dram_fixed + cn.dram_act_mult * peak
    res[ResultSlot.DRAM] = total
    cap1 = cn.dram_cap
    bw = cn.dram_bw
    cap2 = cn.dram2_cap
    if cap2 > 0.0:
        if total > cap1:
            if total > cap1 + cap2:
                res[ResultSlot.VIOLATION] = total - cap1 - cap2
                return Status.DRAM
            bw = (cap1 * cn.dram_bw + cap2 * cn.dram2_bw) / (cap1 + cap2)
    elif total > cap1:
        res[ResultSlot.VIOLATION] = total - cap1
        return Status.DRAM
    res[ResultSlot.DRAM_BW] = bw
    return Status.OK


@jit(inline=True)
def _cycle_compute(kt, cn, config, pl_in, ps_in, cfg, res, k_pl, k_ps, s):
    """Cycle model: group the kernels by configuration, allocate each configuration's cores
    optimally (``_allocate``), compute ns = T_c x slowest cycles / frequency. Status.CORES
    with the shortfall of cores."""
    nc = cn.num_config
    cores = cn.cores
    pos = 0
    for c in range(nc):
        s.start[c] = pos
        s.fill[c] = pos
        pos += s.cnt[c]
    s.start[nc] = pos
    for k in range(config.shape[0]):
        c = config[k]
        s.members[s.fill[c]] = k
        s.fill[c] += 1
    for c in range(nc):
        if s.cnt[c] == 0:
            continue
        cyc, st, need = _allocate(
            s.members, s.start[c], s.start[c + 1], kt.a, kt.b, kt.z, cores, pl_in, ps_in,
            k_pl, k_ps,
        )  # fmt: skip
        if st != Status.OK:
            res[ResultSlot.VIOLATION] = need - cores
            return Status.CORES
        cfg[c, ConfigCol.CYCLES] = cyc
        cfg[c, ConfigCol.COMPUTE] = cfg[c, ConfigCol.TILES] * cyc / cn.freq_GHz
    return Status.OK


@jit(inline=True)
def _flop_compute(cn, cfg, res, s):
    """FLOP model: compute ns = T_c x the summed per-tile times; one core per kernel at the
    least (Status.CORES with the shortfall)."""
    cores = cn.cores
    for c in range(cn.num_config):
        if s.cnt[c] > cores:
            res[ResultSlot.VIOLATION] = s.cnt[c] - cores
            return Status.CORES
        cfg[c, ConfigCol.COMPUTE] = cfg[c, ConfigCol.TILES] * cfg[c, ConfigCol.COMPUTE]
    return Status.OK


@jit(inline=True)
def _times_and_totals(cn, cfg, res, s):
    """Memory and network ns and the II of every configuration (``combine_overlap``, x the
    largest num_input in v2), then the sum of IIs, ns_per_batch and final_ns."""
    all_ii = 0.0
    lat = cn.ar_latency_ns
    bw = res[ResultSlot.DRAM_BW]
    for c in range(cn.num_config):
        tcc = cfg[c, ConfigCol.TILES]
        tm = (tcc * s.memb[c] + s.memk[c]) / bw
        ch = max(s.chan[c, 0], s.chan[c, 1], s.chan[c, 2])
        for j in range(3, s.chan.shape[1]):  # a network of more than 3 dimensions
            ch = max(ch, s.chan[c, j])
        tn = tcc * s.net_t[c] + s.net_1[c] + ch + lat * s.arcnt[c]
        ii = combine_overlap(cfg[c, ConfigCol.COMPUTE], tm, tn, cn.overlap)
        if cn.ii_num_input:
            ii *= s.numin[c]
        cfg[c, ConfigCol.MEMORY] = tm
        cfg[c, ConfigCol.NETWORK] = tn
        cfg[c, ConfigCol.II] = ii
        all_ii += ii
    batch = all_ii * cn.batch_mult + cn.p2p_ns
    res[ResultSlot.ALL_II] = all_ii
    res[ResultSlot.BATCH] = batch
    res[ResultSlot.FINAL] = batch / cn.num_copy


@jit(internal=True)
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


@jit(inline=True)
def _weight_tiling(config, cnt, kt, et, cfg, div, ndiv, cap, divides, k_tf):
    """Smallest weight tiling factors of lone weight kernels that make every configuration fit
    (each divisible contribution gets an equal share of its configuration's slack), then the
    tiled SRAM footprints. ``divides``: v2, the factor must divide the weight bytes."""
    n = config.shape[0]
    ne = et.src.shape[0]
    for k in range(n):
        c = config[k]
        if kt.is_weight[k] == 1 and cnt[c] == 1:
            tf = 1
            if div[c] > 0.0 and cfg[c, ConfigCol.SRAM] + div[c] > cap:
                need = kt.weight_sram[k] * ndiv[c] / (cap - cfg[c, ConfigCol.SRAM])
                tf = max(2, int(math.ceil(min(need, _EXACT))))
            for e in range(ne):
                if et.src[e] == k:
                    cd = config[et.dst[e]]
                    for cc in (c, cd):
                        if cfg[cc, ConfigCol.SRAM] + div[cc] > cap:
                            need = 2.0 * et.sram_bytes[e] * ndiv[cc] / (cap - cfg[cc, ConfigCol.SRAM])
                            tf = max(tf, max(2, int(math.ceil(min(need, _EXACT)))))
            if divides and tf > 1 and 0.0 < kt.weight_sram[k] <= _EXACT:
                tf = _smallest_divisor_at_least(int(kt.weight_sram[k]), tf)
            k_tf[k] = tf
    for k in range(n):
        c = config[k]
        if kt.is_weight[k] == 1 and cnt[c] == 1:
            cfg[c, ConfigCol.SRAM] += kt.weight_sram[k] / k_tf[k]
    for e in range(ne):
        s = et.src[e]
        cs, cd = config[s], config[et.dst[e]]
        if cs != cd and kt.is_weight[s] == 1 and cnt[cs] == 1:
            cfg[cs, ConfigCol.SRAM] += 2.0 * et.sram_bytes[e] / k_tf[s]
            cfg[cd, ConfigCol.SRAM] += 2.0 * et.sram_bytes[e] / k_tf[s]


class _Scratch(NamedTuple):
    """Work arrays of ``_eval_rows`` (allocated once per batch): the weight kernels and the
    per-configuration sums of one row."""

    weights: np.ndarray  #: int64 (W), the weight kernels (is_weight = 1) in kernel order
    cnt: np.ndarray  #: int64 (C + 1), kernels per configuration
    start: np.ndarray  #: int64 (C + 1), first slot of each configuration in ``members``
    members: np.ndarray  #: int64 (n), kernels grouped by configuration
    fill: np.ndarray  #: int64 (C + 1), next free slot while grouping
    net_t: np.ndarray  #: float64 (C), per-tile network ns
    net_1: np.ndarray  #: float64 (C), per-execution network ns
    chan: np.ndarray  #: float64 (C, channels), channel ns
    arcnt: np.ndarray  #: int64 (C), all-reduces (link latency count)
    memb: np.ndarray  #: float64 (C), spilled buffer bytes per tile
    memk: np.ndarray  #: float64 (C), memory_size bytes
    act: np.ndarray  #: float64 (C + 1), live activation bytes (difference array)
    div: np.ndarray  #: float64 (C), SRAM bytes that weight tiling divides
    ndiv: np.ndarray  #: int64 (C), how many such contributions
    numin: np.ndarray  #: int64 (C), largest num_input
    nset: np.ndarray  #: int64 (C), kernels that set num_input
    nunset: np.ndarray  #: int64 (C), kernels that do not


@jit(internal=True)
def _scratch(kt, nc):
    """Fresh ``_Scratch`` for a problem with kernel table ``kt`` and ``nc`` configurations."""
    n = kt.is_weight.shape[0]
    nw = 0
    for k in range(n):
        if kt.is_weight[k] == 1:
            nw += 1
    weights = np.empty(nw, np.int64)
    nw = 0
    for k in range(n):
        if kt.is_weight[k] == 1:
            weights[nw] = k
            nw += 1
    i64, f64 = np.int64, np.float64
    return _Scratch(
        weights,
        np.zeros(nc + 1, i64), np.zeros(nc + 1, i64), np.zeros(n, i64), np.zeros(nc + 1, i64),
        np.zeros(nc, f64), np.zeros(nc, f64), np.zeros((nc, kt.channel_ns.shape[1]), f64),
        np.zeros(nc, i64),
        np.zeros(nc, f64), np.zeros(nc, f64), np.zeros(nc + 1, f64), np.zeros(nc, f64),
        np.zeros(nc, i64), np.zeros(nc, i64), np.zeros(nc, i64), np.zeros(nc, i64),
    )  # fmt: skip


@jit
def evaluate_one(kt, et, cn, config, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf):
    """Evaluate one assignment with full outputs. Returns the status code."""
    n = config.shape[0]
    finals = np.zeros(1, np.float64)
    statuses = np.zeros(1, np.int64)
    viol = np.zeros(1, np.float64)
    configs = np.empty((1, n), np.int64)
    for k in range(n):
        configs[0, k] = config[k]
    _eval_rows(kt, et, cn, configs, pl_in, ps_in, cfg, res, k_pl, k_ps, k_tf, finals, statuses,
               viol, _scratch(kt, cn.num_config))  # fmt: skip
    return statuses[0]


@jit
def evaluate_batch(kt, et, cn, configs, finals, statuses, violations):
    """Evaluate every row of ``configs`` (cores chosen optimally); write final_ns (inf when
    infeasible), the status and the violated amount of each row."""
    n = configs.shape[1]
    nc = cn.num_config
    _eval_rows(
        kt, et, cn, configs, np.zeros(n, np.int64), np.zeros(n, np.int64),
        np.zeros((nc, NUM_CFG), np.float64), np.zeros(NUM_RES, np.float64),
        np.ones(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
        finals, statuses, violations, _scratch(kt, nc),
    )  # fmt: skip


# --------------------------------------------------------------------------- one configuration
# ``set_cost`` takes the steps of ``_eval_row`` for one configuration: ``_set_kernels``,
# ``_set_edges`` (its sums), ``_set_fits`` (rules and capacities), ``_set_compute``.
class _SetSums(NamedTuple):
    """Sums over the kernels and edges of one configuration (``set_cost``)."""

    cnt: int  #: kernels in the configuration (listed in ``members[:cnt]``)
    lone: int  #: the configuration's kernel when it is a lone weight kernel, else -1
    compute_ns: float  #: FLOP-model compute ns per tile
    sram: float  #: SRAM bytes that weight tiling does not divide
    div: float  #: SRAM bytes that weight tiling divides
    hidden: float  #: untiled read-side bytes of buffers from weight kernels elsewhere
    net_tile_ns: float  #: network ns per tile
    net_once_ns: float  #: network ns per execution
    channel_ns: float  #: the largest channel's ns
    all_reduce: int  #: all-reduces (link latency count)
    memory_bytes: float  #: memory_size bytes
    spilled_bytes: float  #: buffer bytes per tile through DRAM
    live: float  #: live activation bytes per tile while the configuration runs
    nset: int  #: kernels that set num_input
    numin: int  #: largest num_input (1 when none)


@jit
def set_cost(kt, et, cn, where, dram_bw, live_cap, relax, members, k_pl, k_ps, zero, out):
    """II of one configuration: ``where[k]`` is 1 for its kernels, 2 for kernels of earlier
    configurations (3: an earlier weight kernel alone in its configuration, whose output
    buffers are weight-tiled), 0 for later ones (the DP over order ideals, docs/design.md).

    The same equations as ``_eval_rows`` restricted to one configuration: set-local except the
    SRAM read-side footprint of buffers produced by a lone weight kernel of another
    configuration, when the caller does not mark it with 3: counted untiled (``relax`` = 0, an
    over-estimate; ``out[SetSlot.HIDDEN]`` = 1 when a rejection might be due to it), or free
    (``relax`` = 1, which turns a DP into a lower bound); ``relax`` = 2: the caller marks
    lone weight kernels exactly. ``live_cap`` bounds T_c * live activation bytes (DRAM).
    Writes every ``SetSlot`` of ``out``.
    """
    out[SetSlot.HIDDEN] = 0.0
    sums = _set_edges(kt, et, where, relax, _set_kernels(kt, where, members))
    tcc = cn.num_tile
    if cn.per_config_tiles and sums.nset > 0:
        tcc = 1
    if not _set_fits(cn, sums, tcc, live_cap, out):
        return
    tc = _set_compute(kt, cn, sums, tcc, members, k_pl, k_ps, zero, out)
    if tc < 0.0:
        return
    tm = (tcc * sums.spilled_bytes + sums.memory_bytes) / dram_bw
    tn = tcc * sums.net_tile_ns + sums.net_once_ns + sums.channel_ns + cn.ar_latency_ns * sums.all_reduce
    ii = combine_overlap(tc, tm, tn, cn.overlap)
    if cn.ii_num_input:
        ii *= sums.numin
    out[SetSlot.II] = ii
    out[SetSlot.STATUS] = Status.OK.value
    out[SetSlot.VIOLATION] = 0.0


@jit(step=True)
def _set_kernels(kt, where, members):
    """The kernel terms of the configuration (``where[k]`` = 1), listing its kernels in
    ``members``; a lone weight kernel's weight bytes are divisible, any other's are not."""
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
    nset = 0
    numin = 1
    for k in range(kt.a.shape[0]):
        if where[k] == 1:
            members[cnt] = k
            cnt += 1
            tc += kt.compute_ns[k]
            sram += kt.sram_extra[k]
            net_t += kt.net_tile_ns[k]
            net_1 += kt.net_once_ns[k]
            ch0 += kt.channel_ns[k, 0]
            ch1 += kt.channel_ns[k, 1]
            ch2 += kt.channel_ns[k, 2]
            arc += kt.all_reduce[k]
            memk += kt.memory_bytes[k]
            if kt.num_input[k] > 0:
                nset += 1
                if kt.num_input[k] > numin:
                    numin = kt.num_input[k]
    lone = -1
    if cnt == 1 and kt.is_weight[members[0]] == 1:
        lone = members[0]
    div = 0.0
    if lone >= 0:
        div += kt.weight_sram[lone]
    elif cnt > 0:
        for j in range(cnt):
            sram += kt.weight_sram[members[j]]
    ch = max(ch0, ch1, ch2)
    for j in range(3, kt.channel_ns.shape[1]):  # a network of more than 3 dimensions
        chj = 0.0
        for k in range(kt.a.shape[0]):
            if where[k] == 1:
                chj += kt.channel_ns[k, j]
        ch = max(ch, chj)
    return _SetSums(cnt, lone, tc, sram, div, 0.0, net_t, net_1, ch, arc, memk,
                    0.0, 0.0, nset, numin)  # fmt: skip


@jit(step=True)
def _set_edges(kt, et, where, relax, k):
    """``k`` (the kernel terms) plus the edge terms: re-layout collectives of edges leaving
    the configuration, on-chip buffers, spilled buffers (DRAM traffic and the two-buffer
    footprint: divisible when tiled, free or counted untiled by ``relax``), live bytes."""
    sram = k.sram
    div = k.div
    net_t = k.net_tile_ns
    arc = k.all_reduce
    memb = 0.0
    live = 0.0
    hidden = 0.0
    for e in range(et.src.shape[0]):
        s, d = et.src[e], et.dst[e]
        s_in = where[s] == 1
        d_in = where[d] == 1
        if s_in:
            net_t += et.net_tile_ns[e]
            arc += et.all_reduce[e]
        if s_in and d_in:
            sram += et.sram_bytes[e] * et.sram_depth[e]
        elif s_in or d_in:
            memb += et.buffer_bytes[e]
            fp = 2.0 * et.sram_bytes[e]
            if (s_in and k.lone >= 0) or (d_in and where[s] == 3):
                div += fp
            elif d_in and kt.is_weight[s] == 1 and relax == 1:
                pass
            else:
                sram += fp
                if d_in and kt.is_weight[s] == 1 and relax == 0:
                    hidden += fp
        if where[s] != 0 and where[d] < 2 and not (s_in and d_in):
            live += et.buffer_bytes[e]
    return _SetSums(k.cnt, k.lone, k.compute_ns, sram, div, hidden, net_t, k.net_once_ns,
                    k.channel_ns, arc, k.memory_bytes, memb, live, k.nset, k.numin)  # fmt: skip


@jit(step=True)
def _set_fits(cn, sums, tcc, live_cap, out):
    """The configuration's rules and capacities: writes LIVE, II = inf and, when it breaks
    one (num_input mixing, SRAM, DRAM), STATUS and VIOLATION; else its SRAM bytes (the
    divisible part tiled down to the capacity). Returns whether it fits."""
    live = sums.live * tcc
    out[SetSlot.LIVE] = live
    out[SetSlot.II] = np.inf
    if cn.num_input_mixed and sums.nset > 0 and sums.nset < sums.cnt:
        out[SetSlot.STATUS] = Status.CONFIG.value
        out[SetSlot.VIOLATION] = 0.0
        return False
    sram, div = sums.sram, sums.div
    if cn.sram_check:
        cap = cn.sram_cap
        over = sram - cap
        if over > 0.0 or (div > 0.0 and over >= 0.0):
            out[SetSlot.STATUS] = Status.SRAM.value
            out[SetSlot.VIOLATION] = over + div
            if sums.hidden > 0.0 and over - sums.hidden < 0.0:
                out[SetSlot.HIDDEN] = 1.0
            return False
        out[SetSlot.SRAM] = sram + (div if sram + div <= cap else cap - sram)
    else:
        out[SetSlot.SRAM] = sram + div
    if live > live_cap:
        # live_cap = (DRAM capacity - fixed bytes) / act_mult: the DRAM overflow in bytes is
        # act_mult times the excess of live bytes
        out[SetSlot.STATUS] = Status.DRAM.value
        out[SetSlot.VIOLATION] = (live - live_cap) * cn.dram_act_mult
        return False
    return True


@jit(step=True)
def _set_compute(kt, cn, sums, tcc, members, k_pl, k_ps, zero, out):
    """Compute ns of the configuration (cycle model: optimal core allocation; FLOP model:
    the summed times), x T_c; -1 with STATUS = CORES and the shortfall when the cores do
    not suffice."""
    cnt = sums.cnt
    cores = cn.cores
    if cn.cycle_model:
        if cnt == 0:
            return 0.0
        cyc, st, _ = _allocate(members, 0, cnt, kt.a, kt.b, kt.z, cores, zero, zero, k_pl, k_ps)
        if st != Status.OK:
            out[SetSlot.STATUS] = Status.CORES.value
            out[SetSlot.VIOLATION] = cnt - cores
            return -1.0
        return tcc * cyc / cn.freq_GHz
    if cnt > cores:
        out[SetSlot.STATUS] = Status.CORES.value
        out[SetSlot.VIOLATION] = cnt - cores
        return -1.0
    return tcc * sums.compute_ns


# ---- admissible lower bound of a set's II (used to prune the assignment search) ----------
@jit
def bound_terms(kt, et, cn, dram_bw):
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
    sum over S (BoundCol.FLOOR: a maximum), so the bound splits over configurations.
    Returns (per-kernel terms [n, CH0 + channels]: one channel column per network dimension,
    at least 3; per-edge memory time [E]).
    """
    n = kt.a.shape[0]
    nch = kt.channel_ns.shape[1]
    out = np.zeros((n, BoundCol.CH0 + nch), np.float64)
    edge_tm = np.zeros(et.src.shape[0], np.float64)
    t = cn.num_tile
    tmin = min(t, 1) if cn.per_config_tiles else t
    freq = cn.freq_GHz
    cores = cn.cores
    lat = cn.ar_latency_ns
    for k in range(n):
        if cn.cycle_model:
            if kt.a[k] > 0 and kt.b[k] > 0 and kt.z[k] > 0:
                work = float(kt.a[k]) * float(kt.b[k]) * float(kt.z[k])
                out[k, BoundCol.TC] = tmin * work / (cores * freq)
                cyc, _, _ = min_cycles(kt.a[k], kt.b[k], kt.z[k], cores)
                out[k, BoundCol.FLOOR] = tmin * cyc / freq
        else:
            out[k, BoundCol.TC] = tmin * kt.compute_ns[k]
        out[k, BoundCol.TM] = kt.memory_bytes[k] / dram_bw
        out[k, BoundCol.TN] = tmin * kt.net_tile_ns[k] + kt.net_once_ns[k] + lat * kt.all_reduce[k]
        for j in range(nch):
            out[k, BoundCol.CH0 + j] = kt.channel_ns[k, j]
    for e in range(et.src.shape[0]):
        s = et.src[e]
        out[s, BoundCol.TN] += tmin * et.net_tile_ns[e] + lat * et.all_reduce[e]
        edge_tm[e] = tmin * et.buffer_bytes[e] / dram_bw
    return out, edge_tm


@jit
def set_bound(mask, terms, edge_tm, overlap, e_src, e_dst):
    """Lower bound of the summed II of any split of the kernels in bitmask ``mask`` over
    configurations (one or more): the additive terms of ``bound_terms`` combined by
    ``combine_overlap`` (``overlap``: a ``codes.Overlap`` value), as ``set_cost`` combines
    compute, memory and network."""
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
            tc += terms[k, BoundCol.TC]
            if terms[k, BoundCol.FLOOR] > fl:
                fl = terms[k, BoundCol.FLOOR]
            tm += terms[k, BoundCol.TM]
            tn += terms[k, BoundCol.TN]
            c0 += terms[k, BoundCol.CH0]
            c1 += terms[k, BoundCol.CH1]
            c2 += terms[k, BoundCol.CH2]
        rest >>= 1
        k += 1
    for e in range(e_src.shape[0]):
        if ((mask >> e_src[e]) ^ (mask >> e_dst[e])) & 1:
            tm += edge_tm[e]
    if fl > tc:
        tc = fl
    ch = max(c0, c1, c2)
    for j in range(BoundCol.CH2 + 1, terms.shape[1]):  # a network of more than 3 dimensions
        cj = 0.0
        rest = mask
        k = 0
        while rest != 0:
            if rest & 1:
                cj += terms[k, j]
            rest >>= 1
            k += 1
        ch = max(ch, cj)
    tn += ch
    return combine_overlap(tc, tm, tn, overlap)
