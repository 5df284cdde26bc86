"""Lowering: a validated spec plus the outer choices -> the records of ``cost/layout.py``.

This is the only code that knows both worlds: it reads ``Spec`` objects and writes the
read-only records (``KernelTable``, ``EdgeTable``, ``Constants``) that the jitted evaluator
(``dfsearch.cost.evaluate``) and the searches consume; the pure-Python twin
(``dfsearch.cost.reference``) reads the spec itself. Every equation that depends only on the outer choices
(shape, sharding, micro-batch size, tile count, number of configurations) is evaluated here,
once: shard dimensions, buffer and weight bytes, FLOP, collective ratios and bytes, the
pipeline factor and batch multiplier, DRAM constants.
The per-configuration sums, maxima, capacities and core allocation depend on the
configuration assignment and are the evaluator's job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dfsearch.codes import (
    Collective,
    ComputeType,
    Dim,
    Equations,
    ExecutionStyle,
    KernelKind,
    WorkloadKind,
)
from dfsearch.cost import network
from dfsearch.cost.layout import Constants, EdgeTable, KernelTable
from dfsearch.cost.quirks import Quirks
from dfsearch.kernels.graph import GraphStructure, downstream_layout, relayout, upstream_layout
from dfsearch.spec import AUTO, Spec
from dfsearch.validate import MAX_KERNEL_WORK

__all__ = [
    "Outer",
    "Problem",
    "KernelTable",
    "EdgeTable",
    "Constants",
    "lower",
    "shard_dims",
    "effective_num_config",
    "forced_config",
    "fwd_bwd_bounds",
]

@dataclass(frozen=True, slots=True)
class Outer:
    """The outer choices of one evaluation."""

    shape: tuple[int, ...]
    sharding: tuple[Dim, ...]
    micro_batch_size: int
    num_tile: int
    num_config: int


@dataclass(frozen=True, slots=True, eq=False)
class Problem:
    """One lowered problem: the three records every jitted function takes
    (``dfsearch.cost.layout``), plus metadata for reports that no jitted code reads."""

    kernels: KernelTable
    edges: EdgeTable
    constants: Constants
    # metadata for reports (not passed to the evaluator)
    outer: Outer
    names: tuple[str, ...]
    shard_m: tuple[int, ...]
    shard_k: tuple[int, ...]
    shard_n: tuple[int, ...]
    workload_flop: float
    peak_gflops: float
    num_chip: int
    tp: int
    pp: int
    dp: int
    num_micro_batch: int
    layers: int
    layers_per_stage: int
    pipeline_factor: float

    @property
    def num_config(self) -> int:
        return self.constants.num_config

    @property
    def num_kernels(self) -> int:
        return len(self.names)


# --------------------------------------------------------------------------- helpers
def effective_num_config(spec: Spec, requested: int | None = None) -> int:
    """C: ``num_config`` (or ``requested`` when it is AUTO), 0 => one per kernel."""
    n = len(spec.graph.kernels)
    c = spec.execution.num_config
    if c == AUTO:
        c = requested if requested is not None else n
    if spec.execution.style is ExecutionStyle.KERNEL_BY_KERNEL or c == 0:
        return n
    return c


def forced_config(spec: Spec, num_config: int) -> bool:
    """True when configuration k must hold kernel k (KBK, or C = #kernels; docs/model.md)."""
    return num_config == len(spec.graph.kernels)


def fwd_bwd_bounds(num_config: int) -> tuple[int, int]:
    """(f, b): FWD kernels in configurations <= f, BWD kernels in >= b (FWD/BWD rule)."""
    if num_config % 2 == 0:
        return num_config // 2 - 1, num_config // 2
    return num_config // 2, num_config // 2


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shard_dims(
    spec: Spec, k_index: int, choice: Dim, tp: int, t: int, grid: tuple[int, int]
) -> tuple[int, int, int]:
    """(sM, sK, sN): per-chip, per-tile dimensions of one kernel."""
    k = spec.graph.kernels[k_index]
    rows, kk, nn = k.rows, (k.k if k.kind.has_k else 1), k.n
    kind = spec.workload.kind
    if kind is WorkloadKind.HPL:
        x, y = grid
        return _ceil_div(rows, x), _ceil_div(kk, y), nn
    if kind is WorkloadKind.FFT:
        chips = spec.system.num_chip // spec.num_copy
        return rows, kk, _ceil_div(nn, chips)

    def dim_of(d: Dim) -> str:
        return {Dim.OUTER: "m", Dim.M: "m", Dim.K: "k", Dim.N: "n"}.get(d, "")

    sharded, tiled = dim_of(choice), dim_of(k.tiling)
    out = []
    for name, size in (("m", rows), ("k", kk), ("n", nn)):
        div = (tp if sharded == name else 1) * (t if tiled == name else 1)
        out.append(_ceil_div(size, div))
    return out[0], out[1], out[2]


def _f(values: list[float]) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    a.setflags(write=False)
    return a


def _i(values: list[int]) -> np.ndarray:
    a = np.asarray(values, dtype=np.int64)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------- lower
def lower(spec: Spec, outer: Outer, quirks: Quirks = Quirks()) -> Problem:
    """Evaluate every outer-choice-dependent equation and pack the result into arrays.

    Raises
    ------
    ValueError
        If ``outer`` does not fit the spec (wrong lengths). Infeasible outer choices
        (e.g. indivisible batch) are not errors: see ``dfsearch.cost.outer_status``.
    """
    g, sysm, ex, wl = spec.graph, spec.system, spec.execution, spec.workload
    kernels = g.kernels
    n = len(kernels)
    if len(outer.sharding) != n or len(outer.shape) != len(sysm.network):
        raise ValueError("outer choices do not match the spec")
    st = GraphStructure.of(g)
    word = ex.word_bytes
    shape = outer.shape
    grp = network.groups(sysm, shape)
    kind = wl.kind
    is_llm = kind is WorkloadKind.LLM
    t = outer.num_tile if is_llm else 1
    copies = spec.num_copy
    chips_per_copy = sysm.num_chip // copies
    v2 = ex.equations is Equations.V2
    legacy = ex.equations is Equations.LEGACY
    acc = sysm.accelerator
    peak = acc.peak_gflops
    cycle_model = ex.compute_util == 0.0
    grid = network.hpl_grid(shape) if kind is WorkloadKind.HPL else (1, 1)
    skip_ic = ex.skip_inter_chip_optimization
    sharding = outer.sharding if (is_llm and not skip_ic) else tuple(Dim.NO for _ in kernels)

    # --- batch structure
    if is_llm:
        gb, mbs, dp, pp = wl.global_batch_size, outer.micro_batch_size, grp.dp, grp.pp
        layers = wl.num_layer
    elif kind is WorkloadKind.DLRM:
        gb, mbs, dp, pp = wl.global_batch_size, 1, chips_per_copy, 1
        layers = 1
    else:
        gb, mbs, dp, pp = 1, 1, 1, 1
        layers = 1
    nmb = gb // (mbs * dp) if gb % (mbs * dp) == 0 else 0
    lps = _ceil_div(layers, pp)
    ccc = lps - 1 if lps >= 2 else 1
    if quirks.bubble_over_layers_per_stage:
        pf = 1.0 + (pp - 1) / (max(nmb, 1) * ccc)
    else:
        pf = 1.0 + (pp - 1) / max(nmb, 1)
    if kind in (WorkloadKind.LLM, WorkloadKind.DLRM):
        batch_mult = pf * lps * gb / dp
    else:
        batch_mult = 1.0

    # --- shard dimensions, buffers, weights, compute
    dims = [shard_dims(spec, i, sharding[i], grp.tp, t, grid) for i in range(n)]
    w, h = acc.systolic_width, acc.systolic_height
    es = ex.effective_stage
    k_a, k_b, k_z, k_tc, k_wsram, k_isw = [], [], [], [], [], []
    weight_total = 0.0
    for i, k in enumerate(kernels):
        sm, sk, sn = dims[i]
        mult = k.num_input if (k.num_input > 0 and not v2) else 1
        a = _ceil_div(sm, w)
        if k.type is ComputeType.SIMD:
            b, z = 1, sn
            flop = float(sm) * sn
        elif k.use_effective_stage and es > 0:
            b, z = _ceil_div(sk, es), sn
            flop = 2.0 * sm * sn * sk
        else:
            b, z = _ceil_div(sn, h), sk
            flop = 2.0 * sm * sn * sk
        if cycle_model and a * b * z * mult > MAX_KERNEL_WORK:
            # validation rejects such kernels (validate.MAX_KERNEL_WORK bounds every cycle
            # count of the int64 evaluator); a spec built without it must not wrap around
            raise ValueError(
                f"kernel {k.name!r}: {a} * {b} * {z * mult} cycles on one core exceed "
                f"2^60 = {MAX_KERNEL_WORK}; the cycle model would overflow (validate the spec)"
            )
        k_a.append(a)
        k_b.append(b)
        k_z.append(z * mult)
        if cycle_model:
            k_tc.append(0.0)
        else:
            rate = ex.compute_util * peak
            if k.type is ComputeType.SIMD and not quirks.simd_at_systolic_peak:
                rate /= h
            k_tc.append(flop * mult / rate)
        is_w = k.kind is KernelKind.GEMM_WEIGHT
        wbytes = float(sm) * sk * word if is_w else 0.0
        weight_total += wbytes
        k_isw.append(1 if is_w else 0)
        k_wsram.append(0.0 if (k.skip_weight or not is_w) else wbytes)

    e_src, e_dst = list(st.src), list(st.dst)
    e_b = [
        0.0 if c.zero_out else float(dims[s][0]) * dims[s][2] * word
        for c, s in zip(g.connections, e_src)
    ]
    # SRAM footprint of edges produced by a weight kernel: DFModel indexes the edge arrays
    # with the weight's index. Fixed by default; replicated on request (docs/model.md).
    e_sram_b, e_sram_depth = list(e_b), list(st.depths)
    if ex.replicate_sram_index_bug:
        widx = {}
        for i, k in enumerate(kernels):
            if k.kind is KernelKind.GEMM_WEIGHT:
                widx[i] = len(widx)
        for e, s in enumerate(e_src):
            if s in widx and widx[s] < len(e_b):
                e_sram_b[e], e_sram_depth[e] = e_b[widx[s]], st.depths[widx[s]]

    # --- network
    k_net_t, k_net_1 = [0.0] * n, [0.0] * n
    k_chan = np.zeros((n, 3))
    k_ar = [0] * n
    e_net_t = [0.0] * len(e_src)
    e_ar = [0] * len(e_src)
    ar_latency = 0.0
    if is_llm:
        r = network.llm_ratios(
            sysm, shape, separate_rs_ag_for_ar=ex.separate_rs_ag_for_ar, quirks=quirks
        )
        ar_latency = r.ar_latency
        for i, k in enumerate(kernels):
            typ = k.communication
            if typ is Collective.NONE and sharding[i] is Dim.K and not skip_ic:
                typ = Collective.ALL_REDUCE
            by = float(dims[i][0]) * dims[i][2] * word
            if typ is Collective.ALL_REDUCE:
                k_net_t[i] = r.all_reduce * by
                k_ar[i] = 1 if by > 0 else 0
            elif typ is Collective.ALL_TO_ALL:
                k_net_t[i] = r.all_to_all * by
            elif typ is Collective.ALL_GATHER:
                k_net_t[i] = r.all_gather * by
            elif typ is Collective.ALL_REDUCE_PERIODIC and nmb > 0:
                k_net_1[i] = r.all_reduce_periodic * by / nmb
        if not skip_ic:
            for e, (s, d) in enumerate(zip(e_src, e_dst)):
                up = upstream_layout(sharding[s])
                down = downstream_layout(kernels[d], st.operand[e], sharding[d])
                typ = relayout(up, down)
                by = float(dims[s][0]) * dims[s][2] * word
                if typ is Collective.ALL_GATHER:
                    e_net_t[e] = r.all_gather * by
                elif typ is Collective.ALL_TO_ALL:
                    e_net_t[e] = r.all_to_all * by
        p2p = r.p2p * (2.0 * wl.hidden_dim * wl.seq_len * word if g.is_training else 0.0)
        p2p *= layers
    else:
        p2p = 0.0
        if kind in (WorkloadKind.DLRM, WorkloadKind.FFT):
            fac = network.a2a_factors(sysm, shape, chips_per_copy, ex.equations)
            div = chips_per_copy if kind is WorkloadKind.DLRM else chips_per_copy**2
            for i, k in enumerate(kernels):
                if k.communication is Collective.ALL_TO_ALL and chips_per_copy > 1:
                    per_chip = k.communication_bytes / div
                    for j, f in enumerate(fac):
                        k_chan[i, j] = per_chip * f
                if kind is WorkloadKind.DLRM and k.communication is Collective.ALL_REDUCE_PERIODIC:
                    by = float(dims[i][0]) * dims[i][2] * word / max(nmb, 1)
                    if quirks.dlrm_arp_bytes_as_ns:
                        k_net_1[i] = by * (2.0 if legacy else 1.0)
                    else:
                        r = network.llm_ratios(
                            sysm, shape, separate_rs_ag_for_ar=False, quirks=quirks
                        )
                        k_net_1[i] = by * r.all_reduce_periodic
        elif kind is WorkloadKind.HPL:
            x, y = grid
            bws = [d.link_bw_GBps for d in sysm.network]
            for i, k in enumerate(kernels):
                if k.communication is Collective.BROADCAST and x > 1:
                    k_chan[i, 1] = k.communication_bytes / x / bws[1]
                if k.communication2 is Collective.POINT_TO_POINT and y > 1:
                    # DFModel reads communication_size here, not communication_size_2
                    k_chan[i, 0] = k.communication_bytes / y / bws[0]
    k_chan.setflags(write=False)

    # --- memory
    ext = sum(k.dram_extra_bytes for k in kernels)
    if is_llm:
        dram_fixed = lps * weight_total + lps * ext
        act_mult = float(mbs)
    elif kind is WorkloadKind.DLRM:
        table = wl.num_table * wl.row * wl.emb_dim * word / chips_per_copy
        dram_fixed = lps * weight_total + lps * ext + table
        act_mult = float(mbs)
    elif kind is WorkloadKind.HPL:
        dram_fixed, act_mult = wl.n * wl.n * word / chips_per_copy + ext, 0.0
    else:
        dram_fixed, act_mult = wl.length * word / chips_per_copy + ext, 0.0
    mem = sysm.memory
    sram_check = is_llm or (kind is WorkloadKind.DLRM and not v2)
    sram_cap = acc.sram_bytes if (acc.sram_bytes > 0 or not v2) else math.inf
    dram_cap = mem.dram_bytes if mem.dram_bytes > 0 else math.inf
    tiered = (not v2) and mem.second_dram_bytes > 0

    # --- configurations
    c = outer.num_config
    fixed = forced_config(spec, c)
    fb_rule = (
        ex.style is ExecutionStyle.DATAFLOW and not fixed and g.is_training and c < n
    )
    f_cap, b_min = fwd_bwd_bounds(c)
    num_set = sum(1 for k in kernels if k.num_input > 0)

    extras = any(k.memory_bytes or k.sram_extra_bytes or k.num_input for k in kernels)
    constants = Constants(
        freq_GHz=float(acc.freq_GHz), sram_cap=float(sram_cap), dram_cap=float(dram_cap),
        dram_bw=float(mem.dram_bw_GBps),
        dram2_bw=float(mem.second_dram_bw_GBps) if tiered else 0.0,
        dram2_cap=float(mem.second_dram_bytes) if tiered else 0.0,
        dram_fixed=float(dram_fixed), dram_act_mult=float(act_mult),
        ar_latency_ns=float(ar_latency), batch_mult=float(batch_mult), p2p_ns=float(p2p),
        num_copy=float(copies), num_tile=int(t), num_config=int(c), cores=int(acc.cores),
        overlap=int(ex.overlap), fb_last_fwd=int(f_cap), fb_first_bwd=int(b_min),
        cycle_model=bool(cycle_model), sram_check=bool(sram_check), tf_divides=v2,
        per_config_tiles=v2 and num_set > 0, ii_num_input=v2, fb_rule=bool(fb_rule),
        num_input_mixed=0 < num_set < n, fixed_config=bool(fixed),
        sparse=bool(extras or k_chan.any() or any(k_net_1)),
    )

    pins = [k.config if (k.config >= 0 and not fixed) else -1 for k in kernels]
    return Problem(
        kernels=KernelTable(
            a=_i(k_a), b=_i(k_b), z=_i(k_z), compute_ns=_f(k_tc), weight_sram=_f(k_wsram),
            is_weight=_i(k_isw), memory_bytes=_f([k.memory_bytes for k in kernels]),
            net_tile_ns=_f(k_net_t), net_once_ns=_f(k_net_1), channel_ns=k_chan,
            all_reduce=_i(k_ar), phase=_i([int(k.phase) for k in kernels]), pin=_i(pins),
            num_input=_i([k.num_input for k in kernels]),
            sram_extra=_f([k.sram_extra_bytes for k in kernels]),
        ),
        edges=EdgeTable(
            src=_i(e_src), dst=_i(e_dst), buffer_bytes=_f(e_b), sram_bytes=_f(e_sram_b),
            sram_depth=_i(e_sram_depth), net_tile_ns=_f(e_net_t), all_reduce=_i(e_ar),
        ),
        constants=constants,
        outer=outer, names=st.names,
        shard_m=tuple(d[0] for d in dims), shard_k=tuple(d[1] for d in dims),
        shard_n=tuple(d[2] for d in dims),
        workload_flop=g.flop * layers * gb, peak_gflops=peak, num_chip=sysm.num_chip,
        tp=grp.tp, pp=pp, dp=dp, num_micro_batch=nmb, layers=layers, layers_per_stage=lps,
        pipeline_factor=pf,
    )  # fmt: skip

