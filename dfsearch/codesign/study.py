"""The co-design study file (``dfsearch codesign STUDY``; docs/codesign.md).

```toml
[codesign]
trials = 24                       # budget: trials asked of the sampler (never seconds)
seed = 0
sampler = "nsga2"                 # or "tpe"
objectives = ["throughput", "cost", "power"]
population = 8                    # optional, NSGA-II's population

[[workload]]                      # one or more; a mix is weighted
spec = "../gpt3_1T_sn30.toml"     # relative to the study file
weight = 1.0

[set]                             # optional field edits of every workload's spec
"system.num_chip" = 8

[chip]                            # the design's fixed values (a variable overrides one)
units = 2080                      # equal-area units of the die: compute or 512 KiB of SRAM
memory_unit_bytes = 524288
compute_share = 0.5
memory = "hbm"                    # a memory technology of the catalogue
memory_units = 1                  # its channels or stacks
link = "serdes-112g"              # optional: link technology; absent = the spec's links
link_lanes = 4                    # lanes per network dimension (or one value per dimension)
process = "n7"

[variables]                       # choices (an array) or a range {low, high, step}
compute_share = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
memory = ["ddr", "hbm", "3d"]
memory_units = { low = 1, high = 6 }
"system.num_chip" = [8, 16]       # any spec field path

[budget]                          # optional limits; a trial over one is recorded, not searched
area_mm2 = 800
chip_power_W = 700
system_power_W = 1e6
system_cost_usd = 1e8
```
"""

from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dfsearch.codesign.chip import ChipDesign, Core
from dfsearch.codesign.technology import Technology, load_technology
from dfsearch.errors import Issue, SpecError
from dfsearch.loader import load_spec, parse_toml, read_text, spec_from_data
from dfsearch.spec import Spec
from dfsearch.study.pareto import OBJECTIVES
from dfsearch.study.study import _flatten, _put
from dfsearch.validate import seed_issue

__all__ = ["Variable", "Workload", "Budget", "CodesignStudy", "load_codesign", "CHIP_KEYS", "SAMPLERS"]

_TOP = ("codesign", "workload", "set", "chip", "variables", "budget")
_HEAD = ("trials", "seed", "sampler", "objectives", "population", "name", "description")
SAMPLERS = ("nsga2", "tpe")
#: chip parameter -> its default (None: required)
CHIP_KEYS = MappingProxyType({
    "units": None, "memory_unit_bytes": None, "compute_share": None, "memory": None,
    "memory_units": 1, "link": None, "link_lanes": 1, "process": "n7",
})  # fmt: skip
_BUDGETS = ("area_mm2", "chip_power_W", "system_power_W", "system_cost_usd")


@dataclass(frozen=True, slots=True)
class Variable:
    """A free parameter: a chip parameter or a spec field path, and its choices."""

    name: str
    choices: tuple[Any, ...]

    @property
    def chip(self) -> bool:
        return self.name in CHIP_KEYS


@dataclass(frozen=True)
class Workload:
    """One workload of the mix: its spec file (as TOML data) and its weight."""

    spec: Path
    weight: float
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits (None: none): die area, chip power (compute + DRAM), system power and cost."""

    area_mm2: float | None = None
    chip_power_W: float | None = None
    system_power_W: float | None = None
    system_cost_usd: float | None = None


@dataclass(frozen=True)
class CodesignStudy:
    """A parsed, checked co-design study."""

    file: str
    name: str
    workloads: tuple[Workload, ...]
    fixed: tuple[tuple[str, Any], ...]
    chip: MappingProxyType  #: chip parameter -> fixed value
    variables: tuple[Variable, ...]
    budget: Budget
    objectives: tuple[str, ...]
    sampler: str
    trials: int
    seed: int
    population: int | None
    tech: Technology

    def design(self, values: dict[str, Any]) -> ChipDesign:
        """The chip design of a trial (``values``: variable name -> value)."""
        p = {**self.chip, **{k: v for k, v in values.items() if k in CHIP_KEYS}}
        dims = len(self.workloads[0].data.get("system", {}).get("network", []))
        lanes = p["link_lanes"]
        lanes = tuple(lanes) if isinstance(lanes, list | tuple) else (lanes,) * dims
        return ChipDesign(int(p["units"]), float(p["memory_unit_bytes"]), float(p["compute_share"]), p["memory"],
                          int(p["memory_units"]), p["link"], lanes, p["process"])  # fmt: skip

    def core(self, spec: Spec) -> Core:
        a = spec.system.accelerator
        return Core(a.systolic_width, a.systolic_height, a.freq_GHz)

    def workload_spec(self, i: int, values: dict[str, Any], edits: dict[str, Any]) -> Spec:
        """Workload ``i``'s spec for a trial: ``[set]``, the field path variables, then the
        chip's ``edits``; checked by the spec loader (SpecError names the trial)."""
        w = self.workloads[i]
        data = copy.deepcopy(w.data)
        for path, value in self.fixed:
            _put(data, path, copy.deepcopy(value), self.file, f"set.{path}")
        for name, value in values.items():
            if name not in CHIP_KEYS:
                _put(data, name, copy.deepcopy(value), self.file, f"variables.{name}")
        for path, value in edits.items():
            _put(data, path, value, self.file, "chip")
        where = f"{self.file} (workload {w.spec.name}, {', '.join(f'{k}={v}' for k, v in values.items())})"
        try:
            return spec_from_data(data, file=where, base_dir=w.spec.parent)
        except SpecError as exc:
            raise exc.with_file(where) from None


def load_codesign(path: str | Path) -> CodesignStudy:
    """Read and check a co-design study (TOML).

    Raises
    ------
    SpecError
        Unreadable file, bad TOML, unknown keys, bad values; every message names the file,
        the key, the value and what was expected (exit code 2).
    """
    file = str(path)
    data = parse_toml(read_text(path), file)
    issues: list[Issue] = []
    _unknown(data, _TOP, "", issues)
    head = data.get("codesign", {})
    if not isinstance(head, dict):
        issues.append(Issue("codesign", f"must be a table. Got {head!r} instead."))
        head = {}
    _unknown(head, _HEAD, "codesign.", issues)
    tech = load_technology()
    settings = _settings(head, issues)
    workloads = _workloads(data.get("workload"), Path(path).parent, file, issues)
    fixed = _fixed(data.get("set", {}), issues)
    variables = _variables(data.get("variables", {}), tech, issues)
    chip = _chip(data.get("chip", {}), {v.name for v in variables}, tech, issues)
    budget = _budget(data.get("budget", {}), issues)
    _lanes_fit(chip, variables, workloads, issues)
    if issues:
        raise SpecError(issues, file=file)
    name = head.get("name") if isinstance(head.get("name"), str) else Path(file).stem
    study = CodesignStudy(file, name, workloads, fixed, MappingProxyType(chip), variables, budget, tech=tech, **settings)
    _precheck(study)
    return study


def _precheck(study: CodesignStudy) -> None:
    """Build every workload's spec once per choice of each field path variable (the others at
    their first choice), with the ``[set]`` edits, so a bad value stops the study before any
    search (SpecError: the file, the trial's values, the field path)."""
    first = {v.name: v.choices[0] for v in study.variables}
    for var in study.variables:
        for value in var.choices if not var.chip else var.choices[:1]:
            for i in range(len(study.workloads)):
                study.workload_spec(i, {**first, var.name: value}, {})


def _fixed(table: Any, issues: list[Issue]) -> tuple[tuple[str, Any], ...]:
    if not isinstance(table, dict):
        issues.append(Issue("set", f"must be a table: \"field.path\" = value. Got {table!r} instead."))
        return ()
    return tuple(_flatten(table, ""))


def _lanes_fit(chip: dict[str, Any], variables: tuple[Variable, ...], workloads: tuple[Workload, ...], issues: list[Issue]) -> None:
    """A list of lanes needs one entry per network dimension of every workload."""
    dims = {len(w.data.get("system", {}).get("network", [])) for w in workloads}
    lists = [("chip.link_lanes", chip.get("link_lanes"))]
    lists += [(f"variables.link_lanes[{i}]", c) for v in variables if v.name == "link_lanes" for i, c in enumerate(v.choices)]
    for where, lanes in lists:
        if isinstance(lanes, list) and {len(lanes)} != dims:
            issues.append(Issue(where, f"must give one lane count per network dimension ({', '.join(map(str, sorted(dims)))}). Got {lanes!r} instead."))


def _unknown(table: dict[str, Any], allowed: tuple[str, ...], prefix: str, issues: list[Issue]) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (allowed: {', '.join(allowed)})."
            issues.append(Issue(f"{prefix}{key}", f"is not a key of a co-design study{hint}"))


def _int(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _settings(head: dict[str, Any], issues: list[Issue]) -> dict[str, Any]:
    trials, seed = head.get("trials", 50), head.get("seed", 0)
    sampler, population = head.get("sampler", "nsga2"), head.get("population")
    objectives = head.get("objectives", ["throughput", "cost", "power"])
    if not _int(trials, 1):
        issues.append(Issue("codesign.trials", f"must be an integer >= 1 (the trial budget). Got {trials!r} instead."))
    if (issue := seed_issue("codesign.seed", seed)) is not None:
        issues.append(issue)
    if sampler not in SAMPLERS:
        issues.append(Issue("codesign.sampler", f"must be one of {', '.join(map(repr, SAMPLERS))}. Got {sampler!r} instead."))
    if population is not None and not _int(population, 2):
        issues.append(Issue("codesign.population", f"must be an integer >= 2. Got {population!r} instead."))
    ok = isinstance(objectives, list) and 1 <= len(objectives) <= 3 and len(set(map(str, objectives))) == len(objectives)
    if not ok or not all(o in OBJECTIVES for o in objectives):
        issues.append(Issue("codesign.objectives", f"must list 1 to 3 distinct names among {', '.join(map(repr, OBJECTIVES))}. Got {objectives!r} instead."))
        objectives = ["throughput"]
    return {"trials": trials, "seed": seed, "sampler": sampler, "population": population, "objectives": tuple(objectives)}


def _workloads(value: Any, folder: Path, file: str, issues: list[Issue]) -> tuple[Workload, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(t, dict) for t in value):
        issues.append(Issue("workload", f"is required: one or more [[workload]] tables with spec = \"file.toml\". Got {value!r} instead."))
        return ()
    out = []
    for i, table in enumerate(value):
        where = f"workload[{i}]"
        _unknown(table, ("spec", "weight"), f"{where}.", issues)
        spec, weight = table.get("spec"), table.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight < math.inf:
            issues.append(Issue(f"{where}.weight", f"must be a number > 0. Got {weight!r} instead."))
        if not isinstance(spec, str) or not spec:
            issues.append(Issue(f"{where}.spec", f"must be the path of a TOML spec (relative to the study file). Got {spec!r} instead."))
            continue
        path = folder / spec
        try:
            load_spec(path)
            data = parse_toml(read_text(path), str(path))
        except SpecError as exc:
            issues += [Issue(f"{where}.spec", i.render(exc.file)) for i in exc.issues]
            continue
        out.append(Workload(path, float(weight) if isinstance(weight, int | float) else 1.0, data))
    return tuple(out)


def _choices(name: str, value: Any, issues: list[Issue]) -> tuple[Any, ...]:
    """An array of choices, or ``{low, high, step}`` (step 1 for integers) as choices."""
    where = f"variables.{name}"
    if isinstance(value, list) and value:
        if len({repr(v) for v in value}) != len(value):
            issues.append(Issue(where, f"lists a value twice: {value!r}."))
        return tuple(value)
    if isinstance(value, dict) and set(value) <= {"low", "high", "step"} and {"low", "high"} <= set(value):
        low, high = value["low"], value["high"]
        step = value.get("step", 1)
        nums = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high, step))
        if nums and step > 0 and low <= high and (high - low) / step <= 10_000:
            n = int(math.floor((high - low) / step + 1e-9)) + 1
            ints = all(isinstance(v, int) for v in (low, high, step))
            return tuple(low + i * step if ints else round(low + i * step, 12) for i in range(n))
    issues.append(Issue(where, f"must be an array of choices or a range {{low, high, step}} (low <= high, step > 0, at most 10,000 values). Got {value!r} instead."))
    return ()


def _variables(table: Any, tech: Technology, issues: list[Issue]) -> tuple[Variable, ...]:
    if not isinstance(table, dict):
        issues.append(Issue("variables", "must be a table: name = [choices] or {low, high, step}."))
        return ()
    out = []
    for name, value in table.items():
        if name not in CHIP_KEYS and isinstance(value, dict) and not ({"low", "high"} <= set(value)):
            for sub, v in _flatten(value, f"{name}."):  # a dotted field path written as tables
                out.append(Variable(sub, _choices(sub, v, issues)))
            continue
        choices = _choices(name, value, issues)
        for i, v in enumerate(choices):
            _chip_value(name, v, f"variables.{name}[{i}]", tech, issues)
        out.append(Variable(name, choices))
    return tuple(out)


def _chip(table: Any, free: set[str], tech: Technology, issues: list[Issue]) -> dict[str, Any]:
    if not isinstance(table, dict):
        issues.append(Issue("chip", "must be a table of chip parameters."))
        return {}
    _unknown(table, tuple(CHIP_KEYS), "chip.", issues)
    out = {}
    for key, default in CHIP_KEYS.items():
        value = table.get(key, default)
        if value is None and key not in free and key != "link":
            issues.append(Issue(f"chip.{key}", "is required (a fixed value here, or a [variables] entry)."))
        elif value is not None:
            _chip_value(key, value, f"chip.{key}", tech, issues)
        out[key] = value
    return out


def _chip_value(key: str, v: Any, where: str, tech: Technology, issues: list[Issue]) -> None:
    """Check one chip parameter's value (field path variables are checked by the loader)."""
    number = isinstance(v, int | float) and not isinstance(v, bool)
    names = {"memory": tech.memory, "link": tech.link, "process": tech.process}
    if key in names and v not in names[key]:
        issues.append(Issue(where, f"must name a {key} of the technology catalogue ({', '.join(map(repr, names[key]))}). Got {v!r} instead."))
    elif key == "compute_share" and not (number and 0 < v < 1):
        issues.append(Issue(where, f"must be a share of compute units, 0 < share < 1. Got {v!r} instead."))
    elif key in ("units", "memory_units") and not _int(v, 1):
        issues.append(Issue(where, f"must be an integer >= 1. Got {v!r} instead."))
    elif key == "memory_unit_bytes" and not (number and v > 0):
        issues.append(Issue(where, f"must be > 0 (SRAM bytes of one memory unit). Got {v!r} instead."))
    elif key == "link_lanes" and not (_int(v, 1) or (isinstance(v, list) and v and all(_int(x, 1) for x in v))):
        issues.append(Issue(where, f"must be an integer >= 1 or one per network dimension. Got {v!r} instead."))


def _budget(table: Any, issues: list[Issue]) -> Budget:
    if not isinstance(table, dict):
        issues.append(Issue("budget", "must be a table of limits."))
        return Budget()
    _unknown(table, _BUDGETS, "budget.", issues)
    values = {}
    for key in _BUDGETS:
        v = table.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf):
            issues.append(Issue(f"budget.{key}", f"must be a number > 0. Got {v!r} instead."))
            v = None
        values[key] = None if v is None else float(v)
    return Budget(**values)
