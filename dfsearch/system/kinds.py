"""Network dimension kinds: the one place a topology's formulas live.

Each value of ``codes.Topology`` (the word in a spec: ``ring``, ``switch``, ``fc``, ``mesh``)
has one ``TopologyKind`` object in ``KINDS``. The object knows its names (label, short code,
DFModel word), the per-byte time of each collective over one dimension of p chips whose
links carry ``bw`` GB/s (= bytes/ns), the links across that dimension's bisection (the
DLRM/FFT all-to-all factor) and its link and switch-port counts (system cost and power).
How dimensions combine into a network (the all-to-all message factors, how many copies of a
dimension there are) is decided in ``dfsearch.system.fabric`` and ``dfsearch.system.network_cost`` from
the kinds' answers; the equations and their derivations are in docs/model.md ("Network
topologies"), and docs/extending.md says how to add a kind.

Plain Python, evaluated at lowering time: the jitted evaluator never sees a topology.

>>> from dfsearch.codes import Topology
>>> KINDS[Topology.MESH].short, KINDS[Topology.RING].all_to_all_ratio(4, 2.0)
('mesh', 1.0)
>>> network_name((Topology.RING, Topology.SWITCH))
'r_sw'
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from dfsearch.codes import TOPOLOGY_VARIANTS, Equations, Topology
from dfsearch.quirks import Quirks

__all__ = [
    "TopologyKind",
    "Ring",
    "Switch",
    "FullyConnected",
    "Mesh",
    "KINDS",
    "kinds_of",
    "network_name",
    "allowed_network",
    "dfmodel_variant",
    "MAX_GRID_DIMS",
]


@dataclass(frozen=True, slots=True)
class TopologyKind(ABC):
    """What the model needs to know about one kind of network dimension.

    Times are ns per byte for p chips (p >= 1) on links of ``bw`` GB/s; counts are per
    instance of the dimension (one ring, one switch, one line): the network composition
    multiplies them by the number of instances.
    """

    code: Topology  #: the enum value specs and reports use (``code.label`` is the TOML word)
    #: the word in DFModel's topology variant names; None when DFModel has no such kind
    dfmodel: str | None
    #: chips are joined by their own point-to-point links (ring, mesh), not through a switch
    #: or all-pairs links; a network whose dimensions are all direct composes as a grid
    direct: bool
    #: the DFModel kind whose place this kind may take in a network (itself for DFModel's)
    stands_for: Topology
    #: separate reduce-scatter + all-gather (or the textbook volume) doubles the DP gradient
    #: all-reduce on this kind (DFModel leaves FC's single)
    doubles_gradient_all_reduce: bool

    @property
    def label(self) -> str:
        return self.code.label

    @property
    def short(self) -> str:
        """The word in a network name such as ``r_sw`` (``codes.Topology.short``)."""
        return self.code.short

    @abstractmethod
    def reduce_ratio(self, p: int, bw: float) -> float:
        """All-reduce (DFModel's half volume), reduce-scatter and all-gather: ns per byte."""

    @abstractmethod
    def all_to_all_ratio(self, p: int, bw: float) -> float:
        """LLM all-to-all: ns per byte, p^2 / (4 L(p) bw) with L(p) the v1 bisection links."""

    def p2p_ratio(self, bw: float) -> float:
        """Pipeline point-to-point between consecutive stages, neighbours on one link: 1/bw."""
        return 1.0 / bw

    @abstractmethod
    def latency_steps(self, p: int) -> int:
        """Link latencies one all-reduce pays (v2 ``link_latency_ns``)."""

    def sub_group(self, p: int, n: int, strided: bool) -> tuple[TopologyKind, int]:
        """How a group of ``p`` of this dimension's ``n`` chips communicates, all ``n / p``
        such groups at once (a split dimension, docs/model.md "Parallelism placement"):
        (the kind whose formulas apply at p chips, a factor f). ``strided``: members are n/p
        chips apart, else contiguous. On a direct kind a strided group's hops span f = n/p
        links and each link is used by f groups at once, so every per-byte time and the
        latency steps are f times the kind's at p. The whole dimension (p = n) is (self, 1).
        A switch or an all-pairs kind gives every group its own ports and links: (self, 1)."""
        return self, 1

    @abstractmethod
    def bisection_links(self, p: int, equations: Equations) -> float:
        """Links across the middle cut of one instance (DLRM/FFT all-to-all factor)."""

    @abstractmethod
    def links(self, p: int) -> float:
        """Links of one instance (system cost and power)."""

    @abstractmethod
    def switch_ports(self, p: int, *, dim: int, ndim: int, quirks: Quirks) -> float:
        """Switch ports of one instance at dimension ``dim`` of an ``ndim``-dimensional
        network, under DFModel's ``quirks``."""


@dataclass(frozen=True, slots=True)
class Ring(TopologyKind):
    """p chips in a cycle, each linked to its two neighbours (DFModel ``r``).

    reduce (p-1)/(p bw) (one ring pass over unidirectional hops); all-to-all p^2/(8 bw)
    (2 links across the cut); latency p-1 steps; bisection 2; p links; 2 switch ports per
    ring (DFModel), or p for a 1-D ring without the ``ring_two_switch_ports`` quirk.
    """

    code: Topology = Topology.RING
    dfmodel: str | None = "r"
    direct: bool = True
    stands_for: Topology = Topology.RING
    doubles_gradient_all_reduce: bool = True

    def reduce_ratio(self, p: int, bw: float) -> float:
        return (p - 1) / (p * bw)

    def all_to_all_ratio(self, p: int, bw: float) -> float:
        return p * p / (8.0 * bw)

    def sub_group(self, p: int, n: int, strided: bool) -> tuple[TopologyKind, int]:
        """Contiguous p < n: a segment of the ring, a line without wraparound, the segments
        disjoint: a mesh of p. Strided: a ring of p whose hops span n/p links, each link used
        by all n/p groups at once: the ring's formulas times n/p."""
        if p >= n:
            return self, 1
        return (self, n // p) if strided else (KINDS[Topology.MESH], 1)

    def latency_steps(self, p: int) -> int:
        return p - 1

    def bisection_links(self, p: int, equations: Equations) -> float:
        return 2.0

    def links(self, p: int) -> float:
        return float(p)

    def switch_ports(self, p: int, *, dim: int, ndim: int, quirks: Quirks) -> float:
        return float(p) if ndim == 1 and not quirks.ring_two_switch_ports else 2.0


@dataclass(frozen=True, slots=True)
class Switch(TopologyKind):
    """p chips on one switch, one link and one port each (DFModel ``sw``).

    reduce (p-1)/(p bw); all-to-all p/(4 bw) (p links across the cut); latency p-1 steps;
    bisection p; p links; p ports.
    """

    code: Topology = Topology.SWITCH
    dfmodel: str | None = "sw"
    direct: bool = False
    stands_for: Topology = Topology.SWITCH
    doubles_gradient_all_reduce: bool = True

    def reduce_ratio(self, p: int, bw: float) -> float:
        return (p - 1) / (p * bw)

    def all_to_all_ratio(self, p: int, bw: float) -> float:
        return p / (4.0 * bw)

    def latency_steps(self, p: int) -> int:
        return p - 1

    def bisection_links(self, p: int, equations: Equations) -> float:
        return float(p)

    def links(self, p: int) -> float:
        return float(p)

    def switch_ports(self, p: int, *, dim: int, ndim: int, quirks: Quirks) -> float:
        return float(p)


@dataclass(frozen=True, slots=True)
class FullyConnected(TopologyKind):
    """p chips with a link between every pair (DFModel ``fc``).

    reduce 1/(p bw) (all p-1 links at once); all-to-all 1/bw (p^2/4 links across the cut);
    latency 1 step; bisection p^2/4 (v1, legacy, design space) or p(p-1)/2 (v2); p(p-1)
    links; no switch ports at dimension 0, p^2 above it (DFModel's counts). The DP gradient
    all-reduce is not doubled.
    """

    code: Topology = Topology.FC
    dfmodel: str | None = "fc"
    direct: bool = False
    stands_for: Topology = Topology.FC
    doubles_gradient_all_reduce: bool = False

    def reduce_ratio(self, p: int, bw: float) -> float:
        return 1.0 / (p * bw)

    def all_to_all_ratio(self, p: int, bw: float) -> float:
        return 1.0 / bw

    def latency_steps(self, p: int) -> int:
        return 1

    def bisection_links(self, p: int, equations: Equations) -> float:
        return p * (p - 1) / 2.0 if equations is Equations.V2 else p * p / 4.0

    def links(self, p: int) -> float:
        return float(p * (p - 1))

    def switch_ports(self, p: int, *, dim: int, ndim: int, quirks: Quirks) -> float:
        return 0.0 if dim == 0 else float(p * p)


@dataclass(frozen=True, slots=True)
class Mesh(TopologyKind):
    """p chips in a line, each linked to its neighbours, no wraparound link (not in DFModel).

    Links are full duplex with ``bw`` per direction, as the ring's formulas assume. A ring
    folded onto the line (0, 2, 4, ... out, ..., 5, 3, 1 back) uses every link direction
    exactly once, so reduce (p-1)/(p bw) as on a ring, but each ring hop spans up to 2 links:
    latency 2(p-1) steps (p-1 for p = 2). One link crosses the middle cut: bisection 1 and
    all-to-all p^2/(4 bw), twice the ring's. p2p 1/bw; p-1 links; no switch ports.
    It may stand wherever DFModel allows a ring (``r``).
    """

    code: Topology = Topology.MESH
    dfmodel: str | None = None
    direct: bool = True
    stands_for: Topology = Topology.RING
    doubles_gradient_all_reduce: bool = True

    def reduce_ratio(self, p: int, bw: float) -> float:
        return (p - 1) / (p * bw)

    def all_to_all_ratio(self, p: int, bw: float) -> float:
        return p * p / (4.0 * bw)

    def latency_steps(self, p: int) -> int:
        return (p - 1) * min(p - 1, 2)

    def sub_group(self, p: int, n: int, strided: bool) -> tuple[TopologyKind, int]:
        """Contiguous: a shorter line, the lines disjoint: a mesh of p. Strided: a line of p
        whose hops span n/p links; the middle links are used by all n/p groups at once: the
        mesh's formulas times n/p."""
        return (self, n // p) if strided and p < n else (self, 1)

    def bisection_links(self, p: int, equations: Equations) -> float:
        return 1.0

    def links(self, p: int) -> float:
        return float(p - 1)

    def switch_ports(self, p: int, *, dim: int, ndim: int, quirks: Quirks) -> float:
        return 0.0


#: topology -> kind: the one table to extend when a kind is added (with its ``Topology`` value)
KINDS: Mapping[Topology, TopologyKind] = MappingProxyType({
    Topology.RING: Ring(),
    Topology.SWITCH: Switch(),
    Topology.FC: FullyConnected(),
    Topology.MESH: Mesh(),
})


def kinds_of(topologies: Sequence[Topology]) -> tuple[TopologyKind, ...]:
    """The kind object of each dimension."""
    return tuple(KINDS[t] for t in topologies)


def network_name(topologies: Sequence[Topology]) -> str:
    """The network's name, the dimensions' short codes joined by ``_`` (``r_fc``,
    ``mesh_mesh``): DFModel's variant name whenever DFModel has the network."""
    return "_".join(KINDS[t].short for t in topologies)


#: most dimensions of a grid (every dimension direct): DFModel's bisection multipliers of a
#: grid's dimensions exist for 2 and 3 dimensions only (docs/model.md, Network topologies)
MAX_GRID_DIMS = 3


def allowed_network(topologies: Sequence[Topology]) -> bool:
    """True when the dimensions form one of DFModel's variants once every kind is replaced by
    the DFModel kind it stands for (a mesh may stand wherever a ring can); a network of more
    than ``MAX_GRID_DIMS`` dimensions (none of DFModel's) may mix any kinds, as long as it is
    hierarchical (some dimension not direct: dimension j joins the groups below it, and every
    formula holds for any number of dimensions).

    >>> allowed_network((Topology.RING, Topology.RING, Topology.SWITCH, Topology.SWITCH))
    True
    >>> allowed_network((Topology.RING,) * 4)
    False
    """
    if len(topologies) > MAX_GRID_DIMS:
        return not all(KINDS[t].direct for t in topologies)
    return tuple(KINDS[t].stands_for for t in topologies) in TOPOLOGY_VARIANTS.values()


def dfmodel_variant(topologies: Sequence[Topology]) -> str:
    """DFModel's variant name of a network; ``ValueError`` naming the kinds DFModel lacks.

    >>> dfmodel_variant((Topology.MESH, Topology.SWITCH))
    Traceback (most recent call last):
    ...
    ValueError: DFModel has no 'mesh' topology: a network with it can be written as a dfsearch TOML spec only
    """
    missing = [KINDS[t].label for t in topologies if KINDS[t].dfmodel is None]
    if missing:
        words = ", ".join(f"{m!r}" for m in dict.fromkeys(missing))
        raise ValueError(
            f"DFModel has no {words} topology: a network with it can be written as a "
            "dfsearch TOML spec only"
        )
    name = "_".join(KINDS[t].dfmodel or "" for t in topologies)
    if name not in TOPOLOGY_VARIANTS:
        raise ValueError(f"DFModel has no topology variant {name!r}")
    return name
