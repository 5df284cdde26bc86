"""Write specs and graphs as dfsearch TOML (the format of ``docs/spec.md``).

A minimal writer of our own (no dependency): tables in a fixed order, keys in dataclass field
order, fields equal to their default left out, floats written with ``repr`` so that they read
back bit for bit. ``load_toml_spec(spec_to_toml(s)) == s`` for every valid spec; the graph is
always written explicitly (``[[graph.kernels]]``), whatever form the input used.

>>> from dfsearch.spec import Graph, Kernel
>>> from dfsearch.codes import ComputeType, KernelKind
>>> x = Kernel(name="x", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD, m=2, n=3)
>>> g = Graph(kernels=(x,))
>>> print(graph_to_toml(g), end="")
[[graph.kernels]]
name = "x"
kind = "elementwise"
type = "simd"
m = 2
n = 3
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

from dfsearch.codes import ExecutionModel
from dfsearch.spec import AUTO, TRAINING_CHOICES, Graph, Kernel, Spec

__all__ = ["spec_to_toml", "graph_to_toml", "toml_value"]

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _float(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"cannot write the non-finite number {value!r}")
    return repr(float(value))  # always has '.' or 'e': a TOML float that reads back exactly


def toml_value(value: Any) -> str:
    """One value in TOML syntax (enums by their label).

    >>> toml_value(1e16), toml_value(3), toml_value("a\\"b"), toml_value((0.5, 1.0))
    ('1e+16', '3', '"a\\\\"b"', '[0.5, 1.0]')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return _string(value.label)  # type: ignore[attr-defined]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _same(a: Any, b: Any) -> bool:
    """Equal *and* written the same (keeps -0.0 and float-vs-int distinctions)."""
    if type(a) is not type(b) and not (isinstance(a, float) and isinstance(b, float)):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _lines(obj: Any, *, always: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[str]:
    """``key = value`` lines of a dataclass; fields equal to their default are left out."""
    out = []
    for f in dataclasses.fields(obj):
        if not f.init or f.name in skip:
            continue
        value = getattr(obj, f.name)
        if value is None:
            continue
        has_default = f.default is not dataclasses.MISSING
        if f.name not in always and has_default and _same(value, f.default):
            continue
        if type(value) is int and str(f.type).removesuffix(" | None") == "float":
            value = float(value)  # an int given for a float field is still written as a float
        out.append(f"{f.name} = {toml_value(value)}")
    return out


def _kernel_lines(k: Kernel) -> list[str]:
    always = ("type", "k") if k.kind.has_k else ("type",)
    return _lines(k, always=always)


def _graph_blocks(graph: Graph) -> list[str]:
    blocks = ["[[graph.kernels]]\n" + "\n".join(_kernel_lines(k)) for k in graph.kernels]
    blocks += ["[[graph.connections]]\n" + "\n".join(_lines(c)) for c in graph.connections]
    return blocks


def _comment(header: str) -> str:
    if not header:
        return ""
    return "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + "\n"


def graph_to_toml(graph: Graph, *, header: str = "") -> str:
    """A graph file: one ``[graph]`` table of ``[[graph.kernels]]`` and ``[[graph.connections]]``.

    Parameters
    ----------
    graph : Graph
        The graph to write.
    header : str
        Text written first as ``#`` comment lines (e.g. the generator command).

    Returns
    -------
    str
        TOML text that :func:`dfsearch.loader.load_graph_file` reads back to an equal graph.

    Raises
    ------
    ValueError
        A size is not a finite number.
    """
    return _comment(header) + "\n\n".join(_graph_blocks(graph)) + "\n"


def _table(name: str, lines: list[str], *, keep_empty: bool = False) -> str:
    if not lines and not keep_empty:
        return ""
    return "\n".join([f"[{name}]", *lines])


def _training_lines(spec: Spec) -> list[str]:
    """``[training]``: a choice the search makes as ``"auto"``; under the realistic model
    every other choice written out (a left-out one would be searched when read back)."""
    t = spec.training
    realistic = spec.execution.model is ExecutionModel.REALISTIC
    given = TRAINING_CHOICES if realistic else ()
    lines = [ln for ln in _lines(t, always=given, skip=("searched",))
             if ln.split(" = ")[0] not in t.searched]
    return lines + [f'{name} = "auto"' for name in t.searched]


def spec_to_toml(spec: Spec, *, header: str = "") -> str:
    """A complete spec in the TOML format of ``docs/spec.md``.

    Parameters
    ----------
    spec : Spec
        A valid spec.
    header : str
        Text written first as ``#`` comment lines.

    Returns
    -------
    str
        TOML text with ``load_toml_spec(text, ...) == spec``.

    Raises
    ------
    ValueError
        A number is not finite.
    """
    w = spec.workload
    sy = spec.system
    ex = spec.execution
    parts = [
        _table("workload", [f"kind = {toml_value(w.kind)}", *_lines(w, skip=("kind",))]),
        *_graph_blocks(spec.graph),
        _table("system", _lines(sy, skip=("accelerator", "memory", "network")), keep_empty=True),
        _table("system.accelerator", _lines(sy.accelerator), keep_empty=True),
        _table("system.memory", _lines(sy.memory), keep_empty=True),
        *("[[system.network]]\n" + "\n".join(_lines(d)) for d in sy.network),
        _table("cost", _lines(spec.cost)),
    ]
    ex_lines = _lines(ex)
    if ex.num_config == AUTO:
        ex_lines = [
            'num_config = "auto"' if ln.startswith("num_config =") else ln for ln in ex_lines
        ]
    parts += [
        _table("execution", ex_lines),
        _table("search", _lines(spec.search)),
        _table("training", _training_lines(spec)),
        _table("quirks", _lines(spec.quirks)),
    ]
    if spec.speculative is not None:
        parts.append(_table("speculative", _lines(spec.speculative), keep_empty=True))
    return _comment(header) + "\n\n".join(p for p in parts if p) + "\n"
