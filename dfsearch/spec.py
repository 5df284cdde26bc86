"""The validated input: frozen dataclasses in DFModel's units (docs/model.md, Units and numbers).

Field names are the TOML keys (they carry their unit: ``link_bw_GBps``, ``sram_bytes``,
``freq_GHz``), so the TOML loader, the TOML writer and the DFModel importer all speak one
vocabulary. Objects here are built only by ``dfsearch.loader`` (TOML), ``dfsearch.io.dfmodel``
(DFModel setup.txt) and the generators; they are always validated (see ``dfsearch.validate``).

Nothing below this module sees raw dicts or strings from a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dfsearch.codes import (
    Collective,
    ComputeType,
    Dim,
    Equations,
    ExecutionModel,
    ExecutionStyle,
    KernelKind,
    MemoryModel,
    ObjectiveKind,
    Overlap,
    Parallelism,
    Phase,
    Recompute,
    SpeculativeScheme,
    Topology,
)
from dfsearch.quirks import Quirks  # re-exported: the spec's [quirks] table
from dfsearch.workload_specs import (  # re-exported
    DLRMWorkload,
    FFTWorkload,
    HPLWorkload,
    LLMWorkload,
    ServingWorkload,
    Workload,
)

__all__ = [
    "AUTO",
    "Kernel",
    "Connection",
    "Graph",
    "Accelerator",
    "Memory",
    "NetworkDim",
    "System",
    "Cost",
    "Execution",
    "Training",
    "LLMWorkload",
    "DLRMWorkload",
    "HPLWorkload",
    "FFTWorkload",
    "ServingWorkload",
    "Workload",
    "Speculative",
    "Quirks",
    "SearchSettings",
    "OUTER_STRATEGY_NAMES",
    "ASSIGNMENT_STRATEGY_NAMES",
    "StagePiece",
    "Spec",
]

#: ``execution.num_config = "auto"``: the search chooses the number of configurations.
AUTO = -1

_FROZEN = dict(frozen=True, slots=True, kw_only=True)


# --------------------------------------------------------------------------- graph
@dataclass(**_FROZEN)
class Kernel:
    """One compute kernel of the dataflow graph.

    Sizes are bytes of the *unsharded* tensors; ``None`` means the input did not give it.
    ``k`` is 1 for elementwise kernels. ``sharding`` is ``None`` when free (the inter-chip
    pass decides), ``config`` is -1 when free. ``saved_bytes`` (training memory model) are
    the bytes of this forward kernel's tensors that the backward pass keeps (``None``: its
    activation inputs); ``selective_recompute`` marks kernels that selective activation
    recomputation runs again instead of keeping their tensors (the attention core).
    ``num_expert`` = E > 0 marks a kernel of a mixture-of-experts layer with E experts
    (docs/model.md, "Mixture of experts"): a weight GEMM's m x k weight is one expert's and
    each chip holds E / EP of them, a periodic all-reduce runs over each expert's DP / EP
    replicas, an ``expert_all_to_all`` over the EP chips (EP = gcd(E, DP)).
    """

    name: str
    kind: KernelKind
    type: ComputeType
    phase: Phase = Phase.NONE
    outer: int = 1
    m: int
    k: int = 1
    n: int
    tiling: Dim = Dim.NO
    sharding: Dim | None = None
    config: int = -1
    input_bytes: float | None = None
    input2_bytes: float | None = None
    weight_bytes: float | None = None
    output_bytes: float | None = None
    communication: Collective = Collective.NONE
    communication_bytes: float = 0.0
    communication2: Collective = Collective.NONE
    communication2_bytes: float = 0.0
    memory_bytes: float = 0.0
    num_input: int = 0
    skip_weight: bool = False
    use_effective_stage: bool = False
    sram_extra_bytes: float = 0.0
    dram_extra_bytes: float = 0.0
    saved_bytes: float | None = None
    selective_recompute: bool = False
    num_expert: int = 0
    id: int | None = None

    @property
    def rows(self) -> int:
        """``outer * m``: DFModel folds the outer (heads) dimension into M."""
        return self.outer * self.m

    @property
    def flop(self) -> float:
        """Unsharded FLOP of one execution, DFModel's statistics convention."""
        mult = self.num_input if self.num_input > 0 else 1
        base = float(self.rows) * float(self.k) * float(self.n) * mult
        return 2.0 * base if self.type is ComputeType.SYSTOLIC else base


@dataclass(**_FROZEN)
class Connection:
    """An edge producer -> consumer, by kernel name. ``zero_out`` (v2): buffer counts 0 bytes."""

    src: str
    dst: str
    zero_out: bool = False
    id: int | None = None


@dataclass(**_FROZEN)
class Graph:
    """The dataflow graph: kernels in file order, connections in file order."""

    kernels: tuple[Kernel, ...]
    connections: tuple[Connection, ...] = ()
    # whether a kernel is a backward one, found once: the search asks per kernel
    has_bwd: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "has_bwd", any(k.phase is Phase.BWD for k in self.kernels))

    def index(self) -> dict[str, int]:
        """Kernel name -> position in ``kernels``."""
        return {k.name: i for i, k in enumerate(self.kernels)}

    @property
    def flop(self) -> float:
        """Sum of the kernels' unsharded FLOP (one graph execution)."""
        return float(sum(k.flop for k in self.kernels))

    def flop_of(self, members: tuple[int, ...]) -> float:
        """Sum of the unsharded FLOP of the kernels at positions ``members``."""
        return float(sum(self.kernels[k].flop for k in members))

    @property
    def is_training(self) -> bool:
        return self.has_bwd


# --------------------------------------------------------------------------- system
@dataclass(**_FROZEN)
class Accelerator:
    """One chip. Peak GFLOP/s = 2 * systolic_width * systolic_height * cores * freq_GHz."""

    cores: int
    systolic_width: int
    systolic_height: int
    sram_bytes: float
    freq_GHz: float
    pmu: int = 0
    pmu_bytes: float = 0.0
    link_latency_ns: float = 0.0

    @property
    def peak_gflops(self) -> float:
        return 2.0 * self.systolic_width * self.systolic_height * self.cores * self.freq_GHz


@dataclass(**_FROZEN)
class Memory:
    """DRAM per chip; ``dram_bytes = 0`` means unlimited. Optional second tier (v1)."""

    dram_bw_GBps: float
    dram_bytes: float = 0.0
    second_dram_bw_GBps: float = 0.0
    second_dram_bytes: float = 0.0


@dataclass(**_FROZEN)
class NetworkDim:
    """One network dimension. ``size = 0`` means the search chooses it (LLM only).
    ``link_latency_ns``: latency of one hop between neighbouring chips on this dimension
    (None: ``accelerator.link_latency_ns``); read by the serving pipeline hop."""

    topology: Topology
    link_bw_GBps: float
    size: int = 0
    parallelism: Parallelism = Parallelism.NONE
    link_latency_ns: float | None = None
    #: realistic execution model: achievable bus bandwidth / link bandwidth of this
    #: dimension's collectives (None: ``execution.bus_efficiency``)
    bus_efficiency: float | None = None
    #: realistic execution model: a measured all-reduce bus bandwidth curve of this
    #: dimension (nccl-tests ``busbw`` in GB/s at message sizes in bytes, sizes increasing;
    #: empty: none). An all-reduce never runs faster than the curve allows (docs/model.md).
    all_reduce_sizes_bytes: tuple[float, ...] = ()
    all_reduce_busbw_GBps: tuple[float, ...] = ()

    def latency_ns(self, accelerator: Accelerator) -> float:
        """This dimension's hop latency: its own, else the accelerator's."""
        own = self.link_latency_ns
        return accelerator.link_latency_ns if own is None else own


@dataclass(**_FROZEN)
class System:
    num_chip: int
    accelerator: Accelerator
    memory: Memory
    network: tuple[NetworkDim, ...]
    hbd: int = 0

    @property
    def variant(self) -> str:
        """The network's name, the dimensions' short codes joined by ``_`` (``"r_r"``,
        ``"mesh_sw"``): DFModel's variant name whenever DFModel has the network."""
        return "_".join(d.topology.short for d in self.network)


# --------------------------------------------------------------------------- cost
@dataclass(**_FROZEN)
class Cost:
    """Prices ($ per GB/s of link, per GB/s of switch port, per GB/s of DRAM, per chip) and
    static power coefficients (J/GB, i.e. W per GB/s; W per chip). ``link_power_J_per_GB``
    has one entry per network dimension; missing entries are 0 (as in DFModel, with no
    fallback to dimension 0)."""

    link_price_per_GBps: float = 0.0
    switch_price_per_GBps: float = 0.0
    dram_price_per_GBps: float = 0.0
    chip_price: float = 0.0
    link_power_J_per_GB: tuple[float, ...] = ()
    switch_power_J_per_GB: float = 0.0
    dram_power_J_per_GB: float = 0.0
    chip_power_W: float = 0.0

    def link_power(self, dim: int) -> float:
        return self.link_power_J_per_GB[dim] if dim < len(self.link_power_J_per_GB) else 0.0


# --------------------------------------------------------------------------- execution
@dataclass(**_FROZEN)
class Execution:
    """How the graph runs on a chip (equation sets: docs/model.md).

    ``num_config``: 0 = one configuration per kernel, ``AUTO`` (-1) = searched.
    ``compute_util``: 0 = cycle-accurate systolic model, u > 0 = FLOP / (u * peak).
    ``equations``: which DFModel equation set to reproduce (v1 default; v2 and legacy options).
    """

    style: ExecutionStyle = ExecutionStyle.DATAFLOW
    num_config: int = 0
    overlap: Overlap = Overlap.PERFECT
    compute_util: float = 0.0
    word_bytes: int = 2
    equations: Equations = Equations.V1
    separate_rs_ag_for_ar: bool = False
    skip_inter_chip_optimization: bool = False
    effective_stage: int = 0
    replicate_sram_index_bug: bool = False
    #: ``dfmodel`` (DFModel's equations) or ``realistic`` (docs/model.md, "The realistic
    #: execution model"); the fields below are read by the realistic model only
    model: ExecutionModel = ExecutionModel.DFMODEL
    kernel_overhead_us: float = 4.5  #: launch and synchronisation per kernel execution
    gemm_tile_m: int = 128  #: output tile of one core (rows), the GEMM's quantum
    gemm_tile_n: int = 128  #: output tile of one core (columns)
    gemm_tile_k: int = 64  #: the reduction's step: K is padded to a multiple of it
    bus_efficiency: float = 0.8  #: achievable bus bandwidth / link bandwidth of a collective
    collective_step_us: float = 1.0  #: latency of one step of a ring collective


# --------------------------------------------------------------------------- training
@dataclass(**_FROZEN)
class Training:
    """How a training step uses memory and recomputes (docs/model.md, "Training memory").

    ``memory_model``: ``AUTO`` counts the training memory for an LLM training graph and
    DFModel's otherwise; ``TRAINING`` adds, per chip, gradients (``grad_bytes`` per
    parameter), optimizer state (``optimizer_bytes`` per parameter, divided over the DP
    replicas with ``optimizer_sharding``, ZeRO stage 1) and the activations the backward pass
    keeps for the micro-batches in flight. ``recompute`` and ``sequence_parallel`` change the
    time too (recomputed kernels run twice; elementwise kernels split over TP).
    """

    memory_model: MemoryModel = MemoryModel.AUTO
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    optimizer_sharding: bool = False
    grad_bytes: float = 4.0  #: fp32 gradient accumulation
    optimizer_bytes: float = 12.0  #: Adam: fp32 master weights, first and second moments
    #: ZeRO stage 0-3: optimizer state (1), gradients (2) and weights (3) divided over DP
    zero_stage: int = 0
    #: interleaved 1F1B: virtual pipeline stages (model chunks) per device; 1 = plain 1F1B
    interleave: int = 1
    #: the choices of ``TRAINING_CHOICES`` the search makes (``"auto"``, or left out of a
    #: realistic-model LLM spec); their fields above hold the defaults until it does
    searched: tuple[str, ...] = ()


#: the training choices a search may make (docs/spec.md, ``[training]``), in the order it
#: enumerates them
TRAINING_CHOICES: tuple[str, ...] = ("recompute", "sequence_parallel", "zero_stage", "interleave")


# --------------------------------------------------------------------------- search
#: the names ``search.strategy`` may take, in the order messages list them ("auto" first: the
#: default); the search layer's registry ``dfsearch.search.strategies.OUTER_STRATEGIES`` holds
#: one strategy per name (tests/test_strategies.py checks that the two agree)
OUTER_STRATEGY_NAMES: tuple[str, ...] = ("auto", "enumerate", "optuna")
#: the names ``search.assignment`` may take (``ASSIGNMENT_STRATEGIES``, likewise)
ASSIGNMENT_STRATEGY_NAMES: tuple[str, ...] = ("auto", "ideal-dp", "order-dp", "anneal", "cp-sat")


@dataclass(**_FROZEN)
class Speculative:
    """``[speculative]`` (docs/spec.md): the draft model's dimensions, the window K, the
    acceptance rate alpha and the scheme."""

    hidden_dim: int
    num_head: int
    head_dim: int
    num_layer: int
    window: int  #: K: draft tokens proposed per verification step (tree: its depth)
    acceptance_rate: float  #: alpha in (0, 1]: the chance that one draft token is accepted
    scheme: SpeculativeScheme = SpeculativeScheme.SEQUENCE
    num_kv_head: int | None = None  #: None: num_head
    ffn_dim: int | None = None  #: None: 4 x hidden_dim
    gated_ffn: int = 0


@dataclass(**_FROZEN)
class SearchSettings:
    """How the search runs. Its result depends on (spec, seed) only: ``max_evaluations``
    is a work budget (configuration costings), ``time_limit_s`` an optional wall-clock safety
    stop (0 = none); a result stopped by either is labelled so. ``strategy`` and
    ``assignment`` name search strategies (``OUTER_STRATEGY_NAMES``,
    ``ASSIGNMENT_STRATEGY_NAMES``; registered in ``dfsearch.search.strategies``): how
    the outer choices are explored and how one outer choice's configuration assignment is
    solved ("auto" = the default composition). ``latency_bound_ms`` (0 = none): a serving
    mapping whose step latency (TTFT or TPOT) exceeds it is infeasible. ``gap``
    (0 <= gap < 1): stop at a proven relative gap; it depends on the bound and the incumbent
    only, so the result stays a function of (spec, seed). ``jobs``: processes that search
    together, which change the wall time only."""

    seed: int = 0
    objective: ObjectiveKind = ObjectiveKind.TIME
    latency_bound_ms: float = 0.0
    time_limit_s: float = 0.0
    max_evaluations: int = 20_000_000
    joint_sharding: bool = False
    strategy: str = "auto"
    assignment: str = "auto"
    #: stop as soon as the incumbent is within this relative gap, (best - bound) / best, of
    #: the proven lower bound (0 = search to the end; a result that stops so says
    #: ``stopped_by = "gap"``)
    gap: float = 0.0
    #: whole models in pipeline stages: stage boundaries may also cut inside a layer
    #: (``cost/stage_cuts.py``); None (unset) is off
    stage_cuts: bool | None = None
    #: processes that search one point together (``search/speculation.py``): the result is
    #: the same for every value, only the wall time changes; 1 = this process alone
    jobs: int = 1


# --------------------------------------------------------------------------- spec
@dataclass(**_FROZEN)
class StagePiece:
    """The role of a graph that is one piece of a pipeline stage of a whole model (set by
    ``plan/stages.py`` on the specs of the pieces it searches; no spec file sets it):
    the graph runs ``runs`` times per micro-batch in its stage, and the stage's other pieces
    keep ``resident_bytes`` of fixed DRAM per chip beside it."""

    runs: int
    resident_bytes: float = 0.0


@dataclass(**_FROZEN)
class Spec:
    """Everything one run needs: graph, system, cost, execution, workload, search, training
    and, for a speculative-decoding serving run, ``speculative``."""

    graph: Graph
    system: System
    cost: Cost
    execution: Execution
    workload: Workload
    search: SearchSettings = SearchSettings()
    training: Training = Training()
    speculative: Speculative | None = None  #: ``[speculative]`` (llm_serving decode only)
    #: the graph is one piece of a pipeline stage (``plan/stages.py`` only)
    piece: StagePiece | None = None
    #: ``[quirks]``: DFModel's number-changing behaviours in effect (docs/spec.md); every
    #: part of the model reads them from here
    quirks: Quirks = Quirks()

    @property
    def num_copy(self) -> int:
        return getattr(self.workload, "num_copy", 1)

    @property
    def dram_capacity(self) -> float:
        """DRAM bytes per chip the model counts (0: unlimited): both tiers, but only the first
        under the v2 equations, which ignore the second."""
        mem = self.system.memory
        second = mem.second_dram_bytes if self.execution.equations is not Equations.V2 else 0.0
        return mem.dram_bytes + second if mem.dram_bytes > 0 else 0.0
