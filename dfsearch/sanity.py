"""Plausibility warnings: inputs that are valid but probably not what the user meant.

Validation (``dfsearch.validate``) rejects what the model cannot compute. This module looks
at a valid spec and points out two kinds of surprise, without changing any result:

* a value implausible for its unit by orders of magnitude — a bandwidth typed in B/s where
  GB/s is expected, a clock in MHz where GHz is expected, a chip above 100 PFLOP/s;
* an input that has no effect on the result — a second DRAM tier under the v2 equations, an ``effective_stage`` no kernel uses, a realistic-model key under ``execution.model = "dfmodel"``. (Inputs the model cannot use at
  all, such as a link power for a dimension that does not exist, are validation errors.)

The thresholds are wide on purpose (every chip of the DFModel paper, from an A100 to a
wafer-scale engine with 3-D stacked DRAM, is far inside them): a warning means "check the
unit", not "unusual design".

>>> from pathlib import Path
>>> import dfsearch
>>> from dfsearch.loader import load_spec
>>> spec = load_spec(Path(dfsearch.__file__).parent / "examples" / "gpt3_1.5B_a100x4.toml")
>>> spec_warnings(spec)
()
>>> slow = dfsearch.replace(spec, "system.memory.dram_bw_GBps", 2.0e8)
>>> print(spec_warnings(slow)[0].render())
system.memory.dram_bw_GBps: 2e+08 GB/s is implausibly large; check the unit (kB/s or Mbit/s written as GB/s?).
"""

from __future__ import annotations

from dataclasses import dataclass

from dfsearch.codes import Equations, ExecutionModel
from dfsearch.spec import Execution, Spec

__all__ = ["SpecWarning", "spec_warnings", "PEAK_LIMIT_GFLOPS"]

#: per-chip peak above which the accelerator is implausible (100 PFLOP/s)
PEAK_LIMIT_GFLOPS = 1e8

# (low, high, unit, hint below low, hint above high): plausible range of a positive value
_BANDWIDTH = (0.01, 1e6, "GB/s", "TB/s written as GB/s?", "kB/s or Mbit/s written as GB/s?")
_CLOCK = (0.01, 20.0, "GHz", "Hz or kHz?", "MHz written as GHz?")
_SRAM = (1e3, 1e12, "bytes", "sram_bytes counts bytes: MB or GB written as a number?", "")
_DRAM = (1e6, 1e15, "bytes", "dram_bytes counts bytes: GB written as a number?", "")
_LATENCY = (0.01, 1e7, "ns", "seconds or microseconds written as ns?", "picoseconds written as ns?")


@dataclass(frozen=True, slots=True)
class SpecWarning:
    """One warning: the field path and what looks wrong."""

    path: str
    message: str

    def render(self) -> str:
        return f"{self.path}: {self.message}"


def spec_warnings(spec: Spec) -> tuple[SpecWarning, ...]:
    """Every plausibility warning of ``spec``, in field order; empty when nothing is odd."""
    return (*_unit_warnings(spec), *_no_effect_warnings(spec))


def _out_of_range(path: str, value: float, rule: tuple) -> list[SpecWarning]:
    low, high, unit, small_hint, large_hint = rule
    if value <= 0 or low <= value <= high:
        return []
    size, hint = ("small", small_hint) if value < low else ("large", large_hint)
    hint = f" ({hint})" if hint else ""
    return [SpecWarning(path, f"{value:.6g} {unit} is implausibly {size}; check the unit{hint}.")]


def _unit_warnings(spec: Spec) -> list[SpecWarning]:
    acc, mem = spec.system.accelerator, spec.system.memory
    out: list[SpecWarning] = []
    out += _out_of_range("system.accelerator.freq_GHz", acc.freq_GHz, _CLOCK)
    if acc.peak_gflops > PEAK_LIMIT_GFLOPS:
        out.append(SpecWarning(
            "system.accelerator",
            f"peak {acc.peak_gflops / 1e6:.4g} PFLOP/s per chip (2 x systolic_width x "
            f"systolic_height x cores x freq_GHz) is above 100 PFLOP/s; check freq_GHz and cores.",
        ))
    out += _out_of_range("system.accelerator.sram_bytes", acc.sram_bytes, _SRAM)
    out += _out_of_range("system.accelerator.link_latency_ns", acc.link_latency_ns, _LATENCY)
    out += _out_of_range("system.memory.dram_bw_GBps", mem.dram_bw_GBps, _BANDWIDTH)
    out += _out_of_range("system.memory.dram_bytes", mem.dram_bytes, _DRAM)
    out += _out_of_range("system.memory.second_dram_bw_GBps", mem.second_dram_bw_GBps, _BANDWIDTH)
    out += _out_of_range("system.memory.second_dram_bytes", mem.second_dram_bytes, _DRAM)
    for i, d in enumerate(spec.system.network):
        out += _out_of_range(f"system.network[{i}].link_bw_GBps", d.link_bw_GBps, _BANDWIDTH)
    return out


def _no_effect_warnings(spec: Spec) -> list[SpecWarning]:
    mem, ex = spec.system.memory, spec.execution
    out: list[SpecWarning] = []
    if mem.second_dram_bytes > 0 and ex.equations is Equations.V2:
        out.append(SpecWarning(
            "system.memory.second_dram_bytes",
            "the second DRAM tier has no effect under equations \"v2\" (a v1 feature).",
        ))
    if ex.effective_stage > 0 and not any(k.use_effective_stage for k in spec.graph.kernels):
        out.append(SpecWarning(
            "execution.effective_stage",
            "no kernel sets use_effective_stage, so it has no effect.",
        ))
    return out + _realistic_only_warnings(ex)


#: the execution keys only the realistic execution model reads, with their defaults
_REALISTIC_KEYS = ("kernel_overhead_us", "gemm_tile_m", "gemm_tile_n", "gemm_tile_k",
                   "bus_efficiency", "collective_step_us")


def _realistic_only_warnings(ex: Execution) -> list[SpecWarning]:
    """A realistic-model key set away from its default while DFModel's equations run."""
    if ex.model is ExecutionModel.REALISTIC:
        return []
    default = Execution()
    return [SpecWarning(f"execution.{key}", "is read by the realistic execution model only; "
                                            "with execution.model = \"dfmodel\" it has no effect.")
            for key in _REALISTIC_KEYS if getattr(ex, key) != getattr(default, key)]
