"""The network's links and switch ports (system cost and power): each kind's count for one
instance of its dimension times the number of instances, with DFModel's counting quirks
(docs/model.md, "Network topologies"). Plain Python, once per shape."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsearch.codes import Topology
from dfsearch.quirks import Quirks
from dfsearch.system.kinds import kinds_of, network_name
from dfsearch.system.ratios import is_grid

if TYPE_CHECKING:
    from dfsearch.spec import Cost, System

__all__ = ["link_switch_counts", "NetworkPrice", "network_price"]

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


@dataclass(frozen=True, slots=True)
class NetworkPrice:
    """The network's share of system cost ($) and static power (W), over every copy."""

    link_cost: float
    switch_cost: float
    link_power: float
    switch_power: float


def network_price(
    system: System, cost: Cost, shape: tuple[int, ...], copies: int, quirks: Quirks
) -> NetworkPrice:
    """Links and switch ports of one copy times their bandwidth and price (or power
    coefficient), times the copies; with ``quirks.cost_thresholds`` DFModel zeroes the links
    of a 1-chip copy and the switches of a copy of <= 4 chips."""
    n = system.num_chip
    nc = n // copies
    topologies = tuple(d.topology for d in system.network)
    links, ports = link_switch_counts(topologies, shape, n, quirks)
    bws = [d.link_bw_GBps for d in system.network]
    c = cost
    link_cost = sum(nl * bw * c.link_price_per_GBps for nl, bw in zip(links, bws))
    switch_cost = sum(ns * bw * c.switch_price_per_GBps for ns, bw in zip(ports, bws))
    link_power = sum(nl * bw * c.link_power(i) for i, (nl, bw) in enumerate(zip(links, bws)))
    switch_power = sum(ns * bw * c.switch_power_J_per_GB for ns, bw in zip(ports, bws))
    link_on = not (quirks.cost_thresholds and nc == 1)
    switch_on = not (quirks.cost_thresholds and nc <= 4)
    return NetworkPrice(
        link_cost=copies * link_cost if link_on else 0.0,
        switch_cost=copies * switch_cost if switch_on else 0.0,
        link_power=copies * link_power if link_on else 0.0,
        switch_power=copies * switch_power if switch_on else 0.0,
    )
