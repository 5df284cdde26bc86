"""Semantic checks of a spec, shared by every loader (TOML and DFModel).

Every check returns :class:`~dfsearch.errors.Issue` objects instead of raising, so a loader can
report all problems of an input at once. Field paths use the TOML vocabulary of ``docs/spec.md``
(``system.network[1].link_bw_GBps``, ``graph.kernels[3] ("Q").m``); list indices count from 0.

>>> from dfsearch.spec import Connection, Graph, Kernel
>>> from dfsearch.codes import ComputeType, KernelKind
>>> a = Kernel(name="a", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD, m=4, n=4)
>>> b = Kernel(name="b", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD, m=4, n=4)
>>> ab, ba = Connection(src="a", dst="b"), Connection(src="b", dst="a")
>>> g = Graph(kernels=(a, b), connections=(ab, ba))
>>> [i.render() for i in validate_graph(g)]
['graph has a cycle: a -> b -> a. A dataflow graph must be acyclic.']
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from dataclasses import replace

from dfsearch.codes import (
    TOPOLOGY_VARIANTS,
    Collective,
    Dim,
    ExecutionModel,
    ExecutionStyle,
    MemoryModel,
    Parallelism,
    Topology,
)
from dfsearch.errors import Issue
from dfsearch.issues import IssueSink, Range, bound_text, out_of_range, quote_list, show
from dfsearch.kernels.graph import sharding_choices
from dfsearch.kernels.pieces import PiecesError, split_pieces
from dfsearch.memo import by_identity, by_identity_and_key
from dfsearch.pins import pin_issues
from dfsearch.spec import (
    ASSIGNMENT_STRATEGY_NAMES,
    AUTO,
    OUTER_STRATEGY_NAMES,
    Cost,
    Execution,
    Graph,
    Kernel,
    NetworkDim,
    SearchSettings,
    Spec,
    Speculative,
    System,
    Training,
    Workload,
)
from dfsearch.system.kinds import KINDS, MAX_GRID_DIMS, allowed_network, kinds_of, network_name
from dfsearch.workloads import WORKLOADS, model_of
from dfsearch.workloads.llm import partitions_graph
from dfsearch.workloads.speculative_rules import speculative_issues

__all__ = [
    "validate_spec",
    "validate_graph",
    "validate_parts",
    "IssueSink",
    "seed_issue",
    "range_issue",
    "RANGES",
    "MAX_KERNEL_WORK",
    "show",
    "quote_list",
]

# --------------------------------------------------------------------------- helpers
def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else "."


# --------------------------------------------------------------------------- ranges
_P24, _P40 = 2**24, 2**40
_KERNEL_BYTES = (
    "input_bytes", "input2_bytes", "weight_bytes", "output_bytes", "communication_bytes",
    "communication2_bytes", "memory_bytes", "sram_extra_bytes", "dram_extra_bytes", "saved_bytes",
)  # fmt: skip
_COST_FIELDS = (
    "link_price_per_GBps", "switch_price_per_GBps", "dram_price_per_GBps", "chip_price",
    "link_power_J_per_GB[]", "switch_power_J_per_GB", "dram_power_J_per_GB", "chip_power_W",
)  # fmt: skip
_BYTES = Range(0, 1e30, "bytes")
_BW = Range(1e-6, 1e9, "GB/s")
_PRICE = Range(0, 1e30)
#: Largest product outer * m * k * n * max(1, num_input) of one kernel in the cycle model
#: (compute_util = 0). The evaluator counts cycles in int64: a kernel's cycle count
#: ceil(sM/W) * ceil(sN/H) * sK (or ceil(sK/es) * sN, or ceil(sM/W) * sN for SIMD), times
#: num_input in v1, is at most this product, since ceil(x/d) <= x for every divisor d >= 1.
#: With 2^60 every cycle count, every binary-search target and every PL * PS stays below
#: the evaluator's "impossible" sentinel 2^62, and sums of core counts (<= cores + 2^62)
#: below 2^63. At 1 GHz 2^60 cycles are 36 years of one kernel on one core.
MAX_KERNEL_WORK = 2**60

#: The range of every numeric field (field paths with ``[]`` for any index). Used by both
#: loaders through :func:`validate_parts` and documented in docs/spec.md ("Ranges"). The
#: limits are generous but finite: integers stay far below 2^63 in every product the model
#: forms (dimension x dimension products are bounded by MAX_KERNEL_WORK), float times and
#: byte counts stay finite and > 0 (bytes <= 1e30, bandwidth >= 1e-6 GB/s, frequency
#: >= 1e-3 GHz, compute_util >= 1e-6: even the largest products of these limits with tile
#: counts, layers and batch sizes stay below 1e110 ns, far from float64's 1.8e308).
RANGES: dict[str, Range] = {
    # graph
    "graph.kernels[].outer": Range(1, _P40, "elements"),
    "graph.kernels[].m": Range(1, _P40, "elements"),
    "graph.kernels[].k": Range(1, _P40, "elements"),
    "graph.kernels[].n": Range(1, _P40, "elements"),
    "graph.kernels[].num_input": Range(0, 2**20),
    "graph.kernels[].num_expert": Range(0, 2**20),
    "graph.kernels[].config": Range(0, 2**16 - 1),
    "graph.kernels[].id": Range(0, 2**63 - 1),
    "graph.connections[].id": Range(0, 2**63 - 1),
    **{f"graph.kernels[].{f}": _BYTES for f in _KERNEL_BYTES},
    # system
    "system.num_chip": Range(1, _P24, "chips"),
    "system.hbd": Range(0, _P24, "chips"),
    "system.accelerator.cores": Range(1, _P24),
    "system.accelerator.systolic_width": Range(1, 2**16, "lanes"),
    "system.accelerator.systolic_height": Range(1, 2**16, "stages"),
    "system.accelerator.sram_bytes": _BYTES,
    "system.accelerator.freq_GHz": Range(1e-3, 1e3, "GHz"),
    "system.accelerator.pmu_bytes": _BYTES,
    "system.accelerator.link_latency_ns": Range(0, 1e15, "ns"),
    "system.memory.dram_bw_GBps": _BW,
    "system.memory.dram_bytes": _BYTES,
    "system.memory.second_dram_bw_GBps": _BW,
    "system.memory.second_dram_bytes": _BYTES,
    "system.network[].link_bw_GBps": _BW,
    "system.network[].size": Range(1, _P24, "chips"),
    "system.network[].link_latency_ns": Range(0, 1e15, "ns"),
    "system.network[].bus_efficiency": Range(1e-3, 2, "", "of the link bandwidth"),
    # cost
    **{f"cost.{f}": _PRICE for f in _COST_FIELDS},
    # execution
    "execution.word_bytes": Range(1, 64, "bytes"),
    "execution.compute_util": Range(1e-6, 1, "", "or 0 for the cycle model"),
    "execution.num_config": Range(1, 2**16 - 1),
    "execution.effective_stage": Range(1, 2**16, "stages"),
    "execution.kernel_overhead_us": Range(0, 1e6, "us"),
    "execution.gemm_tile_m": Range(1, 2**16, "rows"),
    "execution.gemm_tile_n": Range(1, 2**16, "columns"),
    "execution.gemm_tile_k": Range(1, 2**16, "elements"),
    "execution.bus_efficiency": Range(1e-3, 2, "", "of the link bandwidth"),
    "execution.collective_step_us": Range(0, 1e6, "us"),
    # workload: each kind's ``field_ranges`` (dfsearch/workloads/)
    **{
        f"workload.{name}": Range(*rng)
        for model in WORKLOADS.values()
        for name, rng in model.field_ranges.items()
    },
    # search
    "search.max_evaluations": Range(1, 2**62, "evaluations"),
    "search.latency_bound_ms": Range(0, 1e12, "ms"),
    "search.jobs": Range(1, 256, "processes"),
    "training.grad_bytes": Range(0, 64, "bytes per parameter"),
    "training.optimizer_bytes": Range(0, 64, "bytes per parameter"),
    "training.interleave": Range(1, 1024, "virtual stages per device"),
}


def range_key(path: str) -> str:
    """The ``RANGES`` key of a concrete field path: indices and kernel names dropped.

    >>> range_key('graph.kernels[3] ("FFN1").m'), range_key("system.network[1].size")
    ('graph.kernels[].m', 'system.network[].size')
    """
    import re

    return re.sub(r"\[\d+\]( \(\"[^\"]*\"\))?", "[]", path)


def _within(s: IssueSink, path: str, value: float | None, key: str | None = None) -> None:
    """The range rule of ``RANGES[key]`` (``key`` defaults to ``path``)."""
    issue = range_issue(path, value, key)
    if issue is not None:
        s.issues.append(issue)


def range_issue(path: str, value: float | None, key: str | None = None) -> Issue | None:
    """The issue of ``value`` at ``path`` when it is outside its range, else ``None``.

    Values <= 0 belong to the sign rules (see :class:`Range`) and are never reported here.

    >>> range_issue("system.accelerator.freq_GHz", 1e-300).render()
    'system.accelerator.freq_GHz must be between 0.001 and 1000 GHz. Got 1e-300 instead.'
    >>> range_issue("system.num_chip", 2**63).render()
    'system.num_chip must be between 1 and 2^24 = 16777216 chips. Got 9223372036854775808 instead.'
    """
    return out_of_range(path, value, RANGES[key if key is not None else range_key(path)])


_ONLY_WEIGHT = "is only allowed on gemm_weight kernels; this kernel is "


def _kernel_path(path: str, i: int, k: Kernel) -> str:
    return f'{path}.kernels[{i}] ("{k.name}")'


def _dim_group(d: Dim) -> Dim:
    """OUTER and M are one dimension once DFModel folds heads into rows."""
    return Dim.M if d is Dim.OUTER else d


# --------------------------------------------------------------------------- graph
def validate_graph(
    graph: Graph, path: str = "graph", *, sharding_rules: bool = True
) -> list[Issue]:
    """Check a dataflow graph on its own (no system or workload needed).

    Parameters
    ----------
    graph : Graph
        The graph to check.
    path : str
        Field path of the graph in the input, used as the prefix of every issue.
    sharding_rules : bool
        Check a pinned ``sharding`` against the choices the LLM inter-chip pass allows
        (``dfsearch.kernels.graph.sharding_choices``). Non-LLM workloads are never sharded.

    Returns
    -------
    list of Issue
        Empty when the graph is valid.
    """
    s = IssueSink()
    if not graph.kernels:
        s.add(f"{path}.kernels", "must hold at least one kernel.")
    first: dict[str, int] = {}
    duplicates = False
    for i, k in enumerate(graph.kernels):
        kp = _kernel_path(path, i, k)
        if not k.name:
            s.add(f"{path}.kernels[{i}].name", "must not be empty.")
        if k.name in first:
            duplicates = True
            s.add(
                f"{kp}.name",
                f"is already used by {path}.kernels[{first[k.name]}]; "
                "kernel names must be unique.",
            )
        else:
            first[k.name] = i
        _check_kernel(s, kp, k, sharding_rules)
    _check_connections(s, graph, path, first, duplicates)
    return s.issues


@by_identity_and_key(64)
def _graph_issues(graph: Graph, sharding_rules: bool) -> tuple[Issue, ...]:
    """``validate_graph(graph, sharding_rules=...)``, once per graph object (a study's points
    share their generated graph) and flag: it reads nothing else."""
    return tuple(validate_graph(graph, sharding_rules=sharding_rules))


def _check_expert(s: IssueSink, kp: str, k: Kernel) -> None:
    """num_expert >= 0; an expert all-to-all needs the experts it spreads (docs/model.md,
    "Mixture of experts")."""
    s.ge(f"{kp}.num_expert", k.num_expert)
    expert_a2a = Collective.EXPERT_ALL_TO_ALL
    if expert_a2a in (k.communication, k.communication2) and k.num_expert < 1:
        s.add(f"{kp}.num_expert", "must be >= 1 on a kernel whose communication is "
              f"'expert_all_to_all' (it runs over the experts' chips). Got {show(k.num_expert)} "
              "instead.")  # fmt: skip


def _check_kernel(s: IssueSink, kp: str, k: Kernel, sharding_rules: bool) -> None:
    for dim in ("outer", "m", "k", "n"):
        s.ge(f"{kp}.{dim}", getattr(k, dim), 1)
    for f in ("outer", "m", "k", "n", "num_input", "num_expert", "config", "id", *_KERNEL_BYTES):
        _within(s, f"{kp}.{f}", getattr(k, f), f"graph.kernels[].{f}")
    _check_expert(s, kp, k)
    if not k.kind.has_k and k.k != 1:
        s.add(
            f"{kp}.k",
            f"must be 1 for an {k.kind.label} kernel (it has no k dimension). "
            f"Got {show(k.k)} instead.",
        )
    if k.weight_bytes is not None and not k.kind.has_weight:
        s.add(f"{kp}.weight_bytes", f"{_ONLY_WEIGHT}{k.kind.label!r}.")
    if k.input2_bytes is not None and k.kind.num_inputs != 2:
        s.add(
            f"{kp}.input2_bytes",
            "is only allowed on two-input kernels ('gemm', 'elementwise2'); "
            f"this kernel is {k.kind.label!r}.",
        )
    for flag in ("skip_weight", "use_effective_stage"):
        if getattr(k, flag) and not k.kind.has_weight:
            s.add(f"{kp}.{flag}", f"{_ONLY_WEIGHT}{k.kind.label!r}.")
    for size in ("input_bytes", "input2_bytes", "weight_bytes", "output_bytes", "saved_bytes"):
        s.ge_opt(f"{kp}.{size}", getattr(k, size))
    for size in (
        "communication_bytes",
        "communication2_bytes",
        "memory_bytes",
        "sram_extra_bytes",
        "dram_extra_bytes",
    ):
        s.ge(f"{kp}.{size}", getattr(k, size))
    s.ge(f"{kp}.num_input", k.num_input)
    if k.config < -1:
        s.add(f"{kp}.config", f"must be >= 0, or -1 (free). Got {show(k.config)} instead.")
    if k.tiling is Dim.K and not k.kind.has_k:
        s.add(
            f"{kp}.tiling",
            f"cannot be 'k' for an {k.kind.label} kernel (it has no k dimension).",
        )
    if k.sharding is None or k.sharding is Dim.NO:
        if k.sharding is Dim.NO and sharding_rules and k.kind.has_weight:
            _check_choice(s, kp, k)
        return
    if k.tiling is not Dim.NO and _dim_group(k.tiling) is _dim_group(k.sharding):
        s.add(
            f"{kp}:",
            f"tiling {k.tiling.label!r} and sharding {k.sharding.label!r} name the same dimension "
            "('outer' and 'm' count as one); a tiled dimension cannot be sharded.",
        )
        return
    if sharding_rules:
        _check_choice(s, kp, k)


def _check_choice(s: IssueSink, kp: str, k: Kernel) -> None:
    if any(getattr(k, d) < 1 for d in ("outer", "m", "k", "n")):
        return  # already reported
    allowed = sharding_choices(replace(k, sharding=None))
    if not allowed:
        s.add(f"{kp}.sharding", f"cannot be pinned: this kernel {_NO_CHOICE}")
    elif k.sharding not in allowed:
        s.add(
            f"{kp}.sharding",
            f"must be one of {quote_list(d.label for d in allowed)} for this kernel "
            "(no size-1 or tiled dimension, 'outer' whenever outer > 1, "
            "never 'none' with a weight). "
            f"Got {k.sharding.label!r} instead.",  # type: ignore[union-attr]
        )


def _check_connections(
    s: IssueSink, graph: Graph, path: str, first: dict[str, int], duplicates: bool
) -> None:
    names = list(first)
    edges: list[tuple[str, str]] = []
    complete = not duplicates
    for j, c in enumerate(graph.connections):
        cp = f"{path}.connections[{j}]"
        _within(s, f"{cp}.id", c.id, "graph.connections[].id")
        ok = True
        for end in ("src", "dst"):
            name = getattr(c, end)
            if name not in first:
                ok = False
                s.add(f"{cp}.{end}", f"{name!r} is not a kernel name{_did_you_mean(name, names)}")
        if not ok:
            continue
        if c.src == c.dst:
            s.add(f"{cp}:", f"connects {c.src!r} to itself; a dataflow graph must be acyclic.")
            continue
        edges.append((c.src, c.dst))
    if complete and edges:
        for cycle in _cycles(names, edges):
            s.add(path, f"has a cycle: {' -> '.join(cycle)}. A dataflow graph must be acyclic.")


def _cycles(names: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one kernel."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(names)
    g.add_edges_from(edges)
    order = {n: i for i, n in enumerate(names)}
    out = []
    comps = [c for c in nx.strongly_connected_components(g) if len(c) > 1]
    for comp in sorted(comps, key=lambda c: min(order[n] for n in c)):
        sub = g.subgraph(comp)
        start = min(comp, key=order.__getitem__)
        cyc = nx.find_cycle(sub, source=start)
        out.append([u for u, _ in cyc] + [cyc[0][0]])
    return out


# --------------------------------------------------------------------------- spec
def validate_spec(spec: Spec) -> list[Issue]:
    """All semantic checks of a complete spec (see ``docs/spec.md``, "Validation rules").

    Parameters
    ----------
    spec : Spec
        A spec built by any loader.

    Returns
    -------
    list of Issue
        Every problem found; empty when the spec is valid.
    """
    return validate_parts(
        graph=spec.graph,
        system=spec.system,
        cost=spec.cost,
        execution=spec.execution,
        workload=spec.workload,
        search=spec.search,
        training=spec.training,
        speculative=spec.speculative,
    )


def validate_parts(
    *,
    graph: Graph | None = None,
    system: System | None = None,
    cost: Cost | None = None,
    execution: Execution | None = None,
    workload: Workload | None = None,
    search: SearchSettings | None = None,
    training: Training | None = None,
    speculative: Speculative | None = None,
) -> list[Issue]:
    """Like :func:`validate_spec`, for the parts that could be built; ``None`` parts are skipped
    together with every rule that needs them. Loaders use it to report parse errors and
    semantic errors of the other sections in one go.
    """
    s = IssueSink()
    model = model_of(workload) if workload is not None else None
    sharded = model is not None and model.shards_across_chips
    if model is not None:
        model.issues(s, workload)
    graph_ok = False
    if graph is not None:
        graph_issues = list(_graph_issues(graph, model is None or sharded))
        graph_ok = not graph_issues
        s.issues += graph_issues
        if model is not None and not sharded:
            for i, k in enumerate(graph.kernels):
                if k.sharding not in (None, Dim.NO):
                    got = k.sharding.label  # type: ignore[union-attr]
                    s.add(
                        f"{_kernel_path('graph', i, k)}.sharding",
                        f"must be 'none' or omitted: a {workload.kind.label} workload is never "
                        f"sharded across chips. Got {got!r} instead.",
                    )
    if system is not None:
        _check_system(s, system)
        if workload is not None:
            _check_network_for_workload(s, system, workload)
    if cost is not None:
        _check_cost(s, cost, system)
    if execution is not None:
        _check_execution(s, execution)
        if graph is not None and graph.kernels:
            _check_graph_execution(s, graph, execution, order=graph_ok)
            if execution.compute_util == 0:
                _check_kernel_work(s, graph)
            if sharded and not execution.skip_inter_chip_optimization:
                s.issues += _llm_tiling_issues(graph)
    if graph is not None and graph_ok and workload is not None:
        _check_pieces(s, graph, workload)
        _check_partition(s, graph, workload, system)
        if search is not None and search.stage_cuts:
            _check_stage_cuts(s, graph, workload)
    if graph is not None and graph_ok and execution is not None:
        s.issues += pin_issues(graph, execution)
    if training is not None:
        _check_training(s, training, graph, workload)
    if speculative is not None:
        speculative_issues(s, speculative, workload, search)
    if search is not None:
        s.ge("search.time_limit_s", search.time_limit_s)
        s.gt("search.max_evaluations", search.max_evaluations)
        _within(s, "search.max_evaluations", search.max_evaluations)
        s.ge("search.latency_bound_ms", search.latency_bound_ms)
        s.gt("search.jobs", search.jobs)
        _within(s, "search.jobs", search.jobs)
        if not 0 <= search.gap < 1:
            s.add("search.gap", f"must be >= 0 and < 1 (a relative gap: 0.01 = 1 %). Got {show(search.gap)} instead.")
        _within(s, "search.latency_bound_ms", search.latency_bound_ms)
        if model is not None:
            model.objective_issues(s, search, workload)
        issue = seed_issue("search.seed", search.seed)
        if issue is not None:
            s.issues.append(issue)
        for kind in ("strategy", "assignment"):
            issue = strategy_issue(f"search.{kind}", kind, getattr(search, kind))
            if issue is not None:
                s.issues.append(issue)
    return s.issues


def _check_partition(s: IssueSink, graph: Graph, workload: Workload, system: System | None) -> None:
    """DFModel's pipeline partitioning (``workload.partition_graph``): a fixed pp size no
    larger than the kernels (every partition holds one)."""
    if not partitions_graph(workload):
        return
    if system is None:
        return
    for i, d in enumerate(system.network):
        if d.parallelism is Parallelism.PP and d.size > len(graph.kernels):
            s.add(f"system.network[{i}].size", f"must be <= the {len(graph.kernels)} kernels of "
                  "the graph: it is the pipeline (pp) size, and workload.partition_graph gives "
                  f"every pipeline partition at least one kernel. Got {d.size} instead.")


def _check_stage_cuts(s: IssueSink, graph: Graph, workload: Workload) -> None:
    """``search.stage_cuts = true``: only a whole model in pipeline pieces has stage boundaries
    to cut (``cost/stage_cuts.py``)."""
    staged = (workload.kind.label == "llm" and not getattr(workload, "partition_graph", False)
              and getattr(workload, "num_layer", 1) > getattr(workload, "num_layer_in_graph", 1))  # fmt: skip
    try:
        staged = staged and split_pieces(graph).has_ends
    except PiecesError:
        return  # _check_pieces reports it
    if not staged:
        s.add("search.stage_cuts", "must be false or omitted: only a whole model in pipeline "
              "stages (an LLM graph with an embedding or LM head whose layers run more than once "
              "per micro-batch, num_layer > num_layer_in_graph, without partition_graph) has "
              "stage boundaries to cut inside a layer. Got true instead.")


def _check_pieces(s: IssueSink, graph: Graph, workload: Workload) -> None:
    """A stacked LLM graph run more than once per micro-batch: its kernels outside the layers
    must be ends of the model (``kernels/pieces.py``)."""
    if getattr(workload, "partition_graph", False):
        return  # the graph is cut into partitions, not run in pieces
    if getattr(workload, "num_layer", 1) <= getattr(workload, "num_layer_in_graph", 1):
        return
    try:
        split_pieces(graph)
    except PiecesError as e:
        s.add("graph.kernels", f"{e}.")


def _check_training(
    s: IssueSink, t: Training, graph: Graph | None, workload: Workload | None
) -> None:
    """Byte counts per parameter in [0, 64]; the training memory model only for an LLM
    training graph (``auto`` picks it there)."""
    for f in ("grad_bytes", "optimizer_bytes"):
        s.ge(f"training.{f}", getattr(t, f))
        _within(s, f"training.{f}", getattr(t, f))
    if t.zero_stage not in (0, 1, 2, 3):
        s.add("training.zero_stage", f"must be 0, 1, 2, 3 or \"auto\". Got {show(t.zero_stage)} "
              "instead.")
    s.ge("training.interleave", t.interleave, 1)
    _within(s, "training.interleave", t.interleave)
    if t.memory_model is not MemoryModel.TRAINING or workload is None:
        return
    if not model_of(workload).counts_training_memory:
        s.add("training.memory_model", "can be 'training' only for an llm workload (it "
              f"counts a transformer's training memory). Got 'training' for a "
              f"{workload.kind.label} workload instead.")  # fmt: skip
    elif graph is not None and not graph.is_training:
        s.add("training.memory_model", "can be 'training' only for a training graph (one with "
              "backward kernels); this graph is forward-only. Got 'training' instead.")  # fmt: skip


def strategy_issue(path: str, kind: str, name: object) -> Issue | None:
    """The issue of a search strategy name that is not registered (``kind`` "strategy": an
    outer strategy, "assignment": an assignment strategy; ``path`` is the spec field or the
    CLI option), else ``None``.

    >>> strategy_issue("search.strategy", "strategy", "enumerated").render()
    "search.strategy must be one of 'auto', 'enumerate', 'optuna'; did you mean 'enumerate'? Got 'enumerated' instead."
    """
    names = list(OUTER_STRATEGY_NAMES if kind == "strategy" else ASSIGNMENT_STRATEGY_NAMES)
    if isinstance(name, str) and name in names:
        return None
    hint = _did_you_mean(name, names) if isinstance(name, str) else "."
    return Issue(path, f"must be one of {quote_list(names)}{hint} Got {show(name)} instead.")


#: Seeds numpy and optuna accept.
MAX_SEED = 2**32 - 1


def seed_issue(path: str, seed: object) -> Issue | None:
    """The issue of a random seed outside [0, 2**32 - 1] (``path`` is ``search.seed`` or the
    CLI's ``--seed``), else ``None``.

    >>> seed_issue("search.seed", -1).render()
    'search.seed must be an integer in [0, 2**32 - 1]. Got -1 instead.'
    """
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED:
        return None
    return Issue(path, f"must be an integer in [0, 2**32 - 1]. Got {show(seed)} instead.")


def _check_system(s: IssueSink, sy: System) -> None:
    s.ge("system.num_chip", sy.num_chip, 1)
    a = sy.accelerator
    for f in ("cores", "systolic_width", "systolic_height"):
        s.gt(f"system.accelerator.{f}", getattr(a, f))
    s.gt("system.accelerator.freq_GHz", a.freq_GHz)
    s.ge("system.accelerator.sram_bytes", a.sram_bytes)
    if a.pmu > 0:
        s.add(
            "system.accelerator.pmu",
            "must be 0: place-and-route mode (accelerator.pmu > 0) is not supported. "
            f"Got {a.pmu} instead.",
        )
    else:
        s.ge("system.accelerator.pmu", a.pmu)
    s.ge("system.accelerator.pmu_bytes", a.pmu_bytes)
    s.ge("system.accelerator.link_latency_ns", a.link_latency_ns)
    m = sy.memory
    s.gt("system.memory.dram_bw_GBps", m.dram_bw_GBps)
    s.ge("system.memory.dram_bytes", m.dram_bytes)
    s.ge("system.memory.second_dram_bw_GBps", m.second_dram_bw_GBps)
    s.ge("system.memory.second_dram_bytes", m.second_dram_bytes)
    if m.second_dram_bytes > 0 and m.second_dram_bw_GBps == 0:
        s.add(
            "system.memory.second_dram_bw_GBps",
            "must be > 0 when system.memory.second_dram_bytes > 0. "
            f"Got {show(m.second_dram_bw_GBps)} instead.",
        )
    s.ge("system.hbd", sy.hbd)
    for f in ("num_chip", "hbd"):
        _within(s, f"system.{f}", getattr(sy, f))
    for f in ("cores", "systolic_width", "systolic_height", "sram_bytes", "freq_GHz",
              "pmu_bytes", "link_latency_ns"):  # fmt: skip
        _within(s, f"system.accelerator.{f}", getattr(a, f))
    for f in ("dram_bw_GBps", "dram_bytes", "second_dram_bw_GBps", "second_dram_bytes"):
        _within(s, f"system.memory.{f}", getattr(m, f))
    n = len(sy.network)
    if n < 1:
        s.add(
            "system.network",
            f"must have at least 1 dimension ([[system.network]] tables). Got {n} instead.",
        )
        return
    for i, d in enumerate(sy.network):
        s.gt(f"system.network[{i}].link_bw_GBps", d.link_bw_GBps)
        s.ge(f"system.network[{i}].size", d.size)
        _within(s, f"system.network[{i}].link_bw_GBps", d.link_bw_GBps)
        _within(s, f"system.network[{i}].size", d.size)
        if d.link_latency_ns is not None:
            s.ge(f"system.network[{i}].link_latency_ns", d.link_latency_ns)
            _within(s, f"system.network[{i}].link_latency_ns", d.link_latency_ns)
        if d.bus_efficiency is not None:
            s.gt(f"system.network[{i}].bus_efficiency", d.bus_efficiency)
            _within(s, f"system.network[{i}].bus_efficiency", d.bus_efficiency)
        _check_busbw_curve(s, i, d)
    topo = tuple(d.topology for d in sy.network)
    if not allowed_network(topo):
        s.add("system.network", _network_message(topo))


def _check_busbw_curve(s: IssueSink, i: int, d: NetworkDim) -> None:
    """A measured all-reduce curve: as many bandwidths as sizes, all positive, sizes
    strictly increasing."""
    sizes, bws = d.all_reduce_sizes_bytes, d.all_reduce_busbw_GBps
    path = f"system.network[{i}]"
    if len(sizes) != len(bws):
        s.add(f"{path}.all_reduce_busbw_GBps", f"must have one value per entry of "
              f"all_reduce_sizes_bytes ({len(sizes)}). Got {len(bws)} instead.")
        return
    for name, values in (("all_reduce_sizes_bytes", sizes), ("all_reduce_busbw_GBps", bws)):
        for j, v in enumerate(values):
            s.gt(f"{path}.{name}[{j}]", v)
    for j in range(1, len(sizes)):
        if not sizes[j] > sizes[j - 1]:
            s.add(f"{path}.all_reduce_sizes_bytes[{j}]", f"must be larger than the size "
                  f"before it ({sizes[j - 1]:g}: sizes increase). Got {sizes[j]:g} instead.")


def _network_message(topo: tuple[Topology, ...]) -> str:
    """Which networks are allowed (docs/model.md, Network topologies); a kind DFModel lacks
    is explained only when the network uses it."""
    dfmodel = ", ".join(f"{k.short} = {k.label}" for k in KINDS.values() if k.dfmodel)
    text = (
        f"topologies must form one of DFModel's {len(TOPOLOGY_VARIANTS)} variants: "
        f"{', '.join(TOPOLOGY_VARIANTS)} (one word per dimension, in order; {dfmodel})"
    )
    extra = [k for k in dict.fromkeys(kinds_of(topo)) if k.dfmodel is None]
    if extra:
        text += ", where " + ", ".join(
            f"{k.short if k.short == k.label else f'{k.short} ({k.label})'} may take the "
            f"place of {k.stands_for.short}"
            for k in extra
        )
    if len(topo) > MAX_GRID_DIMS:
        text = (f"of more than {MAX_GRID_DIMS} dimensions must not all be direct (ring, mesh): "
                f"a grid has bisection rules for 2 and 3 dimensions only; any mix of kinds with "
                f"a switch or fc dimension is allowed")  # fmt: skip
        return f"topologies {text}. Got {network_name(topo)} instead."
    return f"{text}. Got {network_name(topo)} instead."


def _check_network_for_workload(s: IssueSink, sy: System, w: Workload) -> None:
    """The workload's network rules (``WorkloadModel.network_issues``), once the network
    itself has a valid dimension count and chip count."""
    if not sy.network or sy.num_chip < 1:
        return
    model_of(w).network_issues(s, sy, w)


def _check_cost(s: IssueSink, c: Cost, system: System | None) -> None:
    for f in (
        "link_price_per_GBps",
        "switch_price_per_GBps",
        "dram_price_per_GBps",
        "chip_price",
        "switch_power_J_per_GB",
        "dram_power_J_per_GB",
        "chip_power_W",
    ):
        s.ge(f"cost.{f}", getattr(c, f))
        _within(s, f"cost.{f}", getattr(c, f))
    for i, v in enumerate(c.link_power_J_per_GB):
        s.ge(f"cost.link_power_J_per_GB[{i}]", v)
        _within(s, f"cost.link_power_J_per_GB[{i}]", v)
    if system is not None and 1 <= len(system.network) < len(c.link_power_J_per_GB):
        s.add(
            "cost.link_power_J_per_GB",
            f"must have at most one entry per network dimension ({len(system.network)}). "
            f"Got {len(c.link_power_J_per_GB)} entries instead.",
        )


def _check_execution(s: IssueSink, e: Execution) -> None:
    s.ge("execution.word_bytes", e.word_bytes, 1)
    if not 0 <= e.compute_util <= 1:
        s.add(
            "execution.compute_util",
            f"must be between 0 and 1. Got {show(e.compute_util)} instead.",
        )
    if e.num_config < 0 and e.num_config != AUTO:
        s.add("execution.num_config", f"must be >= 0 or 'auto'. Got {e.num_config} instead.")
    s.ge("execution.effective_stage", e.effective_stage)
    for f in ("kernel_overhead_us", "collective_step_us"):
        s.ge(f"execution.{f}", getattr(e, f))
    for f in ("gemm_tile_m", "gemm_tile_n", "gemm_tile_k"):
        s.ge(f"execution.{f}", getattr(e, f), 1)
    s.gt("execution.bus_efficiency", e.bus_efficiency)
    realistic = ("kernel_overhead_us", "gemm_tile_m", "gemm_tile_n", "gemm_tile_k",
                 "bus_efficiency", "collective_step_us")
    for f in ("word_bytes", "num_config", "effective_stage", *realistic):
        _within(s, f"execution.{f}", getattr(e, f))
    if e.model is ExecutionModel.REALISTIC and e.compute_util == 0:
        s.add("execution.compute_util", "must be > 0 with execution.model = 'realistic' (the "
                                        "fraction of peak a large, tile-aligned GEMM reaches). "
                                        "Got 0 (the cycle model) instead.")
    if e.compute_util <= 1:  # > 1 is reported above
        _within(s, "execution.compute_util", e.compute_util)


def _check_kernel_work(s: IssueSink, g: Graph) -> None:
    """Cycle model: a kernel's cycle count must fit the evaluator's int64 (MAX_KERNEL_WORK)."""
    for i, k in enumerate(g.kernels):
        dims = [k.outer, k.m, k.k, k.n] + ([k.num_input] if k.num_input > 1 else [])
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
            continue  # reported by the field rules
        work = math.prod(dims)
        if work > MAX_KERNEL_WORK:
            names = "outer * m * k * n" + (" * num_input" if k.num_input > 1 else "")
            s.add(
                f"{_kernel_path('graph', i, k)}:",
                f"{names} must be <= {bound_text(MAX_KERNEL_WORK)} when "
                "execution.compute_util = 0 (the cycle model counts a kernel's cycles in 64-bit "
                "integers; split the kernel or use compute_util > 0). "
                f"Got {' * '.join(map(str, dims))} = {work:.4g} instead.",
            )


def _one_config_per_kernel(g: Graph, e: Execution) -> str:
    """Why each kernel gets its own configuration ('' if it does not)."""
    n = len(g.kernels)
    if e.style is ExecutionStyle.KERNEL_BY_KERNEL:
        return "execution.style = 'kernel_by_kernel'"
    if e.num_config == 0:
        return "execution.num_config = 0"
    if e.num_config == n:
        return f"execution.num_config = {n} = the number of kernels"
    return ""


def _check_graph_execution(s: IssueSink, g: Graph, e: Execution, *, order: bool) -> None:
    n = len(g.kernels)
    if e.style is ExecutionStyle.KERNEL_BY_KERNEL and e.num_config not in (0, n):
        got = "'auto'" if e.num_config == AUTO else str(e.num_config)
        s.add(
            "execution.num_config",
            f"must be 0 or the number of kernels ({n}) when execution.style = 'kernel_by_kernel'. "
            f"Got {got} instead.",
        )
    if e.num_config > 0:
        for i, k in enumerate(g.kernels):
            if k.config >= e.num_config:
                s.add(
                    f"{_kernel_path('graph', i, k)}.config",
                    f"must be < execution.num_config = {e.num_config}. Got {k.config} instead.",
                )
    why = _one_config_per_kernel(g, e)
    if not why or not order:
        return
    idx = g.index()
    for j, c in enumerate(g.connections):
        a, b = idx.get(c.src), idx.get(c.dst)
        if a is not None and b is not None and a > b:
            s.add(
                f"graph.connections[{j}]:",
                f"{c.src!r} -> {c.dst!r} goes backwards in the kernel file order (kernel {a} -> "
                f"kernel {b}); with one configuration per kernel ({why}) kernels run in file "
                f"order, so list {c.src!r} before {c.dst!r}.",
            )


@by_identity(64)
def _llm_tiling_issues(g: Graph) -> tuple[Issue, ...]:
    """``_check_llm_tiling``'s issues, once per graph object (it reads the graph alone)."""
    sink = IssueSink()
    _check_llm_tiling(sink, g)
    return tuple(sink.issues)


def _check_llm_tiling(s: IssueSink, g: Graph) -> None:
    """Kernels whose sharding the LLM inter-chip pass chooses need a legal one (docs/model.md)."""
    for i, k in enumerate(g.kernels):
        if k.sharding is not None:
            continue
        kp = _kernel_path("graph", i, k)
        if k.tiling is Dim.NO:
            s.add(
                f"{kp}.tiling",
                "must name a dimension for an LLM kernel whose sharding the inter-chip pass "
                "chooses (DFModel's pass needs a tiled dimension); tile one (decode graphs "
                "tile 'n'), pin 'sharding', or set execution.skip_inter_chip_optimization. "
                "Got 'none' instead.",
            )
            continue
        if any(getattr(k, d) < 1 for d in ("outer", "m", "k", "n")):
            continue
        choices = sharding_choices(k)
        legal = [c for c in choices if c is Dim.NO or _dim_group(c) is not _dim_group(k.tiling)]
        if not choices:
            s.add(f"{kp}:", _NO_CHOICE)
        elif not legal:
            s.add(
                f"{kp}:",
                f"has no legal sharding: the inter-chip pass may only pick "
                f"{quote_list(c.label for c in choices)}, which tiling {k.tiling.label!r} "
                "forbids ('outer' and 'm' count as one dimension); tile "
                "another dimension or pin 'sharding'.",
            )


_NO_CHOICE = (
    "has no legal sharding: every dimension of size > 1 is tiled and a gemm_weight kernel cannot "
    "stay unsharded; give it an untiled dimension > 1 or set "
    "execution.skip_inter_chip_optimization."
)
