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

Several layers in one graph (an LLM's ``num_layer_in_graph`` = N, docs/model.md): one graph
execution runs N consecutive layers, so the graph runs E = num_layer / N times per
micro-batch; layers per stage, the batch multiplier, the workload FLOP and the per-stage
weights and DRAM count those E executions, the p2p term and the quirk's bubble model layers.

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
    MemoryModel,
    Parallelism,
    Phase,
    Recompute,
    ServingPhase,
    Status,
    Topology,
    WorkloadKind,
)
from dfsearch.cost.overlap import combine_overlap
from dfsearch.cost.price import Price, price
from dfsearch.decision import Decision
from dfsearch.kernels.graph import (
    GraphStructure,
    downstream_layout,
    relayout,
    upstream_layout,
)
from dfsearch.quirks import Quirks
from dfsearch.spec import AUTO, Kernel, Spec
from dfsearch.system.kinds import KINDS

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
# dfsearch.system (kinds, ratios, fabric); kinds DFModel lacks (mesh) take their
# per-dimension formulas from their registered kind object, composed naively below.
def _reduce_ratio(topo: Topology, p: int, bw: float) -> float:
    """ALL_REDUCE / ALL_GATHER / ALL_REDUCE_PERIODIC ratio, ns per byte."""
    if topo is Topology.RING or topo is Topology.SWITCH:
        return (p - 1) / (p * bw)
    if topo is Topology.FC:
        return 1 / (p * bw)
    return KINDS[topo].reduce_ratio(p, bw)


def _all_to_all_ratio(topo: Topology, p: int, bw: float) -> float:
    """LLM ALL_TO_ALL ratio, ns per byte."""
    if topo is Topology.RING:
        return p * p / (8 * bw)
    if topo is Topology.SWITCH:
        return p / (4 * bw)
    if topo is Topology.FC:
        return 1 / bw
    return KINDS[topo].all_to_all_ratio(p, bw)


def _latency_steps(topo: Topology, p: int) -> int:
    """Link latencies per TP all-reduce: p - 1 ring steps, one on FC."""
    if topo is Topology.RING or topo is Topology.SWITCH:
        return p - 1
    if topo is Topology.FC:
        return 1
    return KINDS[topo].latency_steps(p)


def _doubles_gradient(topo: Topology) -> bool:
    """Whether the doubled all-reduce volume also doubles the DP gradient all-reduce."""
    if topo in (Topology.RING, Topology.SWITCH, Topology.FC):
        return topo is not Topology.FC
    return KINDS[topo].doubles_gradient_all_reduce


def _composed_bisection(
    topologies: tuple[Topology, ...], shape: tuple[int, ...], n: int, equations: Equations
) -> tuple[list[float], list[float]]:
    """(msg_j, bwf_j) of a network DFModel does not have, from the kinds' bisection links:
    a grid (all dimensions direct) carries all pairs on every dimension, a hierarchical
    network the pairs of its inner group on each inner dimension."""
    kinds = [KINDS[t] for t in topologies]
    nd = len(kinds)
    legacy = equations is Equations.LEGACY
    bis = [kinds[j].bisection_links(shape[j], equations) for j in range(nd)]
    if equations is Equations.DESIGN_SPACE:
        return _composed_design_space(kinds, bis, shape, n)
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


def _composed_design_space(
    kinds: list, bis: list[float], shape: tuple[int, ...], n: int
) -> tuple[list[float], list[float]]:
    """``_composed_bisection`` with the design-space script's constants: (G/2)^2 messages for
    a group of G chips, and a grid dimension counts half its kind's links times the torus
    multiplier (DFModel's design-space torus: g_j links per dimension)."""
    nd = len(kinds)
    whole = n * n / 4
    if nd > 1 and all(k.direct for k in kinds):
        half = [b / 2 for b in bis]
        if nd == 2:
            return [whole, whole], [half[0] * shape[0], half[1] * shape[1]]
        x, y, z = shape
        return [whole] * 3, [half[0] * x * y, half[1] * x * z, half[2] * y * z]
    msg = [math.prod(shape[: j + 1]) ** 2 / 4 for j in range(nd - 1)] + [whole]
    return msg, bis


def _design_space_table(
    variant: str, x: int, y: int, z: int, n: int
) -> tuple[list[float], list[float]] | None:
    """DFModel's design-space script, variant by variant (docs/model.md, Equation sets);
    None for a network DFModel does not have."""
    q = n * n / 4  # messages crossing the whole network's middle cut

    def sq(s: int) -> float:
        return s * s / 4

    table = {
        "sw": ([q], [x]),
        "fc": ([q], [sq(x)]),
        "r": ([q], [2]),
        "r_r": ([q, q], [x, y]),
        "fc_fc": ([sq(x), q], [sq(x), sq(y)]),
        "r_fc": ([sq(x), q], [2, sq(y)]),
        "r_sw": ([sq(x), q], [2, y]),
        "sw_sw": ([sq(x), q], [x, y]),
        "r_r_r": ([q, q, q], [x * y, x * z, y * z]),
        "r_sw_sw": ([sq(x), sq(x * y), q], [2, y, z]),
        "sw_sw_sw": ([sq(x), sq(x * y), q], [x, y, z]),
    }
    return table.get(variant)


def _bisection_table(
    topologies: tuple[Topology, ...], shape: tuple[int, ...], n: int, equations: Equations
) -> tuple[list[float], list[float]]:
    """(msg_j, bwf_j) per dimension for DLRM/FFT all-to-alls (legacy factors: docs/model.md)."""
    variant = "_".join(t.short for t in topologies)
    x = shape[0]
    y = shape[1] if len(shape) > 1 else 1
    z = shape[2] if len(shape) > 2 else 1
    if equations is Equations.DESIGN_SPACE:
        ds = _design_space_table(variant, x, y, z, n)
        if ds is not None:
            return ds
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
# ``reference_evaluate`` runs the steps below in DFModel's order; a step whose check fails
# raises ``_Infeasible`` with the status and the violated amount.
class _Infeasible(Exception):  # a control-flow signal, not an error
    """A check failed: ``reference_evaluate`` turns it into a failed ``RefResult``."""

    def __init__(self, status: Status, violation: float) -> None:
        super().__init__(status, violation)
        self.status = status
        self.violation = violation


@dataclass(frozen=True, slots=True)
class _Case:
    """One decision on one spec, with the quantities every step reads."""

    spec: Spec
    decision: Decision
    quirks: Quirks
    gs: GraphStructure
    shape: tuple[int, ...]
    chips: int  #: chips per copy
    llm: bool
    dlrm: bool
    hpl: bool
    fft: bool
    serving: bool  #: llm_serving: one step of a batch of mbs sequences (docs/model.md)
    v2: bool
    word: int
    tp: int
    pp: int
    dp: int
    tp_dim: int  #: network dimension of TP, -1 when none
    pp_dim: int
    dp_dim: int
    gb: int  #: global batch size (1 for HPL and FFT; serving: batch x DP)
    mbs: int  #: micro-batch size (1 unless LLM; serving: the batch B)
    layers: int  #: graph executions per micro-batch (LLM: num_layer / num_layer_in_graph)
    layers_in_graph: int  #: model layers one graph execution runs (LLM: num_layer_in_graph)
    training: bool  #: some kernel runs backward


@dataclass(frozen=True, slots=True)
class _Configs:
    """The configurations of a decision: the 0/1 matrices relating kernels (A), weight
    kernels (F) and edges (B: on chip, D: spilled, H: by source, E: live) to them."""

    cfg: list[int]
    n: int  #: number of configurations
    A: list[list[int]]
    B: list[list[int]]
    D: list[list[int]]
    H: list[list[int]]
    E: list[list[int]]
    F: list[list[int]]
    weights: list[int]  #: weight index -> kernel index
    tiles: list[int]  #: T_c


@dataclass(frozen=True, slots=True)
class _Shards:
    """Per-chip, per-tile dimensions of every kernel, and the sharding they follow."""

    sharding: list[Dim]
    hpl_x: int
    hpl_y: int
    sM: list[int]
    sK: list[int]
    sN: list[int]


def reference_evaluate(
    spec: Spec, decision: Decision, *, quirks: Quirks | None = None
) -> RefResult:
    """Evaluate one decision with DFModel's equations, naively.

    Parameters
    ----------
    spec : Spec
        A validated spec.
    decision : Decision
        Shape, sharding, micro-batch size, tile count, configuration of every kernel and
        optional fixed core allocation.
    quirks : Quirks, optional
        DFModel quirk switches (docs/model.md); None: the spec's ``quirks``.

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
    case = _case(spec, decision, spec.quirks if quirks is None else quirks)
    # a failed result carries the extras of the steps it passed
    extra: dict = {"workload_flop": spec.graph.flop * case.layers * case.gb}
    try:
        _check_outer(case)
        extra.update(_pipeline(case))
        conf = _configurations(case)
        shards = _shard_dims(case)
        extra["shard_dims"] = tuple(zip(shards.sM, shards.sK, shards.sN))
        b, weight_full, weight_sram = _bytes(case, conf, shards)
        sram, tf = _sram(case, conf, b, weight_sram)
        extra["weight_tiling"] = tuple(tf)
        if _training_memory(case):
            total, dram_bw = _training_dram(case, conf, b, shards, extra)
        else:
            total, dram_bw = _dram(case, conf, b, weight_full, extra["layers_per_stage"])
        if spec.execution.compute_util > 0:
            compute, max_cycles = _flop_compute(case, conf, shards), [0] * conf.n
        else:
            compute, max_cycles = _cycle_compute(case, conf, shards)
    except _Infeasible as fail:
        return _fail(fail.status, fail.violation, **extra)
    memory = _memory(case, conf, b, dram_bw, shards)
    network = _network(case, conf, shards, extra["num_micro_batch"])
    return _result(case, conf, extra, compute, memory, network, sram, total, dram_bw, max_cycles)


def _case(spec: Spec, decision: Decision, quirks: Quirks) -> _Case:
    """The ``_Case`` of a decision: workload kind, TP / PP / DP degrees and their network
    dimensions (LLM; DLRM is data parallel over every chip), batch sizes and layers."""
    graph, system, ex, wl = spec.graph, spec.system, spec.execution, spec.workload
    if len(decision.config) != len(graph.kernels) or len(decision.shape) != len(system.network):
        raise ValueError("decision does not match the spec")
    shape = tuple(decision.shape)
    kind = wl.kind
    llm = kind is WorkloadKind.LLM
    serving = kind is WorkloadKind.LLM_SERVING
    dlrm = kind is WorkloadKind.DLRM
    if dlrm and not quirks.dlrm_arp_bytes_as_ns:
        raise NotImplementedError("DLRM with dlrm_arp_bytes_as_ns off is not modelled by the twin")
    chips = system.num_chip // spec.num_copy
    tp = pp = dp = 1
    tp_dim = pp_dim = dp_dim = -1
    if llm or serving:
        for i, d in enumerate(system.network):
            if d.parallelism is Parallelism.TP:
                tp, tp_dim = shape[i], i
            elif d.parallelism is Parallelism.PP:
                pp, pp_dim = shape[i], i
            elif d.parallelism is Parallelism.DP:
                dp, dp_dim = shape[i], i
    if dlrm:
        dp = chips
    in_graph = 1  # serving, DLRM, HPL, FFT: one layer (or one run) per graph execution
    if serving:
        gb, mbs, layers = decision.micro_batch_size * dp, decision.micro_batch_size, wl.num_layer
    elif llm:
        # N consecutive layers per graph execution: E = num_layer / N executions
        in_graph = wl.num_layer_in_graph
        gb, mbs, layers = wl.global_batch_size, decision.micro_batch_size, wl.num_layer // in_graph
    elif dlrm:
        gb, mbs, layers = wl.global_batch_size, 1, 1
    else:
        gb, mbs, layers = 1, 1, 1
    return _Case(
        spec, decision, quirks, GraphStructure.of(graph), shape, chips, llm, dlrm,
        kind is WorkloadKind.HPL, kind is WorkloadKind.FFT, serving, ex.equations is Equations.V2,
        ex.word_bytes, tp, pp, dp, tp_dim, pp_dim, dp_dim, gb, mbs, layers, in_graph,
        any(k.phase is Phase.BWD for k in graph.kernels),
    )  # fmt: skip


def _check_outer(case: _Case) -> None:
    """The shape multiplies to the chips per copy (SHAPE); the global batch divides into
    micro-batches x DP (LLM) or over the chips (DLRM) (DIVISIBILITY)."""
    prod = 1
    for s in case.shape:
        prod *= s
    if prod != case.chips or any(s < 1 for s in case.shape):
        raise _Infeasible(Status.SHAPE, prod - case.chips)
    gb, mbs = case.gb, case.mbs
    if case.llm:
        unit = mbs * case.dp
        if mbs < 1 or gb % unit != 0:
            raise _Infeasible(Status.DIVISIBILITY, gb % max(unit, 1))
    if case.dlrm and gb % case.chips != 0:
        raise _Infeasible(Status.DIVISIBILITY, gb % case.chips)


def _pipeline(case: _Case) -> dict:
    """The degrees, micro-batches, layers per stage, the pipeline factor and the pipeline's
    point-to-point ns per batch (extras of the result).

    Layers per stage count graph executions, ceil(E / PP); the quirk's bubble and the p2p
    term count model layers: N x ceil(E / PP) and num_layer (docs/model.md, "Several layers
    in one graph"). One piece of a pipeline stage (``Spec.piece``) runs ``piece.runs`` times
    in it (docs/model.md, "Pipeline stages of a whole model")."""
    spec, pp, dp = case.spec, case.pp, case.dp
    nmb = case.gb // (case.mbs * dp)
    lps = _ceil_div(case.layers, pp)
    if spec.piece is not None:  # one piece of a pipeline stage: its runs in that stage
        lps = spec.piece.runs
    if case.serving:  # one step, no bubble: p2p = (PP - 1) hops
        return dict(tp=case.tp, pp=pp, dp=dp, num_micro_batch=nmb, layers_per_stage=lps,
                    pipeline_factor=1.0, p2p_ns=(pp - 1) * _serving_hop(case))  # fmt: skip
    if case.quirks.bubble_over_layers_per_stage:
        model_lps = case.layers_in_graph * lps
        ccc = model_lps - 1 if model_lps >= 2 else 1
        pipeline_factor = 1 + (pp - 1) / (nmb * ccc)
    else:
        pipeline_factor = 1 + (pp - 1) / nmb
    p2p = 0.0
    if case.llm and case.pp_dim >= 0:
        wl = spec.workload
        inter = 2 * wl.hidden_dim * wl.seq_len * case.word if case.training else 0
        p2p = (1 / spec.system.network[case.pp_dim].link_bw_GBps) * inter * wl.num_layer
        if pp == 1 and not case.quirks.p2p_without_pipeline:
            p2p = 0.0  # PP = 1 is no pipeline: nothing is sent between stages
    return dict(tp=case.tp, pp=pp, dp=dp, num_micro_batch=nmb, layers_per_stage=lps,
                pipeline_factor=pipeline_factor, p2p_ns=p2p)  # fmt: skip


def _configurations(case: _Case) -> _Configs:
    """The configuration count and the rules of the assignment: range, kernel by kernel,
    pins, FWD/BWD split (CONFIG); Config(src) <= Config(dst) (ORDER); no configuration mixes
    kernels with and without num_input (CONFIG). Then the matrices (``_matrices``)."""
    kernels, ex, src, dst = case.spec.graph.kernels, case.spec.execution, case.gs.src, case.gs.dst
    nk = len(kernels)
    cfg = [int(c) for c in case.decision.config]
    if ex.style is ExecutionStyle.KERNEL_BY_KERNEL or ex.num_config == 0:
        nconf = nk
    elif ex.num_config > 0:
        nconf = ex.num_config
    else:
        assert ex.num_config == AUTO
        # the decision's own count (trailing configurations may be empty), as the evaluator
        nconf = case.decision.num_config or max(cfg) + 1
    fixed = nconf == nk
    fwd_bwd = ex.style is ExecutionStyle.DATAFLOW and not fixed and case.training and nconf < nk
    if nconf % 2 == 0:
        f_last, b_first = nconf // 2 - 1, nconf // 2
    else:
        f_last = b_first = nconf // 2
    for k, kern in enumerate(kernels):
        c = cfg[k]
        if c < 0 or c >= nconf:
            raise _Infeasible(Status.CONFIG, c)
        if fixed and c != k:
            raise _Infeasible(Status.CONFIG, c - k)
        if kern.config >= 0 and c != kern.config:  # pins hold also with one config per kernel
            raise _Infeasible(Status.CONFIG, c - kern.config)
        if fwd_bwd and kern.phase is Phase.FWD and c > f_last:
            raise _Infeasible(Status.CONFIG, c - f_last)
        if fwd_bwd and kern.phase is Phase.BWD and c < b_first:
            raise _Infeasible(Status.CONFIG, b_first - c)
    for e in range(len(src)):
        if cfg[src[e]] > cfg[dst[e]]:
            raise _Infeasible(Status.ORDER, cfg[src[e]] - cfg[dst[e]])
    is_set = [kern.num_input > 0 for kern in kernels]
    if any(is_set) and not all(is_set):
        for c in range(nconf):
            kinds = {is_set[k] for k in range(nk) if cfg[k] == c}
            if len(kinds) == 2:
                raise _Infeasible(Status.CONFIG, c)
    return _matrices(case, cfg, nconf)


def _matrices(case: _Case, cfg: list[int], nconf: int) -> _Configs:
    """The configuration matrices, explicitly, and the tiles per configuration (V2: 1 where
    a kernel sets num_input)."""
    kernels, src, dst = case.spec.graph.kernels, case.gs.src, case.gs.dst
    C, K, Es = range(nconf), range(len(kernels)), range(len(src))
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
    T = case.decision.num_tile if (case.llm or case.serving) else 1
    tiles = []
    for c in C:
        if case.v2 and any(A[k][c] and kernels[k].num_input > 0 for k in K):
            tiles.append(1)
        else:
            tiles.append(T)
    return _Configs(cfg, nconf, A, B, D, H, E, F, weights, tiles)


def _shard_dims(case: _Case) -> _Shards:
    """Per-chip, per-tile (sM, sK, sN) of every kernel: HPL over its process grid, FFT's N
    over every chip, the others divided by TP along their sharded dimension and (LLM) by T
    along their tiled one; OUTER counts as M."""
    kernels, shape = case.spec.graph.kernels, case.shape
    sharded = case.llm or case.serving
    if sharded and not case.spec.execution.skip_inter_chip_optimization:
        sharding = [Dim(s) for s in case.decision.sharding]
    else:
        sharding = [Dim.NO] * len(kernels)
    hpl_x = hpl_y = 1
    if case.hpl:
        if len(shape) == 1:
            hpl_x, hpl_y = 1, shape[0]
        elif len(shape) == 2:
            hpl_x, hpl_y = shape[0], shape[1]
        elif len(shape) == 3:
            hpl_x, hpl_y = shape[0] * shape[1], shape[2]
        else:  # more dimensions (dfsearch only): X = every dimension but the last
            hpl_x, hpl_y = 1, shape[-1]
            for s in shape[:-1]:
                hpl_x *= s

    def group(d: Dim) -> Dim:
        return Dim.M if d is Dim.OUTER else d

    T = case.decision.num_tile if sharded else 1
    sM, sK, sN = [], [], []
    for k, kern in enumerate(kernels):
        rows, kk, nn = kern.rows, (kern.k if kern.kind.has_k else 1), kern.n
        if case.serving and kern.kind is KernelKind.GEMM_WEIGHT:
            nn *= case.mbs  # the batch's tokens share one read of the weights
        elif case.serving:
            rows *= case.mbs  # every other kernel runs once per sequence
        if case.hpl:
            dims = [_ceil_div(rows, hpl_x), _ceil_div(kk, hpl_y), nn]
        elif case.fft:
            dims = [rows, kk, _ceil_div(nn, case.chips)]
        else:
            shard_dim = group(sharding[k])
            if _seq_parallel(case) and shard_dim is Dim.NO and not kern.kind.has_k:
                shard_dim = Dim.N  # sequence parallelism: split along the sequence
            tile_dim = group(kern.tiling) if sharded else Dim.NO
            dims = []
            for d, size in ((Dim.M, rows), (Dim.K, kk), (Dim.N, nn)):
                div = (case.tp if shard_dim is d else 1) * (T if tile_dim is d else 1)
                dims.append(_ceil_div(size, div))
        sM.append(dims[0])
        sK.append(dims[1])
        sN.append(dims[2])
    return _Shards(sharding, hpl_x, hpl_y, sM, sK, sN)


def _bytes(case: _Case, conf: _Configs, sh: _Shards) -> tuple[list[float], list[float], list[float]]:
    """Per-edge buffer bytes b_e (0 for zero_out edges), and per weight kernel its weight
    bytes w_w: in DRAM, and in SRAM (0 for skip_weight)."""
    graph, src, word = case.spec.graph, case.gs.src, case.word
    b = [
        0.0 if graph.connections[e].zero_out else float(sh.sM[src[e]] * sh.sN[src[e]] * word)
        for e in range(len(src))
    ]
    weight_full = [
        float(sh.sM[k] * sh.sK[k] * word) * _experts_per_chip(case, graph.kernels[k])
        for k in conf.weights
    ]
    weight_sram = [
        0.0 if graph.kernels[k].skip_weight else weight_full[i] for i, k in enumerate(conf.weights)
    ]
    return b, weight_full, weight_sram


# --------------------------------------------------------------------------- SRAM
def _sram(
    case: _Case, conf: _Configs, b: list[float], weight_sram: list[float]
) -> tuple[list[float], list[int]]:
    """SRAM bytes per configuration and the weight tiling factor of every kernel.

    SRAM fails when a configuration's fixed contributions alone do not fit, or exactly fill
    the capacity with something divisible left; then each lone weight kernel takes the
    smallest factor that fits (``_tiling_factor``), and the tiled sums are checked again."""
    C = range(conf.n)
    sram_checked = case.llm or case.serving or (case.dlrm and not case.v2)
    cap = case.spec.system.accelerator.sram_bytes
    sram_unlimited = case.v2 and cap == 0
    contrib, lone = _sram_contributions(case, conf, b, weight_sram)
    fx = [sum(x for cc, x, o in contrib if cc == c and o < 0) for c in C]
    dv = [sum(x for cc, x, o in contrib if cc == c and o >= 0) for c in C]
    # zero-byte contributions (skip_weight weights, zero_out edges) need no share of the SRAM
    nd = [sum(1 for cc, x, o in contrib if cc == c and o >= 0 and x > 0) for c in C]
    tf = [1] * len(lone)
    if sram_checked and not sram_unlimited:
        failing = [
            fx[c] + dv[c] - cap
            for c in C
            if not (fx[c] + dv[c] <= cap or (dv[c] > 0 and fx[c] < cap))
        ]
        if failing:
            raise _Infeasible(Status.SRAM, max(failing))
        for k in range(len(lone)):
            if lone[k]:
                tf[k] = _tiling_factor(case, conf, k, contrib, fx, dv, nd, weight_sram)
    sram = [fx[c] + sum(x / tf[o] for cc, x, o in contrib if cc == c and o >= 0) for c in C]
    if sram_checked and not sram_unlimited and any(sram[c] - cap > 1e-9 * cap for c in C):
        raise _Infeasible(Status.SRAM, max(sram[c] - cap for c in C))
    return sram, tf


def _sram_contributions(
    case: _Case, conf: _Configs, b: list[float], weight_sram: list[float]
) -> tuple[list[tuple[int, float, int]], list[bool]]:
    """Every SRAM contribution as (configuration, bytes, owner): spilled edges 2 b, on-chip
    edges b x depth, weights, sram_extra (a v2 field that acts in every equation set,
    docs/model.md). The owner is the weight kernel whose tiling factor divides it (a weight
    kernel alone in its configuration: its weight and its out-edges' spilled footprints),
    else -1. Also returns which kernels are such lone weight kernels."""
    kernels, src, ex = case.spec.graph.kernels, case.gs.src, case.spec.execution
    C, K, Es = range(conf.n), range(len(kernels)), range(len(src))
    A, B, D, F, weights = conf.A, conf.B, conf.D, conf.F, conf.weights
    depth = list(case.gs.depths)
    b_sram, depth_sram = list(b), list(depth)
    if ex.replicate_sram_index_bug:
        widx = {k: i for i, k in enumerate(weights)}
        for e in Es:
            if src[e] in widx:
                j = widx[src[e]]
                b_sram[e] = b[j]
                depth_sram[e] = depth[j]
    members = [sum(A[k][c] for k in K) for c in C]
    lone = [kernels[k].kind is KernelKind.GEMM_WEIGHT and members[conf.cfg[k]] == 1 for k in K]
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
    for k in K:
        for c in C:
            if A[k][c]:
                contrib.append((c, kernels[k].sram_extra_bytes * A[k][c], -1))
    return contrib, lone


def _tiling_factor(case, conf, k, contrib, fx, dv, nd, weight_sram) -> int:
    """The weight tiling factor of lone weight kernel k: each of its non-zero divisible
    contributions in an overfull configuration gets an equal share of the slack, tf >= 2;
    v2 rounds up to a divisor of the weight bytes (the weight bytes when none is large
    enough; any tf divides 0 bytes)."""
    cap = case.spec.system.accelerator.sram_bytes
    need = 1
    for c, x, o in contrib:
        if o == k and fx[c] + dv[c] > cap:  # zero-byte ones too: tf >= 2
            # capped at 2^53 (exact in float64) as the evaluator does
            need = max(need, 2, math.ceil(min(x * nd[c] / (cap - fx[c]), 2.0**53)))
    if case.v2 and need > 1 and weight_sram[conf.weights.index(k)] <= 2.0**53:
        wbytes = int(weight_sram[conf.weights.index(k)])
        if wbytes > 0:
            divisors = [d for d in range(need, wbytes + 1) if wbytes % d == 0]
            need = divisors[0] if divisors else wbytes
    return need


# --------------------------------------------------------------------------- DRAM
def _dram(
    case: _Case, conf: _Configs, b: list[float], weight_full: list[float], lps: int
) -> tuple[float, float]:
    """DRAM bytes per chip and the bandwidth in effect. LLM / DLRM: weights x layers per
    stage, micro-batch x the widest live activations (T_c x bytes of the edges live during
    the configuration), dram_extra x layers per stage, DLRM's tables; HPL: the matrix; FFT:
    the signal; plus dram_extra. A second tier (not v2) blends the bandwidths; DRAM fails
    when the total exceeds the capacity."""
    spec, kernels, Es = case.spec, case.spec.graph.kernels, range(len(case.gs.src))
    wl, word, chips = spec.workload, case.word, case.chips
    alive = [conf.tiles[c] * sum(b[e] * conf.E[e][c] for e in Es) for c in range(conf.n)]
    dram_extra = sum(kern.dram_extra_bytes for kern in kernels)  # every equation set
    if case.serving:  # the stage's weights and KV cache, one layer's live activations
        total = lps * sum(weight_full) + lps * dram_extra + max(alive)
        total += _serving_kv_bytes(case, lps)
    elif case.llm or case.dlrm:
        total = lps * sum(weight_full[i] * conf.F[i][c] for i in range(len(conf.weights))
                          for c in range(conf.n))  # fmt: skip
        total += case.mbs * max(alive)
        total += lps * dram_extra
        total += spec.piece.resident_bytes if spec.piece is not None else 0.0
        if case.dlrm:
            total += wl.num_table * wl.row * wl.emb_dim * word / chips
    elif case.hpl:
        total = wl.n * wl.n * word / chips + dram_extra
    else:
        total = wl.length * word / chips + dram_extra
    return _dram_check(case, total)


def _dram_check(case: _Case, total: float) -> tuple[float, float]:
    """The bandwidth in effect for ``total`` DRAM bytes per chip, or DRAM infeasible."""
    mem = case.spec.system.memory
    cap1, bw1 = mem.dram_bytes, mem.dram_bw_GBps
    cap2, bw2 = mem.second_dram_bytes, mem.second_dram_bw_GBps
    tiers = not case.v2 and cap2 > 0
    if cap1 == 0 or total <= cap1:
        return total, bw1
    if tiers and total <= cap1 + cap2:
        return total, (cap1 * bw1 + cap2 * bw2) / (cap1 + cap2)
    if tiers:
        raise _Infeasible(Status.DRAM, total - cap1 - cap2)
    raise _Infeasible(Status.DRAM, total - cap1)


def _training_memory(case: _Case) -> bool:
    """The training memory model is in effect: chosen, or "auto" on an LLM training graph."""
    chosen = case.spec.training.memory_model
    if chosen is MemoryModel.AUTO:
        return case.llm and case.training
    return chosen is MemoryModel.TRAINING


def _training_dram(
    case: _Case, conf: _Configs, b: list[float], sh: _Shards, extra: dict
) -> tuple[float, float]:
    """Training memory per chip of the first stage: parameters (MoE: E / EP experts) x (word +
    grad_bytes + optimizer_bytes, the last / DP when sharded), kept activations x layers per stage x
    micro-batches in flight (min(PP, nmb)) x micro-batch (full recompute: the layer inputs,
    plus one layer rebuilt), dram_extra x layers, micro-batch x the widest live
    activations; the bandwidth and the capacity check as in :func:`_dram`."""
    spec, kernels, t = case.spec, case.spec.graph.kernels, case.spec.training
    lps, nmb = extra["layers_per_stage"], extra["num_micro_batch"]
    has_fwd = any(k.phase is Phase.FWD for k in kernels)
    params = lps * sum(  # an MoE expert GEMM holds E / EP experts
        sh.sM[i] * sh.sK[i] * _experts_per_chip(case, k) for i, k in enumerate(kernels)
        if k.kind is KernelKind.GEMM_WEIGHT and (k.phase is Phase.FWD or not has_fwd)
    )  # fmt: skip
    opt = params * t.optimizer_bytes / (case.dp if t.optimizer_sharding else 1)
    kept = kept_all = 0.0
    for i, k in enumerate(kernels):
        if k.phase is not Phase.FWD:
            continue
        if k.saved_bytes is not None:
            saved = k.saved_bytes
        else:
            saved = (k.input_bytes or 0.0) + (0.0 if k.kind.has_weight else (k.input2_bytes or 0.0))
        split = sh.sharding[i] is not Dim.NO or (_seq_parallel(case) and not k.kind.has_k)
        saved = saved / case.tp if split else saved
        kept_all += saved
        if not (t.recompute is Recompute.SELECTIVE and k.selective_recompute):
            kept += saved
    if t.recompute is Recompute.FULL:
        names = {k.name for k in kernels if k.phase is Phase.FWD}
        fed = {c.dst for c in spec.graph.connections if c.src in names}
        kept = sum(k.input_bytes or 0.0 for k in kernels if k.name in names and k.name not in fed)
        kept = kept / case.tp if _seq_parallel(case) else kept
    act = lps * min(case.pp, max(nmb, 1)) * case.mbs * kept
    if t.recompute is Recompute.FULL:
        act += case.mbs * kept_all
    alive = [conf.tiles[c] * sum(b[e] * conf.E[e][c] for e in range(len(case.gs.src)))
             for c in range(conf.n)]  # fmt: skip
    dram_extra = sum(k.dram_extra_bytes for k in kernels)
    total = params * (case.word + t.grad_bytes) + opt + act + lps * dram_extra
    total += case.mbs * max(alive)
    total += spec.piece.resident_bytes if spec.piece is not None else 0.0  # the stage's others
    return _dram_check(case, total)


# --------------------------------------------------------------------------- compute
def _streams(case: _Case, k: int) -> int:
    """num_input of kernel k as a streaming factor of its work (not in v2), times 2 when
    activation recomputation runs it again."""
    kern = case.spec.graph.kernels[k]
    return (kern.num_input if (kern.num_input > 0 and not case.v2) else 1) * _runs(case, k)


def _runs(case: _Case, k: int) -> int:
    """2 for a forward kernel of a training graph that recomputation reruns, else 1."""
    kern, mode = case.spec.graph.kernels[k], case.spec.training.recompute
    if not case.training or kern.phase is not Phase.FWD:
        return 1
    again = mode is Recompute.FULL or (mode is Recompute.SELECTIVE and kern.selective_recompute)
    return 2 if again else 1


def _seq_parallel(case: _Case) -> bool:
    return case.llm and case.training and case.spec.training.sequence_parallel


def _flop_compute(case: _Case, conf: _Configs, sh: _Shards) -> list[float]:
    """FLOP model: T_c x the sum of the kernels' FLOP / rate (systolic: u x peak; SIMD:
    u x peak / H unless the quirk runs it at peak); CORES when a configuration holds more
    kernels than there are cores."""
    kernels, acc, u = case.spec.graph.kernels, case.spec.system.accelerator, case.spec.execution.compute_util
    members = [sum(conf.A[k][c] for k in range(len(kernels))) for c in range(conf.n)]
    for c in range(conf.n):
        if members[c] > acc.cores:
            raise _Infeasible(Status.CORES, members[c] - acc.cores)
    G = acc.peak_gflops
    compute = [0.0] * conf.n
    for c in range(conf.n):
        total_time = 0.0
        for k, kern in enumerate(kernels):
            if kern.type is ComputeType.SYSTOLIC:
                rate = u * G
                flop = 2 * sh.sM[k] * sh.sN[k] * sh.sK[k] * _streams(case, k)
            else:
                rate = u * G if case.quirks.simd_at_systolic_peak else u * G / acc.systolic_height
                flop = sh.sM[k] * sh.sN[k] * _streams(case, k)
            total_time += conf.A[k][c] * flop / rate
        compute[c] = conf.tiles[c] * total_time
    return compute


def _cycle_compute(case: _Case, conf: _Configs, sh: _Shards) -> tuple[list[float], list[int]]:
    """Cycle model: per configuration, every (Par_lane, Par_stage) pair of each member
    (the decision's pair when it fixes both) and the best allocation of the cores
    (``_best_allocation``); compute = T_c x max cycles / frequency. CORES when no
    allocation fits, by the cores the smallest pairs need beyond the chip's."""
    kernels, acc, d = case.spec.graph.kernels, case.spec.system.accelerator, case.decision
    cores = acc.cores
    fix_pl = list(d.par_lane) if d.par_lane else [0] * len(kernels)
    fix_ps = list(d.par_stage) if d.par_stage else [0] * len(kernels)
    compute = [0.0] * conf.n
    max_cycles = [0] * conf.n
    for c in range(conf.n):
        options = []
        for k, kern in enumerate(kernels):
            if not conf.A[k][c]:
                continue
            if fix_pl[k] > 0 and fix_ps[k] > 0:  # a kernel's pair is fixed only as a pair
                pairs = [(fix_pl[k], fix_ps[k])]
            elif kern.type is ComputeType.SIMD:
                pairs = [(pl, 1) for pl in range(1, cores + 1)]
            else:
                pairs = [(pl, ps) for pl in range(1, cores + 1) for ps in range(1, cores // pl + 1)]
            options.append([(_kernel_cycles(case, sh, k, pl, ps), pl, ps) for pl, ps in pairs])
        best = _best_allocation(options, cores)
        if best is None:
            least = sum(min(pl * ps for _, pl, ps in o) for o in options)
            raise _Infeasible(Status.CORES, least - cores)
        max_cycles[c] = best
        compute[c] = conf.tiles[c] * best / acc.freq_GHz
    return compute, max_cycles


def _kernel_cycles(case: _Case, sh: _Shards, k: int, pl: int, ps: int) -> int:
    """Cycles of kernel k on PL x PS cores (``_cycles``; the effective stage applies to
    systolic kernels that use it)."""
    kern, ex, acc = case.spec.graph.kernels[k], case.spec.execution, case.spec.system.accelerator
    eff = (
        ex.effective_stage
        if kern.use_effective_stage and ex.effective_stage > 0 and kern.type is ComputeType.SYSTOLIC
        else 0
    )
    return _cycles(kern.type, sh.sM[k], sh.sK[k], sh.sN[k], pl, ps, acc.systolic_width,
                   acc.systolic_height, eff, _streams(case, k))  # fmt: skip


# --------------------------------------------------------------------------- memory, II
def _memory(
    case: _Case, conf: _Configs, b: list[float], dram_bw: float, sh: _Shards
) -> list[float]:
    """Memory ns per configuration: T_c x its spilled buffer bytes plus its kernels'
    memory_size bytes (serving: what each kernel reads per chip), over the DRAM bandwidth."""
    kernels, Es = case.spec.graph.kernels, range(len(case.gs.src))
    if case.serving:
        read = [_serving_read(case, sh, k) for k in range(len(kernels))]
    else:
        read = [kern.memory_bytes for kern in kernels]
    return [
        (
            conf.tiles[c] * sum(b[e] * conf.D[e][c] for e in Es)
            + sum(read[k] * conf.A[k][c] for k in range(len(kernels)))
        )
        / dram_bw
        for c in range(conf.n)
    ]


# --------------------------------------------------------------------------- LLM serving
def _serving_read(case: _Case, sh: _Shards, k: int) -> float:
    """Bytes kernel k reads from DRAM per step and chip (docs/model.md, "LLM serving"): a
    weight GEMM the part of its weight its shard holds (sM x sK of M x K); any other kernel
    its memory_size for every sequence, the share ceil(S / TP) / S of the dimension it is
    split on (S for the batch: outer x B heads and sequences, or M, K, N)."""
    kern = case.spec.graph.kernels[k]
    if kern.memory_bytes == 0:
        return 0.0
    if kern.kind is KernelKind.GEMM_WEIGHT:
        return kern.memory_bytes * sh.sM[k] * sh.sK[k] / (kern.outer * kern.m * kern.k)
    d = sh.sharding[k]
    sizes = {Dim.OUTER: kern.outer * case.mbs, Dim.M: kern.m, Dim.K: kern.k, Dim.N: kern.n}
    share = 1.0
    if d in sizes and case.tp > 1:
        share = _ceil_div(sizes[d], case.tp) / sizes[d]
    return kern.memory_bytes * case.mbs * share


def _serving_kv_bytes(case: _Case, lps: int) -> float:
    """KV cache per chip: K and V of the full context (prompt + output) for the g x B
    (head, sequence) pairs split over TP, kv_word bytes each, for the stage's layers."""
    wl = case.spec.workload
    g = wl.num_kv_head if wl.num_kv_head else wl.num_head
    kv_word = wl.kv_word_bytes if wl.kv_word_bytes else case.word
    pairs = _ceil_div(g * case.mbs, case.tp)
    return 2 * pairs * wl.head_dim * (wl.prompt_len + wl.output_len) * kv_word * lps


def _serving_hop(case: _Case) -> float:
    """One hop between pipeline stages: B x (prompt_len, or tokens_per_step: 1 in plain
    decode) x hidden x word / TP bytes
    over one PP link, plus that dimension's link latency (else the accelerator's)."""
    if case.pp_dim < 0:
        return 0.0
    spec = case.spec
    wl, dim = spec.workload, spec.system.network[case.pp_dim]
    tokens = wl.prompt_len if wl.phase is ServingPhase.PREFILL else wl.tokens_per_step
    size = case.mbs * tokens * wl.hidden_dim * case.word / case.tp
    latency = dim.link_latency_ns
    if latency is None:
        latency = spec.system.accelerator.link_latency_ns
    return size / dim.link_bw_GBps + latency


def _result(case, conf, extra, compute, memory, network, sram, total, dram_bw, max_cycles):
    """The feasible result: II per configuration (``combine_overlap``; v2: x the largest
    num_input), their sum, ns_per_batch (x the batch multiplier, + p2p) and final_ns (per
    copy), the price."""
    spec, kernels = case.spec, case.spec.graph.kernels
    ii = []
    for c in range(conf.n):
        v = combine_overlap(compute[c], memory[c], network[c], spec.execution.overlap)
        if case.v2:
            v = v * max([1] + [kernels[k].num_input for k in range(len(kernels)) if conf.A[k][c]])
        ii.append(v)
    all_ii = sum(ii)
    if case.serving:
        batch_mult = float(case.layers)  # final_ns = the step latency
    elif case.llm or case.dlrm:
        batch_mult = extra["pipeline_factor"] * extra["layers_per_stage"] * case.gb / case.dp
    else:
        batch_mult = 1.0
    ns_per_batch = all_ii * batch_mult + extra["p2p_ns"]
    return RefResult(
        status=Status.OK,
        violation=0.0,
        final_ns=ns_per_batch / spec.num_copy,
        ns_per_batch=ns_per_batch,
        all_config_ii_ns=all_ii,
        dram_bytes=total,
        dram_bw_GBps=dram_bw,
        compute_ns=tuple(compute),
        memory_ns=tuple(memory),
        network_ns=tuple(network),
        ii_ns=tuple(ii),
        sram_bytes=tuple(sram),
        tiles=tuple(conf.tiles),
        max_cycles=tuple(max_cycles),
        price=price(spec, case.shape, dram_bw, case.quirks),
        **extra,
    )


# --------------------------------------------------------------------------- network
def _network(case: _Case, conf: _Configs, sh: _Shards, nmb: int) -> list[float]:
    """Network ns per configuration, by workload: LLM collectives, DLRM / FFT all-to-alls
    over the bisection, HPL's broadcast and point-to-point."""
    if case.llm or case.serving:
        return _llm_network(case, conf, sh, nmb)
    if case.dlrm or case.fft:
        return _all_to_all_network(case, conf, sh, nmb)
    return _hpl_network(case, conf, sh)


def _llm_ratios(case: _Case) -> tuple[float, float, float, float, float]:
    """ns per byte of the LLM collectives: TP all-reduce (doubled unless the quirk halves
    it; the HBD blend on a 3-D network), all-to-all and all-gather, the DP gradient
    all-reduce (doubled where the topology doubles it); and the link latency per TP
    all-reduce. Returns (r_ar, r_a2a, r_ag, r_arp, latency)."""
    system, ex, shape = case.spec.system, case.spec.execution, case.shape
    net, acc = system.network, system.accelerator
    double = ex.separate_rs_ag_for_ar or not case.quirks.half_volume_all_reduce
    # sequence parallelism: each TP all-reduce is a reduce-scatter + all-gather
    rs_ag = ex.separate_rs_ag_for_ar or _seq_parallel(case)
    r_ar = r_a2a = r_ag = r_arp = 0.0
    latency = 0.0
    if case.tp_dim >= 0:
        topo, bw, tp = net[case.tp_dim].topology, net[case.tp_dim].link_bw_GBps, case.tp
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
        if double or rs_ag:
            r_ar = 2 * r_ar
        latency = acc.link_latency_ns * (2 if rs_ag else 1)
        latency = latency * _latency_steps(topo, tp)
    if case.dp_dim >= 0:
        topo, bw = net[case.dp_dim].topology, net[case.dp_dim].link_bw_GBps
        r_arp = _reduce_ratio(topo, case.dp, bw)
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
    return r_ar, r_a2a, r_ag, r_arp, latency


def _llm_collectives(case: _Case, sh: _Shards, nmb: int) -> tuple[list[list[float]], list[list[float]]]:
    """Bytes of every collective: per kernel [all-reduce, all-to-all, all-gather, periodic
    all-reduce / micro-batches] (a K-sharded kernel without one all-reduces), and per edge
    [all-reduce, all-to-all, all-gather] of the re-layout between its ends' shardings."""
    kernels, gs, word = case.spec.graph.kernels, case.gs, case.word
    src, dst = gs.src, gs.dst
    per_k = [[0.0] * 4 for _ in kernels]
    for k, kern in enumerate(kernels):
        typ = kern.communication
        if typ is Collective.NONE and sh.sharding[k] is Dim.K:
            typ = Collective.ALL_REDUCE
        size = float(sh.sM[k] * sh.sN[k] * word)
        if typ is Collective.ALL_REDUCE:
            per_k[k][0] = size
        elif typ is Collective.ALL_TO_ALL:
            per_k[k][1] = size
        elif typ is Collective.ALL_GATHER:
            per_k[k][2] = size
        for j in range(3):
            per_k[k][j] *= _runs(case, k)
        if typ is Collective.ALL_REDUCE_PERIODIC and kern.num_expert == 0:
            per_k[k][3] = size / nmb  # an expert's: _expert_network
    per_e = [[0.0] * 3 for _ in src]
    if not case.spec.execution.skip_inter_chip_optimization:
        for e in range(len(src)):
            up = upstream_layout(sh.sharding[src[e]])
            down = downstream_layout(kernels[dst[e]], gs.operand[e], sh.sharding[dst[e]])
            typ = relayout(up, down)
            size = float(sh.sM[src[e]] * sh.sN[src[e]] * word)
            if typ is Collective.ALL_REDUCE:
                per_e[e][0] = size
            elif typ is Collective.ALL_TO_ALL:
                per_e[e][1] = size
            elif typ is Collective.ALL_GATHER:
                per_e[e][2] = size
    return per_k, per_e


def _experts_per_chip(case: _Case, kern: Kernel) -> int:
    """MoE: a kernel of E experts holds E / gcd(E, DP) of them per chip; a dense one 1."""
    e = kern.num_expert
    return e // math.gcd(e, case.dp) if (case.llm and e > 0) else 1


def _expert_network(case: _Case, sh: _Shards, nmb: int) -> tuple[list[float], list[float]]:
    """MoE, per kernel: the expert all-to-all ns per tile (EP = gcd(E, DP) chips of the DP
    dimension; each chip sends its shard, 1/EP to each of them: the LLM all-to-all ratio at
    p = EP per message byte) and the expert gradient all-reduce ns per execution (E / EP
    experts' gradients over DP / EP replicas, doubled as the dense one)."""
    kernels, net = case.spec.graph.kernels, case.spec.system.network
    tile, once = [0.0] * len(kernels), [0.0] * len(kernels)
    if case.dp_dim < 0:
        return tile, once
    topo, bw = net[case.dp_dim].topology, net[case.dp_dim].link_bw_GBps
    double = case.spec.execution.separate_rs_ag_for_ar or not case.quirks.half_volume_all_reduce
    for k, kern in enumerate(kernels):
        if kern.num_expert <= 0:
            continue
        ep = math.gcd(kern.num_expert, case.dp)
        size = float(sh.sM[k] * sh.sN[k] * case.word)
        if kern.communication is Collective.EXPERT_ALL_TO_ALL and ep > 1:
            tile[k] = _all_to_all_ratio(topo, ep, bw) * size / ep * _runs(case, k)
        replicas = case.dp // ep
        if kern.communication is Collective.ALL_REDUCE_PERIODIC and replicas > 1 and nmb > 0:
            ratio = _reduce_ratio(topo, replicas, bw) * (2 if double and _doubles_gradient(topo) else 1)
            once[k] = ratio * size * (kern.num_expert // ep) / nmb
    return tile, once


def _llm_network(case: _Case, conf: _Configs, sh: _Shards, nmb: int) -> list[float]:
    """LLM: T_c x (ratio x bytes) of the configuration's kernel collectives and of the
    re-layouts of edges leaving its kernels, + the periodic all-reduce, + the link latency
    of every TP all-reduce."""
    r_ar, r_a2a, r_ag, r_arp, latency = _llm_ratios(case)
    per_k, per_e = _llm_collectives(case, sh, nmb)
    ex_tile, ex_once = _expert_network(case, sh, nmb)
    ar_k, a2a_k, ag_k, arp_k = ([v[j] for v in per_k] for j in range(4))
    ar_e, a2a_e, ag_e = ([v[j] for v in per_e] for j in range(3))
    A, H, K, Es = conf.A, conf.H, range(len(per_k)), range(len(per_e))
    network = [0.0] * conf.n
    for c in range(conf.n):
        s_ar = sum(ar_k[k] * A[k][c] for k in K) + sum(ar_e[e] * H[e][c] for e in Es)
        s_a2a = sum(a2a_k[k] * A[k][c] for k in K) + sum(a2a_e[e] * H[e][c] for e in Es)
        s_ag = sum(ag_k[k] * A[k][c] for k in K) + sum(ag_e[e] * H[e][c] for e in Es)
        s_arp = sum(arp_k[k] * A[k][c] for k in K)
        t = conf.tiles[c] * (r_ar * s_ar + r_a2a * s_a2a + r_ag * s_ag) + r_arp * s_arp
        t += conf.tiles[c] * sum(ex_tile[k] * A[k][c] for k in K)
        t += sum(ex_once[k] * A[k][c] for k in K)
        if case.tp_dim >= 0:
            count = sum(A[k][c] for k in K if ar_k[k] > 0)
            count += sum(H[e][c] for e in Es if ar_e[e] > 0)
            t += latency * count
        network[c] = t
    return network


def _all_to_all_network(case: _Case, conf: _Configs, sh: _Shards, nmb: int) -> list[float]:
    """DLRM / FFT: the all-to-all bytes of the configuration's kernels over each network
    dimension's bisection (the slowest dimension counts; a one-chip FC dimension with
    traffic is infinitely slow), + DLRM's periodic all-reduce (x2 in both pre-v1 sets)."""
    net, chips, eq = case.spec.system.network, case.chips, case.spec.execution.equations
    kernels, dlrm = case.spec.graph.kernels, case.dlrm
    msg, bwf = _bisection_table(tuple(d.topology for d in net), case.shape, chips, eq)
    a2a = [0.0] * len(kernels)
    arp = [0.0] * len(kernels)
    for k, kern in enumerate(kernels):
        if kern.communication is Collective.ALL_TO_ALL and chips > 1:
            # DLRM: / N (design space: the whole bytes per chip); FFT: / N^2
            per = (1 if eq is Equations.DESIGN_SPACE else chips) if dlrm else chips * chips
            a2a[k] = kern.communication_bytes / per
        if dlrm and kern.communication is Collective.ALL_REDUCE_PERIODIC:
            arp[k] = sh.sM[k] * sh.sN[k] * case.word / nmb
    K = range(len(kernels))
    network = [0.0] * conf.n
    for c in range(conf.n):
        per_dim = []
        for j in range(len(net)):
            load = sum(a2a[k] * conf.A[k][c] for k in K) * msg[j]
            if load == 0:
                per_dim.append(0.0)
            elif bwf[j] == 0:  # a one-chip FC dimension (v2 bisection x(x-1)/2 = 0)
                per_dim.append(_INF)
            else:
                per_dim.append(load / (net[j].link_bw_GBps * bwf[j]))
        t = max(per_dim)
        if dlrm:
            t += sum(arp[k] * conf.A[k][c] for k in K) * (2 if eq.pre_v1 else 1)
        network[c] = t
    return network


def _hpl_network(case: _Case, conf: _Configs, sh: _Shards) -> list[float]:
    """HPL: the larger of the point-to-point bytes over the first dimension and the
    broadcast bytes over the second, per configuration."""
    net, kernels = case.spec.system.network, case.spec.graph.kernels
    bc = [0.0] * len(kernels)
    p2 = [0.0] * len(kernels)
    for k, kern in enumerate(kernels):
        if kern.communication is Collective.BROADCAST and sh.hpl_x > 1:
            bc[k] = kern.communication_bytes / sh.hpl_x
        if kern.communication2 is Collective.POINT_TO_POINT and sh.hpl_y > 1:
            p2[k] = kern.communication_bytes / sh.hpl_y
    K = range(len(kernels))
    return [
        max(
            sum(p2[k] * conf.A[k][c] for k in K) / net[0].link_bw_GBps,
            sum(bc[k] * conf.A[k][c] for k in K) / net[1].link_bw_GBps,
        )
        for c in range(conf.n)
    ]
