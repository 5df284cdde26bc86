"""FFT: a transform of ``length`` points spread over every chip of a fixed network, its
data exchanges as all-to-alls (docs/model.md, "DLRM and FFT all-to-all")."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from dfsearch.codes import Dim, WorkloadKind
from dfsearch.workload_specs import FFTWorkload  # re-exported
from dfsearch.workloads.base import (
    DramUse,
    Lowering,
    NetworkNeeds,
    WorkloadModel,
    all_to_all_channels,
)

if TYPE_CHECKING:
    from dfsearch.spec import Execution, Kernel, Spec

__all__ = ["FFTWorkload", "FFT"]

_P24 = 2**24


@dataclass(frozen=True)
class FFT(WorkloadModel):
    """FFT rules: one run per batch; N split over the chips of one copy (docs/model.md, "FFT
    shard rule"); the signal is fixed DRAM; an all-to-all kernel's bytes per chip are its
    communication bytes / chips² (every equation set); SRAM is not checked."""

    kind = WorkloadKind.FFT
    spec_class = FFTWorkload
    field_ranges = MappingProxyType({
        "length": (1, 2**62, "points"),
        "num_copy": (1, _P24, ""),
    })
    generators = ("fft",)

    def shard_dims(
        self, spec: Spec, kernel: Kernel, choice: Dim, tp: int, t: int, shape: tuple[int, ...]
    ) -> tuple[int, int, int]:
        """rows, K, ceil(N / chips)."""
        chips = spec.system.num_chip // spec.num_copy
        kk = kernel.k if kernel.kind.has_k else 1
        return kernel.rows, kk, -(-kernel.n // chips)

    def network(self, ctx: Lowering) -> NetworkNeeds:
        return NetworkNeeds(tuple(all_to_all_channels(ctx, ctx.chips_per_copy**2)))

    def dram(self, ctx: Lowering, weight_bytes: float, extra_bytes: float) -> DramUse:
        """This chip's share of the signal; no activations."""
        wl = ctx.spec.workload
        return DramUse(data=wl.length * ctx.word / ctx.chips_per_copy + extra_bytes)

    def checks_sram(self, execution: Execution) -> bool:
        return False

    def describe(self, workload: FFTWorkload) -> str:
        return f"length {workload.length}, {workload.num_copy} copies"
