"""System cost and static power. Depends only on the shape and the DRAM
bandwidth in effect, never on the rest of the mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsearch.codes import Topology
from dfsearch.cost.network import is_grid
from dfsearch.cost.quirks import Quirks
from dfsearch.spec import Spec
from dfsearch.topology import kinds_of, network_name

__all__ = ["Price", "link_switch_counts", "price"]


@dataclass(frozen=True, slots=True)
class Price:
    system_cost: float
    system_power: float
    dram_cost: float
    chip_cost: float
    link_cost: float
    switch_cost: float
    dram_power: float
    chip_power: float
    link_power: float
    switch_power: float


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


def price(spec: Spec, shape: tuple[int, ...], dram_bw: float, quirks: Quirks = Quirks()) -> Price:
    """System cost ($) and static power (W) for a network shape."""
    sysm, c = spec.system, spec.cost
    n = sysm.num_chip
    copies = spec.num_copy
    nc = n // copies
    topologies = tuple(d.topology for d in sysm.network)
    links, ports = link_switch_counts(topologies, shape, n, quirks)
    bws = [d.link_bw_GBps for d in sysm.network]
    link_cost = sum(nl * bw * c.link_price_per_GBps for nl, bw in zip(links, bws))
    switch_cost = sum(ns * bw * c.switch_price_per_GBps for ns, bw in zip(ports, bws))
    link_power = sum(nl * bw * c.link_power(i) for i, (nl, bw) in enumerate(zip(links, bws)))
    switch_power = sum(ns * bw * c.switch_power_J_per_GB for ns, bw in zip(ports, bws))
    link_on = not (quirks.cost_thresholds and nc == 1)
    switch_on = not (quirks.cost_thresholds and nc <= 4)
    link_cost = copies * link_cost if link_on else 0.0
    link_power = copies * link_power if link_on else 0.0
    switch_cost = copies * switch_cost if switch_on else 0.0
    switch_power = copies * switch_power if switch_on else 0.0
    dram_cost = n * dram_bw * c.dram_price_per_GBps
    chip_cost = n * c.chip_price
    dram_power = n * dram_bw * c.dram_power_J_per_GB
    chip_power = n * c.chip_power_W
    return Price(
        system_cost=dram_cost + chip_cost + link_cost + switch_cost,
        system_power=dram_power + chip_power + link_power + switch_power,
        dram_cost=dram_cost,
        chip_cost=chip_cost,
        link_cost=link_cost,
        switch_cost=switch_cost,
        dram_power=dram_power,
        chip_power=chip_power,
        link_power=link_power,
        switch_power=switch_power,
    )
