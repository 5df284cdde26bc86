"""Structure of a dataflow graph: indices, topological levels, buffer depths, operands,
legal sharding choices and tensor layouts (docs/model.md, "Inter-chip sharding").

Pure Python; computed once per spec, never in a hot loop.

>>> from dfsearch.kernels.generators import llm_fwdbwd
>>> g = llm_fwdbwd(hidden=64, num_head=4, head_dim=16, seq=32, word=2)
>>> s = GraphStructure.of(g)
>>> s.levels[:3], s.depths[:2]
((0, 1, 2), (2, 2))
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dfsearch.codes import Collective, ComputeType, Dim
from dfsearch.memo import by_identity, by_identity_and_key
from dfsearch.spec import Graph, Kernel

__all__ = [
    "priority_topological_order",
    "Layout",
    "GraphStructure",
    "sharding_choices",
    "upstream_layout",
    "downstream_layout",
    "relayout",
    "edge_relayouts",
    "kahn_levels",
]


class Layout(enum.IntEnum):
    """Layout of a tensor across the TP group: replicated, split by rows or by columns."""

    RR = 0  #: replicated
    RS = 1  #: split along the column (N) dimension
    SR = 2  #: split along the row (outer*M) dimension


def kahn_levels(n: int, edges: list[tuple[int, int]]) -> list[int] | None:
    """Level-synchronous Kahn levels; ``None`` if the graph has a cycle."""
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges:
        indeg[d] += 1
        succ[s].append(d)
    level = [-1] * n
    frontier = [i for i in range(n) if indeg[i] == 0]
    lv = 0
    seen = 0
    while frontier:
        nxt = []
        for i in frontier:
            level[i] = lv
            seen += 1
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    nxt.append(j)
        frontier = sorted(nxt)
        lv += 1
    return level if seen == n else None


@dataclass(frozen=True, slots=True)
class GraphStructure:
    """Index-based view of a validated graph (kernel order = file order)."""

    names: tuple[str, ...]
    src: tuple[int, ...]  #: producer index of each connection
    dst: tuple[int, ...]  #: consumer index of each connection
    levels: tuple[int, ...]  #: Kahn level of each kernel
    depths: tuple[int, ...]  #: buffer depth of each connection: level(dst) - level(src) + 1
    tensor_bytes: tuple[float, ...]  #: output bytes of the producer
    operand: tuple[int, ...]  #: 1 or 2: which input of the consumer the connection feeds

    @staticmethod
    def of(graph: Graph) -> GraphStructure:
        """The structure of ``graph``, computed once per graph object (``dfsearch.memo``)."""
        return _structure_of(graph)

    @staticmethod
    def build(graph: Graph) -> GraphStructure:
        """The structure of ``graph``, computed."""
        idx = graph.index()
        src = tuple(idx[c.src] for c in graph.connections)
        dst = tuple(idx[c.dst] for c in graph.connections)
        levels = kahn_levels(len(graph.kernels), list(zip(src, dst)))
        if levels is None:
            raise ValueError("graph has a cycle")  # validation reports cycles before this
        depths = tuple(levels[d] - levels[s] + 1 for s, d in zip(src, dst))
        tensor = tuple(_out_bytes(graph.kernels[s]) for s in src)
        operand = _operands(graph, dst, tensor)
        return GraphStructure(
            names=tuple(k.name for k in graph.kernels),
            src=src,
            dst=dst,
            levels=tuple(levels),
            depths=depths,
            tensor_bytes=tensor,
            operand=operand,
        )

    def in_edges(self, k: int) -> list[int]:
        return [e for e, d in enumerate(self.dst) if d == k]

    def out_edges(self, k: int) -> list[int]:
        return [e for e, s in enumerate(self.src) if s == k]

    def is_topological_order(self) -> bool:
        """True when every connection goes from an earlier to a later kernel in file order."""
        return all(s < d for s, d in zip(self.src, self.dst))


@by_identity(64)
def _structure_of(graph: Graph) -> GraphStructure:
    return GraphStructure.build(graph)


def _out_bytes(k: Kernel) -> float:
    return -1.0 if k.output_bytes is None else k.output_bytes


def _operands(graph: Graph, dst: tuple[int, ...], tensor: tuple[float, ...]) -> tuple[int, ...]:
    """Which input each connection feeds (docs/model.md): by byte-size equality with the
    consumer's input sizes, equal sizes -> operand 1; where neither matches, by the order of
    the consumer's incoming connections (first -> 1, later -> 2)."""
    seen: dict[int, int] = {}
    out = []
    for e, d in enumerate(dst):
        order = seen.get(d, 0)
        seen[d] = order + 1
        k = graph.kernels[d]
        size = tensor[e]
        if k.input_bytes is not None and size == k.input_bytes:
            out.append(1)
        elif k.kind.num_inputs == 2 and k.input2_bytes is not None and size == k.input2_bytes:
            out.append(2)
        else:
            out.append(1 if order == 0 or k.kind.num_inputs == 1 else 2)
    return tuple(out)


# --------------------------------------------------------------------------- sharding
def sharding_choices(k: Kernel) -> tuple[Dim, ...]:
    """Legal inter-chip sharding choices of one kernel (docs/model.md, "Inter-chip sharding").

    A pinned ``sharding`` is returned alone. Raises ``ValueError`` for a kernel that needs a
    choice but has ``NO_TILING`` (DFModel's LLM inter-chip pass cannot handle it).
    """
    if k.sharding is not None:
        return (k.sharding,)
    if k.outer > 1 and k.tiling is not Dim.OUTER:
        return (Dim.OUTER,)
    sizes = {Dim.OUTER: k.outer, Dim.M: k.m, Dim.K: k.k if k.kind.has_k else 1, Dim.N: k.n}
    out = [d for d in (Dim.OUTER, Dim.M, Dim.K, Dim.N) if sizes[d] > 1 and d is not k.tiling]
    if not k.kind.has_weight:
        out.append(Dim.NO)
    return tuple(out)


def upstream_layout(choice: Dim) -> Layout:
    """Layout of a kernel's output given its sharding: OUTER/M -> SR, K -> RR (after the
    all-reduce), N -> RS, NO -> RR."""
    return {
        Dim.OUTER: Layout.SR,
        Dim.M: Layout.SR,
        Dim.K: Layout.RR,
        Dim.N: Layout.RS,
        Dim.NO: Layout.RR,
    }[choice]


_S, _R, _RR = Layout.SR, Layout.RS, Layout.RR
# consumer class -> layout wanted for choices (OUTER, M, K, N, NO)
_DOWN = {
    "k_tiling": (_S, _S, _R, _S, _RR),
    "simd": (_S, _S, _RR, _R, _RR),
    "operand1": (_S, _RR, _S, _R, _RR),
    "operand2": (_S, _S, _R, _RR, _RR),
}


def downstream_layout(consumer: Kernel, operand: int, choice: Dim) -> Layout:
    """Layout in which a consumer with sharding ``choice`` wants the input ``operand``."""
    if consumer.tiling is Dim.K:
        cls = "k_tiling"
    elif consumer.type is ComputeType.SIMD:
        cls = "simd"
    elif consumer.kind.has_weight or operand == 1:
        cls = "operand1"
    else:
        cls = "operand2"
    return _DOWN[cls][choice.value - 1]


def relayout(up: Layout, down: Layout) -> Collective:
    """Collective needed to turn layout ``up`` into ``down`` (DFModel's re-layout rule)."""
    if up == down or up is Layout.RR:
        return Collective.NONE
    if down is Layout.RR:
        return Collective.ALL_GATHER
    return Collective.ALL_TO_ALL


def edge_relayouts(graph: Graph, sharding: tuple[Dim, ...]) -> tuple[Collective, ...]:
    """The re-layout collective of every connection (in ``GraphStructure`` order) under a
    complete ``sharding``, once per graph object and sharding in a process (a search lowers
    one sharding at many outer choices; the points of a study share their graph)."""
    return _edge_relayouts(graph, sharding)


@by_identity_and_key(256)
def _edge_relayouts(graph: Graph, sharding: tuple[Dim, ...]) -> tuple[Collective, ...]:
    st = GraphStructure.of(graph)
    kernels = graph.kernels
    return tuple(
        relayout(upstream_layout(sharding[s]), downstream_layout(kernels[d], st.operand[e], sharding[d]))
        for e, (s, d) in enumerate(zip(st.src, st.dst))
    )  # fmt: skip


def priority_topological_order(succ: Sequence[Sequence[int]], indegree: Sequence[int],
                               key: Callable[[int], Any]) -> list[int]:
    """The topological order of a DAG (successor lists, in-degrees) that always takes the
    ready node of smallest ``key(node)`` (ties: the smaller node)."""
    indeg = list(indegree)
    ready = [(key(k), k) for k in range(len(indeg)) if indeg[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, k = heapq.heappop(ready)
        out.append(k)
        for d in succ[k]:
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(ready, (key(d), d))
    return out
