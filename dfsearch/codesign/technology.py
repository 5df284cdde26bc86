"""The technology catalogue of the co-design search: process nodes, memory technologies and
link technologies, each coefficient with its unit and its source
(``dfsearch/presets/technology.json``; docs/codesign.md tabulates them).

>>> tech = load_technology()
>>> tech.memory["hbm3"].bandwidth_GBps.value, tech.process["n7"].wafer_cost_usd.value
(819.2, 9346.0)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dfsearch.errors import Issue, SpecError

__all__ = ["Coefficient", "Process", "MemoryTech", "LinkTech", "Technology", "load_technology", "CATALOGUE"]

#: the catalogue shipped with the package
CATALOGUE = Path(__file__).resolve().parent.parent / "presets" / "technology.json"


@dataclass(frozen=True, slots=True)
class Coefficient:
    """One number of the catalogue: its value, unit and where it comes from."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True, slots=True)
class Process:
    """A process node: SRAM density, compute energy, wafer price and defect density."""

    name: str
    description: str
    sram_bitcell_um2: Coefficient
    sram_array_efficiency: Coefficient
    energy_pJ_per_flop: Coefficient
    wafer_cost_usd: Coefficient
    wafer_diameter_mm: Coefficient
    defect_density_per_cm2: Coefficient


@dataclass(frozen=True, slots=True)
class MemoryTech:
    """A DRAM technology, per unit (a channel or a stack): bandwidth, capacity (0: keep the
    base spec's), access energy, price per GB/s (DFModel's cost model), PHY area on the die and
    the most units a chip carries."""

    name: str
    description: str
    bandwidth_GBps: Coefficient
    capacity_bytes: Coefficient
    energy_pJ_per_bit: Coefficient
    price_usd_per_GBps: Coefficient
    phy_area_mm2: Coefficient
    max_units: Coefficient


@dataclass(frozen=True, slots=True)
class LinkTech:
    """A chip-to-chip link technology, per lane: bandwidth, area, energy, price per GB/s."""

    name: str
    description: str
    lane_GBps: Coefficient
    lane_area_mm2: Coefficient
    energy_pJ_per_bit: Coefficient
    price_usd_per_GBps: Coefficient


@dataclass(frozen=True, slots=True)
class Technology:
    """The whole catalogue, by name."""

    process: Mapping[str, Process]
    memory: Mapping[str, MemoryTech]
    link: Mapping[str, LinkTech]
    file: str

    def coefficients(self) -> list[tuple[str, Coefficient]]:
        """Every coefficient with its path (``memory.hbm3.bandwidth_GBps``)."""
        out = []
        for group, table in (("process", self.process), ("memory", self.memory), ("link", self.link)):
            for name, entry in table.items():
                out += [(f"{group}.{name}.{f.name}", getattr(entry, f.name)) for f in fields(entry)
                        if isinstance(getattr(entry, f.name), Coefficient)]  # fmt: skip
        return out


_KINDS: dict[str, type] = {"process": Process, "memory": MemoryTech, "link": LinkTech}


def load_technology(path: str | Path | None = None) -> Technology:
    """Read and check a technology catalogue (default: the packaged one).

    Raises
    ------
    SpecError
        Unreadable file, bad JSON, a missing or unknown coefficient, a coefficient without a
        source or with a negative value (file, field path, value, expectation).
    """
    file = str(path or CATALOGUE)
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(Issue("", f"cannot read the technology catalogue: {exc}"), file=file) from None
    issues: list[Issue] = []
    tables = {kind: _entries(data.get(kind), kind, cls, issues) for kind, cls in _KINDS.items()}
    if issues:
        raise SpecError(issues, file=file)
    return Technology(tables["process"], tables["memory"], tables["link"], file)


def _entries(table: Any, kind: str, cls: type, issues: list[Issue]) -> Mapping[str, Any]:
    if not isinstance(table, dict) or not table:
        issues.append(Issue(kind, f"must be a table of named {kind} entries. Got {table!r} instead."))
        return MappingProxyType({})
    out = {}
    for name, entry in table.items():
        where = f"{kind}.{name}"
        if not isinstance(entry, dict):
            issues.append(Issue(where, f"must be a table. Got {entry!r} instead."))
            continue
        wanted = [f.name for f in fields(cls) if f.name not in ("name", "description")]
        for key in entry:
            if key not in (*wanted, "description"):
                issues.append(Issue(f"{where}.{key}", f"is not a coefficient of a {kind} entry (expected: {', '.join(wanted)})."))
        values = {key: _coefficient(entry.get(key), f"{where}.{key}", issues) for key in wanted}
        if all(v is not None for v in values.values()):
            out[name] = cls(name=name, description=str(entry.get("description", "")), **values)
    return MappingProxyType(out)


def _coefficient(value: Any, where: str, issues: list[Issue]) -> Coefficient | None:
    if not isinstance(value, dict):
        issues.append(Issue(where, f"is required: {{value, unit, source}}. Got {value!r} instead."))
        return None
    number, unit, source = value.get("value"), value.get("unit"), value.get("source")
    if isinstance(number, bool) or not isinstance(number, int | float) or not number >= 0:
        issues.append(Issue(f"{where}.value", f"must be a number >= 0. Got {number!r} instead."))
        return None
    if not isinstance(source, str) or len(source.strip()) < 10:
        issues.append(Issue(f"{where}.source", f"must cite where the number comes from (paper, datasheet or standard and its year). Got {source!r} instead."))
        return None
    return Coefficient(float(number), str(unit or ""), source)
