"""The contract of a workload kind: ``WorkloadModel`` and the records its hooks exchange.

A workload kind (``codes.WorkloadKind``: LLM, DLRM, HPL, FFT) is its input dataclass (the
``[workload]`` table, ``dfsearch.workload_specs``) plus one frozen, stateless ``WorkloadModel`` subclass that holds every
rule in which the kinds differ: batch structure, tile counts and shapes searched, shard
dimensions, network terms, DRAM constants, outer-choice divisibility, validation and the
report line. The rest of the code asks the registry (``dfsearch.workloads.model_of``) and
never branches on the kind. ``docs/extending.md`` ("Adding a workload kind") lists the steps.

Import rule: the kinds are in the model layer (docs/design.md, "Layers"). Their input
dataclasses live in the data layer (``dfsearch.workload_specs``); the kind modules import,
at module level, the data layer and the model modules they need (``cost.network``,
``kernels.graph``, ``workloads.network_rules``), never ``validate``, which imports them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from dfsearch.codes import (
    Collective,
    Dim,
    MemoryModel,
    NetworkTerm,
    ObjectiveKind,
    ServingPhase,
    Status,
    WorkloadKind,
)
from dfsearch.cost.dram import DramUse  # re-exported
from dfsearch.system.collectives import (  # re-exported: what the network hook returns
    CollectiveNeed,
    NetworkNeeds,
    NetworkTerms,
)
from dfsearch.workloads.network_rules import check_fixed_network

if TYPE_CHECKING:
    from dfsearch.cost.lower import Outer
    from dfsearch.cost.model import Evaluation
    from dfsearch.issues import IssueSink
    from dfsearch.kernels.graph import GraphStructure
    from dfsearch.quirks import Quirks
    from dfsearch.spec import Execution, Kernel, SearchSettings, Spec, System
    from dfsearch.system.fabric import Fabric
    from dfsearch.system.placement import Placement
    from dfsearch.system.ratios import Groups

__all__ = [
    "WorkloadModel",
    "Batch",
    "DramUse",
    "SINGLE_RUN",
    "Lowering",
    "NetworkTerms",
    "NetworkNeeds",
    "CollectiveNeed",
    "ServingStep",
    "FieldRange",
    "tiled_shard_dims",
    "all_to_all_channels",
    "divisors",
    "pipeline_factors",
]

#: (lo, hi, unit) of one numeric workload field: ``issues.Range(lo, hi, unit)``
FieldRange = tuple[float, float, str]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending, from its prime factorisation (trial division up to
    sqrt(n): about 1e6 steps for n = 1e12; never a scan of every integer up to n).

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    >>> len(divisors(2**40))
    41
    """
    out = [1]
    rest = n
    p = 2
    while p * p <= rest:
        if rest % p == 0:
            e = 0
            while rest % p == 0:
                rest //= p
                e += 1
            out = [d * p**i for d in out for i in range(e + 1)]
        p += 1 if p == 2 else 2
    if rest > 1:
        out = [d * q for d in out for q in (1, rest)]
    return sorted(out)


# --------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True)
class Batch:
    """How one global batch is executed: ``global_batch`` samples in micro-batches of
    ``micro_batch``, ``dp`` data-parallel replicas, ``pp`` pipeline stages over ``layers``
    graph executions per micro-batch (each runs the graph once: one layer, or an LLM's
    ``num_layer_in_graph`` consecutive layers; ``layers_per_stage`` counts executions)."""

    global_batch: int
    micro_batch: int
    dp: int
    pp: int
    layers: int
    layers_in_graph: int = 1  #: model layers one graph execution runs
    #: graph executions in this stage when the spec is a piece of a stage (``Spec.piece``);
    #: 0: ceil(layers / pp)
    stage_runs: int = 0

    @property
    def num_micro_batch(self) -> int:
        """Micro-batches per pipeline, 0 when micro-batch x DP does not divide the batch."""
        unit = self.micro_batch * self.dp
        return self.global_batch // unit if self.global_batch % unit == 0 else 0

    @property
    def layers_per_stage(self) -> int:
        return self.stage_runs if self.stage_runs > 0 else _ceil_div(self.layers, self.pp)


#: the batch structure of a kind that runs its graph once per batch (HPL, FFT)
SINGLE_RUN = Batch(global_batch=1, micro_batch=1, dp=1, pp=1, layers=1)


@dataclass(frozen=True, slots=True)
class Lowering:
    """What ``cost.lower.lower`` has settled when it asks a workload for its network and
    memory terms (read-only)."""

    spec: Spec
    outer: Outer
    groups: Groups
    batch: Batch
    sharding: tuple[Dim, ...]  #: inter-chip sharding of every kernel (Dim.NO: replicated)
    num_tile: int  #: T: tiles of the tiled dimension (1 unless the kind is ``tiled``)
    dims: tuple[tuple[int, int, int], ...]  #: (sM, sK, sN) per kernel, per chip, per tile
    structure: GraphStructure
    chips_per_copy: int
    #: the network of this shape and placement, with the spec's quirks (``dfsearch.system``)
    fabric: Fabric

    @property
    def shape(self) -> tuple[int, ...]:
        return self.outer.shape

    @property
    def quirks(self) -> Quirks:
        """The spec's quirks (the fabric prices the network under the same ones)."""
        return self.spec.quirks

    @property
    def word(self) -> int:
        return self.spec.execution.word_bytes

    def output_bytes(self, k: int) -> float:
        """Bytes of kernel k's output per chip and tile: sM x sN words."""
        return float(self.dims[k][0]) * self.dims[k][2] * self.word


@dataclass(frozen=True, slots=True)
class ServingStep:
    """What a serving step is made of beyond final_ns (``WorkloadModel.step``; docs/model.md,
    "LLM serving"): B sequences per replica, each processing ``tokens`` tokens (prompt_len
    in a prefill, 1 in a decode step), DP replicas, PP stages of ``layers_per_stage`` of
    ``layers`` layers, one pipeline hop of ``hop_ns`` (0 when PP = 1), the tokens generated
    and the KV cache per chip (bytes)."""

    phase: ServingPhase
    batch: int
    tokens: int
    dp: int
    pp: int
    layers: int
    layers_per_stage: int
    hop_ns: float
    output_len: int
    kv_bytes: float

    def stage_ns(self, all_config_ii_ns: float) -> float:
        """Time of one pipeline stage per step: layers per stage x sum of IIs, plus the hop
        to the next stage when PP > 1."""
        return self.layers_per_stage * all_config_ii_ns + (self.hop_ns if self.pp > 1 else 0.0)

    def stage_from_final(self, final_ns: float) -> float:
        """``stage_ns`` from the step latency final_ns = layers x sum of IIs + (PP - 1) x hop
        (increasing in final_ns)."""
        ii = (final_ns - (self.pp - 1) * self.hop_ns) / self.layers
        return self.stage_ns(ii)

    @property
    def tokens_per_step(self) -> int:
        """Tokens the system processes per stage time: B x tokens x DP."""
        return self.batch * self.tokens * self.dp


# --------------------------------------------------------------------------- shared rules
#: the position in (sM, sK, sN) that a sharded or tiled dimension divides (OUTER cuts the rows)
_DIM_POSITION = MappingProxyType({Dim.OUTER: 0, Dim.M: 0, Dim.K: 1, Dim.N: 2})


def tiled_shard_dims(kernel: Kernel, choice: Dim, tp: int, t: int) -> tuple[int, int, int]:
    """(sM, sK, sN) when the sharded dimension is cut TP ways and the tiled one T ways (each
    size divided by the product of its divisors, rounded up). Runs per kernel, choice and
    outer choice: kept to plain arithmetic."""
    div = [1, 1, 1]
    sharded = _DIM_POSITION.get(choice)
    if sharded is not None:
        div[sharded] = tp
    tiled = _DIM_POSITION.get(kernel.tiling)
    if tiled is not None:
        div[tiled] *= t
    kk = kernel.k if kernel.kind.has_k else 1
    return -(-kernel.rows // div[0]), -(-kk // div[1]), -(-kernel.n // div[2])


def all_to_all_channels(ctx: Lowering, divisor: int) -> list[CollectiveNeed]:
    """The all-to-all of every all-to-all kernel over every chip of a copy, communication
    bytes / ``divisor`` per chip, charged per network dimension (``Fabric.channel_times_ns``);
    none on one chip."""
    if ctx.chips_per_copy <= 1:
        return []
    return [
        CollectiveNeed(Collective.ALL_TO_ALL, k.communication_bytes / divisor, None,
                       NetworkTerm.CHANNEL, i)  # fmt: skip
        for i, k in enumerate(ctx.spec.graph.kernels)
        if k.communication is Collective.ALL_TO_ALL
    ]


def pipeline_factors(b: Batch, quirks: Quirks) -> tuple[float, float]:
    """(pipeline factor, batch multiplier): final_ns = sum of IIs x batch multiplier + p2p
    (DFModel's rule, the default ``WorkloadModel.pipeline``).

    With one run per batch (global batch, micro-batch, DP, PP, layers all 1) both are 1.
    """
    nmb, lps, pp = b.num_micro_batch, b.layers_per_stage, b.pp
    model_lps = lps * b.layers_in_graph  # the quirk's bubble counts model layers
    ccc = model_lps - 1 if model_lps >= 2 else 1
    if quirks.bubble_over_layers_per_stage:
        pf = 1.0 + (pp - 1) / (max(nmb, 1) * ccc)
    else:
        pf = 1.0 + (pp - 1) / max(nmb, 1)
    return pf, pf * lps * b.global_batch / b.dp


# --------------------------------------------------------------------------- the contract
@dataclass(frozen=True)
class WorkloadModel(ABC):
    """The rules of one workload kind. Subclasses set the class attributes and override
    the hooks whose default does not fit; ``describe`` and ``dram`` have no default.

    Class attributes
    ----------------
    kind : WorkloadKind
        The registry key; ``kind.label`` is the TOML word (``kind = "llm"``).
    spec_class : type
        The frozen input dataclass (``[workload]``): keyword-only fields with TOML names and
        a ``kind`` field (``init=False``) holding ``kind``.
    field_ranges : Mapping[str, FieldRange]
        Every numeric field: (lo, hi, unit) of ``validate.RANGES["workload.<field>"]``.
    generators : tuple of str
        Names in ``kernels.generators.GENERATORS`` that build this kind's graph.
    generator_fields : Mapping[str, str]
        Generator parameter -> workload field it defaults from, where the names differ.
    shards_across_chips : bool
        Whether the inter-chip sharding of the kernels is searched (``search/sharding.py``)
        and the network shape's free sizes may be chosen.
    tiled : bool
        Whether the tiled dimension is cut into ``outer.num_tile`` tiles (else T = 1).
    min_network_dims : int
        Fewest network dimensions of a fixed-network kind; ``min_network_dims_reason`` ends
        the message ("for an hpl workload (the process grid is X x Y)").
    counts_training_memory : bool
        Whether ``training.memory_model = "auto"`` counts a training step's memory
        (gradients, optimizer state, kept activations: ``cost.training``) for a training
        graph of this kind.
    """

    kind: ClassVar[WorkloadKind]
    spec_class: ClassVar[type]
    field_ranges: ClassVar[Mapping[str, FieldRange]] = MappingProxyType({})
    generators: ClassVar[tuple[str, ...]] = ()
    generator_fields: ClassVar[Mapping[str, str]] = MappingProxyType({})
    shards_across_chips: ClassVar[bool] = False
    tiled: ClassVar[bool] = False
    min_network_dims: ClassVar[int] = 1
    min_network_dims_reason: ClassVar[str] = ""
    counts_training_memory: ClassVar[bool] = False

    # ------------------------------------------------------------------ outer choices
    def memory_model(self, spec: Spec) -> MemoryModel:
        """The memory model in effect: ``training.memory_model``, where ``auto`` resolves to
        ``training`` for a training graph of a kind that counts training memory, else
        ``dfmodel``."""
        chosen = spec.training.memory_model
        if chosen is not MemoryModel.AUTO:
            return chosen
        if self.counts_training_memory and spec.graph.is_training:
            return MemoryModel.TRAINING
        return MemoryModel.DFMODEL

    def searches_sharding(self, execution: Execution) -> bool:
        """Whether the inter-chip sharding is searched (and lowered) for this execution."""
        return self.shards_across_chips and not execution.skip_inter_chip_optimization

    def only_shape(self, system: System, chips: int) -> tuple[int, ...] | None:
        """The one network shape this kind always uses, or None: every factorisation of the
        free sizes (``search.outer.shapes``)."""
        return None

    def admits_shape(
        self, spec: Spec, shape: tuple[int, ...], placement: Placement | None = None
    ) -> bool:
        """Whether the search considers this network shape with this parallelism placement
        (None: the spec's fixed roles; LLM: PP <= num_layer)."""
        return True

    def tile_counts(self, spec: Spec) -> list[int]:
        """Tile counts T searched, ascending."""
        return [1]

    def tile_count_issue(self, spec: Spec, num_tile: int) -> str | None:
        """What is wrong with a given tile count (a mapping file's ``num_tile``), or None.
        Default: a kind that is not ``tiled`` runs each graph execution whole (T = 1)."""
        if self.tiled or num_tile == 1:
            return None
        return (f"must be 1: a {self.kind.label} workload is not tiled (each graph execution "
                f"runs whole, the search uses T = 1). Got {num_tile} instead.")  # fmt: skip

    def micro_batch_size(self, spec: Spec) -> int:
        """The default micro-batch size (a mapping file that gives none)."""
        return 1

    def micro_batch_sizes(self, spec: Spec, dp: int) -> list[int]:
        """Micro-batch sizes searched on a shape with ``dp`` data-parallel replicas,
        ascending."""
        return [self.micro_batch_size(spec)]

    def smallest_micro_batch_wins(self, spec: Spec) -> bool:
        """Whether, all other choices fixed, the smallest of ``micro_batch_sizes`` is never
        slower nor less feasible than a larger one, so that the search may solve it alone
        (``search.outer.micro_batch_sizes``)."""
        return True

    def search_notes(self, spec: Spec, evaluation: Evaluation) -> tuple[str, ...]:
        """Notes on the search's answer that the report and the JSON's ``notes`` carry (a
        searched range's limit that binds); none by default."""
        return ()

    def outer_status(self, spec: Spec, outer: Outer) -> tuple[Status, float]:
        """Infeasibility of the outer choices beyond the shape product (batch divisibility):
        a status and its violation."""
        return Status.OK, 0.0

    # ------------------------------------------------------------------ lowering
    def batch(self, spec: Spec, outer: Outer, groups: Groups) -> Batch:
        """Global batch, micro-batch, DP, PP and layers for these outer choices."""
        return SINGLE_RUN

    def lowered_kernel(self, spec: Spec, kernel: Kernel, outer: Outer) -> Kernel:
        """The kernel whose dimensions the lowering shards (default: the graph's; serving
        scales it by the batch)."""
        return kernel

    def shard_dims(
        self, spec: Spec, kernel: Kernel, choice: Dim, tp: int, t: int, shape: tuple[int, ...]
    ) -> tuple[int, int, int]:
        """(sM, sK, sN): per-chip, per-tile dimensions of one kernel."""
        return tiled_shard_dims(kernel, choice, tp, t)

    def shard_dims_inputs(self, spec: Spec, shape: tuple[int, ...]) -> tuple | None:
        """What ``shard_dims`` reads of ``spec`` and ``shape`` besides the kernel, the
        choice, TP and T, as a hashable tuple (the key of the sharding memo,
        ``search.sharding``); None: not stated, nothing is memoised. The shared rule reads
        nothing else; a kind that overrides ``shard_dims`` states its own."""
        return () if type(self).shard_dims is WorkloadModel.shard_dims else None

    def memory_bytes(self, ctx: Lowering) -> list[float]:
        """Bytes every kernel reads from DRAM per execution and chip (default: its
        ``memory_bytes``, as DFModel's ``memory_size``)."""
        return [k.memory_bytes for k in ctx.spec.graph.kernels]

    def pipeline(self, ctx: Lowering) -> tuple[float, float]:
        """(pipeline factor, batch multiplier): final_ns = sum of IIs x batch multiplier +
        p2p. Default: DFModel's rule (``pipeline_factors``)."""
        return pipeline_factors(ctx.batch, ctx.quirks)

    def step(self, ctx: Lowering) -> ServingStep | None:
        """The serving step of these outer choices (None: not a serving kind)."""
        return None

    def inference_hops_ns(self, ctx: Lowering) -> float | None:
        """The pipeline hops DFModel adds to the layers' time in the latency of one inference
        pass (``final_latency_ns``, docs/model.md "Inference latency"); None: the workload
        reports no such latency (the default)."""
        return None

    def network(self, ctx: Lowering) -> NetworkNeeds:
        """The collectives the workload needs: operation, bytes, group, where each is charged
        (``dfsearch.system.collectives``; the fabric prices them). Default: none."""
        return NetworkNeeds()

    @abstractmethod
    def dram(self, ctx: Lowering, weight_bytes: float, extra_bytes: float) -> DramUse:
        """Fixed DRAM bytes per chip by purpose and the multiplier of the live activation
        bytes, given the total weight bytes of one layer's kernels and their
        ``dram_extra_bytes``."""

    def checks_sram(self, execution: Execution) -> bool:
        """Whether configurations are held to the SRAM capacity."""
        return True

    # ------------------------------------------------------------------ input and output
    def issues(self, sink: IssueSink, workload: Any) -> None:
        """The workload's own rules (default: every ranged field >= 1 and in its range)."""
        for name, rng in self.field_ranges.items():
            path = f"workload.{name}"
            sink.ge(path, getattr(workload, name), 1)
            sink.in_range(path, getattr(workload, name), rng)

    def network_issues(self, sink: IssueSink, system: System, workload: Any) -> None:
        """Rules that tie the network to the workload (default: a fixed-shape kind)."""

        check_fixed_network(
            sink, system, workload, self.min_network_dims, self.min_network_dims_reason
        )

    def objective_issues(self, sink: IssueSink, search: SearchSettings, workload: Any) -> None:
        """Rules between ``[search]`` and the workload (default: the objective is the time
        per batch and no latency bound is set)."""
        kind = workload.kind.label
        if search.objective is not ObjectiveKind.TIME:
            sink.add("search.objective",
                     f"must be 'time' for a {kind} workload ('ttft', 'tpot' and 'throughput' "
                     f"are serving objectives). Got {search.objective.label!r} instead.")  # fmt: skip
        if search.latency_bound_ms > 0:
            sink.add("search.latency_bound_ms",
                     f"must be 0 for a {kind} workload (it bounds the step latency of an "
                     f"llm_serving workload). Got {search.latency_bound_ms:g} instead.")  # fmt: skip

    @abstractmethod
    def describe(self, workload: Any) -> str:
        """One line for the report (``workload  KIND: <this>``)."""

