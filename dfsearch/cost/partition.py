"""DFModel's pipeline partitioning of a multi-layer graph (docs/model.md,
"Pipeline partitioning").

An LLM spec with ``workload.partition_graph`` (the DFModel importer sets it for every input
with ``num_layer_in_graph`` > 1) holds the layers of the whole pipeline in one graph. DFModel
cuts that graph into PP partitions at kernel granularity, prices each partition with its own
inter-chip model, keeps the slowest one and runs its intra-chip model on it alone with
``layers`` = PP: every pipeline stage is taken to be as slow as the slowest partition.

The inter-chip price of a partition c (``partition_problem``):

* compute: the FLOP model with only M divided by TP, whatever the kernel's sharding, and the
  outer (heads) dimension left out: FLOP_k = ceil(M·N / TP) for a SIMD kernel,
  ceil(2·M·N / TP)·K for a systolic one (with M < TP, one row: N and 2·N·K), time
  sum FLOP / (compute_util · peak);
* collectives: the bytes of the kernels' all-reduces (a K-sharded kernel: its output) and of
  the re-layouts of the edges they produce, *each multiplied by the sum* of the all-reduce,
  all-to-all and all-gather ratios of the TP group (DFModel's code multiplies the one byte
  total by all three: a quirk we keep, since it decides the cut);
* p2p: the bytes of every edge alive across c (produced in c or before, consumed after c)
  over the pipeline dimension's link bandwidth;

latency(c) = compute + collectives + p2p (no overlap). ``plan/partition_cut.py`` finds the
partitioning with the fastest slowest partition, ties broken by the fewest bytes sent.

Deliberate differences from DFModel's program, none of which changes its two published runs:
the sharding is the byte-minimal one of the inter-chip pass (DFModel optimises it jointly,
but its partition price does not depend on it except through these bytes, and on DFModel's
graphs the byte-minimal sharding is minimal in every partition); a partition must hold at
least one kernel (DFModel allows empty ones, and its slowest could then be empty); the FLOP
model model exactly (in its cycle-model branch the kernels of a partition share the cores; we price
each on all the cores, one after another, and the cut is then not claimed optimal);
kernel-by-kernel inputs are partitioned like dataflow ones (DFModel pins partition = kernel
index there, which no input with fewer partitions than kernels satisfies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from dfsearch.codes import Collective, Dim, ExecutionModel, ExecutionStyle, Phase
from dfsearch.kernels.graph import GraphStructure, downstream_layout, relayout, upstream_layout
from dfsearch.kernels.pieces import subgraph
from dfsearch.spec import Spec
from dfsearch.system.fabric import Fabric
from dfsearch.system.placement import Placement
from dfsearch.workloads.llm import partitions_graph

__all__ = ["Partition", "PartitionPlan", "PartitionProblem", "is_partitioned", "partition_problem",
           "plan_of", "kept_spec", "partition_flop"]


@dataclass(frozen=True, slots=True)
class Partition:
    """One pipeline partition of the graph, priced by DFModel's inter-chip model."""

    kernels: tuple[str, ...]
    compute_ns: float
    collective_ns: float
    collective_bytes: float  #: all-reduce and re-layout bytes (each priced at all 3 ratios)
    p2p_ns: float
    alive_bytes: float  #: bytes of the edges alive across the partition (sent on)
    latency_ns: float

    def to_json(self) -> dict[str, Any]:
        return {"kernels": list(self.kernels), "compute_ns": self.compute_ns,
                "collective_ns": self.collective_ns, "collective_bytes": self.collective_bytes,
                "p2p_ns": self.p2p_ns, "cut_bytes": self.alive_bytes,
                "latency_ns": self.latency_ns}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """How the graph is cut: every partition, the slowest (``kept``, the one every stage
    runs), the full graph's sharding and partition of every kernel."""

    partitions: tuple[Partition, ...]
    kept: int
    assignment: tuple[int, ...]  #: partition of every kernel of the spec's graph
    sharding: tuple[Dim, ...]  #: of every kernel of the spec's graph
    names: tuple[str, ...]  #: the kept partition's kernels (the evaluation's decision maps them)
    sent_bytes: float  #: sum over edges of bytes x partitions crossed
    exact: bool  #: the partitioning is optimal for DFModel's price (every ideal searched)
    lower_bound_ns: float  #: no partitioning has a faster slowest partition
    given: bool = False  #: read from a mapping file, not searched

    @property
    def slowest_ns(self) -> float:
        return self.partitions[self.kept].latency_ns

    def mapping(self, spec: Spec) -> dict[str, Any]:
        """The partition parts of a mapping file: ``partition`` and ``sharding`` of every
        kernel of the graph (``config`` maps the kept partition's kernels only)."""
        names = [k.name for k in spec.graph.kernels]
        return {"partition": dict(zip(names, self.assignment)),
                "sharding": {n: s.label for n, s in zip(names, self.sharding)}}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "partitions": [p.to_json() for p in self.partitions],
            "kept": self.kept, "slowest_ns": self.slowest_ns, "sent_bytes": self.sent_bytes,
            "exact": self.exact, "lower_bound_ns": self.lower_bound_ns, "given": self.given,
            "latency_formula": "compute + collective bytes x (rho_AR + rho_A2A + rho_AG) "
                               "+ cut bytes / pp link bandwidth",
        }  # fmt: skip


@dataclass(frozen=True)
class PartitionProblem:
    """A DAG to cut into ``parts`` partitions (``plan/partition_cut.py``, module docstring)."""

    weight: tuple[float, ...]  #: w_k, ns
    edges: tuple[tuple[int, int], ...]  #: (src, dst) kernel indices
    edge_bytes: tuple[float, ...]  #: bytes of each edge's tensor
    beta: float  #: ns per byte sent to a later partition
    parts: int
    lo: tuple[int, ...]  #: smallest partition each kernel may take
    hi: tuple[int, ...]  #: largest

    @property
    def n(self) -> int:
        return len(self.weight)

    def cost(self, part: tuple[int, ...]) -> tuple[list[float], list[float]]:
        """(cost of every partition, bytes alive across every partition) of an assignment."""
        w = [0.0] * self.parts
        alive = [0.0] * self.parts
        for k, p in enumerate(part):
            w[p] += self.weight[k]
        for (s, d), b in zip(self.edges, self.edge_bytes):
            for c in range(part[s], part[d]):
                alive[c] += b
        return [w[c] + self.beta * alive[c] for c in range(self.parts)], alive


def is_partitioned(spec: Spec) -> bool:
    """True for DFModel's reading of a multi-layer graph (``workload.partition_graph``)."""
    return spec.piece is None and partitions_graph(spec.workload)


def partition_flop(spec: Spec, tp: int) -> list[int]:
    """Every kernel's FLOP in DFModel's partition price (module docstring): M / TP, no outer."""
    out = []
    for k in spec.graph.kernels:
        m, n, kk = k.m, k.n, k.k
        if m >= tp:
            simd = -(-m * n // tp)
            gemm = -(-2 * m * n // tp) * kk
        else:  # M_sharded >= 1 row
            simd, gemm = n, 2 * n * kk
        out.append(simd if k.type.name == "SIMD" else gemm)
    return out


def _out_bytes(spec: Spec, i: int) -> float:
    k = spec.graph.kernels[i]
    if k.output_bytes is not None and k.output_bytes >= 0:
        return float(k.output_bytes)
    return float(k.rows) * k.n * spec.execution.word_bytes


def partition_problem(spec: Spec, shape: tuple[int, ...], placement: Placement | None,
                      sharding: tuple[Dim, ...]) -> tuple[Any, dict[str, Any]]:
    """The ``PartitionProblem`` of the spec's graph on ``shape`` (module docstring), and the per-kernel parts of its weights (for the report)."""
    sysm, ex = spec.system, spec.execution
    # DFModel's inter-chip pass: flat TP ratios (no HBD, no reduce-scatter + all-gather)
    fabric = Fabric.build(replace(sysm, hbd=0), tuple(shape), placement, spec.quirks)
    grp, r = fabric.groups(), fabric.ratios()
    ratio = r.all_reduce + r.all_to_all + r.all_gather
    kernels = spec.graph.kernels
    st = GraphStructure.of(spec.graph)
    flop = partition_flop(spec, grp.tp)
    if ex.compute_util > 0:
        compute = [f * (1.0 / ex.compute_util) / sysm.accelerator.peak_gflops for f in flop]
    else:
        compute = [_cycle_ns(spec, k, grp.tp) for k in kernels]
    coll = [_out_bytes(spec, i) if sharding[i] is Dim.K and not ex.skip_inter_chip_optimization
            else 0.0 for i in range(len(kernels))]  # fmt: skip
    edge_bytes = []
    for e, (s, d) in enumerate(zip(st.src, st.dst)):
        by = _out_bytes(spec, s)
        edge_bytes.append(by)
        typ = relayout(upstream_layout(sharding[s]),
                       downstream_layout(kernels[d], st.operand[e], sharding[d]))
        if typ in (Collective.ALL_GATHER, Collective.ALL_TO_ALL):
            coll[s] += by
    weight = [c + ratio * b for c, b in zip(compute, coll)]
    parts = grp.pp
    lo, hi = [0] * len(kernels), [parts - 1] * len(kernels)
    if ex.style is ExecutionStyle.DATAFLOW:
        training = any(k.phase is Phase.BWD for k in kernels)
        f, b = (parts // 2 - 1, parts // 2) if parts % 2 == 0 else (parts // 2, parts // 2)
        for i, k in enumerate(kernels):
            if k.config >= 0:  # DFModel pins the kernel's partition to its config
                lo[i] = max(lo[i], k.config)
                hi[i] = min(hi[i], k.config)
            if training and k.phase is Phase.FWD:
                hi[i] = min(hi[i], f)
            elif training and k.phase is Phase.BWD:
                lo[i] = max(lo[i], b)
    beta = r.p2p if parts > 1 else 0.0
    problem = PartitionProblem(
        weight=tuple(weight), edges=tuple(zip(st.src, st.dst)), edge_bytes=tuple(edge_bytes),
        beta=beta, parts=parts, lo=tuple(lo), hi=tuple(hi),
    )  # fmt: skip
    return problem, {"compute": compute, "flop": flop, "coll_bytes": coll, "ratio": ratio,
                     "exact_price": ex.compute_util > 0 and ex.model is ExecutionModel.DFMODEL}


def _cycle_ns(spec: Spec, k: Any, tp: int) -> float:
    """The cycle model's time of one kernel on all the chip's cores (M / TP rows, no outer),
    the best split of the cores into lanes x stages: the additive price of a partition in the
    cycle model, where DFModel shares the cores among the partition's kernels (module
    docstring: not exact)."""
    a = spec.system.accelerator
    rows = max(k.m / tp, 1.0)
    if k.type.name == "SIMD":
        return math.ceil(rows / (a.cores * a.systolic_width)) * k.n / a.freq_GHz
    best = math.inf
    for lanes in range(1, a.cores + 1):
        stages = a.cores // lanes
        m = math.ceil(rows / (lanes * a.systolic_width))
        n = math.ceil(k.n / (stages * a.systolic_height))
        best = min(best, m * n * k.k)
    return best / a.freq_GHz


def plan_of(spec: Spec, problem: Any, parts_info: dict[str, Any], sharding: tuple[Dim, ...],
            assignment: tuple[int, ...], *, exact: bool, lower_bound_ns: float,
            given: bool = False) -> PartitionPlan:
    """The plan of an assignment: every partition priced (its sums taken as DFModel takes
    them: total FLOP x 1 / compute_util / peak), the slowest kept (the first on a tie)."""
    ex, sysm = spec.execution, spec.system
    names = [k.name for k in spec.graph.kernels]
    costs, alive = problem.cost(assignment)
    parts = []
    for c in range(problem.parts):
        members = [i for i, p in enumerate(assignment) if p == c]
        flop = sum(parts_info["flop"][i] for i in members)
        if ex.compute_util > 0:
            compute = flop * (1.0 / ex.compute_util) / sysm.accelerator.peak_gflops
        else:
            compute = sum(parts_info["compute"][i] for i in members)
        by = sum(parts_info["coll_bytes"][i] for i in members)
        coll = by * parts_info["ratio"]
        p2p = alive[c] * problem.beta
        parts.append(Partition(kernels=tuple(names[i] for i in members), compute_ns=compute,
                               collective_ns=coll, collective_bytes=by, p2p_ns=p2p,
                               alive_bytes=alive[c], latency_ns=compute + coll + p2p))  # fmt: skip
    top = max(p.latency_ns for p in parts)
    tol = 1e-12 * abs(top)
    kept = next(c for c, p in enumerate(parts) if p.latency_ns >= top - tol)
    sent = sum(b * (assignment[d] - assignment[s])
               for (s, d), b in zip(problem.edges, problem.edge_bytes))  # fmt: skip
    del costs
    return PartitionPlan(partitions=tuple(parts), kept=kept, assignment=tuple(assignment),
                         sharding=tuple(sharding), names=parts[kept].kernels,
                         sent_bytes=float(sent), exact=exact,
                         lower_bound_ns=min(lower_bound_ns, top), given=given)  # fmt: skip


def kept_spec(spec: Spec, plan: PartitionPlan, pp: int) -> Spec:
    """The spec DFModel's intra-chip pass runs: the kept partition's kernels (their sharding
    pinned to the full graph's) and the edges between them, ``layers`` = PP (one partition per
    stage: ``num_layer`` = PP, one layer per graph execution)."""
    members = tuple(i for i, p in enumerate(plan.assignment) if p == plan.kept)
    ks = tuple(replace(k, sharding=plan.sharding[i]) if i in set(members) else k
               for i, k in enumerate(spec.graph.kernels))  # fmt: skip
    graph = subgraph(replace(spec.graph, kernels=ks), members)
    wl = replace(spec.workload, num_layer=pp, num_layer_in_graph=1, partition_graph=False)
    return replace(spec, graph=graph, workload=wl)


def infeasible_partition(spec: Spec, shape: tuple[int, ...], pp: int, why: str) -> str:
    return (f"shape {shape}: no cut of the {len(spec.graph.kernels)} kernels into PP = {pp} "
            f"partitions: {why}")
