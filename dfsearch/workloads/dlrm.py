"""DLRM: embedding tables spread over every chip of a fixed network, data-parallel over all
of them, the embedding exchange as an all-to-all (docs/model.md, "DLRM and FFT
all-to-all")."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from dfsearch.codes import Collective, Equations, NetworkTerm, Status, WorkloadKind
from dfsearch.workload_specs import DLRMWorkload  # re-exported
from dfsearch.workloads.base import (
    Batch,
    CollectiveNeed,
    DramUse,
    Lowering,
    NetworkNeeds,
    WorkloadModel,
    all_to_all_channels,
)

if TYPE_CHECKING:
    from dfsearch.cost.lower import Outer
    from dfsearch.spec import Execution, Spec
    from dfsearch.system.ratios import Groups

__all__ = ["DLRMWorkload", "DLRM"]

_P24, _P40 = 2**24, 2**40


@dataclass(frozen=True)
class DLRM(WorkloadModel):
    """DLRM rules: DP = the chips of one copy, micro-batch 1, one layer; the tables' bytes
    are fixed DRAM; the all-to-all carries communication bytes / chips per chip (the
    design-space equations: the communication bytes themselves, docs/model.md)."""

    kind = WorkloadKind.DLRM
    spec_class = DLRMWorkload
    field_ranges = MappingProxyType({
        "num_table": (1, _P40, ""),
        "emb_dim": (1, _P40, "elements"),
        "row": (1, _P40, ""),
        "global_batch_size": (1, _P40, ""),
        "num_copy": (1, _P24, ""),
    })
    generators = ("dlrm",)

    def outer_status(self, spec: Spec, outer: Outer) -> tuple[Status, float]:
        """The global batch must divide by the chips of one copy (the DP degree)."""
        gb = spec.workload.global_batch_size
        chips = spec.system.num_chip // spec.num_copy
        if gb % chips != 0:
            return Status.DIVISIBILITY, float(gb % chips)
        return Status.OK, 0.0

    def batch(self, spec: Spec, outer: Outer, groups: Groups) -> Batch:
        chips = spec.system.num_chip // spec.num_copy
        return Batch(
            global_batch=spec.workload.global_batch_size, micro_batch=1, dp=chips, pp=1, layers=1
        )

    def network(self, ctx: Lowering) -> NetworkNeeds:
        """The all-to-all channels, and the gradient all-reduce over every chip once per
        batch (the fabric prices it, ``Quirks.dlrm_arp_bytes_as_ns`` included)."""
        spec = ctx.spec
        # DFModel's design-space script charges each chip the whole embedding exchange
        equations = spec.execution.equations
        divisor = 1 if equations is Equations.DESIGN_SPACE else ctx.chips_per_copy
        needs = all_to_all_channels(ctx, divisor)
        for i, k in enumerate(spec.graph.kernels):
            if k.communication is Collective.ALL_REDUCE_PERIODIC:
                by = ctx.output_bytes(i) / max(ctx.batch.num_micro_batch, 1)
                needs.append(CollectiveNeed(k.communication, by, None, NetworkTerm.KERNEL_ONCE, i))
        return NetworkNeeds(tuple(needs))

    def dram(self, ctx: Lowering, weight_bytes: float, extra_bytes: float) -> DramUse:
        """Weights and extra bytes as an LLM's, plus this chip's share of the tables."""
        wl, lps = ctx.spec.workload, ctx.batch.layers_per_stage
        table = wl.num_table * wl.row * wl.emb_dim * ctx.word / ctx.chips_per_copy
        return DramUse(weights=lps * weight_bytes, data=lps * extra_bytes + table,
                       act_mult=float(ctx.batch.micro_batch))

    def checks_sram(self, execution: Execution) -> bool:
        """SRAM is checked, except with the v2 equations (they check it for LLMs only)."""
        return execution.equations is not Equations.V2

    def describe(self, workload: DLRMWorkload) -> str:
        wl = workload
        return (
            f"{wl.num_table} tables x {wl.row} rows x {wl.emb_dim}, "
            f"global batch {wl.global_batch_size}, {wl.num_copy} copies"
        )
