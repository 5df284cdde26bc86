"""The per-chip DRAM use of a mapping, by purpose: the record the workload kinds' memory
rules return (``WorkloadModel.dram``) and the cost model adds the working set to."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DramUse"]


@dataclass(frozen=True, slots=True)
class DramUse:
    """Per-chip DRAM bytes that do not depend on the configuration assignment, by purpose,
    and the multiplier of the widest live activations (the working set) in the DRAM total.

    ``data`` holds a kind's own fixed data (DLRM tables, the HPL matrix, the FFT signal) and
    every kernel's ``dram_extra_bytes``.
    """

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0  #: kept for the backward pass (training memory model)
    data: float = 0.0
    act_mult: float = 0.0
    #: fixed bytes of the other pieces of the same pipeline stage (``Spec.piece``)
    stage_others: float = 0.0

    @property
    def fixed(self) -> float:
        """Every byte but the working set."""
        return (self.weights + self.gradients + self.optimizer + self.activations + self.data
                + self.stage_others)
