"""A whole-model graph in pieces: the model's two ends and its stacked layers.

A stacked LLM graph names every layer kernel ``<name>_L{i}`` (docs/model.md, "Several layers
in one graph"); kernels without the suffix are the model's *ends* (the embedding, the final
norm and LM head: docs/model.md, "Embedding and LM head"). When the graph runs more than once
per micro-batch (E = num_layer / num_layer_in_graph > 1) the ends still run once: the ones
*before* the layers in the first pipeline stage, the ones *after* them in the last
(docs/model.md, "Pipeline stages of a whole model"). Which end is which follows from the
edges to the layers: a forward kernel that feeds a layer, or a backward kernel fed by one,
comes before; a forward kernel fed by a layer, or a backward kernel that feeds one, comes
after. Ends connected to each other go together.

>>> from dfsearch.kernels.generators import llm_fwdbwd
>>> g = llm_fwdbwd(hidden=64, num_head=4, head_dim=16, seq=32, word=2, vocab_size=100,
...                embedding=True, lm_head=True)
>>> p = split_pieces(g)
>>> [g.kernels[k].name for k in p.before]
['Embedding', 'Embedding_bwd']
>>> len(p.layers), len(p.after)
(41, 7)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dfsearch.codes import Phase
from dfsearch.spec import Graph

__all__ = ["Pieces", "split_pieces", "subgraph"]

_LAYER = re.compile(r"_L\d+$")


@dataclass(frozen=True, slots=True)
class Pieces:
    """Kernel indices of the three pieces, each in graph order."""

    before: tuple[int, ...]  #: ends that run before the layers (the first pipeline stage)
    layers: tuple[int, ...]  #: the stacked layers (every pipeline stage)
    after: tuple[int, ...]  #: ends that run after the layers (the last pipeline stage)

    @property
    def has_ends(self) -> bool:
        return bool(self.before or self.after)


class PiecesError(ValueError):
    """An end kernel that connects to no layer, or to both sides of them."""


def split_pieces(graph: Graph) -> Pieces:
    """The pieces of ``graph`` (module docstring). A graph without ``_L{i}`` names is all
    layers.

    Raises
    ------
    PiecesError
        If a group of connected end kernels touches no layer kernel or touches the layers
        both before and after (the message names one of its kernels).
    """
    kernels = graph.kernels
    n = len(kernels)
    in_layer = [bool(_LAYER.search(k.name)) for k in kernels]
    if not any(in_layer) or all(in_layer):
        return Pieces(before=(), layers=tuple(range(n)), after=())
    index = graph.index()
    root = list(range(n))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    side: dict[int, set[str]] = {}
    edges = [(index[c.src], index[c.dst]) for c in graph.connections]
    for s, d in edges:
        if not in_layer[s] and not in_layer[d]:
            root[find(s)] = find(d)
    for s, d in edges:
        if in_layer[s] == in_layer[d]:
            continue
        end, feeds = (s, True) if in_layer[d] else (d, False)
        forward = kernels[end].phase is not Phase.BWD
        side.setdefault(end, set()).add("before" if feeds == forward else "after")
    groups: dict[int, set[str]] = {}
    for k in range(n):
        if not in_layer[k]:
            groups.setdefault(find(k), set()).update(side.get(k, set()))
    where = {}
    for g, sides in groups.items():
        if len(sides) != 1:
            name = kernels[g].name
            what = (
                "touches no layer kernel" if not sides else "touches the layers before and after"
            )
            raise PiecesError(
                f"kernel {name!r} is outside the stacked layers (its name has no _L<i> suffix) "
                f"and {what}: an end of the model must feed the first layer (embedding) or be "
                "fed by the last (LM head)"
            )
        where[g] = sides.pop()
    before = tuple(k for k in range(n) if not in_layer[k] and where[find(k)] == "before")
    after = tuple(k for k in range(n) if not in_layer[k] and where[find(k)] == "after")
    return Pieces(before=before, layers=tuple(k for k in range(n) if in_layer[k]), after=after)


def subgraph(graph: Graph, members: tuple[int, ...]) -> Graph:
    """The kernels ``members`` (in graph order) and the connections between them."""
    kernels = tuple(graph.kernels[k] for k in sorted(members))
    names = {k.name for k in kernels}
    return Graph(
        kernels=kernels,
        connections=tuple(c for c in graph.connections if c.src in names and c.dst in names),
    )
