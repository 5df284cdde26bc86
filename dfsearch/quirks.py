"""DFModel's number-changing quirks as named switches.

Each field is one of the quirks listed in docs/model.md. A field that is True reproduces
DFModel; the default ``Quirks()`` reproduces DFModel ("Quirks we replicate by default")
except for the fields whose default is False, the quirks we fix by default ("Bugs we fix and
other decisions"). ``Quirks.dfmodel()`` reproduces DFModel throughout; ``Quirks.textbook()``
flips every switch to its corrected alternative, together.
Lowering (``dfsearch.cost.lower``) is the only reader: the jitted evaluator sees plain numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

__all__ = ["Quirks"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Quirks:
    #: TP all-reduce at (p-1)/(p*beta), half the ring reduce-scatter+all-gather
    #: volume. False charges the textbook 2(p-1)/(p*beta) (= ``separate_rs_ag_for_ar``).
    half_volume_all_reduce: bool = True
    #: DLRM gradient all-reduce bytes are added as nanoseconds. False divides
    #: them by the DP dimension's bandwidth with the all-reduce ratio.
    dlrm_arp_bytes_as_ns: bool = True
    #: Pipeline bubble (PP-1)/(nmb * max(lps-1, 1)). False: (PP-1)/nmb.
    bubble_over_layers_per_stage: bool = True
    #: SIMD kernels run at the systolic peak in the FLOP model. False: at
    #: peak / systolic_height (one vector lane per systolic column).
    simd_at_systolic_peak: bool = True
    #: Switch cost/power zeroed for <= 4 chips per copy, links for 1 chip.
    cost_thresholds: bool = True
    #: A 1D ring is charged 2 switch ports regardless of its size.
    ring_two_switch_ports: bool = True
    #: r_sw and sw_sw count dimension-0 links (and sw_sw ports) with the total
    #: chip count instead of chips per copy.
    total_chips_for_dim0: bool = True
    #: FFT shard rule: sN = ceil(N / chips per copy) is applied to
    #: every kernel; DFModel applies it to kernels 0 and 1 only and leaves others at 0.
    #: (Not a replicated quirk: DFModel's behaviour makes other kernels free; see docs/model.md.)

    #: Pipeline p2p charged whenever a pp dimension exists, also when its size is 1 (no
    #: pipeline: nothing is sent). Fixed by default (False: p2p = 0 when PP = 1); True
    #: reproduces DFModel.
    p2p_without_pipeline: bool = False

    @property
    def is_default(self) -> bool:
        """Every switch at its default (a spec without a ``[quirks]`` table)."""
        return self == type(self)()

    @classmethod
    def dfmodel(cls) -> Quirks:
        """Every switch at DFModel's behaviour, the ones we fix by default included."""
        return replace(cls(), **{f.name: True for f in fields(cls)})

    @classmethod
    def textbook(cls) -> Quirks:
        """Every switch flipped to its corrected alternative."""
        return replace(cls(), **{f.name: False for f in fields(cls)})
