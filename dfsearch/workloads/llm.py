"""LLM training and inference: a transformer layer, repeated ``num_layer`` times, run on a
TP x PP x DP network whose free sizes, inter-chip sharding, tile count and micro-batch size
are searched (docs/model.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from dfsearch.codes import (
    Collective,
    Dim,
    Equations,
    MemoryModel,
    NetworkTerm,
    Parallelism,
    Status,
    WorkloadKind,
)
from dfsearch.cost import training
from dfsearch.cost.training import recomputed, sequence_split
from dfsearch.kernels.graph import edge_relayouts as graph_edge_relayouts
from dfsearch.system.ratios import groups
from dfsearch.workload_specs import LLMWorkload  # re-exported
from dfsearch.workloads.base import (
    Batch,
    CollectiveNeed,
    DramUse,
    Lowering,
    NetworkNeeds,
    WorkloadModel,
    divisors,
    tiled_shard_dims,
)
from dfsearch.workloads.llm_schedule import (
    gradient_needs,
    interleave_issue,
    p2p_crossings,
    pipeline_with_interleave,
)
from dfsearch.workloads.network_rules import check_searched_network

if TYPE_CHECKING:
    from dfsearch.cost.lower import Outer
    from dfsearch.issues import IssueSink
    from dfsearch.spec import Kernel, Spec, System
    from dfsearch.system.placement import Placement
    from dfsearch.system.ratios import Groups

__all__ = ["LLMWorkload", "LLM"]

_P24, _P40 = 2**24, 2**40


@dataclass(frozen=True)
class LLM(WorkloadModel):
    """LLM rules: batch = global batch / (micro-batch x DP) micro-batches through PP stages
    of ceil(num_layer / PP) layers; collectives at the TP degree, the gradient all-reduce at
    the DP degree, activations sent between stages."""

    kind = WorkloadKind.LLM
    spec_class = LLMWorkload
    field_ranges = MappingProxyType({
        "hidden_dim": (1, _P24, "elements"),
        "head_dim": (1, _P24, "elements"),
        "num_head": (1, _P24, ""),
        "seq_len": (1, 2**30, "tokens"),
        "num_layer": (1, _P24, ""),
        "global_batch_size": (1, _P40, ""),
        "micro_batch_size": (1, _P40, ""),
        "tile_size": (1, 2**30, "tokens"),
    })
    generators = ("llm", "llm-fwd", "llm-decode")
    generator_fields = MappingProxyType(
        {"hidden": "hidden_dim", "seq": "seq_len", "layers": "num_layer_in_graph"})
    shards_across_chips = True
    tiled = True
    counts_training_memory = True

    # ------------------------------------------------------------------ outer choices
    def only_shape(self, system: System, chips: int) -> tuple[int, ...] | None:
        """A one-dimensional network always spans every chip."""
        return (chips,) if len(system.network) == 1 else None

    def admits_shape(
        self, spec: Spec, shape: tuple[int, ...], placement: Placement | None = None
    ) -> bool:
        """Every pipeline stage holds at least one graph execution: PP <= num_layer /
        num_layer_in_graph (PP of ``placement``, else of the spec's fixed roles)."""

        pp = groups(spec.system, shape, placement).pp
        if partitions_graph(spec.workload):  # every partition holds at least one kernel
            return pp <= len(spec.graph.kernels)
        return pp <= graph_executions(spec.workload)

    def tile_counts(self, spec: Spec) -> list[int]:
        """Every divisor of seq_len; a tile size is a lower bound (tile_size x T >= seq_len,
        DFModel's rule): then the divisors T >= ceil(seq_len / tile_size), and that ceiling
        itself when it is not a divisor."""
        wl = spec.workload
        divs = divisors(wl.seq_len)
        if wl.tile_size <= 0:
            return divs
        fewest = _fewest_tiles(wl)
        return sorted({fewest, *(d for d in divs if d >= fewest)})

    def tile_count_issue(self, spec: Spec, num_tile: int) -> str | None:
        """More tiles than tokens (a tile holds at least one of a sequence's seq_len tokens;
        a decode step has one), or a tile count below the tile-size bound: tile_size x T
        must cover seq_len."""
        wl = spec.workload
        if num_tile > wl.seq_len:
            return (f"must be <= workload.seq_len = {wl.seq_len}: the tiles cut the "
                    f"{wl.seq_len} token(s) of a sequence, one token at least per tile"
                    f"{' (a decode step has one token)' if wl.seq_len == 1 else ''}. "
                    f"Got {num_tile} instead.")  # fmt: skip
        if wl.tile_size <= 0 or wl.tile_size * num_tile >= wl.seq_len:
            return None
        return (
            f"must be >= ceil(workload.seq_len / workload.tile_size) = "
            f"ceil({wl.seq_len} / {wl.tile_size}) = {_fewest_tiles(wl)}: tile_size tokens x "
            f"num_tile tiles must cover the sequence. Got {num_tile} instead."
        )

    def micro_batch_size(self, spec: Spec) -> int:
        """The spec's, or 1 when it is searched (0)."""
        mbs = spec.workload.micro_batch_size
        return mbs if mbs > 0 else 1

    def micro_batch_sizes(self, spec: Spec, dp: int) -> list[int]:
        """The spec's micro-batch size, or (0 = searched) every divisor m of
        global_batch_size / DP, so that micro-batches of m fill the batch; [1] when DP does
        not divide the batch (``outer_status`` reports it)."""
        wl = spec.workload
        if wl.micro_batch_size > 0:
            return [wl.micro_batch_size]
        if dp < 1 or wl.global_batch_size % dp:
            return [1]
        return divisors(wl.global_batch_size // dp)

    def smallest_micro_batch_wins(self, spec: Spec) -> bool:
        """True unless a second DRAM tier is faster than the first (docs/model.md,
        "Micro-batch size"). For fixed other choices the micro-batch size m enters the model
        only through the number of micro-batches global_batch / (m x DP), which only
        shrinks as m grows (a larger pipeline factor, a larger gradient all-reduce per
        execution), and the DRAM footprint fixed + m x live activations, which only grows:
        capacities are loosest and every time term smallest at the smallest m, except that
        overflowing the first DRAM tier switches to the capacity-weighted blend of the two
        bandwidths, which is faster when the second tier is. ZeRO stages 2 and 3 move data
        per micro-batch, less per sequence with a larger one: then False too."""
        if training.zero_stage(spec) >= 2:  # traffic per micro-batch: a larger one moves less
            return False
        mem = spec.system.memory
        # the tier exists as ``cost.lower`` lowers it: v1/legacy, a finite first tier
        tiered = (
            spec.execution.equations is not Equations.V2
            and mem.second_dram_bytes > 0
            and mem.dram_bytes > 0
        )
        return not (tiered and mem.second_dram_bw_GBps > mem.dram_bw_GBps)

    def outer_status(self, spec: Spec, outer: Outer) -> tuple[Status, float]:
        """The global batch must divide by micro-batch x DP; an interleaved schedule needs
        a pipeline it fits (``llm_schedule.interleave_issue``)."""

        gb = spec.workload.global_batch_size
        grp = groups(spec.system, outer.shape, outer.placement)
        unit = outer.micro_batch_size * grp.dp
        if outer.micro_batch_size < 1 or gb % unit != 0:
            return Status.DIVISIBILITY, float(gb % max(unit, 1))
        if spec.training.interleave > 1:
            off = interleave_issue(spec, self.batch(spec, outer, grp))
            if off > 0:
                return Status.SCHEDULE, off
        return Status.OK, 0.0

    def pipeline(self, ctx: Lowering) -> tuple[float, float]:
        """DFModel's rule, with interleaved 1F1B's smaller bubble and the realistic model's
        textbook 1F1B bubble (``llm_schedule``)."""
        return pipeline_with_interleave(ctx)

    # ------------------------------------------------------------------ lowering
    def shard_dims(
        self, spec: Spec, kernel: Kernel, choice: Dim, tp: int, t: int, shape: tuple[int, ...]
    ) -> tuple[int, int, int]:
        """The shared rule; under sequence parallelism a replicated elementwise kernel is
        split over TP along the sequence (N)."""
        # sequence_parallel checked first: this runs per kernel and shape
        if spec.training.sequence_parallel and sequence_split(spec, kernel, choice):
            choice = Dim.N
        return tiled_shard_dims(kernel, choice, tp, t)

    def shard_dims_inputs(self, spec: Spec, shape: tuple[int, ...]) -> tuple | None:
        """``sequence_split`` reads the sequence-parallel flag (and the graph's phases)."""
        return (spec.training.sequence_parallel,) if type(self).shard_dims is LLM.shard_dims else None

    def batch(self, spec: Spec, outer: Outer, groups: Groups) -> Batch:
        wl = spec.workload
        return Batch(
            global_batch=wl.global_batch_size, micro_batch=outer.micro_batch_size,
            dp=groups.dp, pp=groups.pp, layers=graph_executions(wl),
            layers_in_graph=_layers_in_graph(wl),
        )  # fmt: skip

    def network(self, ctx: Lowering) -> NetworkNeeds:
        """Kernel collectives (the preset, or an all-reduce for a K-sharded kernel), edge
        re-layouts, the all-reduce latency and the pipeline's point-to-point bytes (under
        sequence parallelism each TP all-reduce runs as a reduce-scatter + all-gather; the
        DP gradient all-reduce is unchanged)."""
        spec = ctx.spec
        needs = kernel_collectives(ctx)
        if self.searches_sharding(spec.execution):
            needs += edge_relayouts(ctx)
        wl = spec.workload
        sent = 2.0 * wl.hidden_dim * wl.seq_len * ctx.word if spec.graph.is_training else 0.0
        # per model layer, however many layers one graph holds
        crossings = p2p_crossings(spec, ctx.groups.pp)  # interleaved 1F1B: more boundaries
        needs.append(CollectiveNeed(Collective.POINT_TO_POINT, sent, Parallelism.PP,
                                    NetworkTerm.PIPELINE, count=wl.num_layer * crossings))  # fmt: skip
        split = spec.training.sequence_parallel and spec.graph.is_training
        return NetworkNeeds(tuple(needs), split_all_reduce=split, all_reduce_latency=True)

    def inference_hops_ns(self, ctx: Lowering) -> float | None:
        """(PP - 1) x (hidden x seq_len x word / TP bytes over the PP links + their link
        latency), DFModel's hops in the latency of an inference pass; None for a training
        graph (it has backward kernels)."""
        spec, g = ctx.spec, ctx.groups
        if spec.graph.is_training:
            return None
        if g.pp <= 1 or g.pp_dim < 0:
            return 0.0
        hop_bytes = spec.workload.hidden_dim * spec.workload.seq_len * ctx.word / g.tp
        return (g.pp - 1) * ctx.fabric.hop_ns(hop_bytes)

    def dram(self, ctx: Lowering, weight_bytes: float, extra_bytes: float) -> DramUse:
        """The training memory of the first pipeline stage (``cost.training``) when the
        memory model is ``training``; else DFModel's: each stage holds its layers' weights,
        the live activations scale with the micro-batch."""
        if self.memory_model(ctx.spec) is MemoryModel.TRAINING:
            return training.training_dram(ctx, extra_bytes)
        lps = ctx.batch.layers_per_stage
        return DramUse(weights=lps * weight_bytes, data=lps * extra_bytes,
                       act_mult=float(ctx.batch.micro_batch))

    # ------------------------------------------------------------------ input and output
    def issues(self, sink: IssueSink, workload: LLMWorkload) -> None:
        w = workload
        positive = ("hidden_dim", "head_dim", "num_head", "seq_len", "num_layer")
        for f in (*positive, "global_batch_size"):
            sink.ge(f"workload.{f}", getattr(w, f), 1)
        for f in ("micro_batch_size", "tile_size"):
            sink.ge(f"workload.{f}", getattr(w, f))
        for f, rng in self.field_ranges.items():
            sink.in_range(f"workload.{f}", getattr(w, f), rng)
        if (
            w.hidden_dim >= 1
            and w.num_head >= 1
            and w.head_dim >= 1
            and w.num_head * w.head_dim != w.hidden_dim
        ):
            sink.add(
                "workload.hidden_dim",
                "must equal workload.num_head * workload.head_dim = "
                f"{w.num_head} * {w.head_dim} = {w.num_head * w.head_dim}. "
                f"Got {w.hidden_dim} instead.",
            )
        if w.vocab_size is not None:
            sink.ge("workload.vocab_size", w.vocab_size, 1)
            sink.in_range("workload.vocab_size", w.vocab_size, (1, _P24, "tokens"))
        if w.num_layer_in_graph < 1:
            sink.ge("workload.num_layer_in_graph", w.num_layer_in_graph, 1)
        elif w.partition_graph and w.num_layer_in_graph < 2:
            sink.add(
                "workload.partition_graph",
                "needs workload.num_layer_in_graph >= 2: it cuts a graph of several layers into "
                "the pipeline's partitions (docs/model.md, \"Pipeline partitioning\"). Got "
                f"num_layer_in_graph = {w.num_layer_in_graph} instead.",
            )
        elif w.partition_graph:
            pass  # num_layer is not used: DFModel runs PP partitions of the graph
        elif w.num_layer >= 1 and w.num_layer % w.num_layer_in_graph:
            sink.add(
                "workload.num_layer_in_graph",
                f"must divide workload.num_layer = {w.num_layer}: one graph execution runs "
                f"num_layer_in_graph consecutive layers (docs/model.md, \"Several layers in one "
                f"graph\"). Got {w.num_layer_in_graph} instead.",
            )

    def network_issues(self, sink: IssueSink, system: System, workload: LLMWorkload) -> None:
        """Parallelism roles, sizes (free ones are searched) and the HBD rule."""

        check_searched_network(sink, system)
        _check_pipeline_depth(sink, system, workload)

    def describe(self, workload: LLMWorkload) -> str:
        wl = workload
        return (
            f"hidden {wl.hidden_dim}, {wl.num_head} heads x {wl.head_dim}, seq {wl.seq_len}, "
            f"{wl.num_layer} layers, global batch {wl.global_batch_size}"
        )


def graph_executions(wl: LLMWorkload) -> int:
    """Graph executions per micro-batch: num_layer / num_layer_in_graph (each runs that many
    consecutive layers of one pipeline stage; validation makes the division exact). A kind
    without ``num_layer_in_graph`` (LLM serving) runs one layer per execution."""
    return max(1, wl.num_layer // max(1, _layers_in_graph(wl)))


def _layers_in_graph(wl: LLMWorkload) -> int:
    return getattr(wl, "num_layer_in_graph", 1)


def partitions_graph(wl: object) -> bool:
    """True for DFModel's reading of a multi-layer graph: the graph is cut into PP
    partitions (``workload.partition_graph``, docs/model.md "Pipeline partitioning")."""
    return bool(getattr(wl, "partition_graph", False))


def _fewest_tiles(wl: LLMWorkload) -> int:
    """ceil(seq_len / tile_size): the fewest tiles of tile_size tokens that cover the
    sequence."""
    return -(-wl.seq_len // wl.tile_size)


def _check_pipeline_depth(sink: IssueSink, system: System, wl: LLMWorkload) -> None:
    """PP <= num_layer when the spec settles the PP size: given, or implied because the pp
    dimension is the only free one (a 1-dimensional network spans every chip)."""
    net = system.network
    pp_dims = [i for i, d in enumerate(net) if d.parallelism is Parallelism.PP]
    if not pp_dims or wl.num_layer < 1 or any(d.size < 0 for d in net):
        return
    if partitions_graph(wl):
        return  # PP partitions of the graph, however many layers it holds (validate.py)
    i = pp_dims[0]
    size = net[i].size
    free = [j for j, d in enumerate(net) if d.size == 0]
    why = "every pipeline stage holds at least one layer"
    limit, bound = wl.num_layer, f"workload.num_layer = {wl.num_layer}"
    if _layers_in_graph(wl) > 1:
        limit = graph_executions(wl)
        why = "every pipeline stage holds at least one graph execution"
        bound = (f"workload.num_layer / workload.num_layer_in_graph = {wl.num_layer} / "
                 f"{wl.num_layer_in_graph} = {limit}")
    if size == 0 and free == [i]:
        fixed = math.prod(d.size for d in net if d.size > 0)
        if system.num_chip % fixed:
            return  # reported by check_searched_network
        size = system.num_chip // fixed
        if len(net) == 1:
            spans = f"a 1-dimensional network spans system.num_chip = {size} chips"
        else:
            spans = (f"the pp dimension is the only free one, so it spans system.num_chip / "
                     f"(the fixed sizes) = {system.num_chip} / {fixed} = {size} chips")  # fmt: skip
        message = (f"is 0 (searched), but {spans}: the pipeline (pp) size must be <= "
                   f"{bound}, since {why}. Got 0 (PP = {size}) "
                   "instead.")  # fmt: skip
    else:
        message = (f"must be <= {bound}: it is the pipeline (pp) size, "
                   f"and {why}. Got {size} instead.")  # fmt: skip
    if size > limit:
        sink.add(f"system.network[{i}].size", message)


def kernel_collectives(ctx: Lowering) -> list[CollectiveNeed]:
    """The collective of every kernel: per tile (TP all-reduce, all-to-all, all-gather, MoE
    dispatch; twice for a recomputed kernel) or once per execution (the DP gradient
    all-reduce, spread over the micro-batches)."""

    kernels = ctx.spec.graph.kernels
    skip_ic = ctx.spec.execution.skip_inter_chip_optimization
    nmb = ctx.batch.num_micro_batch
    runs = recomputed(ctx.spec)
    tp, dp, tile, once = Parallelism.TP, Parallelism.DP, NetworkTerm.KERNEL_TILE, NetworkTerm.KERNEL_ONCE
    out = []
    for i, k in enumerate(kernels):
        typ = k.communication
        if typ is Collective.NONE:
            if ctx.sharding[i] is not Dim.K or skip_ic:
                continue  # no collective
            typ = Collective.ALL_REDUCE
        by = ctx.output_bytes(i)
        count = 2.0 if runs[i] else 1.0  # a recomputed kernel's collective runs again too
        if typ in (Collective.ALL_REDUCE, Collective.ALL_TO_ALL, Collective.ALL_GATHER):
            out.append(CollectiveNeed(typ, by, tp, tile, i, count=count))
        elif typ is Collective.ALL_REDUCE_PERIODIC and nmb > 0 and k.num_expert == 0:
            out += gradient_needs(ctx, i, by, nmb)  # the ZeRO stage's DP traffic
        elif typ is Collective.ALL_REDUCE_PERIODIC and nmb > 0:
            # MoE: E / EP experts' gradients over DP / EP replicas (experts > 0)
            out.append(CollectiveNeed(typ, by, dp, once, i, per=nmb, experts=k.num_expert))
        elif typ is Collective.EXPERT_ALL_TO_ALL:
            out.append(CollectiveNeed(typ, by, dp, tile, i, count=count, experts=k.num_expert))
    return out


def edge_relayouts(ctx: Lowering) -> list[CollectiveNeed]:
    """The collective that re-lays each edge's tensor out between the producer's and the
    consumer's sharding, per tile, over the TP group."""

    st = ctx.structure
    out = []
    for e, typ in enumerate(graph_edge_relayouts(ctx.spec.graph, ctx.sharding)):
        if typ in (Collective.ALL_GATHER, Collective.ALL_TO_ALL):
            s = st.src[e]
            out.append(CollectiveNeed(typ, ctx.output_bytes(s), Parallelism.TP,
                                      NetworkTerm.EDGE_TILE, e))  # fmt: skip
    return out
