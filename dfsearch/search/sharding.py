"""Inter-chip sharding, solved exactly (docs/model.md, "Inter-chip sharding").

Every kernel picks which dimension is split across the TP group. The objective is DFModel's:
all-reduce bytes of K-sharded kernels plus the re-layout bytes of every connection (raw bytes,
whatever the collective). Ties are broken by end-to-end time through its additive part: the
per-tile compute time of every kernel (a replicated kernel does TP times the work) plus the time of every
collective at the ratios of the actual TP group (an all-gather of a shard is cheaper than an
all-reduce of the same bytes), then by the bytes of the buffers kernels produce, then by
DFModel's enum order. The pairwise cost on a DAG whose domains hold at most five values is
minimised by variable elimination along a min-fill order: exact, and instant for the
low-width graphs of real workloads.

>>> from dfsearch.kernels.generators import llm_fwdbwd
>>> g = llm_fwdbwd(hidden=256, num_head=4, head_dim=64, seq=128, word=2)
>>> sol = solve_sharding(g)
>>> sol.bytes == 4 * 256 * 128 * 2   # four all-reduces of h*s*word, no re-layout
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dfsearch.codes import Collective, Dim
from dfsearch.cost.lower import shard_dims
from dfsearch.kernels.graph import (
    GraphStructure,
    downstream_layout,
    relayout,
    upstream_layout,
)
from dfsearch.memo import by_identity_and_key
from dfsearch.search.sharding_plan import Plan, ShardingPlans
from dfsearch.spec import Graph, Spec
from dfsearch.system.fabric import Fabric
from dfsearch.system.placement import Placement
from dfsearch.workloads import model_of

__all__ = ["ShardingSolution", "solve_sharding", "solve_spec_sharding", "sharding_bytes"]

Cost = tuple[float, float, float]
_ZERO: Cost = (0.0, 0.0, 0.0)


def _add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@dataclass(frozen=True, slots=True)
class ShardingSolution:
    sharding: tuple[Dim, ...]
    bytes: float  #: DFModel's inter-chip objective value
    edge_collectives: tuple[Collective, ...]


def _ar_bytes(k, choice: Dim) -> float:
    return (k.output_bytes or 0.0) if choice is Dim.K else 0.0


#: secondary costs: (kernel index, choice) -> (time, bytes); (edge, src choice, collective) -> time
UnaryTime = Callable[[int, Dim], tuple[float, float]]
EdgeTime = Callable[[int, Dim, Collective], float]


def _default_unary(graph: Graph) -> UnaryTime:
    def f(i: int, choice: Dim) -> tuple[float, float]:
        k = graph.kernels[i]
        rep = choice is Dim.NO
        return (k.flop if rep else 0.0, (k.output_bytes or 0.0) if rep else 0.0)

    return f


def sharding_bytes(graph: Graph, sharding: tuple[Dim, ...]) -> float:
    """DFModel's inter-chip objective of a complete sharding."""
    return _bytes(graph, GraphStructure.of(graph), sharding)


def solve_sharding(
    graph: Graph, unary_time: UnaryTime | None = None, edge_time: EdgeTime | None = None,
    plans: ShardingPlans | None = None,
) -> ShardingSolution:
    """The exact byte-minimal sharding; ties broken by ``unary_time``/``edge_time``.

    Without callbacks the tie-break prefers the least replicated FLOP. ``plans``: a cache
    of elimination plans kept by the caller (one search), so that the calls on one graph
    share its structure (choices, re-layouts, elimination order); the result is the same
    with or without it.

    Raises
    ------
    SpecError
        If a kernel has no legal choice (e.g. NO_TILING on an LLM kernel).
    """
    plan = (plans or ShardingPlans()).of(graph)
    domains = plan.domains
    tables = _factors(graph, plan, unary_time or _default_unary(graph), edge_time)
    choice = _eliminate(plan, tables)
    sharding = tuple(domains[i][choice[i]] for i in range(len(graph.kernels)))
    st = plan.structure
    colls = tuple(plan.relayouts[e][(choice[a], choice[b])] for e, (a, b) in enumerate(zip(st.src, st.dst)))
    total = sum(_ar_bytes(k, s) for k, s in zip(graph.kernels, sharding))
    for e, coll in enumerate(colls):
        if coll is not Collective.NONE:
            total += st.tensor_bytes[e]
    return ShardingSolution(sharding, total, colls)


def _bytes(graph: Graph, st: GraphStructure, sharding: tuple[Dim, ...]) -> float:
    total = sum(_ar_bytes(k, s) for k, s in zip(graph.kernels, sharding))
    for e, (a, b) in enumerate(zip(st.src, st.dst)):
        up = upstream_layout(sharding[a])
        down = downstream_layout(graph.kernels[b], st.operand[e], sharding[b])
        if relayout(up, down) is not Collective.NONE:
            total += st.tensor_bytes[e]
    return total


def _factors(graph: Graph, plan: Plan, unary: UnaryTime, edge_time: EdgeTime | None) -> list[list[Cost]]:
    """The cost tables of the plan's factors (flat, in ``itertools.product`` order of their
    scope): one unary factor per kernel (its all-reduce bytes and tie-break time and bytes)
    and one pairwise factor per connection between two kernels (the bytes and time of the
    collective its re-layout needs)."""
    tables: list[list[Cost]] = []
    for i, k in enumerate(graph.kernels):
        row = []
        for d in plan.domains[i]:
            t, b = unary(i, d)
            row.append((_ar_bytes(k, d), t, b))
        tables.append(row)
    st = plan.structure
    for e, cells in plan.edges:
        size = st.tensor_bytes[e]
        row = []
        for da, coll in cells:
            c = size if coll is not Collective.NONE else 0.0
            t = edge_time(e, da, coll) if (edge_time and c) else 0.0
            row.append(_add(_ZERO, (c, t, 0.0)))
        tables.append(row)
    return tables


def _eliminate(plan: Plan, tables: list[list[Cost]]) -> list[int]:
    """Exact variable elimination along the plan's (min-fill) order -> the minimising choice
    index per kernel: every assignment of a step's scope keeps its least cost over the
    eliminated variable (its first least choice), then back-substitution."""
    tables = list(tables)
    args: list[list[int]] = []
    for step in plan.steps:
        mine = [tables[i] for i in step.factors]
        dv, cells = step.size, step.cells
        new: list[Cost] = []
        arg: list[int] = []
        at = 0
        for _ in range(step.assignments):
            best: Cost | None = None
            best_x = 0
            for x in range(dv):
                c0 = c1 = c2 = 0.0  # the sum of the factors' costs, in factor order
                for t, j in zip(mine, cells[at]):
                    q = t[j]
                    c0 += q[0]
                    c1 += q[1]
                    c2 += q[2]
                at += 1
                c = (c0, c1, c2)
                if best is None or c < best:
                    best, best_x = c, x
            new.append(best if best is not None else _ZERO)
            arg.append(best_x)
        tables.append(new)
        args.append(arg)
    choice = [0] * len(plan.domains)
    for step, arg in zip(reversed(plan.steps), reversed(args)):
        flat = 0
        for u, size in zip(step.scope, step.radix):
            flat = flat * size + choice[u]
        choice[step.variable] = arg[flat]
    return choice


def solve_spec_sharding(
    spec: Spec, shape: tuple[int, ...], num_tile: int, placement: Placement | None = None,
    plans: ShardingPlans | None = None, *, memo: bool = True,
) -> ShardingSolution:
    """Sharding of an LLM spec for one shape, tile count and parallelism placement (None:
    the spec's fixed roles): pinned choices kept, the rest byte-minimal with ties broken by
    per-tile compute + collective time at this TP degree. ``plans``: as in
    :func:`solve_sharding`. ``memo``: reuse the solution of an earlier solve on the same
    graph object with the same numbers (``_Inputs``, the kind's ``shard_dims_inputs``), kept
    across searches (``SOLVED_KEPT``); False solves afresh. The solution is the same."""
    ex = spec.execution
    fabric = Fabric.of(spec, shape, placement)  # the spec's quirks, as lowering prices them
    grp, r = fabric.groups(), fabric.ratios()
    rate = (ex.compute_util or 1.0) * spec.system.accelerator.peak_gflops
    inputs = _Inputs(rate, ex.word_bytes, grp.tp, r.all_reduce, r.all_gather, r.all_to_all, num_tile)
    model = model_of(spec.workload)
    rule = model.shard_dims_inputs(spec, shape)
    if rule is None or not memo:
        return _solve_spec(spec.graph, inputs, spec, shape, plans)
    return _solved(spec.graph, (inputs, type(model), rule), spec, shape, plans)


@dataclass(frozen=True, slots=True)
class _Inputs:
    """The numbers a sharding solve reads besides the graph and the kind's shard rule."""

    rate: float  #: compute_util (1 when 0) x peak GFLOP/s
    word: int
    tp: int
    all_reduce: float  #: the TP group's collective ratios
    all_gather: float
    all_to_all: float
    num_tile: int


#: solutions kept across searches: the points of a study share their generated graph
#: (``kernels.generators.generate``) and differ often in what the sharding does not read
SOLVED_KEPT = 4096


@by_identity_and_key(SOLVED_KEPT)
def _solved(graph: Graph, key: tuple, spec: Spec, shape: tuple[int, ...],
            plans: ShardingPlans | None) -> ShardingSolution:  # fmt: skip
    """``_solve_spec`` memoised on the graph and ``key`` = (inputs, the workload kind, what
    its ``shard_dims`` reads of the spec and shape): all that the solution depends on."""
    return _solve_spec(graph, key[0], spec, shape, plans)


def _solve_spec(graph: Graph, inputs: _Inputs, spec: Spec, shape: tuple[int, ...],
                plans: ShardingPlans | None) -> ShardingSolution:  # fmt: skip
    rate, word, num_tile = inputs.rate, inputs.word, inputs.num_tile
    kernels = graph.kernels
    index = graph.index()

    shards: dict[tuple[int, Dim], tuple[int, int, int]] = {}  # this solve's, each once

    def dims(i: int, d: Dim) -> tuple[int, int, int]:
        if (i, d) not in shards:
            shards[(i, d)] = shard_dims(spec, i, d, inputs.tp, num_tile, shape)
        return shards[(i, d)]

    def unary(i: int, d: Dim) -> tuple[float, float]:
        sm, sk, sn = dims(i, d)
        k = kernels[i]
        flop = float(sm) * sn * (1 if k.type.name == "SIMD" else 2 * sk)
        t = flop / rate
        if d is Dim.K and k.communication is Collective.NONE:
            t += inputs.all_reduce * sm * sn * word
        return t, float(sm) * sn * word

    def edge(e: int, d: Dim, coll: Collective) -> float:
        src = index[graph.connections[e].src]
        sm, _, sn = dims(src, d)
        ratio = inputs.all_gather if coll is Collective.ALL_GATHER else inputs.all_to_all
        return ratio * sm * sn * word

    return solve_sharding(graph, unary, edge, plans)
