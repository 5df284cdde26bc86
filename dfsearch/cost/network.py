"""Network terms that depend only on the network shape.

Collective ratios (ns per byte) for the TP/PP/DP groups of LLM runs, the bisection factors of
DLRM/FFT all-to-alls, the HPL process grid. Plain Python, evaluated once per shape at
lowering time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsearch.codes import Equations, Parallelism, Topology
from dfsearch.cost.quirks import Quirks
from dfsearch.spec import System

__all__ = ["Groups", "groups", "llm_ratios", "LLMRatios", "a2a_factors", "hpl_grid"]


@dataclass(frozen=True, slots=True)
class Groups:
    """Degrees and link bandwidths of the TP, PP and DP groups for one shape."""

    tp: int
    pp: int
    dp: int
    tp_dim: int  #: network dimension carrying TP, -1 if none
    pp_dim: int
    dp_dim: int


def groups(system: System, shape: tuple[int, ...]) -> Groups:
    """TP/PP/DP degrees: the size of the dimension that carries each (absent = 1)."""
    deg = {Parallelism.TP: 1, Parallelism.PP: 1, Parallelism.DP: 1}
    dim = {Parallelism.TP: -1, Parallelism.PP: -1, Parallelism.DP: -1}
    for i, d in enumerate(system.network):
        if d.parallelism is not Parallelism.NONE:
            deg[d.parallelism] = shape[i]
            dim[d.parallelism] = i
    return Groups(
        tp=deg[Parallelism.TP],
        pp=deg[Parallelism.PP],
        dp=deg[Parallelism.DP],
        tp_dim=dim[Parallelism.TP],
        pp_dim=dim[Parallelism.PP],
        dp_dim=dim[Parallelism.DP],
    )


@dataclass(frozen=True, slots=True)
class LLMRatios:
    """ns per byte of each collective, 0 where the group is absent."""

    all_reduce: float
    all_to_all: float
    all_gather: float
    all_reduce_periodic: float
    p2p: float
    #: v2 link latency added per all-reduce in a configuration (ns)
    ar_latency: float


def _reduce_ratio(topo: Topology, p: int, bw: float) -> float:
    if topo is Topology.FC:
        return 1.0 / (p * bw)
    return (p - 1) / (p * bw)


def _a2a_ratio(topo: Topology, p: int, bw: float) -> float:
    if topo is Topology.RING:
        return p * p / (8.0 * bw)
    if topo is Topology.SWITCH:
        return p / (4.0 * bw)
    return 1.0 / bw


def llm_ratios(
    system: System,
    shape: tuple[int, ...],
    *,
    separate_rs_ag_for_ar: bool,
    quirks: Quirks,
) -> LLMRatios:
    """Collective ratios for an LLM run, flat or hierarchical (HBD); quirks in docs/model.md."""
    g = groups(system, shape)
    net = system.network
    double_ar = separate_rs_ag_for_ar or not quirks.half_volume_all_reduce
    ar = a2a = ag = arp = p2p = lat = 0.0
    if g.tp_dim >= 0:
        topo, bw, p = net[g.tp_dim].topology, net[g.tp_dim].link_bw_GBps, g.tp
        ar = _reduce_ratio(topo, p, bw)
        ag = _reduce_ratio(topo, p, bw)
        a2a = _a2a_ratio(topo, p, bw)
        hbd = system.hbd
        if hbd > 0 and len(net) == 3:
            x, b0, b1 = shape[0], net[0].link_bw_GBps, net[1].link_bw_GBps
            if hbd >= x:
                ar = (x - 1) / (x * b0)
            else:
                ar = (hbd - 1) / (hbd * b0) + (x / hbd - 1) / (x * b1)
        if double_ar:
            ar *= 2.0
        lat = system.accelerator.link_latency_ns * (2.0 if separate_rs_ag_for_ar else 1.0)
        if topo is not Topology.FC:
            lat *= p - 1
    if g.dp_dim >= 0:
        topo, bw, p = net[g.dp_dim].topology, net[g.dp_dim].link_bw_GBps, g.dp
        arp = _reduce_ratio(topo, p, bw)
        hbd = system.hbd
        if hbd > 0 and len(net) == 3:
            z, b0, b2 = shape[2], net[0].link_bw_GBps, net[2].link_bw_GBps
            if hbd >= z:
                arp = (z - 1) / (z * b0)
            else:
                arp = (hbd - 1) / (hbd * b0) + (z / hbd - 1) / (z * b2)
        if double_ar and topo is not Topology.FC:
            arp *= 2.0
    if g.pp_dim >= 0:
        p2p = 1.0 / net[g.pp_dim].link_bw_GBps
    return LLMRatios(ar, a2a, ag, arp, p2p, lat)


def a2a_factors(
    system: System, shape: tuple[int, ...], chips_per_copy: int, equations: Equations
) -> tuple[float, ...]:
    """ns per per-chip all-to-all byte on each dimension, msg_j / (link_bw_j * bwf_j),
    for DLRM and FFT (legacy message factors: docs/model.md, Equation sets)."""
    n = chips_per_copy
    dims = tuple(d.topology for d in system.network)
    bws = tuple(d.link_bw_GBps for d in system.network)
    x = shape[0]
    y = shape[1] if len(shape) > 1 else 1
    z = shape[2] if len(shape) > 2 else 1
    full = n * (n - 1) / 2.0

    def fc_bwf(s: int) -> float:
        return s * (s - 1) / 2.0 if equations is Equations.V2 else s * s / 4.0

    variant = system.variant
    # per dimension: (message count, links across the bisection); "N" marks the outermost
    # all-pairs factor N(N-1)/2, which the legacy equations replace
    inner_x = x * (x - 1) / 2.0
    inner_xy = x * y * (x * y - 1) / 2.0
    table: dict[str, list[tuple[float | str, float]]] = {
        "sw": [("N", x)],
        "fc": [("N", fc_bwf(x))],
        "r": [("N", 2.0)],
        "r_r": [("N", 2.0 * x), ("N", 2.0 * y)],
        "fc_fc": [(inner_x, fc_bwf(x)), ("N", fc_bwf(y))],
        "r_fc": [(inner_x, 2.0), ("N", fc_bwf(y))],
        "r_sw": [(inner_x, 2.0), ("N", y)],
        "sw_sw": [(inner_x, x), ("N", y)],
        "r_r_r": [("N", 2.0 * x * y), ("N", 2.0 * x * z), ("N", 2.0 * y * z)],
        "r_sw_sw": [(inner_x, 2.0), (inner_xy, y), ("N", z)],
        "sw_sw_sw": [(inner_x, x), (inner_xy, y), ("N", z)],
    }
    if variant not in table:  # pragma: no cover - validation rejects other combinations
        raise ValueError(f"unknown topology variant {dims}")
    out = []
    for (m, f), bw in zip(table[variant], bws):
        if m == "N":
            if equations is Equations.LEGACY:
                m = n * n / 2.0 if variant == "r_r" else float(n * n)
            else:
                m = full
        # a dimension with no link across its bisection carries no traffic (0) or cannot (inf)
        out.append(0.0 if m == 0 else (m / (bw * f) if f > 0 else math.inf))
    return tuple(out)


def hpl_grid(shape: tuple[int, ...]) -> tuple[int, int]:
    """HPL process grid X x Y: 1D (1, s0); 2D (s0, s1); 3D (s0*s1, s2)."""
    if len(shape) == 1:
        return 1, shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    return shape[0] * shape[1], shape[2]
