"""Import DFModel inputs (``setup.txt``, protobuf text format of message ``DSE``) as a Spec.

DFModel's schema (the union of its v1, v2 and legacy versions) is written down once below, so
the importer knows for every field whether it is an ``int64``, a ``float``, a ``bool``, a
``string``, an enum or a message. That is what decides how a number is read: every protobuf
``float`` is rounded to float32 and widened to a Python float, as DFModel reads it
(``freq: 1.41`` becomes 1.409999966621399; docs/model.md, "Units and numbers"), every
``int64`` stays an exact int, whatever the text looks like (``accelerator_price: 33000`` is a
float field, ``length: 1073740000000`` an int64 one).

Which equations (docs/model.md, "Equation sets"): an input with ``miscellany`` instead of
``execution`` is a pre-v1 input, read with :attr:`Equations.LEGACY` (with
``separate_rs_ag_for_ar`` on unless the file says otherwise). DFModel's design-space runs were
written by another pre-v1 script whose inputs look the same but whose DLRM/FFT all-to-all
differs: ``load_dfmodel(text, legacy_as=Equations.DESIGN_SPACE)`` reads a pre-v1 input with
those equations instead. Otherwise the form of the overlap field decides, as it is
what defines the two versions: ``perfect_overlap`` (v1's bool) gives :attr:`Equations.V1`,
``overlap`` (v2's enum) :attr:`Equations.V2`. Without either, any v2-only structural field
(:data:`V2_STRUCTURAL`) gives V2. The v2 *option* fields (``separate_rs_ag_for_ar``,
``link_latency``, ``zero_out``, ``sram_extra``, ``dram_extra``) act wherever they are used,
also on v1 equations: a v2 feature is on exactly when the input file uses its field.

Decisions where protobuf's "absent means zero" matters:

* ``config`` absent is DFModel's 0, i.e. *pinned to configuration 0* when DFModel honours pins
  (DATAFLOW with ``num_config`` other than 0 and the kernel count); elsewhere DFModel ignores
  pins, and an absent ``config`` becomes -1 (free); an explicit one is kept, and refused by
  validation when no mapping can honour it (``dfsearch.pins``).
* ``sharding`` absent (or its placeholder) is ``None``: the inter-chip pass decides.
* ``num_copy`` absent is 1 (DFModel divides by it); an explicit value must be >= 1.
* ``perfect_overlap`` and ``overlap`` both absent is v1's ``perfect_overlap: false``, i.e.
  :attr:`Overlap.NONE` (sum of compute, memory and network time).
* Fields DFModel writes itself (``topological_number``, ``shard_*``, a connection's
  ``buffer_depth``, ``tensor_size``, ...), the place-and-route grid (``accelerator.x``, ``y``,
  ``placement``; only used for a printout) and the ``gurobi`` block are accepted and ignored.

Kernel names must be unique in a Spec (connections refer to names). A name used again is made
unique as ``"<name>#<id>"`` (or ``"<name>#<position>"`` without an id).

>>> looks_like_dfmodel("dataflow_graph {\\n  kernels { name: 'a' }\\n}")
True
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dfsearch.codes import (
    TOPOLOGY_VARIANTS,
    Collective,
    ComputeType,
    Dim,
    Equations,
    ExecutionStyle,
    KernelKind,
    MemoryModel,
    Overlap,
    Parallelism,
    Phase,
)
from dfsearch.errors import Issue, SpecError
from dfsearch.io.files import read_text
from dfsearch.io.pbtxt import Entry, Message, Scalar, parse_pbtxt
from dfsearch.spec import (
    Accelerator,
    Connection,
    Cost,
    DLRMWorkload,
    Execution,
    FFTWorkload,
    Graph,
    HPLWorkload,
    Kernel,
    LLMWorkload,
    Memory,
    NetworkDim,
    SearchSettings,
    Spec,
    System,
    Training,
)
from dfsearch.system.kinds import KINDS
from dfsearch.validate import validate_spec

__all__ = [
    "V2_FIELDS",
    "V2_STRUCTURAL",
    "looks_like_dfmodel",
    "load_dfmodel",
    "load_dfmodel_file",
    "to_float32",
]


# =========================================================================== schema
@dataclass(frozen=True, slots=True)
class _F:
    """One field of a DFModel message."""

    kind: str  # "int64" | "float" | "bool" | "string" | "enum" | "message"
    ref: str = ""  # enum or message name
    repeated: bool = False
    oneof: str = ""
    version: str = ""  # "v2": only DFModel v2 has it; "v1": v1/legacy only; "": both
    ignored: bool = False  # accepted, not used (outputs of DFModel, printout-only settings)


_INT = _F("int64")
_FLOAT = _F("float")
_BOOL = _F("bool")
_STR = _F("string")


def _enum(name: str, **kw: Any) -> _F:
    return _F("enum", name, **kw)


def _msg(name: str, **kw: Any) -> _F:
    return _F("message", name, **kw)


#: DFModel enums: name -> number (DFModel's own numbering; placeholders are 0 = "not set").
_ENUMS: dict[str, dict[str, int]] = {
    "FWD_BWD": {"FWD_BWD_Placeholder": 0, "FWD": 1, "BWD": 2},
    "KernelType": {"KernelType_Placeholder": 0, "SYSTOLIC": 1, "SIMD": 2},
    "Communication_Type": {
        "Communication_Type_Placeholder": 0,
        "ALL_REDUCE": 1,
        "ALL_TO_ALL": 2,
        "ALL_GATHER": 3,
        "ALL_REDUCE_PERIODIC": 4,
        "POINT_TO_POINT": 5,
        "BROADCAST": 6,
    },
    "Sharding": {
        "SHARDING_Placeholder": 0,
        "OUTER_SHARDING": 1,
        "M_SHARDING": 2,
        "K_SHARDING": 3,
        "N_SHARDING": 4,
        "NO_SHARDING": 5,
    },
    # the elementwise messages have no K dimension, hence no K_SHARDING
    "ElementWise_Sharding": {
        "SHARDING_Placeholder": 0,
        "OUTER_SHARDING": 1,
        "M_SHARDING": 2,
        "N_SHARDING": 4,
        "NO_SHARDING": 5,
    },
    "Tiling": {
        "TILING_Placeholder": 0,
        "OUTER_TILING": 1,
        "M_TILING": 2,
        "K_TILING": 3,
        "N_TILING": 4,
        "NO_TILING": 5,
    },
    "Lane_Stage_Type": {"Lane_Stage_Type_Placeholder": 0, "LANE": 1, "STAGE": 2},
    # v1 calls the placeholder Optimization_Placeholder, v2 Execution_Style_Placeholder
    "Execution_Style": {
        "Optimization_Placeholder": 0,
        "Execution_Style_Placeholder": 0,
        "DATAFLOW": 1,
        "KERNEL_BY_KERNEL": 2,
    },
    "Overlap_Style": {
        "Overlap_Style_Placeholder": 0,
        "PERFECT_OVERLAP": 1,
        "NO_OVERLAP": 2,
        "OVERLAP_COMPUTE_MEMORY": 3,
    },
}


def _variant_fields(*, k: bool, two_inputs: bool, weight: bool, ew: bool) -> dict[str, _F]:
    fields: dict[str, _F] = {"outer": _INT, "M": _INT}
    if k:
        fields["K"] = _INT
    fields["N"] = _INT
    if two_inputs:
        fields["input_tensor_1_size"] = _FLOAT
        fields["input_tensor_2_size"] = _FLOAT
    else:
        fields["input_tensor_size"] = _FLOAT
    if weight:
        fields["weight_tensor_size"] = _FLOAT
    fields["output_tensor_size"] = _FLOAT
    fields["sharding"] = _enum("ElementWise_Sharding" if ew else "Sharding")
    fields["tiling"] = _enum("Tiling")
    fields["communication_type"] = _enum("Communication_Type")
    fields["communication_size"] = _FLOAT
    fields["communication_type_2"] = _enum("Communication_Type")
    fields["communication_size_2"] = _FLOAT
    fields["shard_outer_M"] = _F("int64", ignored=True)
    if k:
        fields["shard_K"] = _F("int64", ignored=True)
    fields["shard_N"] = _F("int64", ignored=True)
    fields["memory_size"] = _FLOAT
    if weight:
        fields["skip_weight"] = _BOOL
        fields["use_effective_stage"] = _BOOL
    fields["num_input"] = _INT
    fields["sram_extra"] = _F("float", version="v2")
    fields["dram_extra"] = _F("float", version="v2")
    return fields


def _topology_fields(ndim: int) -> dict[str, _F]:
    letters = "xyz"[:ndim]
    fields: dict[str, _F] = {c: _INT for c in letters}
    fields.update({f"link_bw_{c}": _FLOAT for c in letters})
    fields.update({f"par_{c}": _STR for c in letters})
    return fields


_KERNEL_VARIANTS = (
    "gemm_input1_weight",
    "gemm_input1_input2",
    "elementwise_input1",
    "elementwise_input1_input2",
)
_LLM_LIKE = ("gemm_fft_llm", "vector_fft_llm", "regular_fft_llm", "mamba")

#: DFModel messages: name -> {field name -> field}.
_SCHEMA: dict[str, dict[str, _F]] = {
    "DSE": {
        "dataflow_graph": _msg("Dataflow_Graph"),
        "system": _msg("System"),
        "cost": _msg("Cost"),
        "execution": _msg("Execution"),
        "miscellany": _msg("Execution"),  # legacy name of field 4
        "gurobi": _msg("Gurobi", ignored=True),
    },
    "Dataflow_Graph": {
        "kernels": _msg("Kernel", repeated=True),
        "connections": _msg("Connection", repeated=True),
    },
    "Kernel": {
        "name": _STR,
        "id": _INT,
        "topological_number": _F("int64", ignored=True),
        "config": _INT,
        "fwd_bwd": _enum("FWD_BWD"),
        "type": _enum("KernelType"),
        "gemm_input1_weight": _msg("GEMM_Input1_Weight", oneof="kernel_variant"),
        "gemm_input1_input2": _msg("GEMM_Input1_Input2", oneof="kernel_variant"),
        "elementwise_input1": _msg("ElementWise_Input1", oneof="kernel_variant"),
        "elementwise_input1_input2": _msg("ElementWise_Input1_Input2", oneof="kernel_variant"),
    },
    "GEMM_Input1_Weight": _variant_fields(k=True, two_inputs=False, weight=True, ew=False),
    "GEMM_Input1_Input2": _variant_fields(k=True, two_inputs=True, weight=False, ew=False),
    "ElementWise_Input1": _variant_fields(k=False, two_inputs=False, weight=False, ew=True),
    "ElementWise_Input1_Input2": _variant_fields(k=False, two_inputs=True, weight=False, ew=True),
    "Connection": {
        "id": _INT,
        "startIdx": _INT,
        "endIdx": _INT,
        "communication_type": _enum("Communication_Type", ignored=True),
        "communication_size": _F("float", ignored=True),
        "buffer_depth": _F("int64", ignored=True),
        "tensor_size": _F("float", ignored=True),
        "shard_tensor_size": _F("float", ignored=True),
        "startName": _F("string", ignored=True),
        "endName": _F("string", ignored=True),
        "lane_stage_type": _enum("Lane_Stage_Type", ignored=True),
        "zero_out": _F("bool", version="v2"),
    },
    "Accelerator": {
        "core": _INT,
        "systolic_width": _INT,
        "systolic_height": _INT,
        "sram_cap": _FLOAT,
        "freq": _FLOAT,
        "link_latency": _F("float", version="v2"),
        "pmu": _INT,
        "pmu_cap": _FLOAT,
        "x": _F("int64", ignored=True),
        "y": _F("int64", ignored=True),
        "placement": _F("string", ignored=True),
    },
    "Memory": {
        "dram_bw": _FLOAT,
        "dram_cap": _FLOAT,
        "second_dram_bw": _F("float", version="v1"),
        "second_dram_cap": _F("float", version="v1"),
    },
    "System": {
        "num_chip": _INT,
        "accelerator": _msg("Accelerator"),
        "memory": _msg("Memory"),
        **{
            name: _msg(name.upper(), oneof="topology_variant")
            for name in TOPOLOGY_VARIANTS  # r, sw, fc, r_r, ..., sw_sw_sw
        },
        "HBD": _INT,
    },
    **{name.upper(): _topology_fields(len(dims)) for name, dims in TOPOLOGY_VARIANTS.items()},
    "Cost": {
        name: _FLOAT
        for name in (
            "link_unit_price",
            "switch_unit_price",
            "dram_unit_price",
            "accelerator_price",
            "link_unit_power_x",
            "link_unit_power_y",
            "link_unit_power_z",
            "switch_unit_power",
            "dram_unit_power",
            "accelerator_power",
        )
    },
    "Execution": {
        "llm": _msg("LLM", oneof="workload_variant"),
        "dlrm": _msg("DLRM", oneof="workload_variant"),
        "hpl": _msg("HPL", oneof="workload_variant"),
        "fft": _msg("FFT", oneof="workload_variant"),
        "gemm_fft_llm": _msg("GEMM_FFT_LLM", oneof="workload_variant", version="v1"),
        "vector_fft_llm": _msg("VECTOR_FFT_LLM", oneof="workload_variant", version="v1"),
        "regular_fft_llm": _msg("REGULAR_FFT_LLM", oneof="workload_variant", version="v1"),
        "mamba": _msg("MAMBA", oneof="workload_variant", version="v1"),
        "execution_style": _enum("Execution_Style"),
        "num_config": _INT,
        "perfect_overlap": _F("bool", version="v1"),
        "overlap": _enum("Overlap_Style", version="v2"),
        "separate_rs_ag_for_ar": _F("bool", version="v2"),
        "compute_util": _FLOAT,
        "word": _INT,
        "skip_inter_chip_optimization": _F("bool", version="v2"),
        "effective_stage": _F("int64", version="v2"),
    },
    "LLM": {
        "hidden_dim": _INT,
        "head_dim": _INT,
        "num_head": _INT,
        "seq_len": _INT,
        "num_layer": _INT,
        "global_batch_size": _INT,
        "micro_batch_size": _INT,
        "tile_size": _INT,
        "num_layer_in_graph": _INT,
    },
    "DLRM": {
        "num_table": _INT,
        "emb_dim": _INT,
        "row": _INT,
        "global_batch_size": _INT,
        "num_copy": _INT,
    },
    "HPL": {"n": _INT, "b": _INT, "num_copy": _INT},
    "FFT": {"length": _INT, "num_copy": _INT},
    "GEMM_FFT_LLM": {"hidden": _INT, "seq_len": _INT},
    "REGULAR_FFT_LLM": {"hidden": _INT, "seq_len": _INT},
    "VECTOR_FFT_LLM": {"hidden": _INT, "seq_len": _INT, "effective_stage": _INT},
    "MAMBA": {"hidden": _INT, "seq_len": _INT, "tile_size": _INT, "effective_stage": _INT},
    "Gurobi": {"thread": _INT, "gap": _FLOAT, "time": _INT},
}

#: Fields only DFModel v2 has; using any of them selects the v2 equations.
V2_FIELDS: tuple[str, ...] = tuple(
    sorted(
        {f"{msg}.{name}" for msg, fields in _SCHEMA.items() for name, f in fields.items()
         if f.version == "v2"}
    )
)

#: v2-only fields that are not options of their own: they select the v2 equations
V2_STRUCTURAL = ("overlap", "skip_inter_chip_optimization", "effective_stage")

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_FLOAT_WORDS = {"inf": math.inf, "infinity": math.inf, "nan": math.nan}
_BOOL_WORDS = {"true": True, "True": True, "t": True, "false": False, "False": False, "f": False}


def to_float32(value: float) -> float:
    """Round ``value`` to IEEE float32 (as protobuf stores a ``float`` field) and widen it.

    >>> to_float32(1.41)
    1.409999966621399
    """
    with np.errstate(over="ignore"):
        return float(np.float32(value))


# =========================================================================== decoding
class _Ctx:
    """What decoding collects across the whole document."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.v2_uses: list[tuple[str, int]] = []  # (field path, line) of v2-only fields

    def add(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))


class _Node:
    """A decoded message: typed values per field name, with source positions."""

    __slots__ = ("path", "schema", "values", "entries", "bad", "line", "misspelt")

    def __init__(self, path: str, schema: str, line: int) -> None:
        self.path = path
        self.schema = schema
        self.values: dict[str, list[Any]] = {}
        self.entries: dict[str, list[Entry]] = {}
        self.bad: set[str] = set()  # fields whose value could not be decoded
        self.misspelt: set[str] = set()  # fields suggested for an unknown (misspelt) name
        self.line = line

    def fpath(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: str) -> bool:
        return name in self.entries

    def excused(self, name: str) -> bool:
        """Already reported: the value was malformed, or the name was misspelt."""
        return name in self.bad or name in self.misspelt

    def get(self, name: str, default: Any = None) -> Any:
        vals = self.values.get(name)
        return vals[-1] if vals else default

    def all(self, name: str) -> list[Any]:
        return self.values.get(name, [])

    def line_of(self, name: str) -> int:
        return self.entries[name][0].line

    def text(self, name: str) -> str:
        value = self.entries[name][-1].value
        return value.show() if isinstance(value, Scalar) else "{...}"


def _closest(name: str, candidates: list[str]) -> str | None:
    lowered = {c.lower(): c for c in candidates}
    if name.lower() in lowered:
        return lowered[name.lower()]
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return found[0] if found else None


def _topology_note(schema: str, name: str) -> str:
    """Why a System field naming a topology kind DFModel lacks (``mesh``) is unknown; ''
    for any other field."""
    if schema != "System":
        return ""
    words = name.lower().split("_")
    for kind in KINDS.values():
        if kind.dfmodel is None and (kind.short in words or kind.label in words):
            return (
                f"DFModel has no {kind.label} topology ({kind.label} is a dfsearch extension): "
                f'write the system as a dfsearch TOML spec, topology = "{kind.label}" in '
                "[[system.network]]"
            )
    return ""


def _decode(msg: Message, schema: str, path: str, ctx: _Ctx) -> _Node:
    node = _Node(path, schema, msg.line)
    fields = _SCHEMA[schema]
    oneof_seen: dict[str, Entry] = {}
    for entry in msg.entries:
        spec = fields.get(entry.name)
        if spec is None:
            note = _topology_note(schema, entry.name)
            hint = None if note else _closest(entry.name, list(fields))
            if hint is not None:
                node.misspelt.add(hint)
            where = f"(line {entry.line}, column {entry.col})"
            msg_text = f"unknown field {entry.name!r} {where}"
            if note:
                msg_text += f"; {note}"
            elif hint is not None:
                msg_text += f"; did you mean {hint!r}?"
            else:
                msg_text += f"; the fields of {schema} are: {', '.join(fields)}"
            ctx.add(path, msg_text)
            continue
        prev = node.entries.get(entry.name)
        fpath = node.fpath(entry.name)
        if prev and not spec.repeated:
            ctx.add(
                fpath,
                f"is given more than once (lines {prev[0].line} and {entry.line}); "
                "it is not a repeated field",
            )
            continue
        if spec.oneof:
            other = oneof_seen.get(spec.oneof)
            if other is not None and other.name != entry.name:
                ctx.add(
                    node.path,
                    f"has both {other.name!r} (line {other.line}) and {entry.name!r} (line "
                    f"{entry.line}), which are alternatives (oneof {spec.oneof}); give only one.",
                )
                continue
            oneof_seen[spec.oneof] = entry
        node.entries.setdefault(entry.name, []).append(entry)
        if spec.version == "v2":
            ctx.v2_uses.append((fpath, entry.line))
        index = len(node.entries[entry.name]) - 1
        value = _decode_value(entry, spec, fpath, index, ctx)
        if value is _BAD:
            node.bad.add(entry.name)
        else:
            node.values.setdefault(entry.name, []).append(value)
    return node


_BAD = object()


def _parse_int(text: str) -> int | None:
    """An integer token's value; None when it is far outside int64 (no huge conversions)."""
    if len(text) > 24:
        return None
    return int(text, 16) if "x" in text.lower() else int(text)

_ARTICLE = {"int64": "an", "float": "a", "bool": "a", "string": "a", "enum": "an"}


def _decode_value(entry: Entry, spec: _F, fpath: str, index: int, ctx: _Ctx) -> Any:
    value = entry.value
    where = f"line {entry.line}, column {entry.col}"
    if spec.kind == "message":
        if not isinstance(value, Message):
            ctx.add(
                fpath,
                f"must be a message ({entry.name} {{ ... }}). Got {value.show()} instead "
                f"({where}).",
            )
            return _BAD
        sub_path = f"{fpath}[{index}]" if spec.repeated else fpath
        return _decode(value, spec.ref, sub_path, ctx)
    if isinstance(value, Message):
        ctx.add(
            fpath,
            f"is {_ARTICLE[spec.kind]} {spec.kind} field: write '{entry.name}: value', not a "
            f"message ({where}).",
        )
        return _BAD
    text = value.text
    where = f"line {value.line}, column {value.col}"
    if spec.kind == "int64":
        if value.kind != "int":
            ctx.add(fpath, f"must be an integer. Got {value.show()} instead ({where}).")
            return _BAD
        number = _parse_int(text)
        if number is None or not _INT64_MIN <= number <= _INT64_MAX:
            ctx.add(fpath, f"is out of the int64 range. Got {value.show()} instead ({where}).")
            return _BAD
        return number
    if spec.kind == "float":
        if value.kind in ("int", "float"):
            number = float(int(text, 16)) if "x" in text.lower() else float(text)
        elif value.kind == "ident" and text.lstrip("-").lower() in _FLOAT_WORDS:
            number = _FLOAT_WORDS[text.lstrip("-").lower()]
        else:
            ctx.add(fpath, f"must be a number. Got {value.show()} instead ({where}).")
            return _BAD
        single = to_float32(number)
        if not math.isfinite(single):
            reason = "a finite number" if value.kind == "ident" else "within float32 range"
            ctx.add(fpath, f"must be {reason}. Got {value.show()} instead ({where}).")
            return _BAD
        return single
    if spec.kind == "bool":
        if value.kind == "ident" and text in _BOOL_WORDS:
            return _BOOL_WORDS[text]
        if value.kind == "int" and text in ("0", "1"):
            return text == "1"
        ctx.add(fpath, f"must be true or false. Got {value.show()} instead ({where}).")
        return _BAD
    if spec.kind == "string":
        if value.kind != "string":
            ctx.add(
                fpath,
                f'must be a quoted string (e.g. "{value.show()}"). Got {value.show()} instead '
                f"({where}).",
            )
            return _BAD
        return text
    # enum
    table = _ENUMS[spec.ref]
    names = [n for n, v in table.items() if v != 0]
    if value.kind == "ident" and text in table:
        return text
    if value.kind == "int":
        number = _parse_int(text)
        by_number = {v: n for n, v in table.items()}
        if number in by_number:
            return by_number[number]
    hint = _closest(text, names) if value.kind in ("ident", "string") else None
    extra = f" Did you mean {hint}?" if hint else ""
    ctx.add(
        fpath,
        f"must be one of {', '.join(names)}. Got {value.show()} instead ({where}).{extra}",
    )
    return _BAD


# =========================================================================== building
class _Builder:
    """Turns decoded nodes into Spec objects, collecting every problem."""

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx

    # -- small typed getters with checks ---------------------------------------------
    def add(self, path: str, message: str) -> None:
        self.ctx.add(path, message)

    def integer(
        self, node: _Node, name: str, *, required: bool = False, low: int | None = None,
        default: int = 0,
    ) -> int:
        if name in node.bad:
            return default
        if not node.has(name):
            if required and not node.excused(name):
                self.add(node.fpath(name), "is required.")
            return default
        value = node.get(name)
        if low is not None and value < low:
            bound = "> 0" if low == 1 else f">= {low}"
            self.add(
                node.fpath(name),
                f"must be {bound}. Got {value} instead (line {node.line_of(name)}).",
            )
            return default
        return value

    def number(
        self, node: _Node, name: str, *, required: bool = False, positive: bool = False,
        default: float = 0.0, high: float | None = None,
    ) -> float:
        if name in node.bad:
            return default
        if not node.has(name):
            if required and not node.excused(name):
                self.add(node.fpath(name), "is required.")
            return default
        value = node.get(name)
        if positive and not value > 0.0:
            self.add(
                node.fpath(name),
                f"must be > 0. Got {node.text(name)} instead (line {node.line_of(name)}).",
            )
            return default
        if value < 0.0:
            self.add(
                node.fpath(name),
                f"must be >= 0. Got {node.text(name)} instead (line {node.line_of(name)}).",
            )
            return default
        if high is not None and value > high:
            self.add(
                node.fpath(name),
                f"must be <= {high:g}. Got {node.text(name)} instead "
                f"(line {node.line_of(name)}).",
            )
            return default
        return value

    def size(self, node: _Node, name: str) -> float | None:
        """An optional byte size: None when absent."""
        if not node.has(name) or name in node.bad:
            return None
        return self.number(node, name)

    def message(self, node: _Node, name: str, *, required: bool = True) -> _Node | None:
        if name in node.bad:
            return None
        sub = node.get(name)
        if sub is None and required and not node.excused(name):
            self.add(node.fpath(name), f"is required ({name} {{ ... }}).")
        return sub

    def oneof(self, node: _Node, names: tuple[str, ...], what: str) -> tuple[str, _Node] | None:
        present = [n for n in names if node.has(n)]
        if not present:
            if not any(node.excused(n) for n in names):
                self.add(node.path, f"needs one {what}: {', '.join(names)}.")
            return None
        name = present[0]
        sub = node.get(name)
        return (name, sub) if sub is not None else None

    # -- graph -------------------------------------------------------------------------
    def graph(self, node: _Node | None, execution: _Node | None) -> Graph | None:
        if node is None:
            return None
        kernels_nodes: list[_Node] = node.all("kernels")
        if not kernels_nodes and not node.excused("kernels"):
            self.add(node.fpath("kernels"), "is required: the graph has no kernels.")
        pins_honoured = self._pins_honoured(execution, len(kernels_nodes))
        kernels: list[Kernel | None] = []
        ids: dict[int, str] = {}  # kernel id -> path of the first kernel with it
        names: set[str] = set()
        id_to_name: dict[int, str] = {}
        for pos, knode in enumerate(kernels_nodes):
            kernel = self.kernel(knode, pos, pins_honoured, names)
            kernels.append(kernel)
            kid = knode.get("id")
            if kid is not None and "id" not in knode.bad:
                if kid in ids:
                    self.add(
                        knode.fpath("id"),
                        f"{kid} is also the id of {ids[kid]}; kernel ids must be unique "
                        f"(line {knode.line_of('id')}).",
                    )
                else:
                    ids[kid] = knode.path
                    if kernel is not None:
                        id_to_name[kid] = kernel.name
        connections: list[Connection] = []
        for cnode in node.all("connections"):
            conn = self.connection(cnode, ids, id_to_name)
            if conn is not None:
                connections.append(conn)
        if any(k is None for k in kernels):
            return None
        return self._make(Graph, node.path, kernels=tuple(kernels), connections=tuple(connections))

    def _pins_honoured(self, execution: _Node | None, num_kernels: int) -> bool:
        """Does DFModel honour ``config`` pins (and so read an absent ``config`` as 0)?"""
        if execution is None:
            return False
        style = execution.get("execution_style")
        num_config = execution.get("num_config", 0)
        return style == "DATAFLOW" and num_config not in (0, num_kernels)

    def kernel(self, node: _Node, pos: int, pins_honoured: bool, names: set[str]) -> Kernel | None:
        before = len(self.ctx.issues)
        name = node.get("name")
        if name is None and not node.excused("name"):
            self.add(node.fpath("name"), "is required.")
        elif name is not None and not name.strip():
            self.add(node.fpath("name"), "must not be empty.")
        kid = node.get("id") if "id" not in node.bad else None
        default_config = 0 if pins_honoured else -1
        config = self.integer(node, "config", low=-1, default=default_config)
        phase_name = node.get("fwd_bwd", "FWD_BWD_Placeholder")
        phase = Phase.NONE if phase_name == "FWD_BWD_Placeholder" else Phase.from_dfmodel(phase_name)
        type_name = node.get("type")
        ctype = None
        if type_name is None or type_name == "KernelType_Placeholder":
            if not node.excused("type"):
                self.add(node.fpath("type"), "is required (SYSTOLIC or SIMD).")
        else:
            ctype = ComputeType.from_dfmodel(type_name)
        chosen = self.oneof(node, _KERNEL_VARIANTS, "kernel variant")
        fields: dict[str, Any] = {}
        if chosen is not None:
            fields = self.kernel_variant(*chosen)
        if len(self.ctx.issues) > before or chosen is None or ctype is None or name is None:
            return None
        unique = name
        if unique in names:
            unique = f"{name}#{kid if kid is not None else pos}"
            while unique in names:
                unique += f"#{pos}"
        names.add(unique)
        return self._make(
            Kernel, node.path, name=unique, type=ctype, phase=phase, config=config, id=kid,
            **fields,
        )

    def kernel_variant(self, variant: str, node: _Node) -> dict[str, Any]:
        kind = KernelKind.from_dfmodel(variant)
        out: dict[str, Any] = {"kind": kind}
        out["outer"] = self.integer(node, "outer", required=True, low=1, default=1)
        out["m"] = self.integer(node, "M", required=True, low=1, default=1)
        out["k"] = self.integer(node, "K", required=True, low=1, default=1) if kind.has_k else 1
        out["n"] = self.integer(node, "N", required=True, low=1, default=1)
        if kind.num_inputs == 2:
            out["input_bytes"] = self.size(node, "input_tensor_1_size")
            out["input2_bytes"] = self.size(node, "input_tensor_2_size")
        else:
            out["input_bytes"] = self.size(node, "input_tensor_size")
        if kind.has_weight:
            out["weight_bytes"] = self.size(node, "weight_tensor_size")
            out["skip_weight"] = bool(node.get("skip_weight", False))
            out["use_effective_stage"] = bool(node.get("use_effective_stage", False))
        out["output_bytes"] = self.size(node, "output_tensor_size")
        out["tiling"] = _dim(node.get("tiling"), "_TILING") or Dim.NO
        out["sharding"] = _dim(node.get("sharding"), "_SHARDING")
        out["communication"] = _collective(node.get("communication_type"))
        out["communication_bytes"] = self.number(node, "communication_size")
        out["communication2"] = _collective(node.get("communication_type_2"))
        out["communication2_bytes"] = self.number(node, "communication_size_2")
        out["memory_bytes"] = self.number(node, "memory_size")
        out["num_input"] = self.integer(node, "num_input", low=0)
        out["sram_extra_bytes"] = self.number(node, "sram_extra")
        out["dram_extra_bytes"] = self.number(node, "dram_extra")
        return out

    def connection(
        self, node: _Node, ids: dict[int, str], id_to_name: dict[int, str]
    ) -> Connection | None:
        ends: list[str | None] = []
        for field in ("startIdx", "endIdx"):
            if field in node.bad:
                ends.append(None)
                continue
            if not node.has(field):
                if not node.excused(field):
                    self.add(node.fpath(field), "is required (the id of a kernel).")
                ends.append(None)
                continue
            kid = node.get(field)
            if kid not in ids:
                known = _describe_ids(sorted(ids))
                self.add(
                    node.fpath(field),
                    f"refers to kernel id {kid}, but no kernel has that id ({known}; "
                    f"line {node.line_of(field)}).",
                )
                ends.append(None)
                continue
            ends.append(id_to_name.get(kid))
        src, dst = ends
        if src is None or dst is None:
            return None
        cid = node.get("id") if "id" not in node.bad else None
        return self._make(
            Connection, node.path, src=src, dst=dst, zero_out=bool(node.get("zero_out", False)),
            id=cid,
        )

    # -- system ------------------------------------------------------------------------
    def system(self, node: _Node | None, equations: Equations) -> System | None:
        if node is None:
            return None
        before = len(self.ctx.issues)
        num_chip = self.integer(node, "num_chip", required=True, low=1, default=1)
        acc_node = self.message(node, "accelerator")
        mem_node = self.message(node, "memory")
        accelerator = self.accelerator(acc_node) if acc_node is not None else None
        memory = self.memory(mem_node, equations) if mem_node is not None else None
        network = None
        chosen = self.oneof(node, tuple(TOPOLOGY_VARIANTS), "topology")
        if chosen is not None:
            network = self.network(*chosen)
        hbd = self.integer(node, "HBD", low=0)
        if len(self.ctx.issues) > before or None in (accelerator, memory, network):
            return None
        return self._make(
            System, node.path, num_chip=num_chip, accelerator=accelerator, memory=memory,
            network=network, hbd=hbd,
        )

    def accelerator(self, node: _Node) -> Accelerator | None:
        before = len(self.ctx.issues)
        kw = dict(
            cores=self.integer(node, "core", required=True, low=1, default=1),
            systolic_width=self.integer(node, "systolic_width", required=True, low=1, default=1),
            systolic_height=self.integer(node, "systolic_height", required=True, low=1, default=1),
            sram_bytes=self.number(node, "sram_cap"),
            freq_GHz=self.number(node, "freq", required=True, positive=True, default=1.0),
            pmu=self.integer(node, "pmu", low=0),
            pmu_bytes=self.number(node, "pmu_cap"),
            link_latency_ns=self.number(node, "link_latency"),
        )
        if len(self.ctx.issues) > before:
            return None
        return self._make(Accelerator, node.path, **kw)

    def memory(self, node: _Node, equations: Equations) -> Memory | None:
        before = len(self.ctx.issues)
        kw = dict(
            dram_bw_GBps=self.number(node, "dram_bw", required=True, positive=True, default=1.0),
            dram_bytes=self.number(node, "dram_cap"),
            second_dram_bw_GBps=self.number(node, "second_dram_bw"),
            second_dram_bytes=self.number(node, "second_dram_cap"),
        )
        if equations is Equations.V2:
            for name in ("second_dram_bw", "second_dram_cap"):
                if node.has(name):
                    v2 = ", ".join(p for p, _ in self.ctx.v2_uses[:3])
                    self.add(
                        node.fpath(name),
                        f"is the second DRAM tier, which only DFModel v1 has, but this file "
                        f"uses v2 fields ({v2}); remove one or the other "
                        f"(line {node.line_of(name)}).",
                    )
        if len(self.ctx.issues) > before:
            return None
        return self._make(Memory, node.path, **kw)

    def network(self, variant: str, node: _Node) -> tuple[NetworkDim, ...] | None:
        before = len(self.ctx.issues)
        dims: list[dict[str, Any]] = []
        for letter, topology in zip("xyz", TOPOLOGY_VARIANTS[variant]):
            par_text = node.get(f"par_{letter}", "")
            parallelism = Parallelism.NONE
            if par_text:
                try:
                    parallelism = Parallelism.from_dfmodel(par_text)
                    if parallelism in (Parallelism.NONE, Parallelism.AUTO):
                        raise KeyError(par_text)
                except KeyError:
                    hint = _closest(par_text, ["TP", "PP", "DP"])
                    extra = f" Did you mean {hint!r}?" if hint else ""
                    self.add(
                        node.fpath(f"par_{letter}"),
                        f'must be "TP", "PP" or "DP". Got {par_text!r} instead '
                        f"(line {node.line_of(f'par_{letter}')}).{extra}",
                    )
            dims.append(
                dict(
                    topology=topology,
                    link_bw_GBps=self.number(
                        node, f"link_bw_{letter}", required=True, positive=True, default=1.0
                    ),
                    size=self.integer(node, letter, low=0),
                    parallelism=parallelism,
                )
            )
        if len(self.ctx.issues) > before:
            return None
        made = [self._make(NetworkDim, node.path, **d) for d in dims]
        return None if None in made else tuple(made)  # type: ignore[arg-type]

    # -- cost --------------------------------------------------------------------------
    def cost(self, node: _Node | None, num_dims: int) -> Cost | None:
        if node is None:  # every cost field is optional; no block = all zero
            return Cost(link_power_J_per_GB=(0.0,) * num_dims)
        before = len(self.ctx.issues)
        kw = dict(
            link_price_per_GBps=self.number(node, "link_unit_price"),
            switch_price_per_GBps=self.number(node, "switch_unit_price"),
            dram_price_per_GBps=self.number(node, "dram_unit_price"),
            chip_price=self.number(node, "accelerator_price"),
            link_power_J_per_GB=tuple(
                self.number(node, f"link_unit_power_{c}") for c in "xyz"[:num_dims]
            ),
            switch_power_J_per_GB=self.number(node, "switch_unit_power"),
            dram_power_J_per_GB=self.number(node, "dram_unit_power"),
            chip_power_W=self.number(node, "accelerator_power"),
        )
        if len(self.ctx.issues) > before:
            return None
        return self._make(Cost, node.path, **kw)

    # -- execution and workload --------------------------------------------------------
    def execution(self, node: _Node | None, equations: Equations) -> Execution | None:
        if node is None:
            return None
        before = len(self.ctx.issues)
        style = None
        style_name = node.get("execution_style")
        if style_name is None or _ENUMS["Execution_Style"].get(style_name) == 0:
            if not node.excused("execution_style"):
                self.add(
                    node.fpath("execution_style"), "is required (DATAFLOW or KERNEL_BY_KERNEL)."
                )
        else:
            style = ExecutionStyle.from_dfmodel(style_name)
        overlap = Overlap.NONE  # v1: perfect_overlap absent = false = sum
        if node.has("perfect_overlap") and node.has("overlap"):
            self.add(
                node.path,
                f"'perfect_overlap' (v1, line {node.line_of('perfect_overlap')}) and 'overlap' "
                f"(v2, line {node.line_of('overlap')}) say the same thing; give only one.",
            )
        elif node.get("overlap") not in (None, "Overlap_Style_Placeholder"):
            overlap = {
                "PERFECT_OVERLAP": Overlap.PERFECT,
                "OVERLAP_COMPUTE_MEMORY": Overlap.COMPUTE_MEMORY,
                "NO_OVERLAP": Overlap.NONE,
            }[node.get("overlap")]
        elif node.get("perfect_overlap") is True:
            overlap = Overlap.PERFECT
        separate = node.get("separate_rs_ag_for_ar")
        if separate is None:
            separate = equations.pre_v1  # pre-v1 scripts: all-reduce as RS + AG
        kw = dict(
            style=style,
            num_config=self.integer(node, "num_config", low=0),
            overlap=overlap,
            compute_util=self.number(node, "compute_util", high=1.0),
            word_bytes=self.integer(node, "word", required=True, low=1, default=2),
            equations=equations,
            separate_rs_ag_for_ar=bool(separate),
            skip_inter_chip_optimization=bool(node.get("skip_inter_chip_optimization", False)),
            effective_stage=self.integer(node, "effective_stage", low=0),
        )
        if len(self.ctx.issues) > before:
            return None
        return self._make(Execution, node.path, **kw)

    def workload(self, node: _Node | None, legacy: bool) -> Any:
        if node is None:
            return None
        chosen = self.oneof(node, ("llm", "dlrm", "hpl", "fft", *_LLM_LIKE), "workload")
        if chosen is None:
            return None
        variant, wnode = chosen
        before = len(self.ctx.issues)
        if variant in _LLM_LIKE:
            self.add(
                wnode.path,
                "is a v1 workload variant that dfsearch does not support: DFModel runs it as a "
                "one-layer, batch-1 LLM without the inter-chip pass and without the pipeline "
                "point-to-point term, which dfsearch does not model. Use 'llm { ... }' (with "
                "'skip_inter_chip_optimization: true') or a dfsearch TOML spec instead.",
            )
            return None
        if variant == "llm":
            kw = {
                name: self.integer(wnode, name, required=True, low=1, default=1)
                for name in ("hidden_dim", "head_dim", "num_head", "seq_len", "num_layer",
                             "global_batch_size")
            }
            kw["micro_batch_size"] = self.integer(wnode, "micro_batch_size", low=0)
            kw["tile_size"] = self.integer(wnode, "tile_size", low=0)
            kw["num_layer_in_graph"] = self.integer(
                wnode, "num_layer_in_graph", required=not legacy, low=1, default=1
            )
            # DFModel reads a graph of several layers as the whole pipeline, cut into PP
            # partitions (docs/model.md, "Pipeline partitioning")
            kw["partition_graph"] = (kw["num_layer_in_graph"] or 1) > 1
            if len(self.ctx.issues) == before and kw["num_head"] * kw["head_dim"] != kw[
                "hidden_dim"
            ]:
                self.add(
                    wnode.path,
                    f"num_head * head_dim must equal hidden_dim. Got {kw['num_head']} * "
                    f"{kw['head_dim']} = {kw['num_head'] * kw['head_dim']} instead of "
                    f"{kw['hidden_dim']} (line {wnode.line}).",
                )
            cls: Any = LLMWorkload
        elif variant == "dlrm":
            kw = {n: self.integer(wnode, n, low=0) for n in ("num_table", "emb_dim", "row")}
            kw["global_batch_size"] = self.integer(
                wnode, "global_batch_size", required=True, low=1, default=1
            )
            kw["num_copy"] = self.integer(wnode, "num_copy", low=1, default=1)
            cls = DLRMWorkload
        elif variant == "hpl":
            kw = {
                "n": self.integer(wnode, "n", required=True, low=1, default=1),
                "b": self.integer(wnode, "b", required=True, low=1, default=1),
                "num_copy": self.integer(wnode, "num_copy", low=1, default=1),
            }
            cls = HPLWorkload
        else:
            kw = {
                "length": self.integer(wnode, "length", required=True, low=1, default=1),
                "num_copy": self.integer(wnode, "num_copy", low=1, default=1),
            }
            cls = FFTWorkload
        if len(self.ctx.issues) > before:
            return None
        return self._make(cls, wnode.path, **kw)

    # -- construction guard ------------------------------------------------------------
    def _make(self, cls: Any, path: str, **kw: Any) -> Any:
        """Build a Spec dataclass; a constructor's own check becomes an Issue, not a crash."""
        try:
            return cls(**kw)
        except (TypeError, ValueError) as err:
            self.add(path, str(err))
            return None


def _dim(name: str | None, suffix: str) -> Dim | None:
    """``N_TILING`` -> Dim.N, ``NO_SHARDING`` -> Dim.NO; placeholder/absent -> None."""
    if name is None or not name.endswith(suffix):
        return None
    return Dim[name[: -len(suffix)]]


def _collective(name: str | None) -> Collective:
    if name is None or name == "Communication_Type_Placeholder":
        return Collective.NONE
    return Collective.from_dfmodel(name)


def _describe_ids(ids: list[int]) -> str:
    """``ids``: sorted, distinct. Contiguous runs are shown as ``first..last``."""
    if not ids:
        return "the graph has no kernel ids"
    if ids[-1] - ids[0] + 1 == len(ids) and len(ids) > 3:  # no list as long as the largest id
        return f"kernel ids are {ids[0]}..{ids[-1]}"
    shown = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
    return f"kernel ids are {shown}"


def _equations_of(dse: _Node, ctx: _Ctx) -> Equations:
    """The equation set of a v1 or v2 input: the form of the overlap field (v1's bool
    ``perfect_overlap``), else any v2-only structural field."""
    exe = dse.get("execution")
    if isinstance(exe, _Node) and exe.has("perfect_overlap"):
        return Equations.V1
    structural = {p.rsplit(".", 1)[-1] for p, _ in ctx.v2_uses} & set(V2_STRUCTURAL)
    return Equations.V2 if structural else Equations.V1


def _requested_equations_issue(
    want: Equations, dse: _Node, ctx: _Ctx, legacy: bool
) -> Issue | None:
    """Why the equation set a caller asks for (``--equations``) does not fit the input: a
    pre-v1 input takes one of the two pre-v1 sets; a v1 or v2 input's set is told by its
    content and may only be asked for as it is."""
    pre = "'legacy' or 'design_space'"
    if legacy:
        if want.pre_v1:
            return None
        return Issue("--equations", (
            f"must be {pre} for this pre-v1 input (field 'miscellany' on line "
            f"{dse.line_of('miscellany')}): DFModel's two pre-v1 scripts "
            "read the same format and differ in the DLRM/FFT all-to-all (docs/model.md, "
            f"\"Equation sets\"). Got {want.label!r} instead."))  # fmt: skip
    told = _equations_of(dse, ctx)
    if want is told:
        return None
    why = "it uses fields only DFModel v2 has" if told is Equations.V2 else "it has no v2-only field"
    exe = dse.get("execution")
    if isinstance(exe, _Node) and exe.has("perfect_overlap"):
        why = "execution.perfect_overlap is v1's form of the overlap field"
    return Issue("--equations", (
        f"must be {told.label!r} (or left out) for this input: its content tells its equation "
        f"set ({why}). --equations chooses 'legacy' or 'design_space' only for pre-v1 inputs (field 4 named "
        f"'miscellany'), whose content cannot tell them apart. Got {want.label!r} instead."))


def _chosen_equations(dse: _Node, ctx: _Ctx, legacy: bool, legacy_as: Equations,
                      requested: Equations | None, file: str | None) -> Equations:
    """The equation set of the input: the one requested (checked against the input), else
    ``legacy_as`` for a pre-v1 input, else the one its content tells."""
    if not legacy_as.pre_v1:
        raise ValueError(
            f"legacy_as must be a pre-v1 equation set ('legacy' or 'design_space'), not "
            f"{legacy_as.label!r}"
        )
    if requested is not None:
        issue = _requested_equations_issue(requested, dse, ctx, legacy)
        if issue is not None:
            raise SpecError([issue], file=file)
        legacy_as = requested if legacy else legacy_as
    return legacy_as if legacy else _equations_of(dse, ctx)


# =========================================================================== public API
#: A top-level DFModel message opening (``system {``, ``cost <``, ``execution: {`` ...) at the
#: start of a line or right after a closing ``}``/``>`` or a field separator: protobuf text
#: may hold several messages on one line.
_DETECT = re.compile(
    r"(?:^|[}>;,])[ \t]*(?:" + "|".join(_SCHEMA["DSE"]) + r")[ \t]*:?[ \t]*[{<]", re.MULTILINE
)


def looks_like_dfmodel(text: str) -> bool:
    """True if ``text`` looks like a DFModel ``setup.txt`` (protobuf text format).

    Detection is by content: the opening of one of DFModel's top-level messages
    (``dataflow_graph {``, ``system {``, ``cost <``, ``execution {``, ``miscellany {`` or
    ``gurobi {``) at the start of a line or after the end of another message on the same
    line. A TOML spec cannot contain either outside a string.

    >>> looks_like_dfmodel("system {\\n  num_chip: 4\\n}")
    True
    >>> looks_like_dfmodel("[system]\\nnum_chip = 4\\n")
    False
    """
    return bool(_DETECT.search(text))


def load_dfmodel(
    text: str, *, file: str | None = None, legacy_as: Equations = Equations.LEGACY,
    equations: Equations | None = None,
) -> Spec:
    """Read a DFModel input (message ``DSE`` in protobuf text format) into a validated Spec.

    Parameters
    ----------
    text : str
        The content of a DFModel ``setup.txt``.
    file : str, optional
        File name, used in error messages.
    legacy_as : Equations, optional
        The equation set of a pre-v1 input (``miscellany``), which the text cannot tell
        (docs/model.md, "Equation sets"): ``LEGACY`` (default, DFModel's Compare_w_existing
        script) or ``DESIGN_SPACE`` (its design-space script). Unused for v1 and v2 inputs.
    equations : Equations, optional
        The set asked for (``--equations``): replaces ``legacy_as`` for a pre-v1 input; a v1
        or v2 input's content tells its set, which this must then be (else ``SpecError``).

    Returns
    -------
    Spec
        Graph, system, cost, execution (with the DFModel equation set that the file implies,
        see docs/model.md) and workload; default search settings.

    Raises
    ------
    SpecError
        If the text is not valid protobuf text format (first syntax error, with line and
        column), or if it does not describe a valid DFModel input: every problem found
        (unknown fields with a suggestion, wrong value types, unknown enum values, missing
        required fields, dangling connections, ...) is reported at once, with field paths in
        DFModel's vocabulary (``dataflow_graph.kernels[3].gemm_input1_weight.M``). Semantic
        problems found by :func:`dfsearch.validate.validate_spec` are raised the same way.
    ValueError
        If ``legacy_as`` is not one of the two pre-v1 equation sets.
    """
    root = parse_pbtxt(text, file=file)
    ctx = _Ctx()
    dse = _decode(root, "DSE", "", ctx)
    builder = _Builder(ctx)

    legacy = dse.has("miscellany")
    if legacy and dse.has("execution"):
        ctx.add(
            "",
            f"'execution' (line {dse.line_of('execution')}) and 'miscellany' (line "
            f"{dse.line_of('miscellany')}) are the same message (the legacy name of "
            "'execution'); give only one.",
        )
    exec_name = "miscellany" if legacy and not dse.has("execution") else "execution"
    equations = _chosen_equations(dse, ctx, legacy, legacy_as, equations, file)

    exe_node = builder.message(dse, exec_name)
    graph = builder.graph(builder.message(dse, "dataflow_graph"), exe_node)
    system = builder.system(builder.message(dse, "system"), equations)
    num_dims = len(system.network) if system is not None else 3
    cost = builder.cost(builder.message(dse, "cost", required=False), num_dims)
    execution = builder.execution(exe_node, equations)
    workload = builder.workload(exe_node, legacy)

    if ctx.issues:
        raise SpecError(ctx.issues, file=file)
    assert graph is not None and system is not None and cost is not None
    assert execution is not None and workload is not None
    spec = Spec(
        graph=graph,
        system=system,
        cost=cost,
        execution=execution,
        workload=workload,
        search=SearchSettings(),
        training=Training(memory_model=MemoryModel.DFMODEL),  # DFModel's DRAM check
    )
    issues = _validate(spec)
    if issues:
        raise SpecError(list(issues), file=file)
    return spec


def load_dfmodel_file(
    path: str | Path,
    *,
    legacy_as: Equations = Equations.LEGACY,
    equations: Equations | None = None,
) -> Spec:
    """Read a DFModel ``setup.txt`` from disk; see :func:`load_dfmodel` (and ``legacy_as``,
    ``equations`` there: the equation set of a pre-v1 input, the one a caller asks for).

    Raises
    ------
    SpecError
        If the file cannot be read, is not UTF-8 text, or is not a valid DFModel input.
    """
    return load_dfmodel(read_text(path), file=str(path), legacy_as=legacy_as, equations=equations)


def _validate(spec: Spec) -> list[Issue]:
    """Run the shared semantic checks of :mod:`dfsearch.validate`."""
    return list(validate_spec(spec))
