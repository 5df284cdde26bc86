"""Mutation engine of the regression battery (issue 9, item 8).

Shared by ``tests/test_battery.py`` (a small, derandomized Hypothesis subset run in CI) and
``benchmarks/battery.py`` (the nightly mode: thousands of seeded mutants, subprocesses with a
timeout so hangs are seen).

A *source* is one shipped input: every example ``dfsearch/examples/*.toml``, every DFModel
``tests/data/dfmodel/*/setup*.txt``, the graph-only ``tests/data/gen_llama3_8B_SN40L_decode_setup.txt``
and, when ``dfsearch convert`` works, one converted setup (a TOML spec with explicit
``[[graph.kernels]]`` / ``[[graph.connections]]``, so kernel and connection mutations reach the
TOML reader too).

A *mutant* is a source with 1-3 mutations applied. TOML sources are parsed with ``tomllib``,
mutated as data and written back with the small writer below; setup.txt sources are edited as
text lines. Every choice goes through a :class:`Chooser`, backed either by Hypothesis
(``HypothesisChooser``: shrinkable, derandomized in CI) or by ``random.Random`` (``RandomChooser``:
the benchmark's seeded stream).

:func:`check_mutant` runs the CLI on a mutant (in-process through ``typer.testing.CliRunner`` or
in a subprocess with a timeout) and returns the list of :class:`Failure` it found:

* exit code not in {0, 1, 2}, an exception escaping, or a traceback in the output;
* exit 2 whose message does not name the file and a field path;
* exit 0 whose JSON has ``lower_bound_s > final_s``;
* exit 0 whose ``--mapping-out`` file, fed to ``eval --json``, does not give the same ``final_s``
  (relative 1e-12);
* (optionally) two runs in two separate processes whose JSON differs outside timing fields.

Only the CLI (``dfsearch.cli.app`` or ``python -m dfsearch``) is used, so renames inside the
package do not affect the battery.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _clock import children_cpu_s, load_factor

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "dfsearch" / "examples"
DATA = ROOT / "tests" / "data"

#: Safety stop passed to every ``run`` (seconds); a run using more than HANG_S CPU seconds
#: (compilation included, so warm the cache first) is a hang.
TIME_LIMIT_S = 20.0
HANG_S = 60.0

# --------------------------------------------------------------------------------------------
# Sources


@dataclass(frozen=True)
class Source:
    name: str  # short id, e.g. "examples/llm_decode.toml"
    path: Path
    kind: str  # "toml" or "setup"

    @property
    def filename(self) -> str:
        return self.path.name

    def text(self) -> str:
        return self.path.read_text()


def shipped_sources() -> list[Source]:
    """Every example and DFModel input in the repository (sorted, stable ids)."""
    out = [Source(f"examples/{p.name}", p, "toml") for p in sorted(EXAMPLES.glob("*.toml"))]
    for p in sorted((DATA / "dfmodel").glob("*/setup*.txt")):
        out.append(Source(f"dfmodel/{p.parent.name}/{p.name}", p, "setup"))
    gen = DATA / "gen_llama3_8B_SN40L_decode_setup.txt"
    if gen.exists():
        out.append(Source(f"data/{gen.name}", gen, "setup"))
    return out


CONVERT_FROM = DATA / "dfmodel" / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt"


def converted_source(workdir: Path) -> Source | None:
    """``dfsearch convert`` of the GPT-3 1.5B setup into ``workdir`` (None if convert fails)."""
    out = Path(workdir) / "converted_gpt3_1.5B.toml"
    if not out.exists():
        oc = run_subprocess(["convert", str(CONVERT_FROM), "-o", str(out)], timeout=120)
        if oc.code != 0 or not out.exists():
            return None
    return Source("converted/gpt3_1.5B.toml", out, "toml")


def all_sources(workdir: Path) -> list[Source]:
    src = shipped_sources()
    conv = converted_source(workdir)
    return src + ([conv] if conv else [])


# --------------------------------------------------------------------------------------------
# Choosers


class Chooser:
    def choice(self, seq: Sequence[Any]) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def integer(self, lo: int, hi: int) -> int:  # pragma: no cover - interface
        raise NotImplementedError


class RandomChooser(Chooser):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.rng.randrange(len(seq))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisChooser(Chooser):
    """Draws from a Hypothesis ``st.data()`` object (so failures shrink and replay)."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data = data
        self.st = st

    def choice(self, seq: Sequence[Any]) -> Any:
        i = self.data.draw(self.st.integers(0, len(seq) - 1))
        return seq[i]

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


# --------------------------------------------------------------------------------------------
# A tiny TOML writer (enough for the specs: tables, arrays of tables, inline values)

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else _str(k)


def _str(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(v: Any) -> str:
    if isinstance(v, DeepArray):
        return "[" * v.n + "1" + "]" * v.n
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if any(c in r for c in ".eE") else r + ".0"
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v).__name__)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dump_toml(doc: dict[str, Any]) -> str:
    lines: list[str] = []

    def emit(table: dict[str, Any], prefix: list[str], header: str | None) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict) and not _is_table_array(v)]
        subs = [(k, v) for k, v in table.items() if isinstance(v, dict) or _is_table_array(v)]
        if header is not None:
            lines.append(header)
        for k, v in scalars:
            lines.append(f"{_key(k)} = {_value(v)}")
        if header is not None or scalars:
            lines.append("")
        for k, v in subs:
            path = prefix + [k]
            dotted = ".".join(_key(p) for p in path)
            if isinstance(v, dict):
                emit(v, path, f"[{dotted}]")
            else:
                for item in v:
                    emit(item, path, f"[[{dotted}]]")

    emit(doc, [], None)
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# Mutations

BIG_INTS = [2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30]
SPECIAL_FLOATS = [0.0, -1.0, 1e-300, 5e-324, 1e300, 1.7976931348623157e308, math.nan, math.inf, -math.inf, 0.5, 1.5]
SMALL_INTS = [0, -1, 1, 2, 3, 5, 7, 13, 17, 1000, 65537, 999983]
GENTLE = [0.25, 0.5, 2, 4, 8]
FACTORS = [0.5, 2, 3, 10, 1000, 1e-3, 1e-6, 1e6, 1e12]
ODD_VALUES: list[Any] = ["abc", "", "1", True, False, [], {}, [1, 2], {"x": 1}]
#: graph.include targets, relative to the mutant's folder ("SELF" = the mutant itself)
INCLUDE_TARGETS = ["SELF", "missing.toml", ".", "/dev/null", "/dev/zero", "run1.json", "mapping1.toml", ""]
#: extra ``run`` options
RUN_OPTIONS = [
    ["--seed", "-1"], ["--seed", str(2**32)], ["--seed", str(2**64)], ["--seed", "1"], ["--seed", "abc"],
    ["--time-limit", "0"], ["--time-limit", "-1"], ["--time-limit", "nan"], ["--time-limit", "inf"],
    ["--time-limit", "1e-300"], ["--time-limit", "1e300"], ["--time-limit", "0.001"],
]
ENUM_EXTRA = ["", "FOO", "none", "auto", "ring", "switch", "fully_connected", "torus", "tp", "pp", "dp",
              "fwd", "bwd", "simd", "systolic", "n", "k", "m", "dataflow", "kernel_by_kernel", "perfect",
              "v1", "v2", "llm", "dlrm", "hpl", "fft"]


class DeepArray:
    """An ``n``-deep nested array ``[[[...1...]]]``, rendered as text (no recursion here)."""

    def __init__(self, n: int) -> None:
        self.n = n


def _deep(n: int) -> Any:
    return DeepArray(n)


@dataclass
class Mutant:
    source: Source
    ops: list[str]
    data: bytes
    run_args: list[str] = field(default_factory=list)  # extra options for ``run``

    @property
    def label(self) -> str:
        extra = f" [run {' '.join(self.run_args)}]" if self.run_args else ""
        return f"{self.source.name}: " + "; ".join(self.ops) + extra

    def write(self, directory: Path) -> Path:
        p = Path(directory) / self.source.filename
        p.write_bytes(self.data.replace(b'include = "SELF"', f'include = "{p.name}"'.encode()))
        return p


def _leaves(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths (tuples of keys / indices) of every value under ``obj`` (tables and lists included)."""
    out: list[tuple] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            out.extend(_leaves(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append(prefix + (i,))
            out.extend(_leaves(v, prefix + (i,)))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _fmt_path(path: tuple) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (("." if s else "") + str(p))
    return s


def _strings(doc: Any) -> list[str]:
    out: set[str] = set()
    for path in _leaves(doc):
        v = _get(doc, path)
        if isinstance(v, str) and len(v) < 40:
            out.add(v)
    return sorted(out)


def _toml_mutation(doc: dict[str, Any], ch: Chooser) -> str:
    """Apply one mutation to ``doc`` in place; return its description."""
    paths = _leaves(doc)
    scalar_paths = [p for p in paths if not isinstance(_get(doc, p), (dict, list))]
    num_paths = [p for p in scalar_paths if isinstance(_get(doc, p), (int, float)) and not isinstance(_get(doc, p), bool)]
    str_paths = [p for p in scalar_paths if isinstance(_get(doc, p), str)]
    tables = [()] + [p for p in paths if isinstance(_get(doc, p), dict)]
    lists = [p for p in paths if isinstance(_get(doc, p), list) and _get(doc, p)]
    key_paths = [p for p in paths if isinstance(p[-1], str)]
    ops = ["number", "number", "number", "scale", "int", "delete", "unknown", "enum", "odd", "array", "chips",
           "gentle", "gentle", "gentle", "include"]
    op = ch.choice(ops)
    if op == "gentle" and num_paths:  # a plausible change: the spec usually stays valid
        p = ch.choice(num_paths)
        old = _get(doc, p)
        new = old * ch.choice(GENTLE)
        if isinstance(old, int):
            new = max(1, int(new))
        _get(doc, p[:-1])[p[-1]] = new
        return f"{_fmt_path(p)} = {_value(new)} (was {_value(old)})"
    if op in ("number", "scale", "int") and num_paths:
        p = ch.choice(num_paths)
        old = _get(doc, p)
        if op == "number":
            new = ch.choice(BIG_INTS + SPECIAL_FLOATS + SMALL_INTS)
            if isinstance(old, float) and isinstance(new, int) and ch.choice([0, 1]):
                new = float(new)
        elif op == "scale":
            f = ch.choice(FACTORS)
            new = old * f
            if isinstance(old, int) and math.isfinite(new):
                new = int(new)
        else:
            new = ch.choice(SMALL_INTS)
        _get(doc, p[:-1])[p[-1]] = new
        return f"{_fmt_path(p)} = {_value(new)} (was {_value(old)})"
    if op == "delete" and key_paths:
        p = ch.choice(key_paths)
        del _get(doc, p[:-1])[p[-1]]
        return f"delete {_fmt_path(p)}"
    if op == "unknown":
        t = ch.choice(tables)
        tab = _get(doc, t)
        existing = [k for k in tab if isinstance(k, str) and len(k) > 2]
        candidates = ["bogus_key", "seed"] + [k[:-1] for k in existing] + [k + "s" for k in existing]
        k = ch.choice(candidates)
        if k in tab:
            k = k + "_x"
        tab[k] = 1
        return f"add {_fmt_path(t + (k,)) or k} = 1"
    if op == "enum" and str_paths:
        p = ch.choice(str_paths)
        old = _get(doc, p)
        vocab = _strings(doc) + ENUM_EXTRA + [old.upper(), old + "x", old[:-1]]
        new = ch.choice(vocab)
        _get(doc, p[:-1])[p[-1]] = new
        return f"{_fmt_path(p)} = {_value(new)} (was {_value(old)})"
    if op == "odd" and paths:
        p = ch.choice(paths)
        old = _get(doc, p)
        new = ch.choice(ODD_VALUES + [_deep(ch.choice([3, 50, 500]))])
        _get(doc, p[:-1])[p[-1]] = new
        shown = _value(new) if len(_value(new)) < 40 else f"<{len(_value(new)) // 2}-deep nested array>"
        return f"{_fmt_path(p)} = {shown} (was {type(old).__name__})"
    if op == "array" and lists:
        p = ch.choice(lists)
        arr = _get(doc, p)
        i = ch.integer(0, len(arr) - 1)
        how = ch.choice(["duplicate", "remove", "remove", "clear"])
        if how == "duplicate":
            arr.insert(i + 1, copy.deepcopy(arr[i]))
            return f"duplicate {_fmt_path(p)}[{i}]"
        if how == "remove":
            del arr[i]
            return f"remove {_fmt_path(p)}[{i}]"
        arr.clear()
        return f"{_fmt_path(p)} = []"
    if op == "include":
        target = ch.choice(INCLUDE_TARGETS)
        doc["graph"] = {"include": target}
        return f"graph = {{include = {_value(target)}}}"
    # chips: sizes that do not factor
    sysd = doc.get("system")
    if isinstance(sysd, dict):
        if isinstance(sysd.get("num_chip"), int) and ch.choice([0, 1]):
            old = sysd["num_chip"]
            new = ch.choice([old + 1, old - 1, 2 * old + 1, 1009, 65537, 999983, 1_000_000_007])
            sysd["num_chip"] = new
            return f"system.num_chip = {new} (was {old})"
        net = sysd.get("network")
        if isinstance(net, list) and net and isinstance(net[0], dict):
            i = ch.integer(0, len(net) - 1)
            old = net[i].get("size")
            new = ch.choice([0, 3, 5, 7, 1000, 1_000_000_007])
            net[i]["size"] = new
            return f"system.network[{i}].size = {new} (was {old})"
    # fallback: an unknown top-level key
    doc["bogus_table"] = {"x": 1}
    return "add [bogus_table] x = 1"


_VALUE_LINE = re.compile(r"^(\s*)([A-Za-z_][\w]*)\s*:\s*(.*?)\s*$")
_OPEN_LINE = re.compile(r"^\s*([A-Za-z_][\w]*)\s*\{\s*$")
_CLOSE_LINE = re.compile(r"^\s*\}\s*$")

SETUP_VALUES = [
    "0", "-1", "1e-300", "1e300", "1e8", "100000000", "0.5", "1.5", "nan", "inf", "-inf",
    "9223372036854775807", "9223372036854775808", "18446744073709551616", "-9223372036854775809",
    '"abc"', "abc", '""', "true", "", "3", "7", "17", "65537", "999983",
]
SETUP_ENUMS = [
    "FWD", "BWD", "SIMD", "SYSTOLIC", "N_TILING", "K_TILING", "M_TILING", "NO_TILING", "DATAFLOW",
    "KERNEL_BY_KERNEL", "PERFECT_OVERLAP", "NO_OVERLAP", "OUTER_SHARDING", "M_SHARDING", "K_SHARDING",
    "NO_SHARDING", "BROADCAST", "ALL_REDUCE_PERIODIC", "ALL_TO_ALL", "POINT_TO_POINT", '"TP"', '"PP"',
    '"DP"', "FOO", "fwd",
]


def _blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(start, end inclusive, name) of every ``name { ... }`` block with a matching brace."""
    out: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _OPEN_LINE.match(line)
        if m:
            stack.append((i, m.group(1)))
        elif _CLOSE_LINE.match(line) and stack:
            s, name = stack.pop()
            out.append((s, i, name))
    return out


def _setup_mutation(lines: list[str], ch: Chooser) -> str:
    value_idx = [i for i, ln in enumerate(lines) if _VALUE_LINE.match(ln)]
    blocks = _blocks(lines)
    ops = ["value", "value", "value", "scale", "enum", "delete_line", "block", "block", "unknown", "truncate",
           "gentle", "gentle", "gentle"]
    op = ch.choice(ops)
    num_idx = [i for i in value_idx if re.fullmatch(r"-?[\d.]+(e[+-]?\d+)?", _VALUE_LINE.match(lines[i]).group(3))]
    if op == "gentle" and num_idx:  # a plausible change: the input usually stays valid
        i = ch.choice(num_idx)
        indent, key, old = _VALUE_LINE.match(lines[i]).groups()
        f = ch.choice(GENTLE)
        new = repr(float(old) * f) if ("." in old or "e" in old) else str(max(1, int(int(old) * f)))
        lines[i] = f"{indent}{key}: {new}"
        return f"line {i + 1}: {key}: {new} (was {old})"
    if op in ("value", "scale", "enum") and value_idx:
        i = ch.choice(value_idx)
        m = _VALUE_LINE.match(lines[i])
        assert m
        indent, key, old = m.groups()
        if op == "value":
            new = ch.choice(SETUP_VALUES)
        elif op == "enum":
            new = ch.choice(SETUP_ENUMS)
        else:
            try:
                x = float(old) * ch.choice(FACTORS)
            except ValueError:
                x = 2.0
            new = repr(x) if "." in old or "e" in old.lower() else str(int(x)) if math.isfinite(x) else repr(x)
        lines[i] = f"{indent}{key}: {new}"
        return f"line {i + 1}: {key}: {new} (was {old})"
    if op == "delete_line" and value_idx:
        i = ch.choice(value_idx)
        old = lines[i].strip()
        del lines[i]
        return f"delete line {i + 1} ({old})"
    if op == "block" and blocks:
        s, e, name = ch.choice(blocks)
        how = ch.choice(["remove", "duplicate"])
        if how == "remove":
            del lines[s : e + 1]
            return f"remove block '{name}' at lines {s + 1}-{e + 1}"
        lines[e + 1 : e + 1] = lines[s : e + 1]
        return f"duplicate block '{name}' at lines {s + 1}-{e + 1}"
    if op == "unknown" and blocks:
        s, e, name = ch.choice(blocks)
        key = ch.choice(["bogus_key", "sed", "num_chips", "M"])
        lines.insert(s + 1, f"  {key}: 1")
        return f"add '{key}: 1' in block '{name}' (line {s + 2})"
    if op == "truncate" and len(lines) > 2:
        n = ch.integer(1, len(lines) - 1)
        del lines[n:]
        return f"truncate after line {n}"
    lines.append("bogus_top: 1")
    return "append 'bogus_top: 1'"


def _file_mutation(text: str, ch: Chooser) -> tuple[bytes, str]:
    how = ch.choice(["empty", "nul", "bom", "crlf", "latin1"])
    if how == "empty":
        return b"", "empty file"
    if how == "nul":
        return b"\x00" * 4096, "4096 NUL bytes"
    if how == "bom":
        return b"\xef\xbb\xbf" + text.encode(), "UTF-8 BOM prefix"
    if how == "crlf":
        return text.replace("\n", "\r\n").encode(), "CRLF line endings"
    return text.encode() + b"\n# \xe9\xff\n", "invalid UTF-8 bytes appended"


def make_mutant(source: Source, ch: Chooser, max_ops: int = 3) -> Mutant:
    """One mutant of ``source`` (1..max_ops mutations, chosen by ``ch``)."""
    text = source.text()
    if ch.integer(0, 39) == 0:  # rare whole-file mutations
        data, desc = _file_mutation(text, ch)
        return Mutant(source, [desc], data)
    n = ch.choice([1, 1, 1, 2, 2, 3][: 2 * max_ops])
    n = min(n, max_ops)
    ops: list[str] = []
    run_args = ch.choice(RUN_OPTIONS) if ch.integer(0, 9) == 0 else []
    if source.kind == "toml":
        doc = tomllib.loads(text)
        for _ in range(n):
            ops.append(_toml_mutation(doc, ch))
        return Mutant(source, ops, dump_toml(doc).encode(), list(run_args))
    lines = text.splitlines()
    for _ in range(n):
        ops.append(_setup_mutation(lines, ch))
    return Mutant(source, ops, ("\n".join(lines) + "\n").encode(), list(run_args))


def make_gentle_mutant(source: Source, ch: Chooser) -> Mutant:
    """A plausible mutant: one numeric field scaled by 1/4 .. 8 (often still feasible)."""
    text = source.text()
    if source.kind == "toml":
        doc = tomllib.loads(text)
        nums = [p for p in _leaves(doc) if isinstance(_get(doc, p), (int, float)) and not isinstance(_get(doc, p), bool)]
        p = ch.choice(nums)
        old = _get(doc, p)
        new = old * ch.choice(GENTLE)
        if isinstance(old, int):
            new = max(1, int(new))
        _get(doc, p[:-1])[p[-1]] = new
        return Mutant(source, [f"{_fmt_path(p)} = {_value(new)} (was {_value(old)})"], dump_toml(doc).encode())
    lines = text.splitlines()
    idx = [i for i, ln in enumerate(lines)
           if (m := _VALUE_LINE.match(ln)) and re.fullmatch(r"-?[\d.]+(e[+-]?\d+)?", m.group(3))]
    i = ch.choice(idx)
    indent, key, old = _VALUE_LINE.match(lines[i]).groups()
    f = ch.choice(GENTLE)
    new = repr(float(old) * f) if ("." in old or "e" in old) else str(max(1, int(int(old) * f)))
    lines[i] = f"{indent}{key}: {new}"
    return Mutant(source, [f"line {i + 1}: {key}: {new} (was {old})"], ("\n".join(lines) + "\n").encode())


def mutant_from_seed(sources: list[Source], seed: int) -> Mutant:
    ch = RandomChooser(seed)
    return make_mutant(ch.choice(sources), ch)


# --------------------------------------------------------------------------------------------
# Running the CLI


@dataclass
class Outcome:
    code: int | None
    output: str  # stdout + stderr
    seconds: float
    exception: str | None = None  # an exception that escaped (in-process) or traceback text
    timed_out: bool = False


def run_inprocess(args: list[str]) -> Outcome:
    from typer.testing import CliRunner

    from dfsearch.cli import app

    t0 = time.process_time()  # CPU seconds: a loaded machine is no hang
    res = CliRunner().invoke(app, args)
    dt = time.process_time() - t0
    exc = None
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        exc = "".join(traceback.format_exception(res.exception)).rstrip()
    out = res.output
    return Outcome(res.exit_code, out, dt, exc)


def run_subprocess(args: list[str], timeout: float = HANG_S) -> Outcome:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    t0 = children_cpu_s()  # the child's CPU seconds: a loaded machine is no hang
    try:
        cp = subprocess.run(
            [sys.executable, "-m", "dfsearch", *args], check=False,
            capture_output=True, timeout=timeout * load_factor(), env=env, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        return Outcome(None, out, timeout, timed_out=True)
    out = cp.stdout.decode(errors="replace") + cp.stderr.decode(errors="replace")
    return Outcome(cp.returncode, out, children_cpu_s() - t0)


# --------------------------------------------------------------------------------------------
# Checks


@dataclass
class Failure:
    kind: str  # traceback, bad_exit, hang, unclear_error, bound_violation, roundtrip_mismatch, nondeterminism, bad_json
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.detail}"


@dataclass
class Report:
    label: str
    code: int | None = None
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    output_head: str = ""


FAILURE_KINDS = [
    "traceback", "bad_exit", "hang", "unclear_error", "bound_violation", "roundtrip_mismatch",
    "nondeterminism", "bad_json",
]

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w+(Error|Exception): ", re.MULTILINE)
_PATH_TOKEN = re.compile(r"^([A-Za-z_][\w-]*(?:\[\d+\])*(?:\.[A-Za-z_][\w-]*(?:\[\d+\])*)*)(?=[\s:,]|$)")
TOP_LEVEL_WORDS = {
    "workload", "graph", "system", "cost", "execution", "search", "include", "mapping",
    "dataflow_graph", "kernels", "connections", "gurobi", "miscellany",
}


def head(text: str, n: int = 6, width: int = 200) -> str:
    return "\n".join(ln[:width] for ln in text.strip().splitlines()[:n])


def message_problems(output: str, filename: str) -> list[str]:
    """The problem texts of an exit-2 message (after ``FILE:``; one per line for 'N problems:')."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        pos = ln.find(filename + ":")
        if pos < 0:
            continue
        rest = ln[pos + len(filename) + 1 :].strip()
        if re.match(r"^\d+ problems:?$", rest):
            return [x.strip() for x in lines[i + 1 :] if x.startswith(" ")]
        return [rest]
    return []


def names_field_path(problem: str, known_keys: set[str]) -> bool:
    """True if ``problem`` starts with a field path (dotted / indexed, or a known key name)
    or points at a line of the file (syntax errors have no field)."""
    m = _PATH_TOKEN.match(problem)
    if m:
        tok = m.group(1)
        if "." in tok or "[" in tok:
            return True
        if tok in known_keys or tok in TOP_LEVEL_WORDS:
            return True
    # a top-level unknown key has no parent path: the key itself, quoted, is the field
    q = re.match(r"^unknown (?:key|table) '([^']+)'", problem)
    if q and q.group(1) in known_keys:
        return True
    return bool(re.search(r"\b(line|byte) \d+", problem))


def known_keys_of(data: bytes, original: str) -> set[str]:
    text = data.decode(errors="replace") + "\n" + original
    keys = set(re.findall(r"^\s*\[*\s*([A-Za-z_][\w.]*)\s*\]*\s*(?:=|:|\{|$)", text, re.MULTILINE))
    out: set[str] = set()
    for k in keys:
        out.update(k.split("."))
    return out


def check_exit2(out: Outcome, path: Path, known: set[str]) -> Failure | None:
    text = out.output
    if path.name not in text:
        return Failure("unclear_error", f"exit 2 message does not name the file {path.name}: {head(text, 3)!r}")
    probs = message_problems(text, path.name)
    if not probs:
        return Failure("unclear_error", f"exit 2 message has no problem after the file name: {head(text, 3)!r}")
    bad = [p for p in probs if not names_field_path(p, known)]
    if bad:
        return Failure("unclear_error", f"exit 2 problem without a field path: {bad[0][:200]!r}")
    return None


def _strip_timing(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_timing(v) for k, v in obj.items() if k not in ("seconds", "wall_s", "elapsed_s")}
    if isinstance(obj, list):
        return [_strip_timing(v) for v in obj]
    return obj


def lower_bound_of(js: dict[str, Any]) -> float | None:
    lb = js.get("lower_bound_s")
    if lb is None and isinstance(js.get("search"), dict):
        lb = js["search"].get("lower_bound_s")
    return lb


def same_float(a: Any, b: Any, rel: float = 1e-12) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _basic(out: Outcome, what: str) -> list[Failure]:
    f: list[Failure] = []
    if out.timed_out:
        f.append(Failure("hang", f"{what} ran over {out.seconds:.0f} s"))
        return f
    if out.exception:
        f.append(Failure("traceback", f"{what}: exception escaped: {out.exception.splitlines()[-1][:300]}"))
    elif _TRACEBACK.search(out.output):
        f.append(Failure("traceback", f"{what}: traceback in output: {head(out.output, 3)!r}"))
    if out.code not in (0, 1, 2):
        f.append(Failure("bad_exit", f"{what}: exit {out.code}"))
    return f


def check_mutant(
    mutant: Mutant,
    workdir: Path,
    runner: Callable[[list[str]], Outcome] = run_inprocess,
    *,
    roundtrip: bool = True,
    determinism: bool = False,
    time_limit: float = TIME_LIMIT_S,
) -> Report:
    """Run ``dfsearch run`` (and ``eval`` / a second run) on ``mutant`` written into ``workdir``."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = mutant.write(workdir)
    j1, m1 = workdir / "run1.json", workdir / "mapping1.toml"
    limit = [] if "--time-limit" in mutant.run_args else ["--time-limit", str(time_limit)]
    args = ["run", str(path), "--quiet", *limit, "--json", str(j1), "--mapping-out", str(m1), *mutant.run_args]
    out = runner(args)
    rep = Report(mutant.label, out.code, out.seconds, output_head=head(out.output, 6))
    rep.failures += _basic(out, "run")
    if rep.failures:
        return rep
    if out.seconds > HANG_S:
        rep.failures.append(Failure("hang", f"run took {out.seconds:.1f} s"))
    if out.code == 2:
        f = check_exit2(out, path, known_keys_of(mutant.data, mutant.source.text()))
        if f and mutant.run_args:  # a bad option: the message names the option instead
            opt = mutant.run_args[0]
            if opt in out.output or opt.lstrip("-").replace("-", "_") in out.output:
                f = None
        if f:
            rep.failures.append(f)
        return rep
    if out.code != 0:
        return rep
    try:
        js = json.loads(j1.read_text())
    except (OSError, ValueError) as e:
        rep.failures.append(Failure("bad_json", f"run exit 0 but --json unreadable: {e}"))
        return rep
    final = js.get("final_s")
    lb = lower_bound_of(js)
    if final is not None and lb is not None and lb > final * (1 + 1e-9):
        rep.failures.append(Failure("bound_violation", f"lower_bound_s {lb!r} > final_s {final!r}"))
    if roundtrip:
        j2 = workdir / "eval.json"
        ev = runner(["eval", str(path), "--mapping", str(m1), "--json", str(j2)])
        basic = _basic(ev, "eval of run's mapping")
        rep.failures += basic
        if not basic:
            try:
                ejs = json.loads(j2.read_text())
            except (OSError, ValueError) as e:
                rep.failures.append(Failure("roundtrip_mismatch", f"eval exit {ev.code}, no JSON ({e}): {head(ev.output, 3)!r}"))
            else:
                if ev.code != 0 or not same_float(ejs.get("final_s"), final):
                    rep.failures.append(Failure(
                        "roundtrip_mismatch",
                        f"run final_s {final!r}, eval of its mapping exit {ev.code} final_s {ejs.get('final_s')!r}: "
                        f"{head(ev.output, 2)!r}",
                    ))
    if determinism and "--time-limit" not in mutant.run_args:  # a time limit may stop runs differently
        j3 = workdir / "run2.json"
        args2 = ["run", str(path), "--quiet", *limit, "--json", str(j3), *mutant.run_args]
        outs = [run_subprocess(args2)]
        if runner is not run_subprocess:  # both runs must come from separate processes
            j1b = workdir / "run1b.json"
            outs.insert(0, run_subprocess(["run", str(path), "--quiet", *limit, "--json", str(j1b), *mutant.run_args]))
            first = j1b
        else:
            first = j1
        basics = [f for o in outs for f in _basic(o, "repeated run")]
        rep.failures += basics
        if not basics:
            try:
                a = _strip_timing(json.loads(first.read_text()))
                b = _strip_timing(json.loads(j3.read_text()))
            except (OSError, ValueError) as e:
                rep.failures.append(Failure("nondeterminism", f"repeated run gave no JSON: {e}"))
            else:
                if a != b:
                    diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
                    rep.failures.append(Failure("nondeterminism", f"JSON differs between processes in {diff[:8]}"))
    return rep


# --------------------------------------------------------------------------------------------
# Mapping files fed to ``dfsearch eval`` (issue 21, item 6)
#
# A *mapping source* is a spec with a mapping that ``dfsearch run --mapping-out`` (TOML) or
# ``run --json`` (JSON, which ``eval --mapping`` also reads) wrote for it. A mapping mutant
# changes the mapping only (1-3 mutations: tile counts above the tokens, configurations out
# of range or against the rules, unknown kernels and dimensions, shapes and placements that do
# not fit, odd types, deleted keys, the generic TOML mutations); :func:`check_mapping_mutant`
# runs ``eval`` on it and checks: exit 0, 1 or 2 without a traceback; exit 2 names the file
# and a field path; exit 1 names the violation's unit in the JSON and the kernel, edge or
# configuration involved in the message.

#: specs whose mappings are mutated: every workload kind, a DFModel input, a whole model in
#: pipeline pieces (``embedding`` / ``lm_head`` tables, ``stage_layers``)
MAPPING_SPECS = [
    EXAMPLES / "gpt3_1.5B_a100x4.toml",
    EXAMPLES / "llm_decode.toml",
    EXAMPLES / "dlrm_a100x128.toml",
    EXAMPLES / "fft_1024gpu.toml",
    EXAMPLES / "hpl_576gpu.toml",
    EXAMPLES / "gpt_pipeline.toml",
    EXAMPLES / "llama3_8b_decode_sn40l.toml",
    DATA / "dfmodel" / "serving" / "llama3_8B_SN40L_decode_tp2_pp8" / "setup.txt",
]

#: the keys of a mapping file (docs/mapping.md): an exit-2 problem may start with one
MAPPING_KEYS = {"shape", "placement", "micro_batch_size", "num_tile", "num_config", "config", "sharding",
                "cores", "stage_layers", "embedding", "lm_head"}
MAPPING_TILES = [0, -1, 2, 3, 7, 4096, 4097, 2**30, 2**31, 2**63, 1.5, "4", True, None]
MAPPING_CONFIGS = [-2, -1, 0, 1, 2, 3, 5, 11, 2**16, 2**63, 1.0, "0", True]
MAPPING_DIMS = ["outer", "m", "k", "n", "none", "OUTER", "x", "", 3, None]
MAPPING_PLACEMENTS = ["tp 4", "pp 2 x dp 2", "none", "tp 0", "tp 4 x tp 4", "dp 1000", "xx", "", 3]


@dataclass(frozen=True)
class MappingSource:
    """A spec and a mapping written for it (``kind``: "toml" or "json")."""

    spec: Path
    mapping: Path
    kind: str

    @property
    def name(self) -> str:
        return f"{self.spec.parent.name}/{self.spec.name} + {self.mapping.suffix[1:]}"


def mapping_sources(workdir: Path, specs: Sequence[Path] = MAPPING_SPECS,
                    runner: Callable[[list[str]], Outcome] | None = None) -> list[MappingSource]:
    """Run every spec once (``--mapping-out`` and ``--json``) into ``workdir``; the specs whose
    run finds a mapping give two sources each (its TOML and its JSON)."""
    runner = runner or run_inprocess
    out: list[MappingSource] = []
    for i, spec in enumerate(specs):
        m, j = Path(workdir) / f"src{i}_mapping.toml", Path(workdir) / f"src{i}_run.json"
        if not (m.exists() and j.exists()):
            runner(["run", str(spec), "--quiet", "--time-limit", str(TIME_LIMIT_S), "--json", str(j),
                    "--mapping-out", str(m)])  # fmt: skip
        if m.exists() and j.exists():
            out += [MappingSource(spec, m, "toml"), MappingSource(spec, j, "json")]
    return out


def _mapping_mutation(doc: dict[str, Any], ch: Chooser) -> str:
    """Apply one mapping-specific mutation to ``doc`` in place; return its description."""
    tables = [k for k in ("config", "sharding") if isinstance(doc.get(k), dict) and doc[k]]
    ends = [k for k in ("embedding", "lm_head") if isinstance(doc.get(k), dict)]
    op = ch.choice(["num_tile", "num_tile", "config", "config", "shift", "sharding", "kernel",
                    "shape", "placement", "micro_batch", "cores", "delete", "end", "stage_layers",
                    "generic"])  # fmt: skip
    if op == "num_tile":
        old, new = doc.get("num_tile"), ch.choice(MAPPING_TILES)
        doc["num_tile"] = new
        return f"num_tile = {new!r} (was {old!r})"
    if op in ("config", "shift", "sharding", "kernel") and tables:
        t = "sharding" if op == "sharding" and "sharding" in tables else ch.choice(tables)
        names = sorted(doc[t])
        k = ch.choice(names)
        old = doc[t][k]
        if op == "kernel":
            doc[t]["no_such_kernel" if ch.choice([0, 1]) else k + "_x"] = old
            return f"{t}: a kernel the spec does not have"
        if t == "sharding":
            new = ch.choice(MAPPING_DIMS)
        elif op == "shift" and isinstance(old, int):
            new = old + ch.choice([-1, 1, 2])
        else:
            new = ch.choice(MAPPING_CONFIGS)
        doc[t][k] = new
        return f"{t}.{k} = {new!r} (was {old!r})"
    if op == "shape":
        old = doc.get("shape")
        new = ch.choice([[], [0], [1], [3], [4, 4], [2, 2, 2], [1024], [-4], ["4"], 4, [2**63]])
        if isinstance(old, list) and old and ch.choice([0, 1]):
            new = list(old)
            new[ch.integer(0, len(new) - 1)] = ch.choice([0, 1, 2, 3, 5, 2**31])
        doc["shape"] = new
        return f"shape = {new!r} (was {old!r})"
    if op == "placement":
        n = ch.integer(0, 3)
        new = [ch.choice(MAPPING_PLACEMENTS) for _ in range(n)] if ch.choice([0, 1, 1]) else "tp 4"
        doc["placement"] = new
        return f"placement = {new!r}"
    if op == "micro_batch":
        new = ch.choice([0, -1, 3, 7, 2**40 + 1, 1.5, "1", None])
        doc["micro_batch_size"] = new
        return f"micro_batch_size = {new!r}"
    if op == "cores" and tables:
        k = ch.choice(sorted(doc[tables[0]]))
        new = {"par_lane": ch.choice([0, -1, 1, 2, 10**6, 1.5]), "par_stage": ch.choice([0, 1, 3, 2**40, "2"])}
        if not isinstance(doc.get("cores"), dict):
            doc["cores"] = {}
        doc["cores"][k] = new
        return f"cores.{k} = {new!r}"
    if op == "delete":
        keys = [k for k in ("shape", "num_tile", "config", "sharding", "micro_batch_size", "num_config",
                            "embedding", "lm_head", "stage_layers") if k in doc]  # fmt: skip
        if keys:
            k = ch.choice(keys)
            del doc[k]
            return f"delete {k}"
    if op == "end" and ends:
        e = ch.choice(ends)
        sub = _mapping_mutation(doc[e], ch) if isinstance(doc[e], dict) else "(not a table)"
        return f"{e}: {sub}"
    if op == "stage_layers":
        new = ch.choice([[], [0], [1], [6, 6], [12], [13], [-1, 13], "12", [1.5]])
        doc["stage_layers"] = new
        return f"stage_layers = {new!r}"
    return _toml_mutation(doc, ch)


def make_mapping_mutant(source: MappingSource, ch: Chooser, max_ops: int = 3) -> Mutant:
    """A mutant of ``source``'s mapping (written as the source's kind); ``Mutant.source`` is
    a :class:`Source` of the mapping file, the spec stays as it is."""
    text = source.mapping.read_text()
    src = Source(f"mapping/{source.name}", source.mapping, "mapping")
    if ch.integer(0, 39) == 0:  # rare whole-file mutations
        data, desc = _file_mutation(text, ch)
        return Mutant(src, [desc], data)
    doc = json.loads(text) if source.kind == "json" else tomllib.loads(text)
    ops = [_mapping_mutation(doc, ch) for _ in range(min(ch.choice([1, 1, 1, 2, 2, 3]), max_ops))]
    if source.kind == "json":
        data = json.dumps(doc, default=lambda o: [[1]] if isinstance(o, DeepArray) else str(o)).encode()
    else:  # TOML has no null: a None drawn above deletes the key
        data = dump_toml(_without_none(doc)).encode()
    return Mutant(src, ops, data)


def _without_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_without_none(v) for v in obj if v is not None]
    return obj


def mapping_mutant_from_seed(sources: list[MappingSource], seed: int) -> tuple[MappingSource, Mutant]:
    ch = RandomChooser(seed)
    source = ch.choice(sources)
    return source, make_mapping_mutant(source, ch)


#: an exit-1 message of ``eval`` says where (a kernel, an edge, a configuration, the batch,
#: the shape or the chip's DRAM) and gives a unit
_WHERE_WORDS = ("kernel '", "edge '", "configuration ", "workload.global_batch_size", "network shape",
                "DRAM per chip")
_UNIT_WORDS = ("bytes", "cores", "sequences", "configuration", "chips")


def check_mapping_mutant(source: MappingSource, mutant: Mutant, workdir: Path,
                         runner: Callable[[list[str]], Outcome] = run_inprocess) -> Report:
    """Run ``dfsearch eval SPEC --mapping MUTANT --json`` and check its answer (see above)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / ("mutant" + source.mapping.suffix)
    path.write_bytes(mutant.data)
    j = workdir / "eval.json"
    j.unlink(missing_ok=True)
    out = runner(["eval", str(source.spec), "--mapping", str(path), "--json", str(j)])
    rep = Report(mutant.label, out.code, out.seconds, output_head=head(out.output, 6))
    rep.failures += _basic(out, "eval")
    if rep.failures:
        return rep
    if out.code == 2:
        f = check_exit2(out, path, known_keys_of(mutant.data, source.mapping.read_text()) | MAPPING_KEYS)
        if f:
            rep.failures.append(f)
        return rep
    try:
        js = json.loads(j.read_text())
    except (OSError, ValueError) as e:
        rep.failures.append(Failure("bad_json", f"eval exit {out.code} but --json unreadable: {e}"))
        return rep
    if out.code == 1:
        said = out.output.split("infeasible mapping:", 1)[-1]
        if not js.get("violation_unit") or not js.get("violation_message"):
            rep.failures.append(Failure("unclear_error", f"eval exit 1 JSON without violation_unit/message: {said[:200]!r}"))
        elif not any(w in said for w in _UNIT_WORDS) or not any(w in said for w in _WHERE_WORDS):
            rep.failures.append(Failure("unclear_error", f"eval exit 1 message without a place or a unit: {said[:200]!r}"))
    return rep
