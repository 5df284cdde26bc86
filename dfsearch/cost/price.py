"""System cost and static power. Depends only on the shape and the DRAM
bandwidth in effect, never on the rest of the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from dfsearch.cost.quirks import Quirks
from dfsearch.spec import Spec

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


def link_switch_counts(
    variant: str, shape: tuple[int, ...], chips_per_copy: int, num_chip: int, quirks: Quirks
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-dimension link counts nL and switch port counts nS."""
    nc = chips_per_copy
    x = shape[0]
    y = shape[1] if len(shape) > 1 else 1
    z = shape[2] if len(shape) > 2 else 1
    big = num_chip if quirks.total_chips_for_dim0 else nc
    table = {
        "r": ((x,), (2 if quirks.ring_two_switch_ports else x,)),
        "sw": ((x,), (x,)),
        "fc": ((x * (x - 1),), (0,)),
        "r_r": ((nc, nc), (2 * y, 2 * x)),
        "fc_fc": ((x * (x - 1) * y, y * (y - 1)), (0, y * y)),
        "r_fc": ((nc, y * (y - 1)), (2 * y, y * y)),
        "r_sw": ((big, y), (2 * y, y)),
        "sw_sw": ((big, y), (big, y)),
        "r_r_r": ((nc, nc, nc), (2 * y * z, 2 * x * z, 2 * x * y)),
        "r_sw_sw": ((nc, y * z, z), (2 * y * z, y * z, z)),
        "sw_sw_sw": ((nc, y * z, z), (nc, y * z, z)),
    }
    links, ports = table[variant]
    return tuple(float(v) for v in links), tuple(float(v) for v in ports)


def price(spec: Spec, shape: tuple[int, ...], dram_bw: float, quirks: Quirks = Quirks()) -> Price:
    """System cost ($) and static power (W) for a network shape."""
    sysm, c = spec.system, spec.cost
    n = sysm.num_chip
    copies = spec.num_copy
    nc = n // copies
    links, ports = link_switch_counts(sysm.variant, shape, nc, n, quirks)
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
