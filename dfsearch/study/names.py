"""Names people know for what a results table holds: catalogue presets (``h100`` -> "H100",
``nvlink_all`` -> "NVLink, every dimension"), axes (``system.memory.dram_bw_GBps`` -> "DRAM
bandwidth (GB/s)"), axis values (``150000000.0`` bytes -> "150 MB", a table value as
``cores 416, SRAM 872 MB``, never JSON), metrics with their units, a point's mapping
("TP8 PP128 DP1") and the workload of a spec ("LLM training, 1.0T parameters").

Figures and the HTML report (``plots``, ``html_report``) label everything through here, so a
tick label never shows an internal name, a dict or a JSON text.

>>> value_name("interconnect", "nvlink_all"), value_name("topology", "torus2d")
('NVLink, every dimension', '2-D torus')
>>> axis_name("system.accelerator.sram_bytes"), value_name("system.accelerator.sram_bytes", 150e6)
('SRAM per chip', '150 MB')
>>> value_name("system.accelerator", '{"cores": 416, "sram_bytes": 872415232}')
'cores 416, SRAM 872.4 MB'
>>> metric_title("utilization")
'utilization (fraction of peak FLOP/s)'
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "axis_name", "axis_title", "value_name", "metric_name", "metric_unit", "metric_title",
    "point_name", "parallelism", "workload_name", "number", "tick",
]  # fmt: skip

#: catalogue preset names (dfsearch.study.catalogue) -> the names of the chips, memories,
#: links, networks and styles they describe
_VALUES: Mapping[str, Mapping[str, str]] = {
    "accelerator": {"h100": "H100", "tpu_v4": "TPU v4", "sn30": "SN30", "wse2": "WSE-2"},
    "memory": {"ddr": "DDR", "hbm": "HBM"},
    "interconnect": {"pcie": "PCIe", "nvlink": "NVLink", "nvlink_all": "NVLink, every dimension"},
    "topology": {"torus2d": "2-D torus", "torus3d": "3-D torus", "dragonfly": "dragonfly",
                 "dgx1": "DGX-1", "dgx2": "DGX-2"},
    "style": {"dataflow": "dataflow", "kernel_by_kernel": "kernel by kernel"},
}  # fmt: skip
#: axis or field name -> (display name, unit kind); unit kinds format values (``_format``)
_FIELDS: Mapping[str, tuple[str, str]] = {
    "accelerator": ("accelerator", ""), "memory": ("memory", ""), "interconnect": ("interconnect", ""),
    "topology": ("topology", ""), "style": ("execution style", ""), "compute_share": ("compute share of the chip area", "%"),
    "sram_bytes": ("SRAM per chip", "bytes"), "dram_bw_GBps": ("DRAM bandwidth", "GB/s"),
    "dram_bytes": ("DRAM per chip", "bytes"), "link_bw_GBps": ("link bandwidth", "GB/s"),
    "num_chip": ("chips", ""), "cores": ("cores", ""), "freq_GHz": ("clock", "GHz"),
    "global_batch_size": ("global batch", ""), "micro_batch_size": ("micro-batch", ""),
    "seq_len": ("sequence length", ""), "hidden_dim": ("hidden size", ""), "num_layer": ("layers", ""),
    "compute_util": ("compute utilisation", ""), "num_config": ("configurations", ""),
    "size": ("size", ""), "bandwidth_GBps": ("bandwidth", "GB/s"),
}  # fmt: skip
#: short key names inside a table value
_SHORT = {"sram_bytes": "SRAM", "dram_bw_GBps": "DRAM", "dram_bytes": "DRAM size", "link_bw_GBps": "link"}
#: metric column -> (name, unit)
_METRICS: Mapping[str, tuple[str, str]] = {
    "final_s": ("time per batch", "s"), "throughput_per_s": ("throughput", "batches/s"),
    "utilization": ("utilization", "fraction of peak FLOP/s"), "system_cost": ("system cost", "$"),
    "system_power": ("system power", "W"), "cost_efficiency": ("cost efficiency", "GFLOP/s per $"),
    "power_efficiency": ("power efficiency", "GFLOP/s per W"), "compute_ns": ("compute time", "ns"),
    "memory_ns": ("memory time", "ns"), "network_ns": ("network time", "ns"),
    "all_config_ii_ns": ("time per graph execution", "ns"), "flop_per_chip": ("FLOP per chip", "FLOP"),
    "dram_bytes_per_chip": ("DRAM traffic per chip", "bytes"), "network_bytes_per_chip": ("network traffic per chip", "bytes"),
    "peak_gflops": ("peak per chip", "GFLOP/s"), "dram_bw_GBps": ("DRAM bandwidth", "GB/s"),
    "link_bw_GBps": ("link bandwidth", "GB/s"), "lower_bound_s": ("lower bound", "s"), "gap": ("gap to the bound", ""),
    "seconds": ("search time", "s"), "tokens_per_s": ("tokens per second", "tokens/s"),
    "ttft_s": ("time to first token", "s"), "tpot_s": ("time per output token", "s"),
    "e2e_latency_s": ("end-to-end latency", "s"), "speculative_tokens_per_s": ("speculative tokens per second", "tokens/s"),
    "speculative_time_per_token_s": ("speculative time per token", "s"), "speculative_speedup": ("speculative speed-up", "x"),
    "slowest_stage_s": ("slowest stage", "s"), "tp": ("tensor parallel degree", ""), "pp": ("pipeline stages", ""),
    "dp": ("data parallel degree", ""), "num_config": ("configurations", ""), "evaluations": ("evaluations", ""),
    "batch": ("batch", "sequences"), "stages": ("stages", ""),
}  # fmt: skip


def _leaf(name: str) -> str:
    """The last component of a field path (``system.network[1].size`` -> ``size``)."""
    return name.rsplit(".", 1)[-1].split("[", 1)[0]


def _field(name: str) -> tuple[str, str]:
    if name in _FIELDS:
        return _FIELDS[name]
    leaf = _leaf(name)
    if leaf in _FIELDS:
        label, unit = _FIELDS[leaf]
        if "network[" in name and leaf == "size":  # which dimension
            label = f"network dimension {name.split('[', 1)[1].split(']', 1)[0]} size"
        return label, unit
    unit = "bytes" if leaf.endswith("_bytes") else "GB/s" if leaf.endswith("_GBps") else ""
    return leaf.replace("_", " "), unit


def axis_name(name: str) -> str:
    """The display name of an axis (a catalogue kind or a field path)."""
    return _field(name)[0]


def axis_title(name: str) -> str:
    """The axis name with its unit where values are shown without one (``DRAM bandwidth (GB/s)``)."""
    label, unit = _field(name)
    return f"{label} ({unit})" if unit in ("GB/s", "GHz") else label


def number(value: float) -> str:
    """A number for a table: from 1,000 on whole and thousands separated (``1,482``,
    ``3,103,887,429``), below in at most 4 significant digits (``0.858``, ``71.36``).

    >>> [number(v) for v in (0.0, 0.85771, 71.364, 1482.3, 3103887429.4, 2e18, 0.000123)]
    ['0', '0.8577', '71.36', '1,482', '3,103,887,429', '2e+18', '0.000123']
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if 1000 <= abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:.4g}" if abs(value) >= 1e-3 else f"{value:.3g}"


def tick(value: float) -> str:
    """A tick label: SI prefixes from 10,000 on (``5M``, ``2G``), else at most 4 significant
    digits (``0.005``, ``5000``).

    >>> [tick(v) for v in (0.005, 500.0, 5000.0, 2e4, 5e6, 2e9)]
    ['0.005', '500', '5000', '20k', '5M', '2G']
    """
    for prefix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= max(size, 1e4):
            return f"{value / size:.3g}{prefix}"
    return f"{value:.4g}"


def _bytes(value: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:.4g} B"


def _formatted(unit: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if unit == "bytes":
        return _bytes(float(value))
    if unit == "%":
        return f"{100 * value:.4g} %"
    return number(float(value)) if isinstance(value, float) else f"{value:,}"


def value_name(axis: str, value: Any) -> str:
    """The display text of one axis value: a preset's name, a number with its unit, a table
    value as ``key value, ...`` (its JSON cell read back), never braces."""
    if axis in _VALUES and isinstance(value, str):
        return _VALUES[axis].get(value, value)
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            return value.strip("{}[]")
    if isinstance(value, Mapping):
        return ", ".join(f"{_SHORT.get(k, _field(k)[0])} {_with_unit(k, v)}" for k, v in sorted(value.items()))
    if isinstance(value, list | tuple):
        return " x ".join(value_name(axis, v) for v in value)
    return _formatted(_field(axis)[1], value)


def _with_unit(name: str, value: Any) -> str:
    """A value inside a table value, with a unit its axis title would give (``300 GB/s``)."""
    unit = _field(name)[1]
    return f"{value_name(name, value)} {unit}" if unit in ("GB/s", "GHz") else value_name(name, value)


def metric_name(column: str) -> str:
    return _METRICS.get(column, (column.replace("_", " "), ""))[0]


def metric_unit(column: str) -> str:
    return _METRICS.get(column, ("", ""))[1]


def metric_title(column: str) -> str:
    """``time per batch (s)``; a metric without a unit by its name alone."""
    unit = metric_unit(column)
    return f"{metric_name(column)} ({unit})" if unit else metric_name(column)


def parallelism(row: Mapping[str, Any]) -> str:
    """``TP8 PP128 DP1`` from a row's tp, pp, dp (the known ones; empty when none is)."""
    return " ".join(f"{k.upper()}{row[k]}" for k in ("tp", "pp", "dp") if row.get(k) is not None)


def point_name(row: Mapping[str, Any], axes: Sequence[str], mapping: bool = True) -> str:
    """A point by its axis values' display names (``H100, 2-D torus, DDR, PCIe``), with its
    parallelism when ``mapping`` (``... · TP8 PP128 DP1``)."""
    where = ", ".join(value_name(a, row[a]) for a in axes) or f"point {row['point']}"
    par = parallelism(row) if mapping else ""
    return f"{where} · {par}" if par else where


def _count(value: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if value >= size:
            return f"{value / size:.1f}{unit}" if value < 10 * size else f"{value / size:.0f}{unit}"
    return f"{value:,.0f}"


def workload_name(workload: Any) -> str:
    """A short name of a spec's workload: ``LLM training, 1.0T parameters``, ``DLRM, 16
    tables``, ``HPL, n = 1,048,576``, ``FFT, 2^40 points``, ``LLM serving (decode),
    175B parameters`` (parameters of the transformer layers: 12 x hidden^2 x layers)."""
    kind = getattr(getattr(workload, "kind", None), "label", "")
    if kind in ("llm", "llm_serving"):
        params = 12 * workload.hidden_dim**2 * workload.num_layer
        what = "LLM training" if kind == "llm" else f"LLM serving ({workload.phase.label})"
        return f"{what}, {_count(params)} parameters"
    if kind == "dlrm":
        return f"DLRM, {workload.num_table} tables"
    if kind == "hpl":
        return f"HPL, n = {workload.n:,}"
    if kind == "fft":
        n = workload.length
        return f"FFT, 2^{n.bit_length() - 1} points" if n > 1024 and n & (n - 1) == 0 else f"FFT, {n:,} points"
    return kind.upper() or "workload"
