"""The network's links and switch ports (system cost and power): each kind's count for one
instance of its dimension times the number of instances, with DFModel's counting quirks
(docs/model.md, "Network topologies"). Plain Python, once per shape."""

from __future__ import annotations

import math

from dfsearch.codes import Topology
from dfsearch.cost.quirks import Quirks
from dfsearch.system.kinds import kinds_of, network_name
from dfsearch.system.ratios import is_grid

__all__ = ["link_switch_counts"]

#: ``Quirks.total_chips_for_dim0``: DFModel's variants whose dimension-0 (links, switch
#: ports) count the chips of every copy, not of one
_TOTAL_CHIPS_FOR_DIM0 = {"r_sw": (True, False), "sw_sw": (True, True)}


def _instances(topologies: tuple[Topology, ...], shape: tuple[int, ...]) -> list[int]:
    """How many copies of each dimension one copy of the system has: in a grid every chip
    lies on one line of each dimension (chips / size); in a hierarchical network dimension j
    joins the groups below it, once per group of the dimensions above it."""
    nc = math.prod(shape)
    if is_grid(kinds_of(topologies)):
        return [nc // s for s in shape]
    return [math.prod(shape[j + 1 :]) for j in range(len(shape))]


def link_switch_counts(
    topologies: tuple[Topology, ...],
    shape: tuple[int, ...],
    num_chip: int,
    quirks: Quirks,
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-dimension link counts nL and switch port counts nS of one copy of the system
    (``shape`` multiplies to its chips): each kind's count for one instance of its
    dimension times the number of instances (docs/model.md, Network topologies)."""
    inst = _instances(topologies, shape)
    ndim = len(topologies)
    links, ports = [], []
    for j, (kind, s) in enumerate(zip(kinds_of(topologies), shape)):
        links.append(kind.links(s) * inst[j])
        ports.append(kind.switch_ports(s, dim=j, ndim=ndim, quirks=quirks) * inst[j])
    total = _TOTAL_CHIPS_FOR_DIM0.get(network_name(topologies))
    if quirks.total_chips_for_dim0 and total:
        every_copy = num_chip // shape[0]  # dimension-0 instances over all copies
        kind = kinds_of(topologies)[0]
        if total[0]:
            links[0] = kind.links(shape[0]) * every_copy
        if total[1]:
            ports[0] = kind.switch_ports(shape[0], dim=0, ndim=ndim, quirks=quirks) * every_copy
    return tuple(links), tuple(ports)
