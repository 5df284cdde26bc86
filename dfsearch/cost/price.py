"""System cost and static power. Depends only on the shape and the DRAM
bandwidth in effect, never on the rest of the mapping. The network's share (links and switch
ports) is the fabric's (``dfsearch.system.network_cost``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dfsearch.quirks import Quirks
from dfsearch.spec import Spec
from dfsearch.system.network_cost import link_switch_counts, network_price

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
    net = network_price(sysm, c, shape, spec.num_copy, quirks)
    link_cost, switch_cost = net.link_cost, net.switch_cost
    link_power, switch_power = net.link_power, net.switch_power
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
