"""The study file: a base spec, axes, how they combine, filters and fixed edits.

```toml
[study]
base = "gpt3_1T_dse_base.toml"   # relative to the study file
combine = "cross"                 # or "zip"
filter = "system.num_chip <= 1024"
seed = 0                          # optional: the search seed of every point

[set]                             # optional: edits applied to every point first
"execution.equations" = "design_space"

[axes]                            # in this order: the first axis varies slowest
accelerator = ["h100", "tpu_v4", "sn30", "wse2"]   # a catalogue preset axis
"system.memory.dram_bw_GBps" = [300, 600]          # a field path axis

[[override]]                      # optional, any number: edits for the points a condition picks
where = "accelerator == 'sn30'"   # conditions on axes, as a filter (joined by "and")
set = { "execution.style" = "kernel_by_kernel", "execution.num_config" = 0 }
```

A point's spec is the base file's data with, in this order, the ``[set]`` edits, the
preset axes (accelerator, memory, topology, interconnect, style: catalogue order), the
``compute_share`` axis (with its ``[area]`` table), the ``[[override]]`` edits whose
conditions hold (file order), then the field
path axes (file order), read through the TOML loader: the same checks and messages as a
spec file, and a generated graph is generated again from the edited workload.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dfsearch.capacity.serve_spec import split_serve
from dfsearch.errors import Issue, SpecError
from dfsearch.io.dfmodel import looks_like_dfmodel
from dfsearch.loader import load_spec, parse_toml, read_text, spec_from_data, spec_to_data
from dfsearch.spec import Spec
from dfsearch.study import catalogue
from dfsearch.study.filters import Condition, parse_filter
from dfsearch.validate import seed_issue

__all__ = ["Axis", "Override", "Point", "ServePoint", "Study", "load_study", "study_from_data"]

_TOP = ("study", "axes", "set", "networks", "area", "override")
#: the derived axis of a chip area split (needs the [area] table)
AREA_AXIS = "compute_share"
_STUDY_KEYS = ("base", "combine", "filter", "seed", "name", "description")
_COMBINE = ("cross", "zip")
_PATH = re.compile(r"^[A-Za-z_]\w*(\[\d+\]|\.\d+|\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True, slots=True)
class Axis:
    """One axis: a catalogue preset kind or a spec field path, and its values."""

    name: str
    values: tuple[Any, ...]
    preset: bool


@dataclass(frozen=True, slots=True)
class Override:
    """An ``[[override]]`` table: field edits for the points whose axis values satisfy every
    condition (a setting that differs per accelerator, per topology or per cell)."""

    conditions: tuple[Condition, ...]
    edits: tuple[tuple[str, Any], ...]
    where: str  #: "override[i]", for messages

    def applies(self, by_name: Mapping[str, Any]) -> bool:
        return all(c.holds(by_name[c.name]) for c in self.conditions)


@dataclass(frozen=True, slots=True)
class Point:
    """One point of a study: its position in the full product and one value per axis."""

    index: int
    values: tuple[Any, ...]

    def labels(self, axes: tuple[Axis, ...]) -> str:
        return ", ".join(f"{a.name}={cell(v)}" for a, v in zip(axes, self.values))


def cell(value: Any) -> Any:
    """An axis value as a table cell: numbers, words and booleans as they are, tables and
    arrays as JSON text."""
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, sort_keys=True)
    return value


@dataclass(frozen=True)
class ServePoint:
    """A point of a serving-capacity study (a base spec with a ``[serve]`` table): the
    point's TOML data, ``[serve]`` included, searched as ``dfsearch serve`` searches a file
    (``path``: the base spec, whose folder holds the files it includes)."""

    data: dict[str, Any]
    path: str


@dataclass(frozen=True)
class Study:
    """A parsed, checked study file. ``base_data`` is the base spec as TOML data."""

    file: str
    base: Path
    base_data: dict[str, Any]
    defaults: dict[str, Any]  #: the loaded base spec as data (every field, defaults too)
    axes: tuple[Axis, ...]
    combine: str
    filters: tuple[Condition, ...]
    fixed: tuple[tuple[str, Any], ...]
    seed: int | None
    name: str
    #: topology preset name -> the sizes of its dimensions (the ``[networks]`` table)
    network_sizes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: the ``[area]`` table: (units, memory_unit_bytes) of a ``compute_share`` axis
    area: tuple[int, float] | None = None
    #: the ``[[override]]`` tables, in file order
    overrides: tuple[Override, ...] = ()

    def all_points(self) -> list[Point]:
        """Every combination of the axes' values (before filters)."""
        return list(self.iter_all_points())

    def points(self) -> list[Point]:
        """The points the filters keep, in order."""
        return list(self.iter_points())

    def iter_all_points(self) -> Iterator[Point]:
        """:meth:`all_points` one at a time (nothing built ahead)."""
        lists = [a.values for a in self.axes]
        combos = zip(*lists) if self.combine == "zip" else itertools.product(*lists)
        return (Point(i, tuple(c)) for i, c in enumerate(combos))

    def iter_points(self) -> Iterator[Point]:
        """:meth:`points` one at a time: a study of a million points starts at once."""
        return (p for p in self.iter_all_points() if self._kept(p))

    def size(self) -> int:
        """The number of points before filters (without enumerating them)."""
        if not self.axes:
            return 1
        if self.combine == "zip":
            return min(len(a.values) for a in self.axes)
        return math.prod(len(a.values) for a in self.axes)

    def filters_read_fields(self) -> bool:
        """Whether a filter names a spec field (then a point's spec data is built to test it)."""
        names = {a.name for a in self.axes}
        return any(c.name not in names for c in self.filters)

    def point_at(self, index: int) -> Point | None:
        """The point of index ``index`` in :meth:`all_points` (None when out of range),
        computed without enumerating.

        >>> s = Study("s.toml", Path("b.toml"), {}, {}, (Axis("a", (1, 2), False), Axis("b", (3, 4, 5), False)),
        ...           "cross", (), (), None, "s")
        >>> s.point_at(5), s.point_at(6)
        (Point(index=5, values=(2, 5)), None)
        """
        if not 0 <= index < self.size():
            return None
        if self.combine == "zip":
            return self.point_of((index,))
        choice, rest = [], index
        for axis in reversed(self.axes):
            rest, c = divmod(rest, len(axis.values))
            choice.append(c)
        return self.point_of(tuple(reversed(choice)))

    def point_of(self, choice: tuple[int, ...]) -> Point:
        """The point taking value ``choice[i]`` of axis i (cross) or the ``choice[0]``-th
        values of every axis (zip), with its index in :meth:`all_points` (no enumeration).

        >>> s = Study("s.toml", Path("b.toml"), {}, {}, (Axis("a", (1, 2), False), Axis("b", (3, 4, 5), False)),
        ...           "cross", (), (), None, "s")
        >>> s.point_of((1, 2))
        Point(index=5, values=(2, 5))
        """
        if self.combine == "zip":
            i = choice[0]
            return Point(i, tuple(a.values[i] for a in self.axes))
        index = 0
        for axis, c in zip(self.axes, choice):
            index = index * len(axis.values) + c
        return Point(index, tuple(a.values[c] for a, c in zip(self.axes, choice)))

    def kept(self, point: Point) -> bool:
        """Whether the filters keep ``point``."""
        return self._kept(point)

    def point_data(self, point: Point) -> dict[str, Any]:
        """The TOML data of a point's spec (not yet validated)."""
        data = copy.deepcopy(self.base_data)
        for path, value in self.fixed:
            _put(data, path, value, self.file, f"set.{path}")
        by_name = dict(zip((a.name for a in self.axes), point.values))
        for kind in catalogue.ORDER:
            if kind in by_name:
                edits = catalogue.preset_edits(kind, by_name[kind], data, self.network_sizes)
                for path, value in edits.items():
                    _put(data, path, value, self.file, f"axes.{kind}")
        if AREA_AXIS in by_name and self.area is not None:
            for path, value in catalogue.area_split_edits(by_name[AREA_AXIS], *self.area).items():
                _put(data, path, value, self.file, f"axes.{AREA_AXIS}")
        for override in self.overrides:
            if override.applies(by_name):
                for path, value in override.edits:
                    _put(data, path, copy.deepcopy(value), self.file, f"{override.where}.set.{path}")
        for axis, value in zip(self.axes, point.values):
            if not axis.preset:
                _put(data, axis.name, copy.deepcopy(value), self.file, f"axes.{axis.name}")
        return data

    def point_spec(self, point: Point) -> Spec:
        """The validated spec of a point.

        Raises
        ------
        SpecError
            The point's spec breaks a rule; the message names the study file, the point's
            axis values and each field path.
        """
        data = self.point_data(point)
        where = f"{self.file} (point {point.labels(self.axes)})"
        try:
            if self.serves:  # the [serve] table checked as dfsearch serve checks it
                data, _ = split_serve(data, where)
            return spec_from_data(data, file=where, base_dir=self.base.parent)
        except SpecError as exc:
            raise exc.with_file(where) from None

    @property
    def serves(self) -> bool:
        """Whether the base spec has a ``[serve]`` table: each point is then searched as
        ``dfsearch serve`` searches a file (docs/studies.md, "Serving-capacity studies")."""
        return isinstance(self.base_data.get("serve"), dict)

    def point_serve(self, point: Point) -> ServePoint | None:
        """A serving-capacity point's data (None when the study does not serve)."""
        return ServePoint(self.point_data(point), str(self.base)) if self.serves else None

    def _kept(self, point: Point) -> bool:
        if not self.filters:
            return True
        by_name = dict(zip((a.name for a in self.axes), point.values))
        data = self.point_data(point) if any(c.name not in by_name for c in self.filters) else {}
        for c in self.filters:
            actual = by_name[c.name] if c.name in by_name else self._field(data, c.name)
            try:
                if not c.holds(actual):
                    return False
            except TypeError as exc:
                msg = f"cannot compare: {exc} (in {c.text!r}, point {point.labels(self.axes)})."
                raise SpecError(Issue("study.filter", msg), file=self.file) from None
        return True

    def _field(self, data: dict[str, Any], path: str) -> Any:
        for source in (data, self.defaults):
            found, value = _get(source, path)
            if found:
                return value
        msg = f"names no axis and no field of the spec: {path!r} (axes: {', '.join(a.name for a in self.axes) or 'none'})."
        raise SpecError(Issue("study.filter", msg), file=self.file)


def _keys(path: str) -> list[str | int]:
    return [int(k) if k.isdigit() else k for k in re.sub(r"\[(\d+)\]", r".\1", path).split(".")]


def _get(data: Any, path: str) -> tuple[bool, Any]:
    node = data
    for key in _keys(path):
        if (isinstance(node, list) and isinstance(key, int) and key < len(node)) or (isinstance(node, dict) and isinstance(key, str) and key in node):
            node = node[key]
        else:
            return False, None
    return True, node


def _put(data: dict[str, Any], path: str, value: Any, file: str, where: str) -> None:
    """Set ``value`` at ``path``; missing tables are created (the loader then rejects an
    unknown one with its own message), a missing list item is an error. A table value on
    an existing table sets the fields it names and keeps the others."""
    node: Any = data
    keys = _keys(path)
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        if isinstance(node, list):
            if not isinstance(key, int) or key >= len(node):
                msg = (f"{path!r}: {'.'.join(map(str, keys[:depth]))} is a list of {len(node)}; "
                       f"expected an index 0 to {len(node) - 1}. Got {key!r} instead.")  # fmt: skip
                raise SpecError(Issue(where, msg), file=file)
        elif not isinstance(node, dict) or isinstance(key, int):
            msg = f"{path!r}: {'.'.join(map(str, keys[:depth])) or 'the spec'} is not a list or table."
            raise SpecError(Issue(where, msg), file=file)
        if last:
            old = node[key] if isinstance(node, dict) and key in node else None
            merge = isinstance(value, dict) and isinstance(old, dict)
            node[key] = {**old, **value} if merge else value
        else:
            if isinstance(node, dict) and key not in node:
                node[key] = {}
            node = node[key]


def load_study(path: str | Path) -> Study:
    """Read and check a study file (TOML).

    Raises
    ------
    SpecError
        Unreadable file, bad TOML, unknown keys, a bad axis, filter or base spec; every
        message names the study file and the key (exit code 2 on the command line).
    """
    file = str(path)
    return study_from_data(parse_toml(read_text(path), file), file=file, folder=Path(path).parent)


def study_from_data(data: dict[str, Any], *, file: str, folder: Path) -> Study:
    """A :class:`Study` from parsed TOML data (``folder``: where ``base`` is relative to)."""
    issues: list[Issue] = []
    _unknown(data, _TOP, "", issues)
    head = data.get("study")
    if not isinstance(head, dict):
        issues.append(Issue("study", "is required (a [study] table with at least base = \"spec.toml\")."))
        head = {}
    _unknown(head, _STUDY_KEYS, "study.", issues)
    combine = head.get("combine", "cross")
    if combine not in _COMBINE:
        issues.append(Issue("study.combine", f"must be one of 'cross', 'zip'. Got {combine!r} instead."))
    seed = head.get("seed")
    if seed is not None and (issue := seed_issue("study.seed", seed)) is not None:
        issues.append(issue)
    axes = _axes(data.get("axes", {}), combine, issues)
    fixed = _fixed(data.get("set", {}), issues)
    sizes = _network_sizes(data.get("networks", {}), issues)
    area = _area(data.get("area"), axes, issues)
    filters = _filters(head.get("filter"), issues)
    overrides = _overrides(data.get("override", []), axes, issues)
    base = head.get("base")
    if (not isinstance(base, str) or not base) and isinstance(data.get("study"), dict):
        issues.append(Issue("study.base", f"must be the path of a spec file (relative to the study file). Got {base!r} instead."))
    if issues:
        raise SpecError(issues, file=file)
    base_path = folder / base
    base_data, defaults = _read_base(base_path, file)
    name = head.get("name") if isinstance(head.get("name"), str) else Path(file).stem
    return Study(file, base_path, base_data, defaults, axes, combine, filters, fixed, seed, name, sizes, area, overrides)


def _unknown(table: dict[str, Any], allowed: tuple[str, ...], prefix: str, issues: list[Issue]) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (allowed: {', '.join(allowed)})."
            issues.append(Issue(f"{prefix}{key}", f"is not a key of a study file{hint}"))


def _axes(table: Any, combine: str, issues: list[Issue]) -> tuple[Axis, ...]:
    if not isinstance(table, dict):
        issues.append(Issue("axes", "must be a table: axis name = [values]."))
        return ()
    axes = []
    for name, values in _flatten(table, ""):
        where = f"axes.{name}"
        if not isinstance(values, list) or not values:
            issues.append(Issue(where, f"must be a non-empty array of values. Got {values!r} instead."))
            continue
        preset = name in catalogue.PRESETS or name == AREA_AXIS
        if name == AREA_AXIS:
            for i, v in enumerate(values):
                if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
                    issues.append(Issue(f"{where}[{i}]", f"must be a share of compute units, 0 < share < 1. Got {v!r} instead."))
        elif preset:
            known = catalogue.PRESETS[name]
            for i, v in enumerate(values):
                if not isinstance(v, str) or v not in known:
                    issues.append(Issue(f"{where}[{i}]", f"must be one of {', '.join(map(repr, known))} (a preset name: docs/studies.md, catalogue). Got {v!r} instead."))
        elif not _PATH.match(name):
            issues.append(Issue(where, "is neither a catalogue axis (accelerator, memory, topology, interconnect, style) nor a field path such as \"system.memory.dram_bw_GBps\"."))
        cells = [json.dumps(cell(v)) for v in values]
        if len(set(cells)) != len(cells):
            issues.append(Issue(where, f"lists a value twice: {values!r}. Each point must be distinct."))
        axes.append(Axis(name, tuple(values), preset))
    if combine == "zip" and len({len(a.values) for a in axes}) > 1:
        sizes = ", ".join(f"{a.name} {len(a.values)}" for a in axes)
        issues.append(Issue("axes", f"with combine = \"zip\" every axis needs the same number of values. Got {sizes}."))
    return tuple(axes)


def _fixed(table: Any, issues: list[Issue]) -> tuple[tuple[str, Any], ...]:
    if not isinstance(table, dict):
        issues.append(Issue("set", "must be a table: \"field.path\" = value."))
        return ()
    out = []
    for path, value in _flatten(table, ""):
        if not _PATH.match(path):
            issues.append(Issue(f"set.{path}", "is not a field path such as \"execution.equations\"."))
        out.append((path, value))
    return tuple(out)


def _overrides(value: Any, axes: tuple[Axis, ...], issues: list[Issue]) -> tuple[Override, ...]:
    """``[[override]]``: each table has ``where`` (conditions on axis names, as a filter:
    a string or a list of them) and ``set`` (field path = value), both required."""
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        issues.append(Issue("override", "must be an array of tables: [[override]] where = \"accelerator == 'sn30'\", set = { ... }."))
        return ()
    out = []
    for i, table in enumerate(value):
        where = f"override[{i}]"
        before = len(issues)
        _unknown(table, ("where", "set"), f"{where}.", issues)
        conditions = _override_conditions(table.get("where"), where, axes, issues)
        edits = table.get("set")
        if not isinstance(edits, dict) or not edits:
            issues.append(Issue(f"{where}.set", f"must be a non-empty table: \"field.path\" = value. Got {edits!r} instead."))
            edits = {}
        sub: list[Issue] = []
        fixed = _fixed(edits, sub)
        issues += [Issue(f"{where}.{x.path}", x.message) for x in sub]
        if len(issues) == before:
            out.append(Override(conditions, fixed, where))
    return tuple(out)


def _override_conditions(value: Any, where: str, axes: tuple[Axis, ...], issues: list[Issue]) -> tuple[Condition, ...]:
    """The conditions of an override's ``where``; each must test an axis, with a value the
    axis has (``==``) or numbers on a numeric axis (``< <= > >=``)."""
    if value is None or value == []:
        issues.append(Issue(f"{where}.where", "is required: conditions on the axes, e.g. \"accelerator == 'sn30'\"."))
        return ()
    texts = value if isinstance(value, list) else [value]
    by_name = {a.name: a for a in axes}
    out: list[Condition] = []
    for j, text in enumerate(texts):
        path = f"{where}.where" if not isinstance(value, list) else f"{where}.where[{j}]"
        try:
            conditions = parse_filter(text, path)
        except SpecError as exc:
            issues += exc.issues
            continue
        for c in conditions:
            axis = by_name.get(c.name)
            numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (*axis.values, c.value)) if axis else False
            if axis is None:
                issues.append(Issue(path, f"may only test axes (here: {', '.join(by_name) or 'none'}). Got {c.name!r} in {c.text!r}."))
            elif c.op == "==" and not any(c.holds(v) for v in axis.values):
                issues.append(Issue(path, f"{c.text!r} never holds: the axis {c.name!r} has the values {', '.join(map(repr, axis.values))}."))
            elif c.op not in ("==", "!=") and not numbers:
                issues.append(Issue(path, f"{c.text!r}: {c.op} compares numbers; the axis {c.name!r} or the value is not numeric."))
            else:
                out.append(c)
    return tuple(out)


def _area(table: Any, axes: tuple[Axis, ...], issues: list[Issue]) -> tuple[int, float] | None:
    """``[area]``: ``units`` (int) and ``memory_unit_bytes`` of a ``compute_share`` axis."""
    wanted = any(a.name == AREA_AXIS for a in axes)
    if table is None:
        if wanted:
            issues.append(Issue("area", f"is required by the axis {AREA_AXIS!r}: [area] units = 2080, memory_unit_bytes = 524288."))
        return None
    if not isinstance(table, dict):
        issues.append(Issue("area", "must be a table: units = N, memory_unit_bytes = B."))
        return None
    _unknown(table, ("units", "memory_unit_bytes"), "area.", issues)
    units, unit_bytes = table.get("units"), table.get("memory_unit_bytes")
    if isinstance(units, bool) or not isinstance(units, int) or units < 2:
        issues.append(Issue("area.units", f"must be an integer >= 2 (compute plus memory units). Got {units!r} instead."))
    if isinstance(unit_bytes, bool) or not isinstance(unit_bytes, int | float) or unit_bytes <= 0:
        issues.append(Issue("area.memory_unit_bytes", f"must be > 0 (SRAM bytes of one memory unit). Got {unit_bytes!r} instead."))
    if not wanted:
        issues.append(Issue("area", f"is used only by an axis {AREA_AXIS!r}; the study has none."))
    return (units, float(unit_bytes)) if isinstance(units, int) and isinstance(unit_bytes, int | float) else None


def _network_sizes(table: Any, issues: list[Issue]) -> dict[str, tuple[int, ...]]:
    """``[networks]``: topology preset name = [size of each dimension]."""
    if not isinstance(table, dict):
        issues.append(Issue("networks", "must be a table: topology = [sizes], e.g. torus2d = [32, 32]."))
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for name, sizes in table.items():
        where = f"networks.{name}"
        preset = catalogue.TOPOLOGIES.get(name)
        if preset is None:
            known = ", ".join(map(repr, catalogue.TOPOLOGIES))
            issues.append(Issue(where, f"must name a topology of the catalogue ({known}). Got {name!r} instead."))
            continue
        n = len(preset.dims)
        ok = isinstance(sizes, list) and len(sizes) == n
        if not ok or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            issues.append(Issue(where, f"must be {n} positive integers, one size per dimension of {preset.variant}. Got {sizes!r} instead."))
            continue
        out[name] = tuple(sizes)
    return out


def _flatten(table: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
    """Keys written quoted (``"system.num_chip" = ...``) or dotted (``system.num_chip = ...``,
    which TOML reads as sub-tables) as one list of (field path, value)."""
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _filters(value: Any, issues: list[Issue]) -> tuple[Condition, ...]:
    if value is None:
        return ()
    texts = value if isinstance(value, list) else [value]
    out: list[Condition] = []
    for i, text in enumerate(texts):
        path = "study.filter" if not isinstance(value, list) else f"study.filter[{i}]"
        try:
            out += parse_filter(text, path)
        except SpecError as exc:
            issues += exc.issues
    return tuple(out)


def _read_base(path: Path, file: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The base spec as TOML data (a DFModel input: its converted data) and as complete data
    (every field, for filters on fields the file leaves at their default)."""
    try:
        text = read_text(path)
        data = None if looks_like_dfmodel(text) else parse_toml(text, str(path))
        if data is not None and "serve" in data:  # a serve spec: its [serve] table stays in the data
            spec = spec_from_data(split_serve(data, str(path))[0], file=str(path), base_dir=path.parent)
        else:
            spec = load_spec(path)
    except SpecError as exc:
        raise SpecError([Issue("study.base", f"{i.render(exc.file)}") for i in exc.issues], file=file) from None
    full = spec_to_data(spec)
    return (full if data is None else data), full
