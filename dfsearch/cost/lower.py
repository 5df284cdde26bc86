"""Lowering: a validated spec plus the outer choices -> the records of ``cost/layout.py``.

This is the only code that knows both worlds: it reads ``Spec`` objects and writes the
read-only records (``KernelTable``, ``EdgeTable``, ``Constants``) that the jitted evaluator
(``dfsearch.cost.evaluate``) and the searches consume; the pure-Python twin
(``dfsearch.cost.reference``) reads the spec itself. Every equation that depends only on the outer choices
(shape, sharding, micro-batch size, tile count, number of configurations) is evaluated here,
once: shard dimensions, buffer and weight bytes, FLOP, collective ratios and bytes, the
pipeline factor and batch multiplier, DRAM constants. What differs between workload kinds
(batch structure, shard rule, network terms, DRAM constants, SRAM check) is asked of the
kind's ``WorkloadModel`` (``dfsearch.workloads``); this module holds what they share.
The per-configuration sums, maxima, capacities and core allocation depend on the
configuration assignment and are the evaluator's job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dfsearch.codes import (
    ComputeType,
    Dim,
    Equations,
    ExecutionModel,
    ExecutionStyle,
    KernelKind,
    Overlap,
)
from dfsearch.cost.layout import Constants, EdgeTable, KernelTable
from dfsearch.cost.training import DramUse, recomputed
from dfsearch.kernels.graph import GraphStructure
from dfsearch.memo import by_identity, by_identity_and_key
from dfsearch.pins import fwd_bwd_bounds  # re-exported
from dfsearch.quirks import Quirks
from dfsearch.spec import AUTO, Accelerator, Execution, Graph, Spec
from dfsearch.system.collectives import price_needs
from dfsearch.system.fabric import Fabric
from dfsearch.system.placement import Placement
from dfsearch.system.ratios import experts_per_chip
from dfsearch.validate import MAX_KERNEL_WORK
from dfsearch.workloads import Lowering, NetworkTerms, WorkloadModel, model_of
from dfsearch.workloads.base import ServingStep

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
    "gemm_tile",
    "gemm_work_flop",
    "k_steps_per_core",
    "realistic_compute_ns",
    "with_num_config",
]

@dataclass(frozen=True, slots=True)
class Outer:
    """The outer choices of one evaluation."""

    shape: tuple[int, ...]
    sharding: tuple[Dim, ...]
    micro_batch_size: int
    num_tile: int
    num_config: int
    #: what each dimension carries (``dfsearch.system.placement``); None: the spec's fixed roles
    placement: Placement | None = None


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
    dram: DramUse = DramUse()  #: the fixed DRAM bytes per chip by purpose
    step: ServingStep | None = None  #: the serving step (``llm_serving``), else None
    #: the pipeline hops of an inference pass's latency (``WorkloadModel.inference_hops_ns``)
    latency_hops_ns: float | None = None

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


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shard_dims(
    spec: Spec, k_index: int, choice: Dim, tp: int, t: int, shape: tuple[int, ...]
) -> tuple[int, int, int]:
    """(sM, sK, sN): per-chip, per-tile dimensions of one kernel, by its workload's rule
    (``WorkloadModel.shard_dims``) for network ``shape``."""
    kernel = spec.graph.kernels[k_index]
    return model_of(spec.workload).shard_dims(spec, kernel, choice, tp, t, shape)


def _f(values: list[float]) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    a.setflags(write=False)
    return a


def _i(values: list[int]) -> np.ndarray:
    a = np.asarray(values, dtype=np.int64)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------- lower
def lower(spec: Spec, outer: Outer, quirks: Quirks | None = None) -> Problem:
    """Evaluate every outer-choice-dependent equation and pack the result into arrays.

    The workload's rules (batch structure, shard dimensions, DRAM constants, whether SRAM is
    checked, the collectives it needs) come from its ``WorkloadModel``
    (``dfsearch.workloads``); the collectives are priced by the spec's fabric
    (``dfsearch.system``). ``quirks``: when given, they replace the spec's ``quirks``.

    Raises
    ------
    ValueError
        If ``outer`` does not fit the spec (wrong lengths). Infeasible outer choices
        (e.g. indivisible batch) are not errors: see ``dfsearch.cost.outer_status``.
    """
    g, sysm = spec.graph, spec.system
    n = len(g.kernels)
    if len(outer.sharding) != n or len(outer.shape) != len(sysm.network):
        raise ValueError("outer choices do not match the spec")
    if quirks is not None:
        spec = replace(spec, quirks=quirks)
    model = model_of(spec.workload)
    ctx = _context(spec, outer, model)
    pf, batch_mult = model.pipeline(ctx)
    e_b, e_sram_b, e_sram_depth = _edge_columns(ctx)
    net = price_needs(ctx.fabric, model.network(ctx), n, len(e_b))
    serial = _serial_realistic(spec.execution)
    kcols, weight_total = _kernel_columns_of(ctx, net.exposed_tile_ns, serial)
    k_net_t, k_net_1, k_ar, e_net_t, e_ar = _network_columns(net, n, len(e_b))
    if serial:  # launch and exposed collectives after the kernel, not under its HBM traffic
        k_net_t = [a + b for a, b in zip(k_net_t, _serial_tile_ns(ctx, net.exposed_tile_ns))]
    k_chan = _channel_columns(net, n)
    facts = _graph_facts(g)
    dram = model.dram(ctx, weight_total, facts.dram_extra)
    if spec.piece is not None:  # one piece of a pipeline stage: the others' bytes stay beside it
        dram = replace(dram, stage_others=spec.piece.resident_bytes)
    constants = _constants(
        ctx, model, dram_fixed=dram.fixed, act_mult=dram.act_mult, batch_mult=batch_mult, net=net,
        sparse=bool(facts.extras or k_chan.any() or any(k_net_1)),
    )  # fmt: skip
    b, dims = ctx.batch, ctx.dims
    return Problem(
        kernels=KernelTable(
            **kcols, memory_bytes=_f(model.memory_bytes(ctx)),
            net_tile_ns=_f(k_net_t), net_once_ns=_f(k_net_1), channel_ns=k_chan,
            all_reduce=_i(k_ar), phase=facts.phase, pin=facts.pin, num_input=facts.num_input,
            sram_extra=facts.sram_extra,
        ),
        edges=EdgeTable(
            src=_i(list(ctx.structure.src)), dst=_i(list(ctx.structure.dst)),
            buffer_bytes=_f(e_b), sram_bytes=_f(e_sram_b), sram_depth=_i(e_sram_depth),
            net_tile_ns=_f(e_net_t), all_reduce=_i(e_ar),
        ),
        constants=constants,
        outer=outer, names=ctx.structure.names,
        shard_m=tuple(d[0] for d in dims), shard_k=tuple(d[1] for d in dims),
        shard_n=tuple(d[2] for d in dims),
        workload_flop=facts.flop * b.layers * b.global_batch,
        peak_gflops=sysm.accelerator.peak_gflops, num_chip=sysm.num_chip,
        tp=ctx.groups.tp, pp=b.pp, dp=b.dp, num_micro_batch=b.num_micro_batch, layers=b.layers,
        layers_per_stage=b.layers_per_stage, pipeline_factor=pf, dram=dram,
        step=model.step(ctx), latency_hops_ns=model.inference_hops_ns(ctx),
    )  # fmt: skip


def _context(spec: Spec, outer: Outer, model: WorkloadModel) -> Lowering:
    """Fabric, groups, batch structure, sharding, tile count and shard dimensions of
    ``outer``."""
    kernels = spec.graph.kernels
    fabric = Fabric.of(spec, outer.shape, outer.placement)
    grp = fabric.groups()
    t = outer.num_tile if model.tiled else 1
    if model.searches_sharding(spec.execution):
        sharding = outer.sharding
    else:
        sharding = tuple(Dim.NO for _ in kernels)
    rule = model.shard_dims_inputs(spec, outer.shape)
    if rule is not None and type(model).lowered_kernel is WorkloadModel.lowered_kernel:
        dims = _graph_dims(spec.graph, (sharding, grp.tp, t, type(model), rule), spec, model, outer.shape)
    else:
        dims = tuple(
            model.shard_dims(spec, model.lowered_kernel(spec, k, outer), sharding[i], grp.tp, t,
                             outer.shape)  # fmt: skip
            for i, k in enumerate(kernels)
        )
    batch = model.batch(spec, outer, grp)
    if spec.piece is not None:  # one piece of a pipeline stage runs piece.runs times in it
        batch = replace(batch, stage_runs=spec.piece.runs)
    return Lowering(
        spec=spec, outer=outer, groups=grp,
        batch=batch, sharding=sharding, num_tile=t, dims=dims,
        structure=GraphStructure.of(spec.graph),
        chips_per_copy=spec.system.num_chip // spec.num_copy, fabric=fabric,
    )  # fmt: skip


@by_identity_and_key(1024)
def _graph_dims(graph: Graph, key: tuple, spec: Spec, model: WorkloadModel,
                shape: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:  # fmt: skip
    """The shard dimensions of every kernel of ``graph`` (the kind's kernels as the graph's)
    for key = (sharding, TP, T, the kind, what its ``shard_dims`` reads of the spec and
    shape): all they depend on, so a search lowering one sharding at many outer choices, and
    the points of a study sharing their graph, compute them once."""
    sharding, tp, t = key[0], key[1], key[2]
    return tuple(model.shard_dims(spec, k, sharding[i], tp, t, shape) for i, k in enumerate(graph.kernels))


@dataclass(frozen=True, slots=True)
class _GraphFacts:
    """What lowering reads of the graph alone (read-only arrays, shared by its problems)."""

    flop: float  #: ``Graph.flop``
    dram_extra: float  #: the kernels' ``dram_extra_bytes``, summed in order
    extras: bool  #: a kernel with memory_bytes, sram_extra_bytes or num_input
    experts: bool  #: a kernel with experts (num_expert > 0)
    phase: np.ndarray
    pin: np.ndarray  #: pinned configuration, -1 when free (honoured, also when forced)
    num_input: np.ndarray
    sram_extra: np.ndarray


@by_identity(64)
def _graph_facts(g: Graph) -> _GraphFacts:
    kernels = g.kernels
    return _GraphFacts(
        flop=g.flop, dram_extra=sum(k.dram_extra_bytes for k in kernels),
        extras=any(k.memory_bytes or k.sram_extra_bytes or k.num_input for k in kernels),
        experts=any(k.num_expert > 0 for k in kernels),
        phase=_i([int(k.phase) for k in kernels]),
        pin=_i([k.config if k.config >= 0 else -1 for k in kernels]),
        num_input=_i([k.num_input for k in kernels]),
        sram_extra=_f([k.sram_extra_bytes for k in kernels]),
    )  # fmt: skip


def _kernel_columns_of(
    ctx: Lowering, exposed: list[float] | None, serial: bool
) -> tuple[dict[str, np.ndarray], float]:
    """``_kernel_columns``, once per graph object and key: the shard dimensions and every
    part of the spec it reads (execution, accelerator, quirks, recomputation; DP when a
    kernel has experts), ``exposed`` and ``serial``. The arrays are read-only and shared."""
    spec = ctx.spec
    dp = ctx.groups.dp if _graph_facts(spec.graph).experts else 0
    key = (ctx.dims, spec.execution, spec.system.accelerator, spec.quirks, spec.training.recompute, dp,
           None if exposed is None else tuple(exposed), serial)  # fmt: skip
    try:
        hash(key)
    except TypeError:  # a field that is not hashable: computed afresh
        return _kernel_columns(ctx, exposed, serial)
    return _kernel_columns_memo(spec.graph, key, ctx, exposed, serial)


@by_identity_and_key(1024)
def _kernel_columns_memo(
    graph: Graph, key: tuple, ctx: Lowering, exposed: list[float] | None, serial: bool
) -> tuple[dict[str, np.ndarray], float]:
    return _kernel_columns(ctx, exposed, serial)


def _serial_realistic(ex: Execution) -> bool:
    """True when the realistic model charges each kernel's launch and exposed collectives
    as a serial term (the network column) rather than in its compute time: under an
    ``overlap`` that adds the network term after compute and memory (docs/model.md, "The
    realistic execution model")."""
    return ex.model is ExecutionModel.REALISTIC and ex.overlap is not Overlap.PERFECT


def _serial_tile_ns(ctx: Lowering, exposed: list[float] | None) -> list[float]:
    """Per kernel and tile: its launches (one per execution) plus its exposed collectives."""
    launch = ctx.spec.execution.kernel_overhead_us * 1e3
    runs = recomputed(ctx.spec)
    v2 = ctx.spec.execution.equations is Equations.V2
    out = []
    for i, k in enumerate(ctx.spec.graph.kernels):
        mult = (k.num_input if (k.num_input > 0 and not v2) else 1) * (2 if runs[i] else 1)
        out.append(mult * launch + (exposed[i] if exposed is not None else 0.0))
    return out


def _kernel_columns(
    ctx: Lowering, exposed: list[float] | None = None, serial: bool = False
) -> tuple[dict[str, np.ndarray], float]:
    """Cycle-model work (a, b, z), FLOP-model compute time, weight SRAM bytes and weight
    flags of every kernel, and the total weight bytes. ``exposed``: the realistic model's
    per-kernel collective time per tile that adds to the compute time (None: DFModel's).
    ``serial``: the realistic model's launch and ``exposed`` are charged apart
    (``_serial_tile_ns``), the compute time is the work alone."""
    spec, quirks = ctx.spec, ctx.quirks
    ex, acc = spec.execution, spec.system.accelerator
    v2 = ex.equations is Equations.V2
    cycle_model = ex.compute_util == 0.0
    w, h, es = acc.systolic_width, acc.systolic_height, ex.effective_stage
    k_a, k_b, k_z, k_tc, k_wsram, k_isw = [], [], [], [], [], []
    weight_total = 0.0
    runs = recomputed(spec)
    for i, k in enumerate(spec.graph.kernels):
        sm, sk, sn = ctx.dims[i]
        mult = k.num_input if (k.num_input > 0 and not v2) else 1
        mult *= 2 if runs[i] else 1  # recomputation runs the kernel a second time
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
        elif serial:
            k_tc.append(realistic_compute_ns(ex, acc, k.type, (sm, sk, sn), mult, simd=flop,
                                             launch=False))  # fmt: skip
        elif exposed is not None:
            k_tc.append(realistic_compute_ns(ex, acc, k.type, (sm, sk, sn), mult, simd=flop)
                        + exposed[i])  # fmt: skip
        else:
            rate = ex.compute_util * acc.peak_gflops
            if k.type is ComputeType.SIMD and not quirks.simd_at_systolic_peak:
                rate /= h
            k_tc.append(flop * mult / rate)
        is_w = k.kind is KernelKind.GEMM_WEIGHT
        wbytes = float(sm) * sk * ex.word_bytes if is_w else 0.0
        wbytes *= experts_per_chip(k.num_expert, ctx.groups.dp)  # MoE: E / EP experts
        weight_total += wbytes
        k_isw.append(1 if is_w else 0)
        k_wsram.append(0.0 if (k.skip_weight or not is_w) else wbytes)
    cols = dict(a=_i(k_a), b=_i(k_b), z=_i(k_z), compute_ns=_f(k_tc), weight_sram=_f(k_wsram),
                is_weight=_i(k_isw))  # fmt: skip
    return cols, weight_total


def gemm_tile(tile: int, size: int) -> int:
    """The output tile a GEMM library picks along a dimension of ``size``: the configured
    ``tile``, or the power of two >= ``size`` (at least 16) when that is narrower (skinny
    operands get narrow tiles)."""
    return min(tile, max(16, 1 << max(0, size - 1).bit_length()))


def gemm_work_flop(sm: int, sk: int, sn: int, ex: Execution, cores: int) -> float:
    """FLOP the cores spend on an ``sm`` x ``sk`` x ``sn`` GEMM: the output cut into tiles
    (tile quantisation), K padded to its step, and the work run in whole waves of one tile
    per core (wave quantisation); when the tiles fill less than one wave, the tile x K-step
    iterations are shared evenly over the cores instead (stream-K, ``k_steps_per_core``;
    docs/model.md, "The realistic execution model")."""
    tm, tn, tk = gemm_tile(ex.gemm_tile_m, sm), gemm_tile(ex.gemm_tile_n, sn), ex.gemm_tile_k
    tiles = _ceil_div(sm, tm) * _ceil_div(sn, tn)
    return 2.0 * cores * tm * tn * tk * k_steps_per_core(tiles, _ceil_div(sk, tk), cores)


def k_steps_per_core(tiles: int, k_steps: int, cores: int) -> int:
    """K steps (one ``tm`` x ``tn`` x ``tk`` block each) the busiest core runs for a GEMM of
    ``tiles`` output tiles of ``k_steps`` steps: whole waves of one tile per core,
    ceil(tiles / cores) x k_steps, when the tiles fill a wave; else the tiles x k_steps
    iterations shared evenly, ceil(tiles x k_steps / cores), as a stream-K GEMM splits an
    under-filled grid (the partial tiles' fix-up is not priced)."""
    if tiles >= cores:
        return _ceil_div(tiles, cores) * k_steps
    return _ceil_div(tiles * k_steps, cores)


def realistic_compute_ns(
    ex: Execution, acc: Accelerator, typ: ComputeType, dims: tuple[int, int, int], mult: int,
    *, simd: float, launch: bool = True,
) -> float:
    """One kernel's time per tile under the realistic model: ``mult`` executions, each the
    launch overhead (unless ``launch`` is False: charged apart) plus its work at
    ``compute_util`` x peak (a GEMM's quantised work, an elementwise kernel's ``simd`` FLOP
    at the SIMD rate)."""
    launch_ns = ex.kernel_overhead_us * 1e3 if launch else 0.0
    rate = ex.compute_util * acc.peak_gflops
    if typ is ComputeType.SIMD:
        work = simd / (rate / acc.systolic_height)
    else:
        work = gemm_work_flop(*dims, ex, acc.cores) / rate
    return mult * (launch_ns + work)


def _edge_columns(ctx: Lowering) -> tuple[list[float], list[float], list[int]]:
    """Buffer bytes of every edge (per chip, per tile) and its SRAM bytes and depth."""
    g, st = ctx.spec.graph, ctx.structure
    e_b = list(_edge_bytes(g, (ctx.dims, ctx.word)))
    # SRAM footprint of edges produced by a weight kernel: DFModel indexes the edge arrays
    # with the weight's index. Fixed by default; replicated on request (docs/model.md).
    e_sram_b, e_sram_depth = list(e_b), list(st.depths)
    if ctx.spec.execution.replicate_sram_index_bug:
        widx = {}
        for i, k in enumerate(g.kernels):
            if k.kind is KernelKind.GEMM_WEIGHT:
                widx[i] = len(widx)
        for e, s in enumerate(st.src):
            if s in widx and widx[s] < len(e_b):
                e_sram_b[e], e_sram_depth[e] = e_b[widx[s]], st.depths[widx[s]]
    return e_b, e_sram_b, e_sram_depth


@by_identity_and_key(1024)
def _edge_bytes(g: Graph, key: tuple) -> tuple[float, ...]:
    """Every edge's buffer bytes per chip and tile for key = (shard dimensions, word): its
    producer's output (sM x sN words), 0 for a ``zero_out`` edge."""
    dims, word = key
    st = GraphStructure.of(g)
    return tuple(0.0 if c.zero_out else float(dims[s][0]) * dims[s][2] * word for c, s in zip(g.connections, st.src))


def _network_columns(
    net: NetworkTerms, n: int, m: int
) -> tuple[list[float], list[float], list[int], list[float], list[int]]:
    """The workload's per-kernel and per-edge network terms, zeros where it set none."""
    return (
        net.kernel_tile_ns if net.kernel_tile_ns is not None else [0.0] * n,
        net.kernel_once_ns if net.kernel_once_ns is not None else [0.0] * n,
        net.kernel_all_reduce if net.kernel_all_reduce is not None else [0] * n,
        net.edge_tile_ns if net.edge_tile_ns is not None else [0.0] * m,
        net.edge_all_reduce if net.edge_all_reduce is not None else [0] * m,
    )


def _channel_columns(net: NetworkTerms, n: int) -> np.ndarray:
    """The per-kernel channel times, one column per network dimension, at least the
    evaluator's 3 (zeros beyond the network's dimensions)."""
    chan = np.zeros((n, 3))
    if net.channel_ns is not None and n > 0:
        given = np.asarray(net.channel_ns, dtype=np.float64).reshape(n, -1)
        if given.shape[1] > 3:
            chan = np.zeros((n, given.shape[1]))
        chan[:, : given.shape[1]] = given
    chan.setflags(write=False)
    return chan


def _checks_sram(model: WorkloadModel, ex: Execution) -> bool:
    """Configurations are held to SRAM as the workload says; not under the realistic model,
    where a GPU runs kernel by kernel from HBM (a kernel's tiles live in its own SRAM)."""
    return bool(model.checks_sram(ex)) and ex.model is not ExecutionModel.REALISTIC


def _constants(
    ctx: Lowering,
    model: WorkloadModel,
    *,
    dram_fixed: float,
    act_mult: float,
    batch_mult: float,
    net: NetworkTerms,
    sparse: bool,
) -> Constants:
    """The scalars of the problem: capacities, bandwidths, multipliers, switches."""
    spec, outer = ctx.spec, ctx.outer
    g, ex, acc, mem = spec.graph, spec.execution, spec.system.accelerator, spec.system.memory
    n = len(g.kernels)
    v2 = ex.equations is Equations.V2
    c = outer.num_config
    fixed = forced_config(spec, c)
    fb_rule = ex.style is ExecutionStyle.DATAFLOW and not fixed and g.is_training and c < n
    f_cap, b_min = fwd_bwd_bounds(c)
    num_set = sum(1 for k in g.kernels if k.num_input > 0)
    sram_cap = acc.sram_bytes if (acc.sram_bytes > 0 or not v2) else math.inf
    dram_cap = mem.dram_bytes if mem.dram_bytes > 0 else math.inf
    tiered = (not v2) and mem.second_dram_bytes > 0
    return Constants(
        freq_GHz=float(acc.freq_GHz), sram_cap=float(sram_cap), dram_cap=float(dram_cap),
        dram_bw=float(mem.dram_bw_GBps),
        dram2_bw=float(mem.second_dram_bw_GBps) if tiered else 0.0,
        dram2_cap=float(mem.second_dram_bytes) if tiered else 0.0,
        dram_fixed=float(dram_fixed), dram_act_mult=float(act_mult),
        ar_latency_ns=float(net.ar_latency_ns), batch_mult=float(batch_mult),
        p2p_ns=float(net.p2p_ns), num_copy=float(spec.num_copy), num_tile=int(ctx.num_tile),
        num_config=int(c), cores=int(acc.cores),
        overlap=int(ex.overlap), fb_last_fwd=int(f_cap), fb_first_bwd=int(b_min),
        cycle_model=bool(ex.compute_util == 0.0), sram_check=_checks_sram(model, ex),
        tf_divides=v2, per_config_tiles=v2 and num_set > 0, ii_num_input=v2,
        fb_rule=bool(fb_rule), num_input_mixed=0 < num_set < n, fixed_config=bool(fixed),
        sparse=sparse,
    )  # fmt: skip


def _config_fields(spec: Spec, c: int) -> dict[str, int | bool]:
    """The fields of ``Constants`` that depend on the configuration count C (the only outer
    choice nothing else of a lowered problem depends on), as ``_constants`` sets them
    (tests/test_lower_reuse.py checks that the two agree)."""
    g, ex = spec.graph, spec.execution
    fixed = forced_config(spec, c)
    fb_rule = ex.style is ExecutionStyle.DATAFLOW and not fixed and g.is_training and c < len(g.kernels)
    f_cap, b_min = fwd_bwd_bounds(c)
    return {"num_config": int(c), "fb_last_fwd": int(f_cap), "fb_first_bwd": int(b_min),
            "fb_rule": bool(fb_rule), "fixed_config": bool(fixed)}  # fmt: skip


def with_num_config(problem: Problem, spec: Spec, num_config: int) -> Problem:
    """``problem`` (lowered from ``spec``) for another configuration count: equal to
    ``lower(spec, replace(problem.outer, num_config=num_config))`` without lowering again,
    since only the configuration fields of its constants depend on the count."""
    if num_config == problem.outer.num_config:
        return problem
    constants = problem.constants._replace(**_config_fields(spec, num_config))
    return replace(problem, constants=constants, outer=replace(problem.outer, num_config=num_config))
