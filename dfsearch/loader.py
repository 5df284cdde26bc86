"""Read inputs: dfsearch TOML specs, graph files, and DFModel ``setup.txt`` (by content).

The TOML format is documented key by key in ``docs/spec.md``; table and key names are the
field names of :mod:`dfsearch.spec`. Every problem of a file (unknown keys, wrong types, unknown
words, missing keys, then the semantic rules of :mod:`dfsearch.validate`) is collected and raised
as one :class:`~dfsearch.errors.SpecError`.

>>> spec = load_toml_spec('''
... [workload]
... kind = "fft"
... length = 1024
... [graph]
... generator = "fft"
... r = 2
... [system]
... num_chip = 1
... [system.accelerator]
... cores = 1
... systolic_width = 1
... systolic_height = 1
... sram_bytes = 0
... freq_GHz = 1.0
... [system.memory]
... dram_bw_GBps = 100
... [[system.network]]
... topology = "switch"
... size = 1
... link_bw_GBps = 10
... ''', file="<doc>", base_dir=Path("."))
>>> spec.system.variant, [k.name for k in spec.graph.kernels]
('sw', ['Step_1', 'Step_2'])
>>> load_toml_spec("[system]\\nnum_chip = 2.5", file="s.toml", base_dir=Path("."))
Traceback (most recent call last):
...
dfsearch.errors.SpecError: s.toml: 6 problems:
  workload is required (a [workload] table).
  graph is required (a [graph] table).
  system.num_chip must be an integer. Got 2.5 instead.
  system.accelerator is required (a [system.accelerator] table).
  system.memory is required (a [system.memory] table).
  system.network is required (1 to 3 [[system.network]] tables).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dfsearch import codes, workloads
from dfsearch.errors import Issue, SpecError
from dfsearch.io import dfmodel
from dfsearch.io.files import read_text  # re-exported
from dfsearch.kernels.generators import GENERATORS, generate
from dfsearch.presets import expand_presets
from dfsearch.spec import (
    AUTO,
    TRAINING_CHOICES,
    Accelerator,
    Connection,
    Cost,
    Execution,
    Graph,
    Kernel,
    Memory,
    NetworkDim,
    Quirks,
    SearchSettings,
    Spec,
    Speculative,
    System,
    Training,
    Workload,
)
from dfsearch.validate import quote_list, show, strategy_issue, validate_graph, validate_parts
from dfsearch.workloads import model_named, model_of

__all__ = [
    "load_spec",
    "load_toml_spec",
    "load_input",
    "load_graph_file",
    "parse_toml",
    "read_text",
    "replace_field",
    "spec_from_data",
    "spec_to_data",
]

_TOP = (
    "workload", "graph", "system", "cost", "execution", "search", "training", "speculative",
    "quirks",
)
_GRAPH_MODES = ("generator", "include", "kernels")


# --------------------------------------------------------------------------- public API
def load_spec(path: str | Path, *, equations: codes.Equations | None = None) -> Spec:
    """Load a spec: a dfsearch TOML file or a DFModel ``setup.txt`` (recognised by content).

    Parameters
    ----------
    path : str or Path
        The input file. Relative ``graph.include`` paths are resolved against its folder.
    equations : Equations, optional
        The equation set asked for (the CLI's ``--equations``): it picks the set of a pre-v1
        DFModel input, which the text cannot tell (docs/model.md, "Equation sets"); any other
        input must already use it (a TOML spec says so in ``execution.equations``).

    Returns
    -------
    Spec
        The validated spec.

    Raises
    ------
    SpecError
        The file is missing or unreadable, is not valid TOML / DFModel text, or breaks any rule
        of ``docs/spec.md``; the error lists every problem found, with field paths.
    """
    text = read_text(path)
    if dfmodel.looks_like_dfmodel(text):
        return dfmodel.load_dfmodel(text, file=str(path), equations=equations)
    spec = load_toml_spec(text, file=str(path), base_dir=Path(path).parent)
    return _check_equations(spec, equations, str(path))


def _check_equations(obj: Spec | Graph, equations: codes.Equations | None, file: str) -> Any:
    """``obj`` when the equation set asked for is none or the one a dfsearch input states,
    else a SpecError on ``--equations``."""
    if equations is None:
        return obj
    if isinstance(obj, Graph):
        raise SpecError([Issue("--equations", (
            "does not apply to a graph file (it holds no system nor equations). Got "
            f"{equations.label!r}."))], file=file)  # fmt: skip
    have = obj.execution.equations
    if have is not equations:
        raise SpecError([Issue("--equations", (
            f"must be {have.label!r} (or left out) for a dfsearch spec: it states its equation "
            f"set in execution.equations ({have.label!r}; 'v1' when absent), so set "
            f"execution.equations = {equations.label!r} there instead. --equations chooses "
            "the set of a pre-v1 DFModel input, whose content cannot tell it. Got "
            f"{equations.label!r} instead."))], file=file)  # fmt: skip
    return obj


def load_toml_spec(text: str, *, file: str, base_dir: Path) -> Spec:
    """Parse and validate the text of a dfsearch TOML spec.

    Parameters
    ----------
    text : str
        TOML text.
    file : str
        Name used in error messages (``SpecError.file``).
    base_dir : Path
        Folder against which a relative ``graph.include`` is resolved.

    Returns
    -------
    Spec
        The validated spec.

    Raises
    ------
    SpecError
        Invalid TOML, or any problem of the spec (all of them, in one error).
    """
    data = parse_toml(text, file)
    return spec_from_data(data, file=file, base_dir=Path(base_dir))


def load_input(path: str | Path, *, equations: codes.Equations | None = None) -> Spec | Graph:
    """Load a spec (TOML or DFModel) or a graph file (a TOML file whose only table is ``[graph]``);
    ``equations`` as in :func:`load_spec`.

    Raises
    ------
    SpecError
        As :func:`load_spec` / :func:`load_graph_file`.
    """
    text = read_text(path)
    if dfmodel.looks_like_dfmodel(text):
        return dfmodel.load_dfmodel(text, file=str(path), equations=equations)
    data = parse_toml(text, str(path))
    if set(data) == {"graph"}:
        obj: Spec | Graph = _graph_file_from_data(data, file=str(path))
    else:
        obj = spec_from_data(data, file=str(path), base_dir=Path(path).parent)
    return _check_equations(obj, equations, str(path))


def load_graph_file(path: str | Path) -> Graph:
    """Load a graph file: TOML with a single ``[graph]`` table of ``[[graph.kernels]]`` and
    ``[[graph.connections]]`` (what ``dfsearch generate`` writes).

    Raises
    ------
    SpecError
        Missing/unreadable file, invalid TOML, other tables, or an invalid graph.
    """
    text = read_text(path)
    return _graph_file_from_data(parse_toml(text, str(path)), file=str(path))


def replace_field(spec: Spec, path: str, value: Any) -> Spec:
    """A new spec with the field at ``path`` set to ``value``, validated like a loaded file
    (``dfsearch.replace``; use it instead of ``dataclasses.replace``, which skips validation).

    ``path`` is the field's TOML key path, as in error messages: ``"search.seed"``,
    ``"system.memory.dram_bw_GBps"``; list items by index, ``"system.network[0].size"`` or
    ``"system.network.0.size"``, ``"graph.kernels[3].m"``. ``value`` is what the TOML file
    would hold (enums also as their label, e.g. ``"ring"``; a whole table as a dict or a
    dataclass). The graph is kept as it is: changing a workload field does not re-run the
    graph generator.

    The spec is turned back into the data of a TOML file (the graph as explicit kernels), the
    value is put at ``path`` and the data goes through the TOML loader: the same type checks and
    rules, the same messages.

    >>> base = load_spec(Path(__file__).parent / "examples" / "fft_1024gpu.toml")
    >>> replace_field(base, "system.memory.dram_bw_GBps", 600).system.memory.dram_bw_GBps
    600.0
    >>> replace_field(base, "system.network[0].link_bw_GBps", 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dfsearch.errors.SpecError: dfsearch.replace: system.network[0].link_bw_GBps must be > 0... Got 0 instead.

    Raises
    ------
    SpecError
        The path names no field, or the new value breaks a rule of ``docs/spec.md``; the
        message names the field path, the value and what was expected.
    """
    data = spec_to_data(spec)
    data.setdefault("quirks", {})  # left out when default; a path may still name it
    _put(data, _split_path(path), spec_to_data(value), path)
    return spec_from_data(data, file=_REPLACE, base_dir=Path("."))


_REPLACE = "dfsearch.replace"


def spec_to_data(value: Any) -> Any:
    """A spec (or part of one) as the values a TOML file would hold: tables as dicts, enums
    by their label, ``num_config = AUTO`` as "auto", unset (``None``) fields left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is None or not (f.init or f.name == "kind"):
                continue
            auto = isinstance(value, Execution) and f.name == "num_config" and v == AUTO
            out[f.name] = "auto" if auto else spec_to_data(v)
        if isinstance(value, Training):
            _training_data(value, out)
        if isinstance(value, SearchSettings) and value.jobs == 1:
            del out["jobs"]  # as a file without it (study digests keep); it changes no result
        if isinstance(value, Spec):
            out["graph"] = {k: v for k, v in out["graph"].items() if v != []}
            if value.execution.model is codes.ExecutionModel.REALISTIC:  # left out = searched
                for name in TRAINING_CHOICES:
                    out["training"].setdefault(name, spec_to_data(getattr(value.training, name)))
            if value.quirks.is_default:  # as a file without [quirks] (study digests keep)
                del out["quirks"]
        return out
    if isinstance(value, enum.Enum):
        return value.label
    if isinstance(value, tuple | list):
        return [spec_to_data(v) for v in value]
    if isinstance(value, Mapping):
        return {k: spec_to_data(v) for k, v in value.items()}
    return value


def _training_data(t: Training, out: dict[str, Any]) -> None:
    """``[training]`` as data: a choice the search makes as "auto"; the newer keys left out
    at their defaults (the data, and study digests, of a spec that does not use them stay
    as they were)."""
    del out["searched"]
    for name, default in (("zero_stage", 0), ("interleave", 1)):
        if out[name] == default and name not in t.searched:
            del out[name]
    for name in t.searched:
        out[name] = "auto"


def _split_path(path: str) -> list[str | int]:
    """``"system.network[0].size"`` or ``"system.network.0.size"`` -> keys and list indices."""
    if not isinstance(path, str) or not path.strip():
        msg = f"the field path must be a non-empty string. Got {show(path)} instead."
        raise SpecError(msg, file=_REPLACE)
    keys: list[str | int] = []
    for part in re.sub(r"\[(\d+)\]", r".\1", path).split("."):
        keys.append(int(part) if part.isdigit() else part)
    return keys


def _put(data: dict[str, Any], keys: list[str | int], value: Any, path: str) -> None:
    """Set ``value`` at ``keys`` inside ``data``; every key but the last must exist."""
    node: Any = data
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        where = ".".join(str(k) for k in keys[:depth]) or "the spec"
        if isinstance(node, list):
            if not isinstance(key, int) or key >= len(node):
                msg = (
                    f"{path!r}: {where} is a list of {len(node)}; expected an index "
                    f"0 to {len(node) - 1}. Got {key!r} instead."
                )
                raise SpecError(msg, file=_REPLACE)
        elif not isinstance(node, dict) or isinstance(key, int):
            raise SpecError(f"{path!r}: {where} is not a table. Got key {key!r}.", file=_REPLACE)
        elif key not in node and not last:
            close = difflib.get_close_matches(key, list(node), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (has: {', '.join(node)})."
            raise SpecError(f"{path!r}: {where} has no table {key!r}{hint}", file=_REPLACE)
        if last:
            node[key] = value
        else:
            node = node[key]


# --------------------------------------------------------------------------- files
def parse_toml(text: str, file: str) -> dict[str, Any]:
    """``tomllib.loads`` with every failure as a :class:`SpecError` naming ``file``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"invalid TOML: {e}", file=file) from None
    except RecursionError:  # tomllib recurses once per level of [[[...]]] or {a={...}}
        raise SpecError(_TOO_DEEP.format(what="TOML") + _deepest_line(text), file=file) from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise SpecError(f"invalid TOML: {e}", file=file) from None


_TOO_DEEP = "invalid {what}: arrays or tables are nested too deeply (hundreds of levels)."


def _deepest_line(text: str) -> str:
    """" At line N (key K)." for the line that opens the most brackets, else ""."""
    best, where = 0, ""
    for n, line in enumerate(text.splitlines(), 1):
        depth = max(line.count("["), line.count("{"))
        if depth > best:
            key = line.split("=", 1)[0].strip() if "=" in line else ""
            best, where = depth, f" At line {n}" + (f" (key {key!r})." if key else ".")
    return where if best >= 16 else ""


# --------------------------------------------------------------------------- reader
class _Reader:
    """Turns TOML values into typed values, collecting issues instead of raising."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        #: paths of values that could not be read (the default stands in for them)
        self.tainted: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))

    # ---- containers
    def table(self, value: Any, path: str) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.add(path, f"must be a table. Got {show(value)} instead.")
        return None

    def tables(self, value: Any, path: str) -> list[dict[str, Any]] | None:
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        self.add(path, f"must be an array of tables ([[{path}]]). Got {show(value)} instead.")
        return None

    def keys(self, table: Mapping[str, Any], path: str, allowed: list[str]) -> bool:
        ok = True
        for key in table:
            if key not in allowed:
                ok = False
                close = difflib.get_close_matches(key, allowed, n=1)
                if close:  # probably a misspelt key: its default is a stand-in
                    self.tainted.append(f"{path}.{close[0]}" if path else close[0])
                if close:
                    hint = f"; did you mean {close[0]!r}?"
                else:
                    hint = f" (allowed: {', '.join(allowed)})."
                where = f"{path}:" if path else ""
                self.add(where, f"unknown key {key!r}{hint}")
        return ok

    # ---- scalars: return (ok, value)
    def integer(self, v: Any, path: str) -> tuple[bool, Any]:
        if isinstance(v, int) and not isinstance(v, bool):
            return True, v
        got = repr(v) if isinstance(v, float) else show(v)  # 4.0 stays 4.0 here
        self.add(path, f"must be an integer. Got {got} instead.")
        return False, None

    def number(self, v: Any, path: str) -> tuple[bool, Any]:
        if isinstance(v, int | float) and not isinstance(v, bool):
            if math.isfinite(v):
                return True, float(v)
            self.add(path, f"must be a finite number. Got {show(v)} instead.")
            return False, None
        self.add(path, f"must be a number. Got {show(v)} instead.")
        return False, None

    def boolean(self, v: Any, path: str) -> tuple[bool, Any]:
        if isinstance(v, bool):
            return True, v
        self.add(path, f"must be true or false. Got {show(v)} instead.")
        return False, None

    def string(self, v: Any, path: str) -> tuple[bool, Any]:
        if isinstance(v, str):
            return True, v
        self.add(path, f"must be a string. Got {show(v)} instead.")
        return False, None

    def word(self, v: Any, path: str, enum: Any) -> tuple[bool, Any]:
        if isinstance(v, str):
            try:
                return True, enum.from_label(v)
            except KeyError:
                pass
        self.add(path, f"must be one of {quote_list(enum.labels())}. Got {show(v)} instead.")
        return False, None

    def numbers(self, v: Any, path: str) -> tuple[bool, Any]:
        if not isinstance(v, list):
            self.add(path, f"must be an array of numbers. Got {show(v)} instead.")
            return False, None
        out, ok = [], True
        for i, x in enumerate(v):
            good, val = self.number(x, f"{path}[{i}]")
            ok &= good
            out.append(val)
        return ok, tuple(out)

    def convert(self, v: Any, annotation: str, path: str) -> tuple[bool, Any]:
        """Convert by the dataclass field's annotation (a string under PEP 563)."""
        base = annotation.removesuffix(" | None")
        if base == "int":
            return self.integer(v, path)
        if base == "float":
            return self.number(v, path)
        if base == "bool":
            return self.boolean(v, path)
        if base == "str":
            return self.string(v, path)
        if base == "tuple[float, ...]":
            return self.numbers(v, path)
        return self.word(v, path, getattr(codes, base))

    # ---- dataclasses
    def fields(
        self,
        cls: type,
        table: Mapping[str, Any],
        path: str,
        *,
        custom: Mapping[str, Callable[[Any, str], tuple[bool, Any]]] | None = None,
        optional: tuple[str, ...] = (),
        extra: tuple[str, ...] = (),
        skip: tuple[str, ...] = (),
    ) -> tuple[dict[str, Any], bool]:
        """Read the init fields of ``cls`` from ``table``: unknown keys, missing required keys,
        types. ``custom`` converters override the annotation; ``optional`` names required fields
        the caller fills in itself; ``extra`` are further allowed keys; ``skip`` names fields the
        caller reads itself."""
        custom = custom or {}
        flds = [f for f in dataclasses.fields(cls) if f.init]
        self.keys(table, path, list(extra) + [f.name for f in flds])
        kw: dict[str, Any] = {}
        buildable = True
        for f in flds:
            if f.name in skip:
                continue
            fp = f"{path}.{f.name}"
            required = f.default is dataclasses.MISSING and f.name not in optional
            if f.name not in table:
                if required:
                    self.add(fp, "is required.")
                    buildable = False
                continue
            conv = custom.get(f.name)
            value = table[f.name]
            good, val = conv(value, fp) if conv else self.convert(value, f.type, fp)
            if good:
                kw[f.name] = val
            else:
                self.tainted.append(fp)
                buildable &= not required
        return kw, buildable

    def build(self, cls: type, kw: dict[str, Any], ok: bool) -> Any:
        return cls(**kw) if ok else None


# --------------------------------------------------------------------------- spec
def spec_from_data(data: dict[str, Any], *, file: str, base_dir: Path) -> Spec:
    """A validated spec from the values of a parsed TOML file (``file`` names it in errors;
    relative ``include`` paths resolve against ``base_dir``). Presets named in it
    (``system.preset``, ``system.network[i].fabric``, ``workload.model``) are expanded
    first (``dfsearch.presets``). Raises ``SpecError``."""
    data = expand_presets(data, file)
    r = _Reader()
    r.keys(data, "", list(_TOP))
    for name in ("workload", "graph", "system"):
        if name not in data:
            r.add(name, f"is required (a [{name}] table).")
    parts: dict[str, Any] = {
        "workload": _read_workload(r, data["workload"]) if "workload" in data else None,
        "execution": _read_execution(r, data["execution"]) if "execution" in data else Execution(),
        "system": _read_system(r, data["system"]) if "system" in data else None,
        "cost": _read_simple(r, Cost, data.get("cost", {}), "cost"),
        "search": _read_search(r, data.get("search", {})),
        "training": _read_training(r, data),
    }
    if "speculative" in data:
        parts["speculative"] = _read_simple(r, Speculative, data["speculative"], "speculative")
    quirks = _read_simple(r, Quirks, data.get("quirks", {}), "quirks")
    graph = None
    if "graph" in data:
        w, e = parts["workload"], parts["execution"]
        clean = w is not None and e is not None and not _tainted(r, "workload", "execution")
        ctx = (w, e) if clean else None
        graph = _read_graph(r, data["graph"], base_dir=base_dir, context=ctx, spec=True)
    parts["graph"] = graph
    issues = r.issues + _semantic_issues(r, parts)
    if issues:
        order = {k: i for i, k in enumerate(data)}
        issues.sort(key=lambda i: order.get(_head(i.path), -1))
        raise SpecError(issues, file=file)
    return Spec(**parts, quirks=quirks)


def _head(path: str) -> str:
    """First component of a field path: ``system`` for ``system.network[1].size``."""
    return re.split(r"[.\[: ]", path, maxsplit=1)[0]


def _tainted(r: _Reader, *sections: str) -> bool:
    return any(_head(p) in sections for p in r.tainted)


def _semantic_issues(r: _Reader, parts: dict[str, Any]) -> list[Issue]:
    """Run the rules of :mod:`dfsearch.validate` on what could be read. A section with an
    unreadable value (its default stands in) is checked on its own, and issues touching the
    unreadable value are dropped; rules across sections use only fully read sections."""
    built = {k: v for k, v in parts.items() if v is not None}
    clean = {k: v for k, v in built.items() if not _tainted(r, k)}
    issues = validate_parts(**clean)
    for name in sorted(built.keys() - clean.keys()):
        alone = {name: built[name]}
        if name == "graph" and "workload" in clean:  # which sharding rules apply
            alone["workload"] = clean["workload"]
        for issue in validate_parts(**alone):
            if issue not in issues and not any(_overlap(issue.path, p) for p in r.tainted):
                issues.append(issue)
    return issues


def _overlap(a: str, b: str) -> bool:
    """True when one field path contains the other (``system.network`` and
    ``system.network[0].size``); kernel labels and trailing colons are ignored."""
    a = re.sub(r' \("[^"]*"\)', "", a).rstrip(":")
    b = re.sub(r' \("[^"]*"\)', "", b).rstrip(":")
    short, long = sorted((a, b), key=len)
    return long == short or long.startswith((short + ".", short + "["))


def _read_simple(r: _Reader, cls: type, value: Any, path: str) -> Any:
    table = r.table(value, path)
    if table is None:
        return None
    return r.build(cls, *r.fields(cls, table, path))


def _read_training(r: _Reader, data: dict[str, Any]) -> Training | None:
    """The ``[training]`` table. A choice of ``TRAINING_CHOICES`` given as ``"auto"``, or
    left out of a realistic-model LLM spec, is made by the search (``Training.searched``)."""
    table = r.table(data.get("training", {}), "training")
    if table is None:
        return None
    execution = data.get("execution", {})
    workload = data.get("workload", {})
    realistic_llm = (isinstance(execution, dict) and execution.get("model") == "realistic"
                     and isinstance(workload, dict) and workload.get("kind") == "llm")
    searched = tuple(n for n in TRAINING_CHOICES
                     if table.get(n) == "auto" or (realistic_llm and n not in table))
    if "searched" in table:
        r.add("training.searched", "is not a key of [training] (write \"auto\" for a choice "
              "the search makes). Got a value for it instead.")
    plain = {k: v for k, v in table.items() if k not in searched and k != "searched"}
    kw, ok = r.fields(Training, plain, "training", skip=("searched",))
    return r.build(Training, {**kw, "searched": searched}, ok)


def _read_search(r: _Reader, value: Any) -> SearchSettings | None:
    """The ``[search]`` table; a strategy that is not a string is told the allowed names
    (a string is checked against the registry by ``validate``)."""
    table = r.table(value, "search")
    if table is None:
        return None

    def strategy_name(kind: str) -> Callable[[Any, str], tuple[bool, Any]]:
        def read(v: Any, path: str) -> tuple[bool, Any]:
            if isinstance(v, str):
                return True, v
            r.issues.append(strategy_issue(path, kind, v))  # type: ignore[arg-type]
            return False, None

        return read

    custom = {kind: strategy_name(kind) for kind in ("strategy", "assignment")}
    kw, ok = r.fields(SearchSettings, table, "search", custom=custom)
    return r.build(SearchSettings, kw, ok)


def _read_workload(r: _Reader, value: Any) -> Workload | None:
    table = r.table(value, "workload")
    if table is None:
        return None
    words = [m.kind.label for m in workloads.WORKLOADS.values()]
    if "kind" not in table:
        r.add("workload.kind", f"is required (one of {quote_list(words)}).")
        return None
    word = table["kind"]
    model = model_named(word) if isinstance(word, str) else None
    if model is None:
        r.add("workload.kind", f"must be one of {quote_list(words)}. Got {show(word)} instead.")
        return None
    cls = model.spec_class
    kw, ok = r.fields(cls, table, "workload", extra=("kind",))
    return r.build(cls, kw, ok)


def _read_execution(r: _Reader, value: Any) -> Execution | None:
    table = r.table(value, "execution")
    if table is None:
        return None

    def num_config(v: Any, path: str) -> tuple[bool, Any]:
        if v == "auto" and isinstance(v, str):
            return True, AUTO
        if isinstance(v, int) and not isinstance(v, bool):
            return True, v
        r.add(path, f"must be an integer or 'auto'. Got {show(v)} instead.")
        return False, None

    kw, ok = r.fields(Execution, table, "execution", custom={"num_config": num_config})
    return r.build(Execution, kw, ok)


def _read_system(r: _Reader, value: Any) -> System | None:
    table = r.table(value, "system")
    if table is None:
        return None
    kw, ok = r.fields(System, table, "system", skip=("accelerator", "memory", "network"))
    for name, cls in (("accelerator", Accelerator), ("memory", Memory)):
        path = f"system.{name}"
        if name not in table:
            r.add(path, f"is required (a [{path}] table).")
            ok = False
            continue
        kw[name] = _read_simple(r, cls, table[name], path)
        ok &= kw[name] is not None
    if "network" not in table:
        r.add("system.network", "is required (1 to 3 [[system.network]] tables).")
        ok = False
    else:
        dims = r.tables(table["network"], "system.network")
        if dims is None:
            ok = False
        else:
            built = [
                _read_simple(r, NetworkDim, d, f"system.network[{i}]") for i, d in enumerate(dims)
            ]
            ok &= all(b is not None for b in built)
            kw["network"] = tuple(built)
    return r.build(System, kw, ok)


# --------------------------------------------------------------------------- graph
def _read_graph(
    r: _Reader,
    value: Any,
    *,
    base_dir: Path | None,
    context: tuple[Workload, Execution] | None,
    spec: bool,
) -> Graph | None:
    """Read ``[graph]``. In a spec (``spec=True``) all three forms are allowed; in a graph
    file only explicit kernels. ``context`` (workload, execution) supplies generator defaults;
    ``None`` when those sections failed to parse (the generator is then not run)."""
    table = r.table(value, "graph")
    if table is None:
        return None
    modes = [m for m in _GRAPH_MODES if m in table]
    if not spec:
        r.keys(table, "graph", ["kernels", "connections"])
        if "kernels" not in table:
            r.add(
                "graph.kernels",
                "is required (a graph file holds [[graph.kernels]] and [[graph.connections]]).",
            )
            return None
        return _read_explicit(r, table)
    if not modes:
        r.add(
            "graph",
            "needs one of 'generator', 'include' or [[graph.kernels]] (see docs/spec.md).",
        )
        r.keys(table, "graph", list(_GRAPH_MODES) + ["connections"])
        return None
    if len(modes) > 1:
        r.add(
            "graph",
            "must use exactly one of 'generator', 'include' and [[graph.kernels]]. "
            f"Got {' and '.join(map(repr, modes))}.",
        )
        return None
    mode = modes[0]
    if mode == "kernels":
        r.keys(table, "graph", ["kernels", "connections"])
        return _read_explicit(r, table)
    if "connections" in table:
        r.add("graph.connections", "is only allowed together with [[graph.kernels]].")
    if mode == "include":
        r.keys(table, "graph", ["include", "connections"])
        return _read_include(r, table["include"], base_dir)
    return _read_generator(r, table, context)


def _read_explicit(r: _Reader, table: Mapping[str, Any]) -> Graph | None:
    kernels = r.tables(table["kernels"], "graph.kernels")
    conns = r.tables(table.get("connections", []), "graph.connections")
    if kernels is None or conns is None:
        return None
    built_k = [_read_kernel(r, t, f"graph.kernels[{i}]") for i, t in enumerate(kernels)]
    built_c = [
        _read_simple(r, Connection, t, f"graph.connections[{j}]") for j, t in enumerate(conns)
    ]
    if any(x is None for x in built_k) or any(x is None for x in built_c):
        return None
    return Graph(kernels=tuple(built_k), connections=tuple(built_c))


def _read_kernel(r: _Reader, table: dict[str, Any], path: str) -> Kernel | None:
    kw, ok = r.fields(Kernel, table, path, optional=("type", "k"))
    kind = kw.get("kind")
    if kind is not None:
        if "type" not in kw:
            kw["type"] = codes.ComputeType.SYSTOLIC if kind.has_k else codes.ComputeType.SIMD
        if kind.has_k and "k" not in table:
            r.add(f"{path}.k", f"is required for a {kind.label} kernel.")
            ok = False
    return r.build(Kernel, kw, ok)


def _read_include(r: _Reader, value: Any, base_dir: Path | None) -> Graph | None:
    ok, rel = r.string(value, "graph.include")
    if not ok:
        return None
    target = Path(rel) if base_dir is None else Path(base_dir) / rel
    try:
        return load_graph_file(target)
    except SpecError as e:
        for issue in e.issues:
            r.add("graph.include:", f"in {e.file or target}: {issue.render()}")
        return None


def _generator_params(gen: Any) -> tuple[str, ...]:
    """Parameter names of a :data:`~dfsearch.kernels.generators.GENERATORS` entry."""
    return tuple(getattr(p, "name", p) for p in gen.params)


def _read_generator(
    r: _Reader, table: Mapping[str, Any], context: tuple[Workload, Execution] | None
) -> Graph | None:
    ok, name = r.string(table["generator"], "graph.generator")
    if not ok:
        return None
    if name not in GENERATORS:
        r.add("graph.generator", f"must be one of {quote_list(GENERATORS)}. Got {name!r} instead.")
        return None
    names = _generator_params(GENERATORS[name])
    bools = {p.name for p in GENERATORS[name].params if p.type is bool}
    params: dict[str, int] = {}
    good = r.keys(table, "graph", ["generator", *names, "connections"])
    for key, v in table.items():
        if key == "generator" or key not in names:
            continue
        read = r.boolean if key in bools else r.integer
        ok, val = read(v, f"graph.{key}")
        good &= ok
        if ok:
            params[key] = val
    if context is None:
        return None
    workload, execution = context
    kind, model = workload.kind.label, model_of(workload)
    fits = [g for g in model.generators if g in GENERATORS]
    owner = next((m for m in workloads.WORKLOADS.values() if name in m.generators), model)
    if owner is not model:
        r.add(
            "graph.generator",
            f"must be one of {quote_list(fits)} for workload.kind = {kind!r}. "
            f"Got {name!r} instead.",
        )
        return None
    in_graph = getattr(workload, "num_layer_in_graph", None)
    if "layers" in params and in_graph is not None and params["layers"] != in_graph:
        r.add("graph.layers", f"must equal workload.num_layer_in_graph = {in_graph} (set "
                              f"workload.num_layer_in_graph = {params['layers']}; graph.layers "
                              f"then defaults to it). Got {params['layers']} instead.")
        good = False
    good &= _ends_fit(r, params, workload)
    for p in names:
        if p in params:
            continue
        if p == "word":
            params[p] = execution.word_bytes
        else:
            src = model.generator_fields.get(p, p)
            if hasattr(workload, src) and src != "kind":
                params[p] = getattr(workload, src)
    if not good:
        return None
    try:
        return generate(name, params, path="graph")
    except SpecError as e:
        r.issues.extend(e.issues)
        return None


def _ends_fit(r: _Reader, params: Mapping[str, Any], workload: Workload) -> bool:
    """``graph.embedding`` / ``graph.lm_head`` need a vocabulary (docs/model.md, "Embedding
    and LM head")."""
    asked = [k for k in ("embedding", "lm_head") if params.get(k)]
    if not asked:
        return True
    ok = True
    if "vocab_size" not in params and getattr(workload, "vocab_size", None) is None:
        r.add("workload.vocab_size", f"is required when {' and '.join(f'graph.{k}' for k in asked)}"
                                     f" = true (the embedding table and the LM head are vocab_size"
                                     f" x hidden_dim): expected an integer > 0. Got none instead.")
        ok = False
    return ok


# --------------------------------------------------------------------------- graph files
def _graph_file_from_data(data: dict[str, Any], *, file: str) -> Graph:
    r = _Reader()
    if "graph" not in data:
        r.add("graph", "is required (a graph file holds one [graph] table).")
    others = [k for k in data if k != "graph"]
    for k in others:
        r.add("", f"unexpected table {k!r}: a graph file holds only the [graph] table.")
    graph = None
    if "graph" in data:
        graph = _read_graph(r, data["graph"], base_dir=None, context=None, spec=False)
    issues = list(r.issues)
    if graph is not None:
        # the LLM sharding rules need the workload: the including spec checks them
        issues += validate_graph(graph, sharding_rules=False)
    if issues or graph is None:
        raise SpecError(issues or [Issue("graph", "is invalid.")], file=file)
    return graph
