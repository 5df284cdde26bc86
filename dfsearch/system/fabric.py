"""The fabric: one object that answers what a collective costs on one network shape.

``Fabric.of(spec, shape, placement)`` is built once per lowered problem (and by every
search-time helper that prices links) from the spec's system, the shape, the parallelism
placement and the spec's ``quirks``. It answers

* ``collective_time_ns(op, bytes, group)``: one collective of ``bytes`` per chip over a
  group, where the group is a kind of parallelism (``Parallelism.TP``, ``PP``, ``DP``: its
  dimension or part of one), a network dimension index (HPL's grid lines), or ``None`` (every
  chip of one copy: DLRM's gradient all-reduce);
* ``channel_times_ns(op, bytes)``: the per-dimension times of a collective over every chip of a
  copy (the DLRM/FFT all-to-all, combined by the evaluator as the max of sums);
* ``ratios()`` / ``expert_ratios(E)``: the ns per byte the LLM and MoE paths read;
* ``all_reduce_latency_ns(split)`` and ``hop_ns(bytes)``: the latency terms.

Under ``execution.model = "realistic"`` (``alpha_beta`` set) the TP, PP and DP collectives
of the LLM kinds are priced alpha-beta instead (``dfsearch.system.alpha_beta``: ring steps x
a step latency + bytes / the achievable bus bandwidth); the MoE paths, whole-copy and
per-dimension collectives keep DFModel's formulas. Under ``"dfmodel"`` nothing changes.

DFModel's number-changing behaviours that concern the network (half-volume all-reduce, the
DLRM gradient all-reduce bytes counted as ns, the HBD reduce, p2p without a pipeline, the
link and switch-port counting quirks) are read from ``quirks`` here and nowhere else, so
every caller sees them the same way. Expressions keep DFModel's operation order (the golden
cases are bit for bit).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dfsearch.codes import Collective, Equations, ExecutionModel, Parallelism
from dfsearch.quirks import Quirks
from dfsearch.system import ratios as per_byte
from dfsearch.system.alpha_beta import AlphaBeta
from dfsearch.system.network_cost import NetworkPrice, link_switch_counts, network_price
from dfsearch.system.placement import Placement, fixed_placement

if TYPE_CHECKING:
    from dfsearch.spec import Cost, Spec, System

__all__ = ["Fabric", "Group"]

#: who takes part in a collective: a kind of parallelism's group, one network dimension
#: (its every line at once), or None: every chip of one copy
Group = Parallelism | int | None


@dataclass(frozen=True, slots=True)
class Fabric:
    """The network of one shape under one placement, with the quirks in effect."""

    system: System
    shape: tuple[int, ...]
    placement: Placement  #: resolved: the spec's fixed roles when the search chose none
    quirks: Quirks
    equations: Equations
    separate_rs_ag_for_ar: bool
    chips_per_copy: int
    #: TP, PP and DP degrees and dimensions (``groups()``)
    grp: per_byte.Groups
    #: ns per byte under the execution's all-reduce choice, and with TP all-reduces run as a
    #: reduce-scatter + all-gather
    plain: per_byte.LLMRatios
    split: per_byte.LLMRatios
    #: the realistic execution model's pricing of the TP, PP and DP collectives (None:
    #: DFModel's formulas, untouched)
    alpha_beta: AlphaBeta | None = None

    @classmethod
    def of(
        cls, spec: Spec, shape: tuple[int, ...], placement: Placement | None = None
    ) -> Fabric:
        """The fabric of ``spec``'s network on ``shape`` (None: the spec's fixed roles)."""
        sysm, ex = spec.system, spec.execution
        fabric = _built(cls, sysm, tuple(shape), placement, spec.quirks, ex.equations,
                        ex.separate_rs_ag_for_ar, sysm.num_chip // spec.num_copy)  # fmt: skip
        if ex.model is not ExecutionModel.REALISTIC:
            return fabric
        ab = AlphaBeta(bus_efficiency=ex.bus_efficiency, step_ns=ex.collective_step_us * 1e3)
        return replace(fabric, alpha_beta=ab)

    @classmethod
    def build(
        cls, system: System, shape: tuple[int, ...], placement: Placement | None,
        quirks: Quirks, *, equations: Equations = Equations.V1,
        separate_rs_ag_for_ar: bool = False, chips_per_copy: int = 0,
    ) -> Fabric:
        """The fabric of ``system`` on ``shape`` without a whole spec (``chips_per_copy`` 0:
        every chip)."""
        pl = fixed_placement(system, shape) if placement is None else placement

        def r(sep: bool) -> per_byte.LLMRatios:
            return per_byte.llm_ratios(system, shape, separate_rs_ag_for_ar=sep, quirks=quirks,
                                       placement=pl)  # fmt: skip

        plain = r(separate_rs_ag_for_ar)
        return cls(
            system=system, shape=shape, placement=pl, quirks=quirks, equations=equations,
            separate_rs_ag_for_ar=separate_rs_ag_for_ar,
            chips_per_copy=chips_per_copy or system.num_chip,
            grp=per_byte.groups(system, shape, pl), plain=plain,
            split=plain if separate_rs_ag_for_ar else r(True),
        )  # fmt: skip

    # ------------------------------------------------------------------ groups and ratios
    def groups(self) -> per_byte.Groups:
        """TP, PP and DP degrees and the dimensions carrying them."""
        return self.grp

    def ratios(self, *, split_all_reduce: bool = False) -> per_byte.LLMRatios:
        """ns per byte of the TP, DP and PP collectives under the execution's all-reduce
        choice; ``split_all_reduce``: every all-reduce as a reduce-scatter + all-gather."""
        return self.split if split_all_reduce else self.plain

    def expert_ratios(self, num_expert: int) -> per_byte.ExpertRatios:
        """EP, experts per chip and the MoE dispatch / gradient ratios of an E-expert kernel."""
        return per_byte.expert_ratios(
            self.system, self.groups(), num_expert,
            separate_rs_ag_for_ar=self.separate_rs_ag_for_ar, quirks=self.quirks,
        )  # fmt: skip

    def all_to_all_factors(self) -> tuple[float, ...]:
        """ns per per-chip all-to-all byte on each dimension (DLRM/FFT)."""
        return per_byte.a2a_factors(self.system, self.shape, self.chips_per_copy, self.equations)

    def link_switch_counts(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Links and switch ports of each dimension of one copy (system cost and power)."""
        topologies = tuple(d.topology for d in self.system.network)
        return link_switch_counts(topologies, self.shape, self.system.num_chip, self.quirks)

    def network_price(self, cost: Cost, copies: int) -> NetworkPrice:
        """Link and switch cost and static power of the whole system (``copies`` copies)."""
        return network_price(self.system, cost, self.shape, copies, self.quirks)

    # ------------------------------------------------------------------ collectives
    def collective_time_ns(
        self, op: Collective, nbytes: float, group: Group, *, experts: int = 0,
        split_all_reduce: bool = False,
    ) -> float:
        """ns of one ``op`` of ``nbytes`` per chip over ``group`` (module docstring).
        ``experts``: the kernel's E (MoE: the gradient all-reduce of its E / EP experts over
        DP / EP replicas, the dispatch over EP chips); ``split_all_reduce``: a TP all-reduce
        runs as a reduce-scatter + all-gather (sequence parallelism). ``ValueError`` for an
        operation the group does not carry."""
        if group is None:
            return self._whole_copy_ns(op, nbytes)
        if isinstance(group, int) and not isinstance(group, Parallelism):
            if op in (Collective.BROADCAST, Collective.POINT_TO_POINT):
                return nbytes / self.system.network[group].link_bw_GBps
            raise ValueError(f"no {op.label} over network dimension {group}")
        if self.alpha_beta is not None and experts == 0:
            # a TP all-reduce split into reduce-scatter + all-gather has no tree form
            ring_only = split_all_reduce and group is Parallelism.TP
            return self._alpha_beta_ns(op, nbytes, group, ring_only=ring_only)
        if op is Collective.ALL_REDUCE_PERIODIC and group is Parallelism.DP and experts > 0:
            e = self.expert_ratios(experts)
            return e.gradient_all_reduce * nbytes * e.experts_per_chip
        if op is Collective.EXPERT_ALL_TO_ALL and group is Parallelism.DP:
            return self.expert_ratios(experts).all_to_all * nbytes
        if op is Collective.POINT_TO_POINT and group is Parallelism.PP:
            if self.groups().pp == 1 and not self.quirks.p2p_without_pipeline:
                return 0.0  # PP = 1 is no pipeline: nothing is sent (Quirks.dfmodel() sends)
            return self.ratios().p2p * nbytes
        return self._ratio(op, group, split_all_reduce) * nbytes

    def _alpha_beta_ns(self, op: Collective, nbytes: float, group: Parallelism,
                       ring_only: bool = False) -> float:
        """The realistic model's time of a collective of one kind of parallelism's groups
        (``dfsearch.system.alpha_beta``; ``ring_only``: no tree all-reduce); 0 when no
        dimension carries the kind."""
        assert self.alpha_beta is not None
        links = per_byte.group_links(self.system, self.placement, group)
        if links is None:
            return 0.0
        dim = self.system.network[links.dim]
        curve = (dim.all_reduce_sizes_bytes, dim.all_reduce_busbw_GBps)
        return self.alpha_beta.time_ns(op, nbytes, degree=links.degree, link_bw_GBps=links.bw,
                                       share=links.factor, bus_efficiency=dim.bus_efficiency,
                                       ring_only=ring_only, curve=curve)  # fmt: skip

    def _ratio(self, op: Collective, group: Parallelism, split: bool) -> float:
        """ns per byte of a TP collective or the DP gradient all-reduce."""
        r = self.plain
        table = {
            (Collective.ALL_REDUCE, Parallelism.TP): (self.split if split else r).all_reduce,
            (Collective.ALL_TO_ALL, Parallelism.TP): r.all_to_all,
            (Collective.ALL_GATHER, Parallelism.TP): r.all_gather,
            (Collective.ALL_REDUCE_PERIODIC, Parallelism.DP): r.all_reduce_periodic,
        }
        if (op, group) not in table:
            raise ValueError(f"no {op.label} over the {group.label} group")
        return table[op, group]

    def _whole_copy_ns(self, op: Collective, nbytes: float) -> float:
        """A collective over every chip of one copy: DLRM's gradient all-reduce, counted as
        ns per byte under ``quirks.dlrm_arp_bytes_as_ns`` (doubled by the pre-v1 equations),
        else at the DP group's all-reduce ratio of the spec's fixed roles."""
        if op is not Collective.ALL_REDUCE_PERIODIC:
            raise ValueError(f"{op.label} over every chip is priced per dimension (channels)")
        if self.quirks.dlrm_arp_bytes_as_ns:
            return nbytes * (2.0 if self.equations.pre_v1 else 1.0)
        r = per_byte.llm_ratios(self.system, self.shape, separate_rs_ag_for_ar=False,
                              quirks=self.quirks)  # fmt: skip
        return nbytes * r.all_reduce_periodic

    def channel_times_ns(self, op: Collective, nbytes: float) -> tuple[float, ...]:
        """Per network dimension, ns of an all-to-all of ``nbytes`` per chip over every chip
        of one copy (docs/model.md, "DLRM and FFT all-to-all")."""
        if op is not Collective.ALL_TO_ALL:
            raise ValueError(f"no per-dimension pricing of {op.label}")
        return tuple(nbytes * f for f in self.all_to_all_factors())

    # ------------------------------------------------------------------ latencies
    def all_reduce_latency_ns(self, *, split_all_reduce: bool = False) -> float:
        """Link latency a TP all-reduce pays (v2 ``link_latency_ns``)."""
        return self.ratios(split_all_reduce=split_all_reduce).ar_latency

    def hop_ns(self, nbytes: float) -> float:
        """One pipeline hop: ``nbytes`` over the PP links plus their link latency; 0 without a
        pipeline (no PP dimension, or PP = 1)."""
        g = self.groups()
        if g.pp_dim < 0 or g.pp <= 1:
            return 0.0
        if self.alpha_beta is not None:
            return self._alpha_beta_ns(Collective.POINT_TO_POINT, nbytes, Parallelism.PP)
        net, acc = self.system.network, self.system.accelerator
        return nbytes * self.ratios().p2p + net[g.pp_dim].latency_ns(acc)


@functools.lru_cache(maxsize=256)
def _built(cls: type[Fabric], system: System, shape: tuple[int, ...], placement: Placement | None,
           quirks: Quirks, equations: Equations, separate: bool, chips_per_copy: int) -> Fabric:  # fmt: skip
    """``Fabric.build`` once per process for equal (frozen) arguments: a search and the
    points of a study on the same system build the same fabrics many times (issue 25)."""
    return cls.build(system, shape, placement, quirks, equations=equations,
                     separate_rs_ag_for_ar=separate, chips_per_copy=chips_per_copy)  # fmt: skip
