"""Network terms that depend only on the network shape.

Collective ratios (ns per byte) for the TP/PP/DP groups of LLM runs, the bisection factors of
DLRM/FFT all-to-alls, the HPL process grid. Plain Python, evaluated once per shape at
lowering time. The per-dimension formulas belong to each dimension's kind
(``dfsearch.topology``); this module combines them into the network's terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsearch.codes import Equations, Parallelism
from dfsearch.cost.quirks import Quirks
from dfsearch.spec import System
from dfsearch.topology import TopologyKind

__all__ = [
    "Groups",
    "groups",
    "llm_ratios",
    "LLMRatios",
    "hbd_reduce_ratio",
    "is_grid",
    "a2a_factors",
    "hpl_grid",
]


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


def hbd_reduce_ratio(size: int, hbd: int, fast_bw: float, slow_bw: float) -> float:
    """Hierarchical (HBD) all-reduce over ``size`` chips: groups of ``hbd`` chips on the
    fast dimension-0 links, then across groups on the slow links (docs/model.md, quirks):
    (size-1)/(size fast) when one group holds them all, else
    (hbd-1)/(hbd fast) + (size/hbd - 1)/(size slow)."""
    if hbd >= size:
        return (size - 1) / (size * fast_bw)
    return (hbd - 1) / (hbd * fast_bw) + (size / hbd - 1) / (size * slow_bw)


def llm_ratios(
    system: System,
    shape: tuple[int, ...],
    *,
    separate_rs_ag_for_ar: bool,
    quirks: Quirks,
) -> LLMRatios:
    """Collective ratios for an LLM run, flat or hierarchical (HBD); quirks in docs/model.md.
    Each group's per-byte times come from its dimension's kind (``dfsearch.topology``)."""
    g = groups(system, shape)
    net = system.network
    hbd = system.hbd if len(net) == 3 else 0
    double_ar = separate_rs_ag_for_ar or not quirks.half_volume_all_reduce
    ar = a2a = ag = arp = p2p = lat = 0.0
    if g.tp_dim >= 0:
        kind, bw, p = net[g.tp_dim].topology.kind, net[g.tp_dim].link_bw_GBps, g.tp
        ar = kind.reduce_ratio(p, bw)
        ag = kind.reduce_ratio(p, bw)
        a2a = kind.all_to_all_ratio(p, bw)
        if hbd > 0:
            ar = hbd_reduce_ratio(shape[0], hbd, net[0].link_bw_GBps, net[1].link_bw_GBps)
        if double_ar:
            ar *= 2.0
        lat = system.accelerator.link_latency_ns * (2.0 if separate_rs_ag_for_ar else 1.0)
        lat *= kind.latency_steps(p)
    if g.dp_dim >= 0:
        kind, bw, p = net[g.dp_dim].topology.kind, net[g.dp_dim].link_bw_GBps, g.dp
        arp = kind.reduce_ratio(p, bw)
        if hbd > 0:
            arp = hbd_reduce_ratio(shape[2], hbd, net[0].link_bw_GBps, net[2].link_bw_GBps)
        if double_ar and kind.doubles_gradient_all_reduce:
            arp *= 2.0
    if g.pp_dim >= 0:
        p2p = net[g.pp_dim].topology.kind.p2p_ratio(net[g.pp_dim].link_bw_GBps)
    return LLMRatios(ar, a2a, ag, arp, p2p, lat)


def is_grid(kinds: tuple[TopologyKind, ...]) -> bool:
    """A network of two or more dimensions that are all direct (ring, mesh) is a grid: every
    dimension spans the whole network (DFModel's torus ``r_r``, ``r_r_r``). Any other network
    is hierarchical: dimension j joins the groups formed by dimensions 0..j-1."""
    return len(kinds) > 1 and all(k.direct for k in kinds)


def _grid_multipliers(shape: tuple[int, ...]) -> tuple[int, ...]:
    """DFModel's multipliers of a grid dimension's bisection links: (x, y) in 2-D,
    (xy, xz, yz) in 3-D (docs/model.md, Network topologies)."""
    if len(shape) == 2:
        return shape[0], shape[1]
    x, y, z = shape
    return x * y, x * z, y * z


def _message_factors(
    shape: tuple[int, ...], n: int, grid: bool, equations: Equations
) -> list[float]:
    """msg_j of each dimension: the messages of an N-chip all-to-all that cross its cut
    (docs/model.md, "DLRM and FFT all-to-all"). The pairs of a group of g chips are
    g(g-1)/2 (v1, v2, legacy inner dimensions) or g^2/4 (design space: the messages crossing
    the group's middle cut); the whole network's are legacy's N^2 (N^2/2 on a 2-D grid)."""
    design_space = equations is Equations.DESIGN_SPACE

    def pairs(g: int) -> float:
        return g * g / 4.0 if design_space else g * (g - 1) / 2.0

    if equations is Equations.LEGACY:
        whole = n * n / 2.0 if grid and len(shape) == 2 else float(n * n)
    else:
        whole = pairs(n)
    out = []
    group = 1
    for j, s in enumerate(shape):
        group *= s
        out.append(whole if grid or j == len(shape) - 1 else pairs(group))
    return out


def a2a_factors(
    system: System, shape: tuple[int, ...], chips_per_copy: int, equations: Equations
) -> tuple[float, ...]:
    """ns per per-chip all-to-all byte on each dimension, msg_j / (link_bw_j * bwf_j),
    for DLRM and FFT (docs/model.md, Network topologies; the message factors of each
    equation set: Equation sets). bwf_j is the kind's bisection links (times the grid
    multiplier in a grid, halved in a design-space grid); msg_j is the pairs of the whole
    network on the outermost dimension and on every grid dimension, and the pairs inside the
    group of dimensions 0..j on an inner hierarchical dimension (``_message_factors``)."""
    kinds = tuple(d.topology.kind for d in system.network)
    bws = tuple(d.link_bw_GBps for d in system.network)
    grid = is_grid(kinds)
    msgs = _message_factors(shape, chips_per_copy, grid, equations)
    mult = _grid_multipliers(shape) if grid else (1,) * len(kinds)
    # DFModel's design-space torus counts g_j links across a dimension's cut, v1 2 g_j
    scale = 0.5 if grid and equations is Equations.DESIGN_SPACE else 1.0
    out = []
    for j, (kind, bw) in enumerate(zip(kinds, bws)):
        m = msgs[j]
        f = kind.bisection_links(shape[j], equations) * mult[j] * scale
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
