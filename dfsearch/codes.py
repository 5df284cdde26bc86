"""The one definition of every enumeration dfsearch uses.

Each enum is an ``IntEnum``: the integer value is the code the jitted evaluator sees,
``.label`` is the lower-case word used in TOML specs and reports, and ``.dfmodel`` is the
name DFModel's protobuf text format uses (where DFModel has one).

>>> Dim.from_label("n") is Dim.N
True
>>> Collective.from_dfmodel("ALL_REDUCE_PERIODIC").label
'all_reduce_periodic'
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "KernelKind",
    "KernelTraits",
    "KERNEL_TRAITS",
    "ComputeType",
    "Phase",
    "NetworkTerm",
    "Dim",
    "Collective",
    "Topology",
    "Parallelism",
    "ExecutionStyle",
    "Overlap",
    "WorkloadKind",
    "ServingPhase",
    "SpeculativeScheme",
    "Router",
    "ServeMode",
    "Equations",
    "Status",
    "RunStatus",
    "ObjectiveKind",
    "ExecutionModel",
    "MemoryModel",
    "Recompute",
    "TOPOLOGY_VARIANTS",
]


class _Coded(enum.IntEnum):
    """Base: lower-case labels for TOML, DFModel names for the importer."""

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def dfmodel(self) -> str:
        return self.name

    @classmethod
    def labels(cls) -> tuple[str, ...]:
        return tuple(m.label for m in cls)

    @classmethod
    def from_label(cls, text: str) -> _Coded:
        for m in cls:
            if m.label == text:
                return m
        raise KeyError(text)

    @classmethod
    def from_dfmodel(cls, text: str) -> _Coded:
        for m in cls:
            if m.dfmodel == text:
                return m
        raise KeyError(text)


class KernelKind(_Coded):
    """The four kernel variants of DFModel; their traits are one row each in ``KERNEL_TRAITS``.

    >>> KernelKind.GEMM_WEIGHT.has_weight, KernelKind.ELEMENTWISE2.num_inputs
    (True, 2)
    """

    GEMM_WEIGHT = 1  #: GEMM whose second operand is a resident weight
    GEMM = 2  #: GEMM of two activations
    ELEMENTWISE = 3  #: one-input elementwise op (K = 1)
    ELEMENTWISE2 = 4  #: two-input elementwise op (K = 1)

    @property
    def traits(self) -> KernelTraits:
        return KERNEL_TRAITS[self]

    @property
    def dfmodel(self) -> str:
        return self.traits.dfmodel

    @property
    def has_k(self) -> bool:
        return self.traits.has_k

    @property
    def num_inputs(self) -> int:
        return self.traits.num_inputs

    @property
    def has_weight(self) -> bool:
        return self.traits.has_weight


@dataclass(frozen=True, slots=True)
class KernelTraits:
    """What the model needs to know about a kernel kind."""

    dfmodel: str  #: the variant name in DFModel's protobuf text format
    has_k: bool  #: has a reduction dimension K (GEMMs); elementwise kernels have K = 1
    num_inputs: int  #: activation inputs (the weight of a weight GEMM is not an input)
    has_weight: bool  #: the second operand is a weight resident in SRAM/DRAM


#: kernel kind -> traits: the one table to extend when a kind is added
KERNEL_TRAITS: Mapping[KernelKind, KernelTraits] = MappingProxyType({
    KernelKind.GEMM_WEIGHT: KernelTraits("gemm_input1_weight", True, 1, True),
    KernelKind.GEMM: KernelTraits("gemm_input1_input2", True, 2, False),
    KernelKind.ELEMENTWISE: KernelTraits("elementwise_input1", False, 1, False),
    KernelKind.ELEMENTWISE2: KernelTraits("elementwise_input1_input2", False, 2, False),
})


class ComputeType(_Coded):
    SYSTOLIC = 1
    SIMD = 2


class Phase(_Coded):
    """Forward / backward marker (``fwd_bwd``); NONE when the input does not say."""

    NONE = 0
    FWD = 1
    BWD = 2


class Dim(_Coded):
    """A kernel dimension, used for tiling and for sharding (DFModel enum values)."""

    OUTER = 1
    M = 2
    K = 3
    N = 4
    NO = 5  #: nothing tiled / replicated (not sharded)

    @property
    def label(self) -> str:
        return "none" if self is Dim.NO else self.name.lower()

    @property
    def tiling_dfmodel(self) -> str:
        return "NO_TILING" if self is Dim.NO else f"{self.name}_TILING"

    @property
    def sharding_dfmodel(self) -> str:
        return "NO_SHARDING" if self is Dim.NO else f"{self.name}_SHARDING"


class Collective(_Coded):
    """Communication types (kernel presets and inter-chip results)."""

    NONE = 0
    ALL_REDUCE = 1
    ALL_TO_ALL = 2
    ALL_GATHER = 3
    ALL_REDUCE_PERIODIC = 4
    POINT_TO_POINT = 5
    BROADCAST = 6
    #: MoE dispatch / combine: all-to-all over the expert-parallel group (dfsearch only;
    #: docs/model.md, "Mixture of experts")
    EXPERT_ALL_TO_ALL = 7


class NetworkTerm(_Coded):
    """Where a workload's collective is charged (``dfsearch.system.collectives``): per tile of
    a kernel, once per execution of a kernel, on a per-dimension channel of a kernel (combined
    by the max of sums), per tile of an edge's re-layout, or on the pipeline's point-to-point
    time per batch."""

    KERNEL_TILE = 1
    KERNEL_ONCE = 2
    CHANNEL = 3
    EDGE_TILE = 4
    PIPELINE = 5


class Topology(_Coded):
    """The kind of one network dimension: its names here (``.label`` in specs, ``.short``
    in network names); its formulas and counts are the ``TopologyKind`` object
    ``dfsearch.system.kinds.KINDS[topology]`` (the model layer: this module imports none).

    >>> Topology.MESH.short, Topology.FC.short
    ('mesh', 'fc')
    """

    RING = 1
    SWITCH = 2
    FC = 3
    MESH = 4  #: a line of chips without wraparound (dfsearch only: DFModel has no mesh)

    @property
    def short(self) -> str:
        """The word in a network name such as ``r_sw`` (DFModel's, where it has one)."""
        return _TOPOLOGY_SHORT[self]


_TOPOLOGY_SHORT: Mapping[Topology, str] = MappingProxyType({
    Topology.RING: "r",
    Topology.SWITCH: "sw",
    Topology.FC: "fc",
    Topology.MESH: "mesh",
})


#: DFModel's topology variants: name -> basic topology of each dimension.
TOPOLOGY_VARIANTS: Mapping[str, tuple[Topology, ...]] = MappingProxyType({
    "r": (Topology.RING,),
    "sw": (Topology.SWITCH,),
    "fc": (Topology.FC,),
    "r_r": (Topology.RING, Topology.RING),
    "r_fc": (Topology.RING, Topology.FC),
    "r_sw": (Topology.RING, Topology.SWITCH),
    "sw_sw": (Topology.SWITCH, Topology.SWITCH),
    "fc_fc": (Topology.FC, Topology.FC),
    "r_r_r": (Topology.RING, Topology.RING, Topology.RING),
    "r_sw_sw": (Topology.RING, Topology.SWITCH, Topology.SWITCH),
    "sw_sw_sw": (Topology.SWITCH, Topology.SWITCH, Topology.SWITCH),
})


class Parallelism(_Coded):
    """What a network dimension carries. For an LLM, NONE (omitted) and AUTO leave it to the
    search (``dfsearch.system.placement``); DFModel inputs know only TP, PP and DP."""

    NONE = 0
    TP = 1
    PP = 2
    DP = 3
    AUTO = 4

    @property
    def dfmodel(self) -> str:
        return self.name


class ExecutionStyle(_Coded):
    DATAFLOW = 1
    KERNEL_BY_KERNEL = 2


class Overlap(_Coded):
    """How compute, memory and network time of one configuration combine."""

    PERFECT = 1  #: max(Tc, Tm, Tn)
    COMPUTE_MEMORY = 2  #: max(Tc, Tm) + Tn
    NONE = 3  #: Tc + Tm + Tn

    @property
    def dfmodel(self) -> str:
        return {1: "PERFECT_OVERLAP", 2: "OVERLAP_COMPUTE_MEMORY", 3: "NO_OVERLAP"}[self.value]


class ExecutionModel(_Coded):
    """Which execution model prices kernels and collectives (docs/model.md, "The realistic
    execution model")."""

    DFMODEL = 1  #: DFModel's equations, exactly
    REALISTIC = 2  #: launch overhead, GEMM quantisation, alpha-beta collectives, TP exposed


class MemoryModel(_Coded):
    """What the DRAM capacity check counts per chip (docs/model.md, "Training memory")."""

    AUTO = 1  #: training for an LLM training graph, dfmodel otherwise
    DFMODEL = 2  #: weights of the stage's layers + one layer's live activations
    TRAINING = 3  #: + gradients, optimizer state and the activations kept for backward


class Recompute(_Coded):
    """Activation recomputation in the backward pass of a training graph."""

    NONE = 1  #: every forward tensor the backward pass needs is kept
    SELECTIVE = 2  #: the attention core is run again (kernels marked selective_recompute)
    FULL = 3  #: every forward kernel is run again; only each layer's input is kept


class WorkloadKind(_Coded):
    LLM = 1
    DLRM = 2
    HPL = 3
    FFT = 4
    LLM_SERVING = 5  #: LLM inference serving: one prefill or decode step (workloads/serving.py)


class ServingPhase(_Coded):
    """The step an ``llm_serving`` workload models (``workload.phase``): the prompt's
    forward pass (time to first token) or one generated token (time per output token)."""

    PREFILL = 0
    DECODE = 1


class SpeculativeScheme(_Coded):
    """How a speculative-decoding step proposes tokens (``speculative.scheme``): one draft
    sequence of K tokens, or a binary tree of depth K (2^K tree tokens verified at once)."""

    SEQUENCE = 0
    TREE = 1


class Router(_Coded):
    """How a serving simulation (``dfsearch.capacity``) sends each arriving request to one
    of its replicas: in turn, or to the replica with the fewest unfinished requests at the
    arrival (ties to the lowest replica index)."""

    ROUND_ROBIN = 0
    LEAST_LOADED = 1


class ServeMode(_Coded):
    """How ``dfsearch serve`` lays a deployment out: prefill and decode on the same replicas
    (continuous batching with chunked prefill), or on two pools with the KV cache sent from
    a prefill replica to a decode replica."""

    COLOCATED = 0
    DISAGGREGATED = 1


class Equations(_Coded):
    """Which of DFModel's equation sets to reproduce (docs/model.md, "Equation sets")."""

    V1 = 1
    V2 = 2
    LEGACY = 3  #: the pre-v1 script of DFModel's Compare_w_existing runs
    #: the pre-v1 script of DFModel's design-space runs: legacy but for the DLRM/FFT all-to-all
    DESIGN_SPACE = 4

    @property
    def pre_v1(self) -> bool:
        """Both pre-v1 scripts (input field 4 named ``miscellany``): the doubled TP and DLRM
        gradient all-reduces."""
        return self in (Equations.LEGACY, Equations.DESIGN_SPACE)


class Status(_Coded):
    """Evaluator status codes: infeasibility is data, not an exception."""

    OK = 0
    SRAM = 1  #: a configuration's SRAM footprint exceeds sram_cap
    DRAM = 2  #: the DRAM footprint exceeds dram_cap (+ second tier)
    CORES = 3  #: the kernels of a configuration need more cores than the chip has
    DIVISIBILITY = 4  #: global batch not divisible by micro-batch x DP
    SHAPE = 5  #: network shape does not multiply to the chip count
    ORDER = 6  #: an edge goes from a later configuration to an earlier one
    CONFIG = 7  #: a configuration assignment breaks a rule (FWD/BWD, pinned, num_input)
    LATENCY = 8  #: the step latency exceeds ``search.latency_bound_ms`` (never set by the evaluator)
    #: the interleaved 1F1B schedule does not fit the pipeline (an outer status, never set by
    #: the evaluator; ``workloads/llm_schedule.py``)
    SCHEDULE = 9

    @property
    def message(self) -> str:
        return _STATUS_MESSAGES[self]


class RunStatus(_Coded):
    """What a run (search, evaluation, check, sweep point) can say about its answer.

    The one vocabulary of every result and report; ``.label`` is the JSON word.
    """

    OPTIMAL = 0  #: a lower bound meets the result: proven optimal
    FEASIBLE_NOT_PROVEN = 1  #: the search finished its budget-free work but cannot prove it
    STOPPED_BY_LIMIT = 2  #: a work budget or the time limit stopped the search early
    INFEASIBLE = 3  #: no feasible mapping exists (proven) or none was found
    INTERRUPTED = 4  #: the user interrupted the search (Ctrl-C)
    EVALUATED = 5  #: one given mapping was evaluated, nothing was searched

    @property
    def message(self) -> str:
        return _RUN_STATUS_MESSAGES[self]

    @classmethod
    def of_search(cls, *, found: bool, proven: bool, interrupted: bool, stopped: bool) -> RunStatus:
        """The status of a search that ``found`` a mapping or not, ``proven`` it optimal (a
        lower bound meets it) or not, and was ``interrupted`` (Ctrl-C) or ``stopped`` (a
        budget or the time limit) or neither. A proof wins over how the search ended."""
        if found and proven:
            return cls.OPTIMAL
        if interrupted:
            return cls.INTERRUPTED
        if stopped:
            return cls.STOPPED_BY_LIMIT
        return cls.FEASIBLE_NOT_PROVEN if found else cls.INFEASIBLE


class ObjectiveKind(_Coded):
    """What the search minimises (``search.objective``; implementations in
    ``dfsearch.search.objective``)."""

    TIME = 1  #: time per global batch (DFModel's final_s)
    TTFT = 2  #: time to first token: the step latency of a prefill (``llm_serving``)
    TPOT = 3  #: time per output token: the step latency of a decode step (``llm_serving``)
    THROUGHPUT = 4  #: tokens per second of the system, maximised (``llm_serving``)

    @property
    def minimises_time(self) -> bool:
        """Whether the objective is an increasing function of final_ns alone (the time per
        batch, or a serving step's latency): then whatever never slows a mapping down (a
        smaller micro-batch or serving batch) never makes it worse."""
        return self is not ObjectiveKind.THROUGHPUT


_RUN_STATUS_MESSAGES = {
    RunStatus.OPTIMAL: "proven optimal",
    RunStatus.FEASIBLE_NOT_PROVEN: "feasible, not proven optimal",
    RunStatus.STOPPED_BY_LIMIT: "stopped by a limit, not proven",
    RunStatus.INFEASIBLE: "no feasible mapping",
    RunStatus.INTERRUPTED: "interrupted, not proven",
    RunStatus.EVALUATED: "given mapping evaluated, not searched",
}


_STATUS_MESSAGES = {
    Status.OK: "feasible",
    Status.SRAM: "SRAM capacity exceeded",
    Status.DRAM: "DRAM capacity exceeded",
    Status.CORES: "not enough cores for the kernels of a configuration",
    Status.DIVISIBILITY: "global batch size not divisible by micro-batch size x DP",
    Status.SHAPE: "network shape does not multiply to the number of chips",
    Status.ORDER: "an edge runs from a later configuration to an earlier one",
    Status.CONFIG: "configuration assignment breaks a rule (FWD/BWD split, pinned config, num_input)",
    Status.LATENCY: "step latency exceeds search.latency_bound_ms",
    Status.SCHEDULE: "the interleaved 1F1B schedule does not fit the pipeline",
}
