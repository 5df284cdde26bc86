"""A deliberately naive, pure-Python twin of the evaluator, used only by tests.

Written straight from DFModel's equations and our interpretation decisions (docs/model.md;
listed in ``tests/test_reference_differential.py``), independently of the lowering and the
jitted code. Everything is spelled out: the 0/1 matrices A, B, D, E, F, H that relate kernels
and edges to configurations are built as lists of lists and every per-configuration quantity is a
plain sum over all kernels or all edges weighted by those matrices. Speed is irrelevant here;
obviousness is the point. The differential tests compare this twin with
``dfsearch.cost.model.evaluate``.

The optimal core allocation of the cycle model is found by exhaustive
enumeration of every (Par_lane, Par_stage) pair of every kernel, which is only practical for
the tiny core counts the tests use. A kernel's pair is fixed by the decision only when both
``par_lane`` and ``par_stage`` give it a value > 0.

Weight tiling (docs/model.md): a weight kernel alone in its configuration
divides its weight and its out-edges' spilled footprints by tf; each non-zero divisible
footprint of an overfull configuration gets an equal share of the slack, tf >= 2; v2 rounds
tf up to a divisor of the weight bytes (any tf divides 0 bytes); when no divisor is large
enough, the largest (the weight bytes) is taken and the configuration does not fit (SRAM).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsearch.codes import (
    Collective,
    ComputeType,
    Dim,
    Equations,
    ExecutionStyle,
    KernelKind,
    Parallelism,
    Phase,
    Status,
    Topology,
    WorkloadKind,
)
from dfsearch.cost.overlap import combine_overlap
from dfsearch.cost.price import Price, price
from dfsearch.cost.quirks import Quirks
from dfsearch.decision import Decision
from dfsearch.kernels.graph import (
    GraphStructure,
    downstream_layout,
    relayout,
    upstream_layout,
)
from dfsearch.spec import AUTO, Spec

__all__ = ["RefResult", "reference_evaluate"]

_INF = float("inf")


@dataclass(frozen=True, slots=True)
class RefResult:
    """What the twin says about one decision. Per-configuration tuples are empty when the
    decision fails before the per-configuration quantities are defined (SHAPE,
    DIVISIBILITY, CONFIG, ORDER); ``final_ns`` and ``ns_per_batch`` are ``inf`` whenever the
    status is not OK."""

    status: Status
    violation: float
    final_ns: float
    ns_per_batch: float
    all_config_ii_ns: float
    dram_bytes: float
    dram_bw_GBps: float
    compute_ns: tuple[float, ...]
    memory_ns: tuple[float, ...]
    network_ns: tuple[float, ...]
    ii_ns: tuple[float, ...]
    sram_bytes: tuple[float, ...]
    tiles: tuple[int, ...]
    max_cycles: tuple[int, ...]
    # extras, for a wider comparison
    workload_flop: float = 0.0
    price: Price | None = None
    weight_tiling: tuple[int, ...] = ()
    tp: int = 1
    pp: int = 1
    dp: int = 1
    num_micro_batch: int = 1
    layers_per_stage: int = 1
    pipeline_factor: float = 1.0
    p2p_ns: float = 0.0
    shard_dims: tuple[tuple[int, int, int], ...] = ()


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _fail(status: Status, violation: float, **extra: object) -> RefResult:
    return RefResult(
        status=status,
        violation=float(violation),
        final_ns=_INF,
        ns_per_batch=_INF,
        all_config_ii_ns=0.0,
        dram_bytes=0.0,
        dram_bw_GBps=0.0,
        compute_ns=(),
        memory_ns=(),
        network_ns=(),
        ii_ns=(),
        sram_bytes=(),
        tiles=(),
        max_cycles=(),
        **extra,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- ratios
# DFModel's kinds (ring, switch, fc) and variants are written out here, independently of
# dfsearch.topology and dfsearch.cost.network; kinds DFModel lacks (mesh) take their
# per-dimension formulas from their registered kind object, composed naively below.
def _reduce_ratio(topo: Topology, p: int, bw: float) -> float:
    """ALL_REDUCE / ALL_GATHER / ALL_REDUCE_PERIODIC ratio, ns per byte."""
    if topo is Topology.RING or topo is Topology.SWITCH:
        return (p - 1) / (p * bw)
    if topo is Topology.FC:
        return 1 / (p * bw)
    return topo.kind.reduce_ratio(p, bw)


def _all_to_all_ratio(topo: Topology, p: int, bw: float) -> float:
    """LLM ALL_TO_ALL ratio, ns per byte."""
    if topo is Topology.RING:
        return p * p / (8 * bw)
    if topo is Topology.SWITCH:
        return p / (4 * bw)
    if topo is Topology.FC:
        return 1 / bw
    return topo.kind.all_to_all_ratio(p, bw)


def _latency_steps(topo: Topology, p: int) -> int:
    """Link latencies per TP all-reduce: p - 1 ring steps, one on FC."""
    if topo is Topology.RING or topo is Topology.SWITCH:
        return p - 1
    if topo is Topology.FC:
        return 1
    return topo.kind.latency_steps(p)


def _doubles_gradient(topo: Topology) -> bool:
    """Whether the doubled all-reduce volume also doubles the DP gradient all-reduce."""
    if topo in (Topology.RING, Topology.SWITCH, Topology.FC):
        return topo is not Topology.FC
    return topo.kind.doubles_gradient_all_reduce


def _composed_bisection(
    topologies: tuple[Topology, ...], shape: tuple[int, ...], n: int, equations: Equations
) -> tuple[list[float], list[float]]:
    """(msg_j, bwf_j) of a network DFModel does not have, from the kinds' bisection links:
    a grid (all dimensions direct) carries all pairs on every dimension, a hierarchical
    network the pairs of its inner group on each inner dimension."""
    kinds = [t.kind for t in topologies]
    nd = len(kinds)
    legacy = equations is Equations.LEGACY
    bis = [kinds[j].bisection_links(shape[j], equations) for j in range(nd)]
    if nd > 1 and all(k.direct for k in kinds):
        if nd == 2:
            whole = n * n / 2 if legacy else n * (n - 1) / 2
            return [whole, whole], [bis[0] * shape[0], bis[1] * shape[1]]
        x, y, z = shape
        whole = n * n if legacy else n * (n - 1) / 2
        return [whole] * 3, [bis[0] * x * y, bis[1] * x * z, bis[2] * y * z]
    msg = []
    for j in range(nd):
        if j == nd - 1:
            msg.append(n * n if legacy else n * (n - 1) / 2)
        else:
            g = math.prod(shape[: j + 1])
            msg.append(g * (g - 1) / 2)
    return msg, bis


def _bisection_table(
    topologies: tuple[Topology, ...], shape: tuple[int, ...], n: int, equations: Equations
) -> tuple[list[float], list[float]]:
    """(msg_j, bwf_j) per dimension for DLRM/FFT all-to-alls (legacy factors: docs/model.md)."""
    variant = "_".join(t.short for t in topologies)
    x = shape[0]
    y = shape[1] if len(shape) > 1 else 1
    z = shape[2] if len(shape) > 2 else 1
    legacy = equations is Equations.LEGACY
    v2 = equations is Equations.V2
    # message factor of the pairs that cross the outermost level: N(N-1)/2, legacy N^2
    whole = n * n if legacy else n * (n - 1) / 2

    def fc(s: int) -> float:
        return s * (s - 1) / 2 if v2 else s * s / 4

    def pairs(s: int) -> float:
        return s * (s - 1) / 2

    if variant == "sw":
        return [whole], [x]
    if variant == "fc":
        return [whole], [fc(x)]
    if variant == "r":
        return [whole], [2]
    if variant == "r_r":
        if legacy:
            return [n * n / 2, n * n / 2], [2 * x, 2 * y]
        return [whole, whole], [2 * x, 2 * y]
    if variant == "fc_fc":
        return [pairs(x), whole], [fc(x), fc(y)]
    if variant == "r_fc":
        return [pairs(x), whole], [2, fc(y)]
    if variant == "r_sw":
        return [pairs(x), whole], [2, y]
    if variant == "sw_sw":
        return [pairs(x), whole], [x, y]
    if variant == "r_r_r":
        return [whole, whole, whole], [2 * x * y, 2 * x * z, 2 * y * z]
    if variant == "r_sw_sw":
        return [pairs(x), pairs(x * y), whole], [2, y, z]
    if variant == "sw_sw_sw":
        return [pairs(x), pairs(x * y), whole], [x, y, z]
    return _composed_bisection(topologies, shape, n, equations)


# --------------------------------------------------------------------------- cycle model
def _cycles(
    kind_type: ComputeType,
    sm: int,
    sk: int,
    sn: int,
    pl: int,
    ps: int,
    w: int,
    h: int,
    effective: int,
    mult: int,
) -> int:
    """Cycles of one kernel on PL x PS cores (cycle model), times the streaming factor."""
    if kind_type is ComputeType.SIMD:
        return _ceil_div(sm, pl * w) * sn * mult
    if effective > 0:
        return _ceil_div(sm, pl * w) * _ceil_div(sk, ps * effective) * sn * mult
    return _ceil_div(sm, pl * w) * _ceil_div(sn, ps * h) * sk * mult


def _best_allocation(options: list[list[tuple[int, int, int]]], cores: int) -> int | None:
    """Smallest achievable max-cycles when each kernel picks one (cycles, PL, PS) option and
    the cores PL*PS of all kernels add up to at most ``cores``; ``None`` if impossible.

    Exhaustive: every cycle value any kernel can reach is a candidate for the optimum; for a
    candidate tau each kernel takes its cheapest option with cycles <= tau.
    """
    if not options:
        return 0
    candidates = sorted({cyc for opts in options for cyc, _, _ in opts})
    for tau in candidates:
        total = 0
        for opts in options:
            fitting = [pl * ps for cyc, pl, ps in opts if cyc <= tau]
            if not fitting:
                total = cores + 1
                break
            total += min(fitting)
        if total <= cores:
            return tau
    return None


# --------------------------------------------------------------------------- evaluation
def reference_evaluate(spec: Spec, decision: Decision, *, quirks: Quirks = Quirks()) -> RefResult:
    """Evaluate one decision with DFModel's equations, naively.

    Parameters
    ----------
    spec : Spec
        A validated spec.
    decision : Decision
        Shape, sharding, micro-batch size, tile count, configuration of every kernel and
        optional fixed core allocation.
    quirks : Quirks
        DFModel quirk switches (docs/model.md).

    Returns
    -------
    RefResult
        Status, violation and (when feasible) every time, byte and bandwidth figure.

    Raises
    ------
    NotImplementedError
        For a DLRM spec with ``quirks.dlrm_arp_bytes_as_ns`` off (not modelled here).
    ValueError
        If the decision's lengths do not match the spec.
    """
    graph, system, ex, wl = spec.graph, spec.system, spec.execution, spec.workload
    kernels = graph.kernels
    nk = len(kernels)
    if len(decision.config) != nk or len(decision.shape) != len(system.network):
        raise ValueError("decision does not match the spec")
    gs = GraphStructure.of(graph)
    src, dst = gs.src, gs.dst
    ne = len(src)
    eq = ex.equations
    v2 = eq is Equations.V2
    word = ex.word_bytes
    shape = tuple(decision.shape)
    kind = wl.kind
    llm = kind is WorkloadKind.LLM
    dlrm = kind is WorkloadKind.DLRM
    hpl = kind is WorkloadKind.HPL
    fft = kind is WorkloadKind.FFT
    if dlrm and not quirks.dlrm_arp_bytes_as_ns:
        raise NotImplementedError("DLRM with dlrm_arp_bytes_as_ns off is not modelled by the twin")

    # ---------------------------------------------------------------- degrees
    num_copy = spec.num_copy
    chips = system.num_chip // num_copy
    tp = pp = dp = 1
    tp_dim = pp_dim = dp_dim = -1
    if llm:
        for i, d in enumerate(system.network):
            if d.parallelism is Parallelism.TP:
                tp, tp_dim = shape[i], i
            elif d.parallelism is Parallelism.PP:
                pp, pp_dim = shape[i], i
            elif d.parallelism is Parallelism.DP:
                dp, dp_dim = shape[i], i
    if dlrm:
        dp = chips
    if llm:
        gb, mbs = wl.global_batch_size, decision.micro_batch_size
        layers = wl.num_layer
    elif dlrm:
        gb, mbs, layers = wl.global_batch_size, 1, 1
    else:
        gb, mbs, layers = 1, 1, 1
    workload_flop = graph.flop * layers * gb

    # ---------------------------------------------------------------- outer checks
    prod = 1
    for s in shape:
        prod *= s
    if prod != chips or any(s < 1 for s in shape):
        return _fail(Status.SHAPE, prod - chips, workload_flop=workload_flop)
    if llm:
        unit = mbs * dp
        if mbs < 1 or gb % unit != 0:
            return _fail(Status.DIVISIBILITY, gb % max(unit, 1), workload_flop=workload_flop)
    if dlrm and gb % chips != 0:
        return _fail(Status.DIVISIBILITY, gb % chips, workload_flop=workload_flop)

    nmb = gb // (mbs * dp)
    lps = _ceil_div(layers, pp)
    if quirks.bubble_over_layers_per_stage:
        ccc = lps - 1 if lps >= 2 else 1
        pipeline_factor = 1 + (pp - 1) / (nmb * ccc)
    else:
        pipeline_factor = 1 + (pp - 1) / nmb
    batch_mult = pipeline_factor * lps * gb / dp if (llm or dlrm) else 1.0
    training = any(k.phase is Phase.BWD for k in kernels)
    p2p = 0.0
    if llm and pp_dim >= 0:
        inter = 2 * wl.hidden_dim * wl.seq_len * word if training else 0
        p2p = (1 / system.network[pp_dim].link_bw_GBps) * inter * layers
    extra = dict(
        workload_flop=workload_flop,
        tp=tp,
        pp=pp,
        dp=dp,
        num_micro_batch=nmb,
        layers_per_stage=lps,
        pipeline_factor=pipeline_factor,
        p2p_ns=p2p,
    )

    # ---------------------------------------------------------------- configurations
    cfg = [int(c) for c in decision.config]
    if ex.style is ExecutionStyle.KERNEL_BY_KERNEL or ex.num_config == 0:
        nconf = nk
    elif ex.num_config > 0:
        nconf = ex.num_config
    else:
        assert ex.num_config == AUTO
        nconf = max(cfg) + 1
    fixed = nconf == nk
    fwd_bwd = ex.style is ExecutionStyle.DATAFLOW and not fixed and training and nconf < nk
    if nconf % 2 == 0:
        f_last, b_first = nconf // 2 - 1, nconf // 2
    else:
        f_last = b_first = nconf // 2
    for k, kern in enumerate(kernels):
        c = cfg[k]
        if c < 0 or c >= nconf:
            return _fail(Status.CONFIG, c, **extra)
        if fixed and c != k:
            return _fail(Status.CONFIG, c - k, **extra)
        if not fixed and kern.config >= 0 and c != kern.config:
            return _fail(Status.CONFIG, c - kern.config, **extra)
        if fwd_bwd and kern.phase is Phase.FWD and c > f_last:
            return _fail(Status.CONFIG, c - f_last, **extra)
        if fwd_bwd and kern.phase is Phase.BWD and c < b_first:
            return _fail(Status.CONFIG, b_first - c, **extra)
    for e in range(ne):
        if cfg[src[e]] > cfg[dst[e]]:
            return _fail(Status.ORDER, cfg[src[e]] - cfg[dst[e]], **extra)
    is_set = [kern.num_input > 0 for kern in kernels]
    if any(is_set) and not all(is_set):
        for c in range(nconf):
            kinds = {is_set[k] for k in range(nk) if cfg[k] == c}
            if len(kinds) == 2:
                return _fail(Status.CONFIG, c, **extra)

    C = range(nconf)
    K = range(nk)
    Es = range(ne)
    # the configuration matrices, explicitly
    A = [[1 if cfg[k] == c else 0 for c in C] for k in K]
    B = [[1 if cfg[src[e]] == c and cfg[dst[e]] == c else 0 for c in C] for e in Es]
    D = [[1 if (cfg[src[e]] == c) != (cfg[dst[e]] == c) else 0 for c in C] for e in Es]
    H = [[1 if cfg[src[e]] == c else 0 for c in C] for e in Es]
    E = [
        [1 if cfg[src[e]] != cfg[dst[e]] and cfg[src[e]] <= c <= cfg[dst[e]] else 0 for c in C]
        for e in Es
    ]
    weights = [k for k in K if kernels[k].kind is KernelKind.GEMM_WEIGHT]  # w -> kernel index
    F = [[1 if cfg[k] == c else 0 for c in C] for k in weights]

    # tiles per configuration: V2 uses 1 where a kernel sets num_input
    T = decision.num_tile if llm else 1
    tiles = []
    for c in C:
        if v2 and any(A[k][c] and kernels[k].num_input > 0 for k in K):
            tiles.append(1)
        else:
            tiles.append(T)

    # ---------------------------------------------------------------- shard dims
    if llm and not ex.skip_inter_chip_optimization:
        sharding = [Dim(s) for s in decision.sharding]
    else:
        sharding = [Dim.NO] * nk
    hpl_x = hpl_y = 1
    if hpl:
        if len(shape) == 1:
            hpl_x, hpl_y = 1, shape[0]
        elif len(shape) == 2:
            hpl_x, hpl_y = shape[0], shape[1]
        else:
            hpl_x, hpl_y = shape[0] * shape[1], shape[2]

    def group(d: Dim) -> Dim:
        return Dim.M if d is Dim.OUTER else d

    sM, sK, sN = [], [], []
    for k, kern in enumerate(kernels):
        rows, kk, nn = kern.rows, (kern.k if kern.kind.has_k else 1), kern.n
        if hpl:
            sM.append(_ceil_div(rows, hpl_x))
            sK.append(_ceil_div(kk, hpl_y))
            sN.append(nn)
            continue
        if fft:
            sM.append(rows)
            sK.append(kk)
            sN.append(_ceil_div(nn, chips))
            continue
        shard_dim = group(sharding[k])
        tile_dim = group(kern.tiling) if llm else Dim.NO
        t_here = T if llm else 1
        dims = []
        for d, size in ((Dim.M, rows), (Dim.K, kk), (Dim.N, nn)):
            div = (tp if shard_dim is d else 1) * (t_here if tile_dim is d else 1)
            dims.append(_ceil_div(size, div))
        sM.append(dims[0])
        sK.append(dims[1])
        sN.append(dims[2])
    extra["shard_dims"] = tuple(zip(sM, sK, sN))

    # per-edge buffer bytes b_e and weight bytes w_w
    b = [
        0.0 if graph.connections[e].zero_out else float(sM[src[e]] * sN[src[e]] * word) for e in Es
    ]
    weight_full = [float(sM[k] * sK[k] * word) for k in weights]
    weight_sram = [
        0.0 if kernels[k].skip_weight else weight_full[i] for i, k in enumerate(weights)
    ]
    depth = list(gs.depths)

    # ---------------------------------------------------------------- SRAM
    sram_checked = llm or (dlrm and not v2)
    cap = system.accelerator.sram_bytes
    sram_unlimited = v2 and cap == 0
    b_sram, depth_sram = list(b), list(depth)
    if ex.replicate_sram_index_bug:
        widx = {k: i for i, k in enumerate(weights)}
        for e in Es:
            if src[e] in widx:
                j = widx[src[e]]
                b_sram[e] = b[j]
                depth_sram[e] = depth[j]
    members = [sum(A[k][c] for k in K) for c in C]
    lone = [kernels[k].kind is KernelKind.GEMM_WEIGHT and members[cfg[k]] == 1 for k in K]
    # contributions: (config, bytes, owner kernel or -1 when not divisible by a tiling factor)
    contrib: list[tuple[int, float, int]] = []
    for e in Es:
        owner = src[e] if lone[src[e]] else -1
        for c in C:
            if D[e][c]:
                contrib.append((c, 2 * b_sram[e] * D[e][c], owner))
            if B[e][c]:
                contrib.append((c, b_sram[e] * depth_sram[e] * B[e][c], -1))
    for i, k in enumerate(weights):
        for c in C:
            if F[i][c]:
                contrib.append((c, weight_sram[i] * F[i][c], k if lone[k] else -1))
    # sram_extra (a v2 field) acts in every equation set (docs/model.md)
    for k in K:
        for c in C:
            if A[k][c]:
                contrib.append((c, kernels[k].sram_extra_bytes * A[k][c], -1))
    fx = [sum(x for cc, x, o in contrib if cc == c and o < 0) for c in C]
    dv = [sum(x for cc, x, o in contrib if cc == c and o >= 0) for c in C]
    # zero-byte contributions (skip_weight weights, zero_out edges) need no share of the SRAM
    nd = [sum(1 for cc, x, o in contrib if cc == c and o >= 0 and x > 0) for c in C]
    tf = [1] * nk
    if sram_checked and not sram_unlimited:
        failing = [
            fx[c] + dv[c] - cap
            for c in C
            if not (fx[c] + dv[c] <= cap or (dv[c] > 0 and fx[c] < cap))
        ]
        if failing:
            return _fail(Status.SRAM, max(failing), **extra)
        for k in K:
            if not lone[k]:
                continue
            need = 1
            for c, x, o in contrib:
                if o == k and fx[c] + dv[c] > cap:  # zero-byte ones too: tf >= 2
                    # capped at 2^53 (exact in float64) as the evaluator does
                    need = max(need, 2, math.ceil(min(x * nd[c] / (cap - fx[c]), 2.0**53)))
            if v2 and need > 1 and weight_sram[weights.index(k)] <= 2.0**53:
                wbytes = int(weight_sram[weights.index(k)])
                if wbytes > 0:
                    divisors = [d for d in range(need, wbytes + 1) if wbytes % d == 0]
                    need = divisors[0] if divisors else wbytes
            tf[k] = need
    sram = [fx[c] + sum(x / tf[o] for cc, x, o in contrib if cc == c and o >= 0) for c in C]
    if sram_checked and not sram_unlimited and any(sram[c] - cap > 1e-9 * cap for c in C):
        return _fail(Status.SRAM, max(sram[c] - cap for c in C), **extra)
    extra["weight_tiling"] = tuple(tf)

    # ---------------------------------------------------------------- DRAM
    mem = system.memory
    alive = [tiles[c] * sum(b[e] * E[e][c] for e in Es) for c in C]
    dram_extra = sum(kern.dram_extra_bytes for kern in kernels)  # every equation set
    if llm or dlrm:
        total = lps * sum(weight_full[i] * F[i][c] for i in range(len(weights)) for c in C)
        total += mbs * max(alive)
        total += lps * dram_extra
        if dlrm:
            total += wl.num_table * wl.row * wl.emb_dim * word / chips
    elif hpl:
        total = wl.n * wl.n * word / chips + dram_extra
    else:
        total = wl.length * word / chips + dram_extra
    cap1, bw1 = mem.dram_bytes, mem.dram_bw_GBps
    cap2, bw2 = mem.second_dram_bytes, mem.second_dram_bw_GBps
    tiers = not v2 and cap2 > 0
    if cap1 == 0 or total <= cap1:
        dram_bw = bw1
    elif tiers and total <= cap1 + cap2:
        dram_bw = (cap1 * bw1 + cap2 * bw2) / (cap1 + cap2)
    elif tiers:
        return _fail(Status.DRAM, total - cap1 - cap2, **extra)
    else:
        return _fail(Status.DRAM, total - cap1, **extra)

    # ---------------------------------------------------------------- compute
    acc = system.accelerator
    cores, W, Hh, freq = acc.cores, acc.systolic_width, acc.systolic_height, acc.freq_GHz
    u = ex.compute_util

    def streams(k: int) -> int:
        return kernels[k].num_input if (kernels[k].num_input > 0 and not v2) else 1

    compute = [0.0] * nconf
    max_cycles = [0] * nconf
    if u > 0:
        for c in C:
            if members[c] > cores:
                return _fail(Status.CORES, members[c] - cores, **extra)
        G = acc.peak_gflops
        for c in C:
            total_time = 0.0
            for k in K:
                kern = kernels[k]
                if kern.type is ComputeType.SYSTOLIC:
                    rate = u * G
                    flop = 2 * sM[k] * sN[k] * sK[k] * streams(k)
                else:
                    rate = u * G if quirks.simd_at_systolic_peak else u * G / Hh
                    flop = sM[k] * sN[k] * streams(k)
                total_time += A[k][c] * flop / rate
            compute[c] = tiles[c] * total_time
    else:
        fix_pl = list(decision.par_lane) if decision.par_lane else [0] * nk
        fix_ps = list(decision.par_stage) if decision.par_stage else [0] * nk
        for c in C:
            options = []
            for k in K:
                if not A[k][c]:
                    continue
                kern = kernels[k]
                eff = (
                    ex.effective_stage
                    if kern.use_effective_stage
                    and ex.effective_stage > 0
                    and kern.type is ComputeType.SYSTOLIC
                    else 0
                )
                streams_k = streams(k)
                if fix_pl[k] > 0 and fix_ps[k] > 0:  # a kernel's pair is fixed only as a pair
                    pairs = [(fix_pl[k], fix_ps[k])]
                elif kern.type is ComputeType.SIMD:
                    pairs = [(pl, 1) for pl in range(1, cores + 1)]
                else:
                    pairs = [
                        (pl, ps) for pl in range(1, cores + 1) for ps in range(1, cores // pl + 1)
                    ]
                opts = []
                for pl, ps in pairs:
                    cyc = _cycles(kern.type, sM[k], sK[k], sN[k], pl, ps, W, Hh, eff, streams_k)
                    opts.append((cyc, pl, ps))
                options.append(opts)
            best = _best_allocation(options, cores)
            if best is None:
                least = sum(min(pl * ps for _, pl, ps in o) for o in options)
                return _fail(Status.CORES, least - cores, **extra)
            max_cycles[c] = best
            compute[c] = tiles[c] * best / freq

    # ---------------------------------------------------------------- memory
    memory = [
        (
            tiles[c] * sum(b[e] * D[e][c] for e in Es)
            + sum(kernels[k].memory_bytes * A[k][c] for k in K)
        )
        / dram_bw
        for c in C
    ]

    # ---------------------------------------------------------------- network
    network = [0.0] * nconf
    net = system.network
    if llm:
        double = ex.separate_rs_ag_for_ar or not quirks.half_volume_all_reduce
        r_ar = r_a2a = r_ag = r_arp = 0.0
        latency = 0.0
        if tp_dim >= 0:
            topo, bw = net[tp_dim].topology, net[tp_dim].link_bw_GBps
            r_ar = _reduce_ratio(topo, tp, bw)
            r_ag = _reduce_ratio(topo, tp, bw)
            r_a2a = _all_to_all_ratio(topo, tp, bw)
            if system.hbd > 0 and len(net) == 3:
                x, hb = shape[0], system.hbd
                if hb >= x:
                    r_ar = (x - 1) / (x * net[0].link_bw_GBps)
                else:
                    r_ar = (hb - 1) / (hb * net[0].link_bw_GBps) + (x / hb - 1) / (
                        x * net[1].link_bw_GBps
                    )
            if double:
                r_ar = 2 * r_ar
            latency = acc.link_latency_ns * (2 if ex.separate_rs_ag_for_ar else 1)
            latency = latency * _latency_steps(topo, tp)
        if dp_dim >= 0:
            topo, bw = net[dp_dim].topology, net[dp_dim].link_bw_GBps
            r_arp = _reduce_ratio(topo, dp, bw)
            if system.hbd > 0 and len(net) == 3:
                z, hb = shape[2], system.hbd
                if hb >= z:
                    r_arp = (z - 1) / (z * net[0].link_bw_GBps)
                else:
                    r_arp = (hb - 1) / (hb * net[0].link_bw_GBps) + (z / hb - 1) / (
                        z * net[2].link_bw_GBps
                    )
            if double and _doubles_gradient(topo):
                r_arp = 2 * r_arp
        # per-kernel collectives
        ar_k, a2a_k, ag_k, arp_k = [0.0] * nk, [0.0] * nk, [0.0] * nk, [0.0] * nk
        for k, kern in enumerate(kernels):
            typ = kern.communication
            if typ is Collective.NONE and sharding[k] is Dim.K:
                typ = Collective.ALL_REDUCE
            size = float(sM[k] * sN[k] * word)
            if typ is Collective.ALL_REDUCE:
                ar_k[k] = size
            elif typ is Collective.ALL_TO_ALL:
                a2a_k[k] = size
            elif typ is Collective.ALL_GATHER:
                ag_k[k] = size
            elif typ is Collective.ALL_REDUCE_PERIODIC:
                arp_k[k] = size / nmb
        # per-edge re-layout collectives
        ar_e, a2a_e, ag_e = [0.0] * ne, [0.0] * ne, [0.0] * ne
        if not ex.skip_inter_chip_optimization:
            for e in Es:
                up = upstream_layout(sharding[src[e]])
                down = downstream_layout(kernels[dst[e]], gs.operand[e], sharding[dst[e]])
                typ = relayout(up, down)
                size = float(sM[src[e]] * sN[src[e]] * word)
                if typ is Collective.ALL_REDUCE:
                    ar_e[e] = size
                elif typ is Collective.ALL_TO_ALL:
                    a2a_e[e] = size
                elif typ is Collective.ALL_GATHER:
                    ag_e[e] = size
        for c in C:
            s_ar = sum(ar_k[k] * A[k][c] for k in K) + sum(ar_e[e] * H[e][c] for e in Es)
            s_a2a = sum(a2a_k[k] * A[k][c] for k in K) + sum(a2a_e[e] * H[e][c] for e in Es)
            s_ag = sum(ag_k[k] * A[k][c] for k in K) + sum(ag_e[e] * H[e][c] for e in Es)
            s_arp = sum(arp_k[k] * A[k][c] for k in K)
            t = tiles[c] * (r_ar * s_ar + r_a2a * s_a2a + r_ag * s_ag) + r_arp * s_arp
            if tp_dim >= 0:
                count = sum(A[k][c] for k in K if ar_k[k] > 0)
                count += sum(H[e][c] for e in Es if ar_e[e] > 0)
                t += latency * count
            network[c] = t
    elif dlrm or fft:
        msg, bwf = _bisection_table(tuple(d.topology for d in net), shape, chips, eq)
        a2a = [0.0] * nk
        arp = [0.0] * nk
        for k, kern in enumerate(kernels):
            if kern.communication is Collective.ALL_TO_ALL and chips > 1:
                a2a[k] = kern.communication_bytes / (chips if dlrm else chips * chips)
            if dlrm and kern.communication is Collective.ALL_REDUCE_PERIODIC:
                arp[k] = sM[k] * sN[k] * word / nmb
        for c in C:
            per_dim = []
            for j in range(len(net)):
                load = sum(a2a[k] * A[k][c] for k in K) * msg[j]
                if load == 0:
                    per_dim.append(0.0)
                elif bwf[j] == 0:  # a one-chip FC dimension (v2 bisection x(x-1)/2 = 0)
                    per_dim.append(_INF)
                else:
                    per_dim.append(load / (net[j].link_bw_GBps * bwf[j]))
            t = max(per_dim)
            if dlrm:
                t += sum(arp[k] * A[k][c] for k in K) * (2 if eq is Equations.LEGACY else 1)
            network[c] = t
    else:  # HPL
        bc = [0.0] * nk
        p2 = [0.0] * nk
        for k, kern in enumerate(kernels):
            if kern.communication is Collective.BROADCAST and hpl_x > 1:
                bc[k] = kern.communication_bytes / hpl_x
            if kern.communication2 is Collective.POINT_TO_POINT and hpl_y > 1:
                p2[k] = kern.communication_bytes / hpl_y
        for c in C:
            network[c] = max(
                sum(p2[k] * A[k][c] for k in K) / net[0].link_bw_GBps,
                sum(bc[k] * A[k][c] for k in K) / net[1].link_bw_GBps,
            )

    # ---------------------------------------------------------------- II and totals
    ii = []
    for c in C:
        v = combine_overlap(compute[c], memory[c], network[c], ex.overlap)
        if v2:
            v = v * max([1] + [kernels[k].num_input for k in K if A[k][c]])
        ii.append(v)
    all_ii = sum(ii)
    ns_per_batch = all_ii * batch_mult + p2p
    final = ns_per_batch / num_copy
    return RefResult(
        status=Status.OK,
        violation=0.0,
        final_ns=final,
        ns_per_batch=ns_per_batch,
        all_config_ii_ns=all_ii,
        dram_bytes=total,
        dram_bw_GBps=dram_bw,
        compute_ns=tuple(compute),
        memory_ns=tuple(memory),
        network_ns=tuple(network),
        ii_ns=tuple(ii),
        sram_bytes=tuple(sram),
        tiles=tuple(tiles),
        max_cycles=tuple(max_cycles),
        price=price(spec, shape, dram_bw, quirks),
        **extra,  # type: ignore[arg-type]
    )
