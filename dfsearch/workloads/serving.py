"""LLM serving: one prefill or one decode step of a batch of sequences through a transformer
of ``num_layer`` layers on a TP x PP x DP network (docs/model.md, "LLM serving").

The graph (generator ``llm-serving``) is one layer for ONE sequence; the lowering applies the
batch B (a weight GEMM's N x B, every other kernel's rows x B), reads every weight from DRAM
once per step (its shard per chip) and the KV cache of the batch, and sets the constants so
that the evaluator's final_ns is the step latency: the time to first token (prefill) or the
time per output token (decode),

    step = num_layer x (sum of the configurations' IIs) + (PP - 1) x hop,
    hop  = B x s_step x hidden x word / TP / beta_pp + link_latency_pp,

with s_step = prompt_len (prefill) or 1 (decode). DP replicas serve independent batches.
``ServingMetrics`` turns an evaluation into TTFT / TPOT, tokens per second, end-to-end
latency and KV bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from dfsearch.codes import (
    Collective,
    Dim,
    KernelKind,
    NetworkTerm,
    ObjectiveKind,
    Parallelism,
    ServingPhase,
    WorkloadKind,
)
from dfsearch.workload_specs import DEFAULT_MAX_BATCH, ServingWorkload  # re-exported
from dfsearch.workloads.base import (
    Batch,
    CollectiveNeed,
    DramUse,
    Lowering,
    NetworkNeeds,
    ServingStep,
    WorkloadModel,
    divisors,
)
from dfsearch.workloads.llm import (
    LLM,
    _check_pipeline_depth,
    edge_relayouts,
    kernel_collectives,
)
from dfsearch.workloads.network_rules import check_searched_network

if TYPE_CHECKING:
    from dfsearch.cost.lower import Outer
    from dfsearch.cost.model import Evaluation
    from dfsearch.issues import IssueSink
    from dfsearch.spec import Kernel, SearchSettings, Spec, System
    from dfsearch.system.placement import Placement
    from dfsearch.system.ratios import Groups

__all__ = [
    "ServingWorkload",
    "Serving",
    "ServingMetrics",
    "serving_metrics",
    "kv_heads_per_chip",
    "DEFAULT_MAX_BATCH",
]

_P24, _P30 = 2**24, 2**30
#: the objectives that fit each phase (``search.objective``)
_PHASE_OBJECTIVE = {ObjectiveKind.TTFT: ServingPhase.PREFILL, ObjectiveKind.TPOT: ServingPhase.DECODE}


def kv_heads_per_chip(kv_heads: int, batch: int, tp: int) -> int:
    """ceil(g x B / TP): the (head, sequence) pairs of the KV cache one chip holds and reads
    when the KV heads are split over the TP group (a head shared by TP / g chips when g < TP).

    >>> kv_heads_per_chip(8, 1, 16), kv_heads_per_chip(8, 4, 16), kv_heads_per_chip(32, 1, 4)
    (1, 2, 8)
    """
    return -(-kv_heads * batch // tp)


@dataclass(frozen=True)
class Serving(WorkloadModel):
    """Serving rules: one step of B sequences per replica, the layers' weights read once per
    step, the KV cache of the batch in DRAM, final_ns = the step latency."""

    kind = WorkloadKind.LLM_SERVING
    spec_class = ServingWorkload
    field_ranges = MappingProxyType({
        "hidden_dim": (1, _P24, "elements"),
        "num_head": (1, _P24, ""),
        "head_dim": (1, _P24, "elements"),
        "num_layer": (1, _P24, ""),
        "prompt_len": (1, _P30, "tokens"),
        "output_len": (1, _P30, "tokens"),
        "batch_size": (1, _P24, "sequences"),
        "max_batch_size": (1, _P24, "sequences"),
        "gated_ffn": (0, 1, ""),
        "tokens_per_step": (1, _P24, "tokens"),
    })
    generators = ("llm-serving",)
    generator_fields = MappingProxyType(
        {"hidden": "hidden_dim", "decode": "phase", "kv_word": "kv_word_bytes",
         "tokens": "tokens_per_step"}
    )
    shards_across_chips = True
    tiled = True

    # ------------------------------------------------------------------ outer choices
    def only_shape(self, system: System, chips: int) -> tuple[int, ...] | None:
        return LLM().only_shape(system, chips)

    def admits_shape(
        self, spec: Spec, shape: tuple[int, ...], placement: Placement | None = None
    ) -> bool:
        """PP <= num_layer, as for ``llm``."""
        return LLM().admits_shape(spec, shape, placement)

    def tile_counts(self, spec: Spec) -> list[int]:
        """Prefill: every divisor of prompt_len (the tokens are tiled); decode: 1."""
        wl = spec.workload
        return divisors(wl.prompt_len) if wl.phase is ServingPhase.PREFILL else [1]

    def tile_count_issue(self, spec: Spec, num_tile: int) -> str | None:
        """More tiles than the tokens a sequence processes in one step (prompt_len in a
        prefill, tokens_per_step in a decode step): a tile holds one token at least."""
        wl = spec.workload
        if num_tile <= wl.step_tokens:
            return None
        field = "prompt_len" if wl.phase is ServingPhase.PREFILL else "tokens_per_step"
        return (f"must be <= workload.{field} = {wl.step_tokens}, the tokens of one "
                f"{wl.phase.label} step per sequence (a tile holds one token at least). "
                f"Got {num_tile} instead.")  # fmt: skip

    def micro_batch_size(self, spec: Spec) -> int:
        """The batch B: the spec's, or 1 when it is searched (0)."""
        return spec.workload.batch_size or 1

    def micro_batch_sizes(self, spec: Spec, dp: int) -> list[int]:
        """The spec's batch, or (0 = searched) the powers of two up to max_batch_size."""
        wl = spec.workload
        if wl.batch_size > 0:
            return [wl.batch_size]
        return [2**i for i in range(wl.max_batch_size.bit_length()) if 2**i <= wl.max_batch_size]

    def search_notes(self, spec: Spec, evaluation: Evaluation) -> tuple[str, ...]:
        """With the batch searched (``batch_size = 0``): when the answer's batch is the largest
        searched, the ceiling ``max_batch_size`` binds -- a larger batch may do better (a
        throughput objective) and was not tried; said, not silent."""
        wl, step = spec.workload, evaluation.step
        if wl.batch_size > 0 or step is None:
            return ()
        top = 1 << (wl.max_batch_size.bit_length() - 1)  # the largest power of two searched
        if step.batch < top:
            return ()
        return (f"batch {step.batch} is the largest searched (workload.max_batch_size = "
                f"{wl.max_batch_size}): the ceiling binds, a larger batch was not tried; raise "
                "workload.max_batch_size to search past it",)

    def smallest_micro_batch_wins(self, spec: Spec) -> bool:
        """Every term of the step grows with B (compute, KV reads, collectives, spilled
        buffers, the hop) and so does the DRAM footprint; only overflowing into a faster
        second DRAM tier could speed a larger batch up (the rule of ``llm``)."""
        return LLM().smallest_micro_batch_wins(spec)

    # ------------------------------------------------------------------ lowering
    def batch(self, spec: Spec, outer: Outer, groups: Groups) -> Batch:
        """B sequences per replica, DP replicas (global batch B x DP), one micro-batch."""
        b = max(outer.micro_batch_size, 1)
        return Batch(global_batch=b * groups.dp, micro_batch=b, dp=groups.dp, pp=groups.pp,
                     layers=spec.workload.num_layer)  # fmt: skip

    def lowered_kernel(self, spec: Spec, kernel: Kernel, outer: Outer) -> Kernel:
        """The kernel for the batch: a weight GEMM's N x B (one weight read serves every
        sequence), any other kernel's outer (rows) x B."""

        b = max(outer.micro_batch_size, 1)
        if kernel.kind is KernelKind.GEMM_WEIGHT:
            return replace(kernel, n=kernel.n * b)
        return replace(kernel, outer=kernel.outer * b)

    def memory_bytes(self, ctx: Lowering) -> list[float]:
        """DRAM bytes each kernel reads per step and chip: a weight GEMM its weight shard,
        memory_bytes x sM x sK / (rows x K); any other kernel memory_bytes x B, divided
        along its sharded dimension at that dimension's granularity, ceil(S / TP) / S (a
        head-sharded KV kernel reads ceil(g x B / TP) of the g x B (head, sequence) pairs)."""
        spec, out = ctx.spec, []
        b, tp = ctx.batch.micro_batch, ctx.groups.tp
        for i, k in enumerate(spec.graph.kernels):
            if k.memory_bytes == 0.0:
                out.append(0.0)
            elif k.kind is KernelKind.GEMM_WEIGHT:
                sm, sk, _ = ctx.dims[i]
                out.append(k.memory_bytes * (sm * sk) / (k.rows * k.k))
            else:
                out.append(k.memory_bytes * b * _read_fraction(k, b, ctx.sharding[i], tp))
        return out

    def pipeline(self, ctx: Lowering) -> tuple[float, float]:
        """No bubble and one step per batch: pipeline factor 1, batch multiplier num_layer
        (final_ns = num_layer x sum of IIs + p2p, the step latency)."""
        return 1.0, float(ctx.batch.layers)

    def network(self, ctx: Lowering) -> NetworkNeeds:
        """The TP collectives and re-layouts of ``llm``; p2p = (PP - 1) pipeline hops."""
        needs = kernel_collectives(ctx)
        if self.searches_sharding(ctx.spec.execution):
            needs += edge_relayouts(ctx)
        if ctx.groups.pp_dim >= 0 and ctx.groups.pp > 1:
            needs.append(CollectiveNeed(Collective.POINT_TO_POINT, _hop_bytes(ctx), Parallelism.PP,
                                        NetworkTerm.PIPELINE, count=ctx.batch.pp - 1, hop=True))  # fmt: skip
        return NetworkNeeds(tuple(needs), all_reduce_latency=True)

    def dram(self, ctx: Lowering, weight_bytes: float, extra_bytes: float) -> DramUse:
        """The stage's layers' weights, their dram_extra bytes and the KV cache of the batch
        for the full context (``data``); the live activations of one layer (x 1: the batch
        is already in the dimensions)."""
        lps = ctx.batch.layers_per_stage
        return DramUse(weights=lps * weight_bytes, data=lps * extra_bytes + _kv_bytes(ctx),
                       act_mult=1.0)  # fmt: skip

    def step(self, ctx: Lowering) -> ServingStep:
        wl, b = ctx.spec.workload, ctx.batch
        return ServingStep(
            phase=wl.phase, batch=b.micro_batch, tokens=wl.step_tokens, dp=b.dp, pp=b.pp,
            layers=b.layers, layers_per_stage=b.layers_per_stage, hop_ns=ctx.fabric.hop_ns(_hop_bytes(ctx)),
            output_len=wl.output_len, kv_bytes=_kv_bytes(ctx),
        )  # fmt: skip

    # ------------------------------------------------------------------ input and output
    def issues(self, sink: IssueSink, workload: ServingWorkload) -> None:
        w = workload
        for f, rng in self.field_ranges.items():
            sink.ge(f"workload.{f}", getattr(w, f), 0 if f in ("batch_size", "gated_ffn") else 1)
            sink.in_range(f"workload.{f}", getattr(w, f), rng)
        if w.gated_ffn not in (0, 1):
            sink.add("workload.gated_ffn", f"must be 0 or 1. Got {w.gated_ffn} instead.")
        for f, rng in (("num_kv_head", (1, _P24, "")), ("ffn_dim", (1, _P24, "elements")),
                       ("kv_word_bytes", (1, 64, "bytes"))):  # fmt: skip
            if getattr(w, f) is not None:
                sink.ge(f"workload.{f}", getattr(w, f), 1)
                sink.in_range(f"workload.{f}", getattr(w, f), rng)
        if min(w.hidden_dim, w.num_head, w.head_dim) >= 1 and w.num_head * w.head_dim != w.hidden_dim:
            sink.add("workload.hidden_dim",
                     "must equal workload.num_head * workload.head_dim = "
                     f"{w.num_head} * {w.head_dim} = {w.num_head * w.head_dim}. "
                     f"Got {w.hidden_dim} instead.")  # fmt: skip
        g = w.num_kv_head
        if g is not None and g >= 1 and w.num_head >= 1 and w.num_head % g:
            sink.add("workload.num_kv_head",
                     f"must divide workload.num_head = {w.num_head}: each key/value head serves "
                     f"the same number of query heads. Got {g} instead.")  # fmt: skip
        if w.phase is ServingPhase.PREFILL and w.tokens_per_step != 1:
            sink.add("workload.tokens_per_step",
                     "must be 1 for a prefill (the prefill processes prompt_len tokens). "
                     f"Got {w.tokens_per_step} instead.")  # fmt: skip
        if w.batch_size > w.max_batch_size >= 1:
            sink.add("workload.batch_size",
                     f"must be <= workload.max_batch_size = {w.max_batch_size}. "
                     f"Got {w.batch_size} instead.")  # fmt: skip

    def network_issues(self, sink: IssueSink, system: System, workload: ServingWorkload) -> None:
        """As ``llm``: parallelism roles, sizes (free ones are searched), PP <= num_layer."""

        check_searched_network(sink, system)
        _check_pipeline_depth(sink, system, workload)  # type: ignore[arg-type]

    def objective_issues(
        self, sink: IssueSink, search: SearchSettings, workload: ServingWorkload
    ) -> None:
        """``ttft`` needs a prefill, ``tpot`` a decode; ``time`` (the step latency) and
        ``throughput`` fit both; ``latency_bound_ms`` >= 0."""
        want = _PHASE_OBJECTIVE.get(search.objective)
        if want is not None and want is not workload.phase:
            sink.add("search.objective",
                     f"must fit workload.phase = {workload.phase.label!r}: {search.objective.label!r} "
                     f"is the step latency of a {want.label} step (use "
                     f"{_objective_of(workload.phase)!r}, 'throughput' or 'time'). "
                     f"Got {search.objective.label!r} instead.")  # fmt: skip

    def describe(self, workload: ServingWorkload) -> str:
        w = workload
        kv = f" ({w.num_kv_head} KV heads)" if w.num_kv_head else ""
        ffn = f", ffn {w.ffn_dim or 4 * w.hidden_dim}" + (" gated" if w.gated_ffn else "")
        batch = f"batch {w.batch_size}" if w.batch_size else f"batch searched up to {w.max_batch_size}"
        if w.tokens_per_step > 1:
            batch += f", {w.tokens_per_step} tokens per step"
        return (f"{w.phase.label}, hidden {w.hidden_dim}, {w.num_head} heads x {w.head_dim}{kv}"
                f"{ffn}, {w.num_layer} layers, prompt {w.prompt_len}, output {w.output_len}, "
                f"{batch}")  # fmt: skip


def _objective_of(phase: ServingPhase) -> str:
    return next(k.label for k, p in _PHASE_OBJECTIVE.items() if p is phase)


def _read_fraction(k: Kernel, batch: int, choice: Dim, tp: int) -> float:
    """ceil(S / TP) / S of the dimension a non-weight kernel is sharded on (S: its size for
    the batch; outer counts heads x sequences); 1 when replicated."""
    size = {Dim.OUTER: k.outer * batch, Dim.M: k.m, Dim.K: k.k, Dim.N: k.n}.get(choice)
    if size is None or tp <= 1:
        return 1.0
    return (-(-size // tp)) / size


def _hop_bytes(ctx: Lowering) -> float:
    """What one pipeline hop sends: B x s_step x hidden x word / TP bytes (the fabric adds the
    PP links' latency, ``Fabric.hop_ns``)."""
    wl = ctx.spec.workload
    return ctx.batch.micro_batch * wl.step_tokens * wl.hidden_dim * ctx.word / ctx.groups.tp


def _kv_bytes(ctx: Lowering) -> float:
    """KV cache per chip: 2 (K and V) x ceil(g x B / TP) x head_dim x (prompt_len +
    output_len) x kv_word, for the stage's layers."""
    wl = ctx.spec.workload
    kv_word = wl.kv_word_bytes or ctx.word
    pairs = kv_heads_per_chip(wl.kv_heads, ctx.batch.micro_batch, ctx.groups.tp)
    context = wl.prompt_len + wl.output_len
    return 2.0 * pairs * wl.head_dim * context * kv_word * ctx.batch.layers_per_stage


# --------------------------------------------------------------------------- metrics
@dataclass(frozen=True, slots=True)
class ServingMetrics:
    """What one serving step means to a user (docs/model.md, "LLM serving").

    ``step_ns`` is the TTFT (prefill) or the TPOT (decode); ``stage_ns`` the time one
    pipeline stage needs per step (layers per stage x sum of IIs, + one hop when PP > 1): a
    new batch enters every stage time, so PP batches are in flight. ``e2e_ns`` (decode):
    output_len x TPOT, the generation without the prefill."""

    phase: ServingPhase
    batch: int
    dp: int
    pp: int
    step_ns: float
    stage_ns: float
    tokens_per_s_replica: float
    tokens_per_s: float
    e2e_ns: float | None
    kv_bytes: float  #: KV cache per chip (bytes)
    weight_bytes: float  #: weights per chip (bytes)
    bounds: tuple[str, ...]  #: each non-empty configuration's bound: compute / memory / network

    @property
    def latency_name(self) -> str:
        return "ttft" if self.phase is ServingPhase.PREFILL else "tpot"

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase.label,
            "batch": self.batch,
            "dp": self.dp,
            "pp": self.pp,
            f"{self.latency_name}_s": self.step_ns / 1e9,
            "step_latency_s": self.step_ns / 1e9,
            "stage_s": self.stage_ns / 1e9,
            "tokens_per_s_replica": self.tokens_per_s_replica,
            "tokens_per_s": self.tokens_per_s,
            "e2e_latency_s": None if self.e2e_ns is None else self.e2e_ns / 1e9,
            "kv_bytes_per_chip": self.kv_bytes,
            "weight_bytes_per_chip": self.weight_bytes,
            "bounds": list(self.bounds),
        }


def serving_metrics(ev: Evaluation) -> ServingMetrics | None:
    """The serving metrics of a feasible evaluation of an ``llm_serving`` spec, else None.

    tokens/s of one replica = B x s_step / stage time; of the system x DP (prefill counts the
    prompt tokens processed, decode the tokens generated)."""
    s = ev.step
    if s is None or not ev.feasible:
        return None
    stage = s.stage_ns(ev.all_config_ii_ns)
    replica = s.batch * s.tokens * 1e9 / stage if stage > 0 else float("inf")
    decode = s.phase is ServingPhase.DECODE
    return ServingMetrics(
        phase=s.phase, batch=s.batch, dp=s.dp, pp=s.pp, step_ns=ev.final_ns, stage_ns=stage,
        tokens_per_s_replica=replica, tokens_per_s=replica * s.dp,
        e2e_ns=s.output_len * ev.final_ns if decode else None, kv_bytes=s.kv_bytes,
        weight_bytes=ev.dram_use.weights,
        bounds=tuple(c.bottleneck for c in ev.configs if c.kernels),
    )  # fmt: skip

