"""HPL: an n x n LU factorisation in blocks of b on a fixed network seen as an X x Y process
grid; its broadcast and row swaps use the links of dimensions 1 and 0 (docs/model.md)."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from dfsearch.codes import Collective, Dim, NetworkTerm, WorkloadKind
from dfsearch.system.ratios import hpl_grid
from dfsearch.workload_specs import HPLWorkload  # re-exported
from dfsearch.workloads.base import (
    CollectiveNeed,
    DramUse,
    Lowering,
    NetworkNeeds,
    WorkloadModel,
)

if TYPE_CHECKING:
    from dfsearch.spec import Execution, Kernel, Spec

__all__ = ["HPLWorkload", "HPL"]

_P24, _P40 = 2**24, 2**40


@dataclass(frozen=True)
class HPL(WorkloadModel):
    """HPL rules: one run per batch; M split X ways and K split Y ways over the process grid
    (``system.ratios.hpl_grid``); the matrix is fixed DRAM; SRAM is not checked."""

    kind = WorkloadKind.HPL
    spec_class = HPLWorkload
    field_ranges = MappingProxyType({
        "n": (1, _P40, "elements"),
        "b": (1, _P40, "elements"),
        "num_copy": (1, _P24, ""),
    })
    generators = ("hpl",)
    min_network_dims = 2
    min_network_dims_reason = "for an hpl workload (the process grid is X x Y)"

    def shard_dims(
        self, spec: Spec, kernel: Kernel, choice: Dim, tp: int, t: int, shape: tuple[int, ...]
    ) -> tuple[int, int, int]:
        """ceil(rows / X), ceil(K / Y), N."""
        x, y = hpl_grid(shape)
        kk = kernel.k if kernel.kind.has_k else 1
        return -(-kernel.rows // x), -(-kk // y), kernel.n

    def network(self, ctx: Lowering) -> NetworkNeeds:
        """The broadcast on dimension 1 (X > 1) and the point-to-point on dimension 0
        (Y > 1), both communication bytes per chip of the grid line, charged on that
        dimension's channel."""
        x, y = hpl_grid(ctx.shape)
        needs = []
        for i, k in enumerate(ctx.spec.graph.kernels):
            if k.communication is Collective.BROADCAST and x > 1:
                needs.append(CollectiveNeed(Collective.BROADCAST, k.communication_bytes / x, 1,
                                            NetworkTerm.CHANNEL, i))  # fmt: skip
            if k.communication2 is Collective.POINT_TO_POINT and y > 1:
                # DFModel reads communication_size here, not communication_size_2
                needs.append(CollectiveNeed(Collective.POINT_TO_POINT,
                                            k.communication_bytes / y, 0, NetworkTerm.CHANNEL, i))  # fmt: skip
        return NetworkNeeds(tuple(needs))

    def dram(self, ctx: Lowering, weight_bytes: float, extra_bytes: float) -> DramUse:
        """This chip's share of the n x n matrix; no activations."""
        wl = ctx.spec.workload
        return DramUse(data=wl.n * wl.n * ctx.word / ctx.chips_per_copy + extra_bytes)

    def checks_sram(self, execution: Execution) -> bool:
        return False

    def describe(self, workload: HPLWorkload) -> str:
        return f"n {workload.n}, block {workload.b}, {workload.num_copy} copies"
