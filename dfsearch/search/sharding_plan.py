"""The structure of the inter-chip sharding problem of one graph, computed once and shared
by every solve on that graph (``search.sharding``): each kernel's legal choices, the
collective each connection needs for each pair of choices, and the variable elimination
schedule (min-fill order, each step's factors, scope and table positions). Only the costs
change between solves (the TP degree, the tile count, the collective ratios).

Factor ids: kernel i's unary factor is i, the connections between two distinct kernels come
next in connection order, and step j's new factor is (their count) + j. A factor's table is
flat, in ``itertools.product`` order of its scope (sorted kernel indices).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from itertools import product

from dfsearch.codes import Collective, Dim
from dfsearch.errors import SpecError
from dfsearch.kernels.graph import (
    GraphStructure,
    downstream_layout,
    relayout,
    sharding_choices,
    upstream_layout,
)
from dfsearch.memo import by_identity
from dfsearch.spec import Graph

__all__ = ["ShardingPlans", "Plan", "Step"]


@dataclass(frozen=True, slots=True)
class Step:
    """One elimination: ``variable`` leaves; its factors' sum, least over its ``size``
    choices, becomes a factor over ``scope``."""

    variable: int
    size: int  #: choices of the variable
    factors: tuple[int, ...]  #: ids of the factors it sums, in the order they were created
    scope: tuple[int, ...]
    radix: tuple[int, ...]  #: choices of each scope variable
    assignments: int  #: assignments of the scope
    #: per (assignment, choice), in that order: the flat position in each factor's table
    cells: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Plan:
    graph: Graph  #: the graph it was made for (held, so that its id stays its own)
    structure: GraphStructure
    domains: tuple[tuple[Dim, ...], ...]
    #: per connection: the collective its re-layout needs, by (producer, consumer) choice index
    relayouts: tuple[dict[tuple[int, int], Collective], ...]
    #: per connection between distinct kernels: its index and, per cell of its factor, the
    #: producer's choice and the collective the re-layout needs
    edges: tuple[tuple[int, tuple[tuple[Dim, Collective], ...]], ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class ShardingPlans:
    """The plans of the graphs one search solves (a cache local to its owner, by graph
    identity: a search's spec holds its graph for the whole search)."""

    by_graph: dict[int, Plan] = field(default_factory=dict)

    def of(self, graph: Graph) -> Plan:
        plan = self.by_graph.get(id(graph))
        if plan is None or plan.graph is not graph:
            plan = _plan_of(graph)
            self.by_graph[id(graph)] = plan
        return plan


@by_identity(64)
def _plan_of(graph: Graph) -> Plan:
    """``make_plan``, once per graph object in a process: the points of a study share their
    generated graph (``kernels.generators.generate``), hence its plan."""
    return make_plan(graph)


def make_plan(graph: Graph) -> Plan:
    st = GraphStructure.of(graph)
    domains = tuple(_domains(graph))
    relayouts = []
    for e, (a, b) in enumerate(zip(st.src, st.dst)):
        kb, op = graph.kernels[b], st.operand[e]
        relayouts.append({(ia, ib): relayout(upstream_layout(da), downstream_layout(kb, op, db))
                          for ia, da in enumerate(domains[a]) for ib, db in enumerate(domains[b])})  # fmt: skip
    scopes = [(i,) for i in range(len(domains))]
    edges = []
    for e, (a, b) in enumerate(zip(st.src, st.dst)):
        if a == b:
            continue
        cells = {((ia, ib) if a < b else (ib, ia)): (domains[a][ia], coll) for (ia, ib), coll in relayouts[e].items()}
        scopes.append((min(a, b), max(a, b)))
        edges.append((e, tuple(cells[k] for k in sorted(cells))))
    return Plan(graph, st, domains, tuple(relayouts), tuple(edges), _steps(domains, scopes))


def _steps(domains: tuple[tuple[Dim, ...], ...], scopes: list[tuple[int, ...]]) -> tuple[Step, ...]:
    """The elimination schedule: min-fill order; each variable sums the factors it is in,
    by id."""
    n = len(domains)
    order = _min_fill_order(n, scopes)
    scope_of: dict[int, tuple[int, ...]] = dict(enumerate(scopes))
    uses: list[set[int]] = [set() for _ in range(n)]
    for i, s in scope_of.items():
        for u in s:
            uses[u].add(i)
    steps = []
    for v in order:
        mine = sorted(uses[v])
        for i in mine:
            for u in scope_of[i]:
                if u != v:
                    uses[u] -= uses[v]
        scope = tuple(sorted({u for i in mine for u in scope_of[i] if u != v}))
        radix = tuple(len(domains[u]) for u in scope)
        cells = []
        for assign in product(*(range(r) for r in radix)):
            env = dict(zip(scope, assign))
            for x in range(len(domains[v])):
                env[v] = x
                cells.append(tuple(_flat([env[u] for u in scope_of[i]], [len(domains[u]) for u in scope_of[i]]) for i in mine))
        fid = len(scopes) + len(steps)
        scope_of[fid] = scope
        for i in mine:
            del scope_of[i]
        for u in scope:
            uses[u].add(fid)
        count = 1
        for r in radix:
            count *= r
        steps.append(Step(v, len(domains[v]), tuple(mine), scope, radix, count, tuple(cells)))
    return tuple(steps)


def _flat(choice: list[int], radix: list[int]) -> int:
    flat = 0
    for c, r in zip(choice, radix):
        flat = flat * r + c
    return flat


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
