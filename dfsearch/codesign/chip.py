"""The chip model of the co-design search: from a chip design (a die of ``units`` equal-area
units, a share of them compute units, the rest SRAM; a memory technology and its unit count;
a link technology and its lanes) to the spec's accelerator, memory and cost fields, with the
die's area, yield, cost and power. Pure functions of the design and the technology catalogue
(docs/codesign.md gives the equations).

>>> from dfsearch.codesign.technology import load_technology
>>> tech = load_technology()
>>> design = ChipDesign(units=2080, memory_unit_bytes=524288, compute_share=0.7, memory="hbm")
>>> f = chip_figures(design, Core(32, 6, 1.25), tech)
>>> f.cores, f.sram_bytes, round(f.die_area_mm2, 1)
(1456, 327155712.0, 336.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dfsearch.codesign.technology import Process, Technology

__all__ = [
    "Core", "ChipDesign", "ChipFigures", "chip_figures", "split_units", "sram_mm2_per_byte",
    "dies_per_wafer", "poisson_yield", "die_cost", "compute_power_W", "spec_edits",
]


@dataclass(frozen=True, slots=True)
class Core:
    """One compute unit: a W x H systolic array at a clock (the base spec's)."""

    systolic_width: int
    systolic_height: int
    freq_GHz: float

    def peak_gflops(self) -> float:
        return 2.0 * self.systolic_width * self.systolic_height * self.freq_GHz


@dataclass(frozen=True, slots=True)
class ChipDesign:
    """The chip's free parameters. ``link`` None keeps the base spec's network bandwidths;
    ``link_lanes`` gives the lanes of each network dimension's link (one value: every
    dimension)."""

    units: int
    memory_unit_bytes: float
    compute_share: float
    memory: str
    memory_units: int = 1
    link: str | None = None
    link_lanes: tuple[int, ...] = ()
    process: str = "n7"


@dataclass(frozen=True, slots=True)
class ChipFigures:
    """What the chip model derives from a design (per chip)."""

    core: Core
    cores: int
    sram_bytes: float
    logic_area_mm2: float  #: compute and memory units
    phy_area_mm2: float  #: DRAM interfaces
    serdes_area_mm2: float  #: link lanes
    die_area_mm2: float
    dies_per_wafer: int
    die_yield: float
    die_cost_usd: float
    peak_gflops: float
    compute_power_W: float
    dram_bw_GBps: float
    dram_bytes: float  #: 0: the base spec's capacity stays
    dram_power_J_per_GB: float
    dram_price_per_GBps: float
    dram_power_W: float  #: at full bandwidth
    link_bw_GBps: tuple[float, ...]  #: per network dimension; () keeps the base spec's
    link_power_J_per_GB: float | None
    link_price_per_GBps: float | None

    @property
    def chip_power_W(self) -> float:
        """Compute plus DRAM at full bandwidth (the package's power)."""
        return self.compute_power_W + self.dram_power_W


def split_units(units: int, share: float, memory_unit_bytes: float) -> tuple[int, float]:
    """cores = round(units x share), SRAM = (units - cores) x memory_unit_bytes (the rule of
    a study's ``compute_share`` axis).

    >>> split_units(2080, 0.2, 524288)
    (416, 872415232.0)
    """
    cores = int(round(units * share))
    return cores, float((units - cores) * memory_unit_bytes)


def sram_mm2_per_byte(p: Process) -> float:
    """Die area of one byte of SRAM: 8 bit cells over the macro's array efficiency.

    >>> from dfsearch.codesign.technology import load_technology
    >>> round(sram_mm2_per_byte(load_technology().process["n7"]) * 2**20, 4)  # mm^2 per MiB
    0.3236
    """
    return 8 * p.sram_bitcell_um2.value * 1e-6 / p.sram_array_efficiency.value


def dies_per_wafer(area_mm2: float, diameter_mm: float) -> int:
    """Whole dies on a round wafer: pi (d/2)^2 / A - pi d / sqrt(2 A) (the wafer's area over
    the die's, less the partial dies along the edge; Hennessy & Patterson, ch. 1).

    >>> dies_per_wafer(100.0, 300.0)
    640
    """
    n = math.pi * (diameter_mm / 2) ** 2 / area_mm2 - math.pi * diameter_mm / math.sqrt(2 * area_mm2)
    return max(0, int(math.floor(n)))


def poisson_yield(area_mm2: float, defects_per_cm2: float) -> float:
    """Share of good dies, exp(-D0 A) (Poisson defects, A in cm^2).

    >>> round(poisson_yield(100.0, 0.1), 4)
    0.9048
    """
    return math.exp(-defects_per_cm2 * area_mm2 / 100.0)


def die_cost(area_mm2: float, p: Process) -> tuple[int, float, float]:
    """(dies per wafer, yield, cost of one good die in $): wafer price / (dies x yield);
    infinite when no die fits."""
    n = dies_per_wafer(area_mm2, p.wafer_diameter_mm.value)
    y = poisson_yield(area_mm2, p.defect_density_per_cm2.value)
    cost = p.wafer_cost_usd.value / (n * y) if n > 0 and y > 0 else math.inf
    return n, y, cost


def compute_power_W(peak_gflops: float, p: Process) -> float:
    """Peak FLOP/s x energy per FLOP.

    >>> from dfsearch.codesign.technology import load_technology
    >>> round(compute_power_W(138000.0, load_technology().process["n7"]), 1)  # TPUv4i's peak
    175.0
    """
    return peak_gflops * 1e9 * p.energy_pJ_per_flop.value * 1e-12


def chip_figures(design: ChipDesign, core: Core, tech: Technology) -> ChipFigures:
    """Every derived figure of ``design`` (names must exist in ``tech``: the study checks)."""
    p = tech.process[design.process]
    mem = tech.memory[design.memory]
    cores, sram = split_units(design.units, design.compute_share, design.memory_unit_bytes)
    logic = design.units * design.memory_unit_bytes * sram_mm2_per_byte(p)  # a core = a memory unit
    phy = design.memory_units * mem.phy_area_mm2.value
    lanes = sum(design.link_lanes) if design.link else 0
    link = tech.link[design.link] if design.link else None
    serdes = lanes * link.lane_area_mm2.value if link else 0.0
    area = logic + phy + serdes
    n, y, cost = die_cost(area, p)
    peak = cores * core.peak_gflops()
    dram_bw = design.memory_units * mem.bandwidth_GBps.value
    dram_j = mem.energy_pJ_per_bit.value * 8e-3  # pJ/bit -> J/GB
    return ChipFigures(
        core=core, cores=cores, sram_bytes=sram, logic_area_mm2=logic, phy_area_mm2=phy, serdes_area_mm2=serdes,
        die_area_mm2=area, dies_per_wafer=n, die_yield=y, die_cost_usd=cost, peak_gflops=peak,
        compute_power_W=compute_power_W(peak, p), dram_bw_GBps=dram_bw,
        dram_bytes=design.memory_units * mem.capacity_bytes.value, dram_power_J_per_GB=dram_j,
        dram_price_per_GBps=mem.price_usd_per_GBps.value, dram_power_W=dram_bw * dram_j,
        link_bw_GBps=tuple(n_lanes * link.lane_GBps.value for n_lanes in design.link_lanes) if link else (),
        link_power_J_per_GB=link.energy_pJ_per_bit.value * 8e-3 if link else None,
        link_price_per_GBps=link.price_usd_per_GBps.value if link else None,
    )  # fmt: skip


def spec_edits(f: ChipFigures) -> dict[str, Any]:
    """The spec field edits (path -> value) that put the chip ``f`` into a spec (its core too,
    so every workload of a mix runs on the same chip)."""
    edits: dict[str, Any] = {
        "system.accelerator.systolic_width": f.core.systolic_width,
        "system.accelerator.systolic_height": f.core.systolic_height,
        "system.accelerator.freq_GHz": f.core.freq_GHz,
        "system.accelerator.cores": f.cores,
        "system.accelerator.sram_bytes": f.sram_bytes,
        "system.memory.dram_bw_GBps": f.dram_bw_GBps,
        "cost.chip_price": f.die_cost_usd,
        "cost.chip_power_W": f.compute_power_W,
        "cost.dram_power_J_per_GB": f.dram_power_J_per_GB,
        "cost.dram_price_per_GBps": f.dram_price_per_GBps,
    }
    if f.dram_bytes > 0:
        edits["system.memory.dram_bytes"] = f.dram_bytes
    for i, bw in enumerate(f.link_bw_GBps):
        edits[f"system.network[{i}].link_bw_GBps"] = bw
    if f.link_power_J_per_GB is not None:
        edits["cost.link_power_J_per_GB"] = [f.link_power_J_per_GB] * len(f.link_bw_GBps)
        edits["cost.link_price_per_GBps"] = f.link_price_per_GBps
    return edits
