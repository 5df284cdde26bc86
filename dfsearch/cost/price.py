"""System cost and static power. Depends only on the shape and the DRAM
bandwidth in effect, never on the rest of the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from dfsearch.cost.quirks import Quirks
from dfsearch.spec import Spec
from dfsearch.system.network_cost import link_switch_counts

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


def price(
    spec: Spec, shape: tuple[int, ...], dram_bw: float, quirks: Quirks | None = None
) -> Price:
    """System cost ($) and static power (W) for a network shape, under the spec's ``quirks``
    (``quirks``: when given, they replace the spec's)."""
    quirks = spec.quirks if quirks is None else quirks
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
