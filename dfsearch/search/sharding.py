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

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from itertools import product

from dfsearch.codes import Collective, Dim
from dfsearch.cost.lower import shard_dims
from dfsearch.errors import SpecError
from dfsearch.kernels.graph import (
    GraphStructure,
    downstream_layout,
    relayout,
    sharding_choices,
    upstream_layout,
)
from dfsearch.spec import Graph, Spec
from dfsearch.system.fabric import Fabric
from dfsearch.system.placement import Placement

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
    st = GraphStructure.of(graph)
    total = sum(_ar_bytes(k, s) for k, s in zip(graph.kernels, sharding))
    for e, (a, b) in enumerate(zip(st.src, st.dst)):
        up = upstream_layout(sharding[a])
        down = downstream_layout(graph.kernels[b], st.operand[e], sharding[b])
        if relayout(up, down) is not Collective.NONE:
            total += st.tensor_bytes[e]
    return total


def solve_sharding(
    graph: Graph, unary_time: UnaryTime | None = None, edge_time: EdgeTime | None = None
) -> ShardingSolution:
    """The exact byte-minimal sharding; ties broken by ``unary_time``/``edge_time``.

    Without callbacks the tie-break prefers the least replicated FLOP.

    Raises
    ------
    SpecError
        If a kernel has no legal choice (e.g. NO_TILING on an LLM kernel).
    """
    kernels = graph.kernels
    st = GraphStructure.of(graph)
    domains = _domains(graph)
    factors = _factors(graph, st, domains, unary_time or _default_unary(graph), edge_time)
    choice = _eliminate(len(kernels), domains, factors)
    sharding = tuple(domains[i][choice[i]] for i in range(len(kernels)))
    colls = []
    for e, (a, b) in enumerate(zip(st.src, st.dst)):
        up = upstream_layout(sharding[a])
        colls.append(relayout(up, downstream_layout(kernels[b], st.operand[e], sharding[b])))
    return ShardingSolution(sharding, sharding_bytes(graph, sharding), tuple(colls))


#: a cost factor: its scope (sorted kernel indices) and a table {choice indices: cost}
Factor = tuple[tuple[int, ...], dict[tuple[int, ...], Cost]]


def _domains(graph: Graph) -> list[tuple[Dim, ...]]:
    """The legal sharding choices of every kernel."""
    domains: list[tuple[Dim, ...]] = []
    for i, k in enumerate(graph.kernels):
        try:
            dom = sharding_choices(k)
        except ValueError as exc:  # pragma: no cover - validation catches this first
            raise SpecError(f'graph.kernels[{i}] ("{k.name}"): {exc}') from None
        if not dom:
            raise SpecError(
                f'graph.kernels[{i}] ("{k.name}") has no legal sharding choice '
                f"(tiling {k.tiling.label}, dims outer={k.outer} m={k.m} k={k.k} n={k.n})."
            )
        domains.append(dom)
    return domains


def _factors(graph: Graph, st: GraphStructure, domains: list[tuple[Dim, ...]],
             unary: UnaryTime, edge_time: EdgeTime | None) -> list[Factor]:
    """One unary factor per kernel (its all-reduce bytes) and one pairwise factor per
    connected kernel pair (the bytes of the collectives its edges need)."""
    kernels = graph.kernels
    factors: list[Factor] = []
    for i, k in enumerate(kernels):
        table = {}
        for a, d in enumerate(domains[i]):
            t, b = unary(i, d)
            table[(a,)] = (_ar_bytes(k, d), t, b)
        factors.append(((i,), table))
    for e, (a, b) in enumerate(zip(st.src, st.dst)):
        if a == b:
            continue
        size = st.tensor_bytes[e]
        table = {}
        for ia, da in enumerate(domains[a]):
            for ib, db in enumerate(domains[b]):
                coll = relayout(upstream_layout(da), downstream_layout(kernels[b], st.operand[e], db))
                c = size if coll is not Collective.NONE else 0.0
                t = edge_time(e, da, coll) if (edge_time and c) else 0.0
                key = (ia, ib) if a < b else (ib, ia)
                table[key] = _add(table.get(key, _ZERO), (c, t, 0.0))
        factors.append(((min(a, b), max(a, b)), table))
    return factors


def _eliminate(n: int, domains: list[tuple[Dim, ...]], factors: list[Factor]) -> list[int]:
    """Exact variable elimination (min-fill order) -> the minimising choice index per kernel."""
    order = _min_fill_order(n, [f[0] for f in factors])
    # factors by id (new ones get larger ids, so each variable's factors are summed in the
    # order they were created) and the ids of the factors each variable appears in
    table: dict[int, Factor] = dict(enumerate(factors))
    uses: list[set[int]] = [set() for _ in range(n)]
    for i, (scope_i, _) in table.items():
        for u in scope_i:
            uses[u].add(i)
    # eliminate variables one by one, remembering argmin tables for back-substitution
    trace: list[tuple[int, tuple[int, ...], dict[tuple[int, ...], int]]] = []
    for v in order:
        mine = [table.pop(i) for i in sorted(uses[v])]
        for s_, _ in mine:
            for u in s_:
                if u != v:
                    uses[u] -= uses[v]
        scope = tuple(sorted({u for s, _ in mine for u in s if u != v}))
        new: dict[tuple[int, ...], Cost] = {}
        arg: dict[tuple[int, ...], int] = {}
        for assign in product(*(range(len(domains[u])) for u in scope)):
            env = dict(zip(scope, assign))
            best: Cost | None = None
            best_x = 0
            for x in range(len(domains[v])):
                env[v] = x
                c = _ZERO
                for s, t in mine:
                    c = _add(c, t[tuple(env[u] for u in s)])
                if best is None or c < best:
                    best, best_x = c, x
            new[assign] = best if best is not None else _ZERO
            arg[assign] = best_x
        fid = len(factors) + len(trace)
        table[fid] = (scope, new)
        for u in scope:
            uses[u].add(fid)
        trace.append((v, scope, arg))
    choice = [0] * n
    for v, scope, arg in reversed(trace):
        choice[v] = arg[tuple(choice[u] for u in scope)]
    return choice


def _min_fill_order(n: int, scopes: list[tuple[int, ...]]) -> list[int]:
    """Greedy min-fill elimination order of the interaction graph (ties: min degree, index).

    Scores are kept in a heap and recomputed only where an elimination can change them: the
    eliminated variable's neighbours and their neighbours."""
    adj: list[set[int]] = [set() for _ in range(n)]
    for s in scopes:
        for a in s:
            for b in s:
                if a != b:
                    adj[a].add(b)
    left = set(range(n))

    def fill(v: int) -> tuple[int, int, int]:
        nb = list(adj[v] & left)
        missing = sum(1 for i, a in enumerate(nb) for b in nb[i + 1 :] if b not in adj[a])
        return (missing, len(nb), v)

    score = {v: fill(v) for v in range(n)}
    heap = list(score.values())
    heapq.heapify(heap)
    order = []
    while left:
        key = heapq.heappop(heap)
        v = key[2]
        if v not in left or score[v] != key:
            continue  # stale entry
        nb = adj[v] & left
        for a in nb:
            adj[a] |= nb - {a}
        left.remove(v)
        order.append(v)
        touched = set(nb)
        for a in nb:
            touched |= adj[a] & left
        for u in touched:
            new = fill(u)
            if new != score[u]:
                score[u] = new
                heapq.heappush(heap, new)
    return order


def solve_spec_sharding(
    spec: Spec, shape: tuple[int, ...], num_tile: int, placement: Placement | None = None
) -> ShardingSolution:
    """Sharding of an LLM spec for one shape, tile count and parallelism placement (None:
    the spec's fixed roles): pinned choices kept, the rest byte-minimal with ties broken by
    per-tile compute + collective time at this TP degree."""
    sysm, ex = spec.system, spec.execution
    fabric = Fabric.of(spec, shape, placement)  # the spec's quirks, as lowering prices them
    grp, r = fabric.groups(), fabric.ratios()
    peak = sysm.accelerator.peak_gflops
    rate = (ex.compute_util or 1.0) * peak
    word = ex.word_bytes
    kernels = spec.graph.kernels
    index = spec.graph.index()

    def dims(i: int, d: Dim) -> tuple[int, int, int]:
        return shard_dims(spec, i, d, grp.tp, num_tile, shape)

    def unary(i: int, d: Dim) -> tuple[float, float]:
        sm, sk, sn = dims(i, d)
        k = kernels[i]
        flop = float(sm) * sn * (1 if k.type.name == "SIMD" else 2 * sk)
        t = flop / rate
        if d is Dim.K and k.communication is Collective.NONE:
            t += r.all_reduce * sm * sn * word
        return t, float(sm) * sn * word

    def edge(e: int, d: Dim, coll: Collective) -> float:
        src = index[spec.graph.connections[e].src]
        sm, _, sn = dims(src, d)
        ratio = r.all_gather if coll is Collective.ALL_GATHER else r.all_to_all
        return ratio * sm * sn * word

    return solve_sharding(spec.graph, unary, edge)
