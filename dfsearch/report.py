"""Plain-text rendering of specs, evaluations and run results (no colours, stable output)."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from dfsearch.codes import ExecutionModel, MemoryModel, RunStatus, ServingPhase
from dfsearch.cost.model import Evaluation
from dfsearch.cost.partition import is_partitioned
from dfsearch.cost.stages import is_staged
from dfsearch.explain import UNITS, violation_text
from dfsearch.kernels.pieces import split_pieces
from dfsearch.quirks import Quirks
from dfsearch.result import RunResult
from dfsearch.sanity import spec_warnings
from dfsearch.spec import Execution, Graph, Spec
from dfsearch.workloads import model_of
from dfsearch.workloads.serving import serving_metrics

if TYPE_CHECKING:
    from dfsearch.cost.partition import PartitionPlan
    from dfsearch.cost.stages import StagePlan

__all__ = ["format_seconds", "describe_spec", "describe_graph", "format_evaluation", "format_run",
           "stage_lines", "stage_timing", "partition_lines"]


def format_seconds(ns: float) -> str:
    """A time in ns as a readable string with its unit."""
    if ns != ns or ns == float("inf"):
        return "inf"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"


def _realistic_text(ex: Execution) -> str:
    """The realistic execution model's constants, for the execution line."""
    return (f"; realistic model: launch {ex.kernel_overhead_us:g} us per kernel, GEMM tiles "
            f"{ex.gemm_tile_m}x{ex.gemm_tile_n}x{ex.gemm_tile_k}, collectives at "
            f"{ex.bus_efficiency:g} x link bandwidth + {ex.collective_step_us:g} us per step")


def _si(x: float, unit: str) -> str:
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


def describe_graph(graph: Graph) -> list[str]:
    n_sys = sum(1 for k in graph.kernels if k.type.name == "SYSTOLIC")
    weights = sum((k.weight_bytes or 0.0) for k in graph.kernels)
    return [
        f"graph     {len(graph.kernels)} kernels ({n_sys} systolic, "
        f"{len(graph.kernels) - n_sys} SIMD), {len(graph.connections)} connections"
        + (", training (has BWD kernels)" if graph.is_training else ""),
        f"          {graph.flop:.10g} FLOP per graph execution, {_si(weights, 'B')} of weights",
    ]


def _pieces_line(spec: Spec) -> list[str]:
    """How a whole model in pipeline pieces (``cost/stages.py``), or a graph cut into pipeline
    partitions (``cost/partition.py``), runs its graph."""
    if is_partitioned(spec):
        return [f"          {spec.workload.num_layer_in_graph} layers of the whole pipeline, cut "
                "into PP partitions; the slowest runs on every stage (DFModel's pipeline partitioning)"]
    if not is_staged(spec):
        return []
    p, wl = split_pieces(spec.graph), spec.workload
    return [f"          a whole model in pipeline pieces: {len(p.before)} kernels before the "
            f"layers (first stage), {len(p.layers)} layer kernels run "
            f"{wl.num_layer // wl.num_layer_in_graph} times per micro-batch over the stages, "
            f"{len(p.after)} after them (last stage)"]


def describe_spec(spec: Spec) -> list[str]:
    s, a, ex, wl = spec.system, spec.system.accelerator, spec.execution, spec.workload
    net = " x ".join(
        f"{d.topology.label}"
        + (f"[{d.size}]" if d.size else "[free]")
        + (f" {d.parallelism.label.upper()}" if d.parallelism.value else "")
        + f" @{d.link_bw_GBps:g} GB/s"
        for d in s.network
    )
    lines = [f"workload  {wl.kind.label.upper()}: " + model_of(wl).describe(wl)]
    sp = spec.speculative
    if sp is not None:
        lines.append(f"          speculative ({sp.scheme.label}): draft hidden {sp.hidden_dim}, "
                     f"{sp.num_head} heads x {sp.head_dim}, {sp.num_layer} layers; window "
                     f"K = {sp.window}, acceptance rate {sp.acceptance_rate:g}")  # fmt: skip
    lines += describe_graph(spec.graph)
    lines += _pieces_line(spec)
    lines += [
        f"system    {s.num_chip} chips x {_si(a.peak_gflops * 1e9, 'FLOP/s')} "
        f"({a.cores} cores of {a.systolic_width}x{a.systolic_height} at {a.freq_GHz:.4g} GHz, "
        f"SRAM {_si(a.sram_bytes, 'B')})",
        f"          DRAM {s.memory.dram_bw_GBps:g} GB/s, "
        + (f"{_si(s.memory.dram_bytes, 'B')}" if s.memory.dram_bytes else "unlimited"),
        f"network   {s.variant}: {net}",
        f"execution {ex.style.label}, num_config "
        + ("auto" if ex.num_config < 0 else str(ex.num_config or "one per kernel"))
        + f", overlap {ex.overlap.label}, "
        + (f"compute_util {ex.compute_util:.4g}" if ex.compute_util else "cycle model")
        + f", word {ex.word_bytes} B, equations {ex.equations.label}"
        + (_realistic_text(ex) if ex.model is ExecutionModel.REALISTIC else ""),
    ]
    lines += _quirks_line(spec.quirks)
    lines += [f"WARNING   {w.render()}" for w in spec_warnings(spec)]
    return lines


def _quirks_line(quirks: Quirks) -> list[str]:
    """The ``[quirks]`` switches set away from their defaults (nothing when none is)."""
    changed = [f"{f.name} = {str(getattr(quirks, f.name)).lower()}" for f in fields(Quirks)
               if getattr(quirks, f.name) != f.default]  # fmt: skip
    return [f"quirks    {', '.join(changed)} (docs/spec.md, [quirks])"] if changed else []


def _names(kernels: tuple[str, ...], width: int = 44) -> str:
    text = ", ".join(kernels)
    if len(text) <= width:
        return text
    return text[: width - 12].rsplit(",", 1)[0] + f", ... ({len(kernels)})"


def _config_table(ev: Evaluation, indent: str = "  ") -> list[str]:
    """One row per non-empty configuration: kernels, times, II and what bounds it."""
    lines = [f"{indent}{'cfg':>3}  {'kernels':<44} {'compute':>10} {'memory':>10} "
             f"{'network':>10} {'II':>10}  bound"]  # fmt: skip
    for i, c in enumerate(ev.configs):
        if not c.kernels:
            continue
        lines.append(
            f"{indent}{i:>3}  {_names(c.kernels):<44} {format_seconds(c.compute_ns):>10} "
            f"{format_seconds(c.memory_ns):>10} {format_seconds(c.network_ns):>10} "
            f"{format_seconds(c.ii_ns):>10}  {c.bottleneck}"
        )
    return lines


def format_evaluation(ev: Evaluation, spec: Spec | None = None, plan: StagePlan | None = None,
                      *, timing: str | None = None) -> list[str]:
    """The mapping, its configurations, times, cost and memory; with ``plan`` (a whole model
    in pipeline pieces) the configurations are the layer graph's and the time the stages'
    (``stage_timing``); ``timing``, when given, is the text after ``final_s`` (a plan kind's:
    ``PlanSection.timing``)."""
    d = ev.decision
    lines = [
        f"mapping   shape {' x '.join(map(str, d.shape))}: TP {ev.tp}, PP {ev.pp}, DP {ev.dp}; "
        f"micro-batch {d.micro_batch_size} ({ev.num_micro_batch} per pipeline), "
        f"tiles {d.num_tile}",
    ]
    if d.placement is not None:  # chosen by the search: the spec leaves some roles free
        lines.append(f"placement {d.placement}")
    if not ev.feasible:
        why = violation_text(spec, ev) if spec is not None else (
            f"{ev.status.message} (by {ev.violation:.6g} {UNITS.get(ev.status, '')})")
        lines.append(f"status    INFEASIBLE: {why}")
        return lines
    lines += ["", *_config_table(ev)]
    if timing is None:
        timing = stage_timing(plan) if plan is not None else (
            f"all-config II {format_seconds(ev.all_config_ii_ns)}, p2p "
            f"{format_seconds(ev.p2p_ns)}, pipeline factor {ev.pipeline_factor:.6g}")
    lines += [
        "",
        f"time      {ev.final_s:.10g} s {_time_unit(ev)} (final_s); {timing}",
        *_latency_lines(ev),
        f"util      {ev.utilization:.6%} of {ev.num_chip} x {_si(ev.peak_gflops * 1e9, 'FLOP/s')} "
        f"({ev.workload_flop:.6g} FLOP)",
        f"cost      ${ev.price.system_cost:,.2f}  (chips {ev.price.chip_cost:,.0f}, "
        f"DRAM {ev.price.dram_cost:,.0f}, links {ev.price.link_cost:,.0f}, "
        f"switches {ev.price.switch_cost:,.0f})",
        f"power     {ev.price.system_power:,.2f} W",
        *_memory_lines(spec, ev),
        *_serving_lines(ev),
    ]
    return lines


def _time_unit(ev: Evaluation) -> str:
    """What final_s measures: a global batch, or one serving step (TTFT / TPOT)."""
    if ev.step is None:
        return "per global batch"
    if ev.step.phase is ServingPhase.PREFILL:
        return "per prefill (TTFT)"
    return "per decode step (TPOT)"


def _latency_lines(ev: Evaluation) -> list[str]:
    """DFModel's latency of one inference pass (final_latency_ns) when the model gives one."""
    if ev.final_latency_ns is None:
        return []
    return [f"latency   {format_seconds(ev.final_latency_ns)} per inference pass through every "
            f"layer (final_latency_ns {ev.final_latency_ns:.10g}): layers x all-config II + "
            "(PP - 1) hops"]  # fmt: skip


def _serving_lines(ev: Evaluation) -> list[str]:
    """TTFT or TPOT, tokens/s, end-to-end latency and KV bytes of an llm_serving step
    (docs/model.md, "LLM serving"); nothing for other workloads."""
    m = serving_metrics(ev)
    if m is None:
        return []
    name = m.latency_name.upper()
    lines = [
        f"serving   {m.phase.label}, batch {m.batch} per replica x {m.dp} replica(s): "
        f"{name} {format_seconds(m.step_ns)} (final_s), stage {format_seconds(m.stage_ns)}",
        f"          {m.tokens_per_s:,.6g} tokens/s ({m.tokens_per_s_replica:,.6g} per replica"
        + (f", {m.pp} batches in flight" if m.pp > 1 else "") + ")",
        f"          KV cache {_si(m.kv_bytes, 'B')} and weights {_si(m.weight_bytes, 'B')} per "
        f"chip; bound per configuration: {', '.join(m.bounds)}",
    ]
    if m.e2e_ns is not None:
        lines.append(f"          end-to-end {format_seconds(m.e2e_ns)} for "
                     f"{ev.step.output_len if ev.step else 0} tokens (output_len x TPOT; "
                     "the prefill is not included)")  # fmt: skip
    return lines


def _memory_lines(spec: Spec | None, ev: Evaluation) -> list[str]:
    """DRAM per chip at its bandwidth; under the training memory model, by purpose against
    the capacity (given the spec)."""
    of = ""
    if spec is not None:
        cap = spec.dram_capacity
        of = f" of {_si(cap, 'B')}" if cap > 0 else " (capacity unlimited)"
    head = f"memory    DRAM {_si(ev.dram_bytes, 'B')}{of} per chip at {ev.dram_bw_GBps:g} GB/s"
    u = ev.dram_use
    if ev.memory_model is not MemoryModel.TRAINING:
        if ev.step is None:
            return [head + " (weights + live activations: DFModel's memory model)"]
        parts = [("weights", u.weights), ("KV cache", u.data),
                 ("workspace", max(0.0, ev.dram_bytes - u.fixed))]  # fmt: skip
        return [head, "          " + ", ".join(f"{name} {_si(v, 'B')}" for name, v in parts)]
    parts = [("weights", u.weights), ("grads", u.gradients), ("optimizer", u.optimizer),
             ("activations", u.activations), ("KV/extra", u.data),
             ("workspace", max(0.0, ev.dram_bytes - u.fixed))]  # fmt: skip
    if u.stage_others > 0:
        parts.insert(-1, ("embedding/LM head", u.stage_others))
    notes = []
    if spec is not None:
        t = spec.training
        notes.append(f"recompute {t.recompute.label}")
        if t.sequence_parallel:
            notes.append("sequence parallel")
        if t.optimizer_sharding:
            notes.append("optimizer sharded over DP")
        if t.zero_stage:
            notes.append(f"ZeRO stage {t.zero_stage}")
        if t.interleave > 1:
            notes.append(f"interleave {t.interleave}")
        if t.searched:
            notes.append(f"chosen by the search: {', '.join(t.searched)}")
    how = f" ({', '.join(notes)})" if notes else ""
    return [
        head,
        "          " + ", ".join(f"{name} {_si(v, 'B')}" for name, v in parts),
        f"          training memory model{how}; "
        'training.memory_model = "dfmodel" counts weights + live activations only',
    ]


def _sharding_fixed(result: RunResult) -> bool:
    """True when the proof covers one inter-chip sharding per outer choice (the byte-minimal
    one of the sharding pass, docs/model.md) rather than every sharding: an LLM graph with
    free kernels, TP > 1 and joint sharding off."""
    spec, ev = result.spec, result.evaluation
    if ev is None or ev.tp <= 1 or spec.search.joint_sharding:
        return False
    if not model_of(spec.workload).searches_sharding(spec.execution):
        return False
    return any(k.sharding is None for k in spec.graph.kernels)


def format_run(result: RunResult, *, title: str = "") -> str:
    """The report of a run: spec, mapping, times, and what the search can certify."""
    s = result.search
    ev = result.evaluation
    lb = s.lower_bound_s
    if s.status is RunStatus.OPTIMAL:
        verdict = "proven optimal (a lower bound meets it)"
        if _sharding_fixed(result):
            verdict += "; inter-chip sharding byte-minimal per outer choice, as in DFModel"
    elif ev is not None and lb is not None and lb > 0:
        gap = ev.final_s / lb - 1
        verdict = f"{s.status.message}; lower bound {lb:.6g} s (gap <= {gap:.3%})"
    else:
        verdict = f"{s.status.message}; no lower bound"
    lines = [title] if title else []
    lines += describe_spec(result.spec)
    if ev is not None:
        lines += format_evaluation(ev, result.spec, timing=result.section.timing())
        lines += result.section.evaluation_lines()
    else:
        lines += ["", result.infeasible_message()]
    lines += [
        f"search    {s.method}: {s.solved} of {s.candidates} outer choices searched, "
        f"{s.pruned} ruled out by bounds or outer constraints; {s.evaluations:,} evaluations, "
        f"{s.seconds:.3g} s, "
        f"seed {s.seed}",
        f"status    {s.status.label.upper()}: {verdict}",
    ]
    if s.stopped_by:
        lines.append(
            f"WARNING   the search stopped early ({s.stopped_by}): this is the best mapping "
            "found so far, not a proven answer"
            + ("; a time limit makes the answer depend on machine speed" if "time" in s.stopped_by else "")
        )
    lines += [f"note      {n}" for n in s.notes]
    lines += result.section.closing_lines()
    return "\n".join(lines)


def partition_lines(plan: PartitionPlan) -> list[str]:
    """DFModel's pipeline partitions of a multi-layer graph (docs/model.md, "Pipeline
    partitioning"): each partition's kernels and inter-chip latency, the slowest kept."""
    n = sum(len(p.kernels) for p in plan.partitions)
    how = ("given by the mapping" if plan.given else
           "fastest slowest partition, then fewest bytes sent: optimal" if plan.exact else
           f"cut along topological orders, not proven (bound {format_seconds(plan.lower_bound_ns)})")
    lines = [
        f"partition {len(plan.partitions)} pipeline partition(s) of the {n}-kernel graph, priced by "
        "DFModel's inter-chip model (docs/model.md, 'Pipeline partitioning'); the table above maps the slowest, which every "
        "stage runs",
        f"  {'part':>5}  {'kernels':<44} {'compute':>10} {'collectives':>11} {'p2p':>10} "
        f"{'cut bytes':>10} {'latency':>10}",
    ]
    for c, p in enumerate(plan.partitions):
        names = f"{len(p.kernels)}: " + (f"{p.kernels[0]} .. {p.kernels[-1]}" if len(p.kernels) > 1
                                         else p.kernels[0])
        names = names if len(names) <= 44 else names[:41] + "..."
        lines.append(f"  {c:>5}  {names:<44} {format_seconds(p.compute_ns):>10} "
                     f"{format_seconds(p.collective_ns):>11} {format_seconds(p.p2p_ns):>10} "
                     f"{_si(p.alive_bytes, 'B'):>10} {format_seconds(p.latency_ns):>10}"
                     + ("  slowest (kept)" if c == plan.kept else ""))
    lines.append(f"          cut: {how}; {_si(plan.sent_bytes, 'B')} sent between partitions")
    return lines


def stage_timing(plan: StagePlan) -> str:
    """The timing of a whole model in pipeline stages: its slowest stage and its p2p."""
    return (f"slowest stage {format_seconds(max(st.time_ns for st in plan.stages))} per "
            f"micro-batch, p2p {format_seconds(plan.p2p_ns)}")


def stage_lines(plan: StagePlan) -> list[str]:
    """The pipeline stages of a whole model and the mappings of its ends (docs/model.md,
    "Pipeline stages of a whole model")."""
    t_max = plan.slowest_ns
    slow = next(i for i, st in enumerate(plan.stages) if st.time_ns == t_max)
    rest = sum(st.time_ns for st in plan.stages) - t_max
    lines = [
        f"stages    {len(plan.stages)} pipeline stage(s); the table above is the layer graph, "
        "which every stage runs",
        f"  {'stage':>7}  {'layers':>6}  {'runs':<40} {'per micro-batch':>15}  {'DRAM per chip':>13}",
    ]
    i = 0
    while i < len(plan.stages):  # equal neighbours share a row: "2-127"
        st, j = plan.stages[i], i + 1
        while j < len(plan.stages) and plan.stages[j] == st and j != slow and i != slow:
            j += 1
        runs = " + ".join([*(["embedding"] if st.before else []),
                           *([f"layer after {st.starts_after}"] if st.starts_after else []),
                           *([f"{st.runs} x layer graph"] if st.runs else []),
                           *([f"layer to {st.ends_after}"] if st.ends_after else []),
                           *(["LM head"] if st.after else [])])
        label = f"{i + 1}" if j == i + 1 else f"{i + 1}-{j}"
        lines.append(f"  {label:>7}  {st.layers:>6}  {runs:<40} {format_seconds(st.time_ns):>15}  "
                     f"{_si(st.dram_bytes, 'B'):>13}" + ("  slowest" if i == slow else ""))
        i = j
    lines.append(
        f"          batch = {plan.micro_batches} micro-batches x {format_seconds(t_max)} + "
        f"{plan.bubble:.4g} x {format_seconds(rest)} (the other stages) + p2p "
        f"{format_seconds(plan.p2p_ns)} = {format_seconds(plan.batch_ns)}"
    )
    if plan.space == "whole layer-graph executions per stage":
        lines.append("          split chosen over whole layer-graph executions per stage; "
                     "[search] stage_cuts = true also tries stages that end inside a layer "
                     "or hold only an end (slower search; docs/whole_models.md)")
    else:  # search.stage_cuts
        lines.append(f"          split chosen over: {plan.space}")
        for k in sorted({st.ends_after for st in plan.stages if st.ends_after}):
            lines.append(f"          a cut after {k} sends {_si(plan.cut_bytes[k], 'B')} per sample")
    if not plan.split_exact:
        lines.append("          a piece runs slower in its stage than alone: the split is not proven optimal")
    used = sorted({st.ends_after for st in plan.stages if st.ends_after})
    parts = [(f"{w}:{k}", f"layer {'to' if w == 'first' else 'after'} {k}") for k in used
             for w in ("first", "second")]  # fmt: skip
    for name, label in (("before", "embedding"), ("after", "LM head"), *parts):
        e = plan.pieces.get(name)
        if e is None:
            continue
        lines += [f"{label:<9} {len(plan.names[name])} kernels, tiles {e.decision.num_tile}, "
                  f"all-config II {format_seconds(e.all_config_ii_ns)}", *_config_table(e)]
    return lines
