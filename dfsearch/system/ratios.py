"""Per-byte collective times composed from the dimensions' kinds (plain Python, once per shape).

Collective ratios (ns per byte) for the TP/PP/DP groups of LLM runs (whole dimensions or
parts of split ones, ``dfsearch.system.placement``), the bisection factors of DLRM/FFT
all-to-alls, the HPL process grid, the expert-parallel terms. The per-dimension formulas
belong to each dimension's kind (``dfsearch.system.kinds``); this module combines them. Callers
outside ``dfsearch.system`` ask the ``Fabric`` (``dfsearch.system.fabric``), which applies the
quirks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsearch.codes import Equations, Parallelism
from dfsearch.quirks import Quirks
from dfsearch.system.kinds import KINDS, TopologyKind
from dfsearch.system.placement import Placement, fixed_placement

if TYPE_CHECKING:
    from dfsearch.spec import System

__all__ = [
    "Groups",
    "groups",
    "GroupLinks",
    "group_links",
    "placement_key",
    "llm_ratios",
    "LLMRatios",
    "hbd_reduce_ratio",
    "is_grid",
    "a2a_factors",
    "hpl_grid",
    "ExpertRatios",
    "expert_parallelism",
    "expert_ratios",
    "experts_per_chip",
]


@dataclass(frozen=True, slots=True)
class Groups:
    """Degrees and dimensions of the TP, PP and DP groups for one shape and placement."""

    tp: int
    pp: int
    dp: int
    tp_dim: int  #: network dimension carrying TP, -1 if none
    pp_dim: int
    dp_dim: int
    #: the placement they come from (the spec's fixed roles unless the search chose one)
    placement: Placement | None = None


def groups(system: System, shape: tuple[int, ...], placement: Placement | None = None) -> Groups:
    """TP/PP/DP degrees and dimensions of ``placement`` (None: the spec's fixed roles, each
    kind the size of the dimension that carries it; absent = 1)."""
    pl = fixed_placement(system, shape) if placement is None else placement
    kinds = (Parallelism.TP, Parallelism.PP, Parallelism.DP)
    tp, pp, dp = (pl.degree(k) for k in kinds)
    tp_dim, pp_dim, dp_dim = (pl.find(k)[0] for k in kinds)
    return Groups(tp, pp, dp, tp_dim, pp_dim, dp_dim, pl)


@dataclass(frozen=True, slots=True)
class GroupLinks:
    """How one kind's groups communicate: the topology kind whose formulas apply at
    ``degree`` chips on links of ``bw`` GB/s, times ``factor`` (``TopologyKind.sub_group``)."""

    kind: TopologyKind
    degree: int
    bw: float
    factor: int
    dim: int


def group_links(system: System, pl: Placement, kind: Parallelism) -> GroupLinks | None:
    """The links of ``kind``'s groups under ``pl``; None when no dimension carries it."""
    i, j = pl.find(kind)
    if i < 0:
        return None
    d = system.network[i]
    p, n = pl.dims[i][j].degree, math.prod(q.degree for q in pl.dims[i])
    sub, factor = KINDS[d.topology].sub_group(p, n, strided=j > 0)
    return GroupLinks(sub, p, d.link_bw_GBps, factor, i)


def placement_key(system: System, pl: Placement) -> tuple:
    """What the model reads of a placement: every kind's degree and group links. Two
    placements of one shape with the same key give the same problem."""
    out = []
    for k in (Parallelism.TP, Parallelism.PP, Parallelism.DP):
        g = group_links(system, pl, k)
        out.append(None if g is None else (g.kind.code, g.degree, g.bw, g.factor))
    return tuple(out)


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
    placement: Placement | None = None,
) -> LLMRatios:
    """Collective ratios for an LLM run, flat or hierarchical (HBD); quirks in docs/model.md.
    Each group's per-byte times come from its dimension's kind (``dfsearch.system.kinds``), for a
    part of a split dimension through ``TopologyKind.sub_group`` (``placement``; None: the
    spec's fixed roles)."""
    pl = fixed_placement(system, shape) if placement is None else placement
    net = system.network
    hbd = system.hbd if len(net) == 3 else 0
    double_ar = separate_rs_ag_for_ar or not quirks.half_volume_all_reduce
    ar = a2a = ag = arp = p2p = lat = 0.0
    tp = group_links(system, pl, Parallelism.TP)
    if tp is not None:
        ar = _scaled(tp.kind.reduce_ratio(tp.degree, tp.bw), tp.factor)
        ag = ar
        a2a = _scaled(tp.kind.all_to_all_ratio(tp.degree, tp.bw), tp.factor)
        if hbd > 0:
            ar = hbd_reduce_ratio(shape[0], hbd, net[0].link_bw_GBps, net[1].link_bw_GBps)
        if double_ar:
            ar *= 2.0
        lat = system.accelerator.link_latency_ns * (2.0 if separate_rs_ag_for_ar else 1.0)
        lat *= tp.kind.latency_steps(tp.degree) * tp.factor
    dp = group_links(system, pl, Parallelism.DP)
    if dp is not None:
        arp = _scaled(dp.kind.reduce_ratio(dp.degree, dp.bw), dp.factor)
        if hbd > 0:
            arp = hbd_reduce_ratio(shape[2], hbd, net[0].link_bw_GBps, net[2].link_bw_GBps)
        if double_ar and KINDS[net[dp.dim].topology].doubles_gradient_all_reduce:
            arp *= 2.0
    pp = group_links(system, pl, Parallelism.PP)
    if pp is not None:
        p2p = _scaled(pp.kind.p2p_ratio(pp.bw), pp.factor)
    return LLMRatios(ar, a2a, ag, arp, p2p, lat)


def _scaled(ratio: float, factor: int) -> float:
    """``ratio`` times a sub-group's factor; the whole dimension's (factor 1) untouched."""
    return ratio if factor == 1 else ratio * factor


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
    kinds = tuple(KINDS[d.topology] for d in system.network)
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
    """HPL process grid X x Y: X the chips of every dimension but the last, Y the last's:
    1D (1, s0); 2D (s0, s1); 3D (s0*s1, s2); N-D (s0*...*s(N-2), s(N-1)).

    >>> hpl_grid((8,)), hpl_grid((2, 4)), hpl_grid((2, 3, 4)), hpl_grid((2, 2, 2, 2))
    ((1, 8), (2, 4), (6, 4), (8, 2))
    """
    return math.prod(shape[:-1]), shape[-1]


# --------------------------------------------------------------------------- experts (MoE)
def expert_parallelism(num_expert: int, dp: int) -> int:
    """EP: the experts of a mixture-of-experts layer are spread over the data-parallel group,
    EP = gcd(E, DP) chips per set of experts (docs/model.md, "Mixture of experts"). Each
    chip holds E / EP experts and each expert has DP / EP replicas; 1 for a dense kernel
    (E = 0).

    >>> expert_parallelism(8, 4), expert_parallelism(8, 16), expert_parallelism(6, 4)
    (4, 8, 2)
    """
    return math.gcd(num_expert, dp) if num_expert > 0 else 1


def experts_per_chip(num_expert: int, dp: int) -> int:
    """E / EP: the experts whose weights one chip holds (1 for a dense kernel, E = 0)."""
    return num_expert // expert_parallelism(num_expert, dp) if num_expert > 0 else 1


@dataclass(frozen=True, slots=True)
class ExpertRatios:
    """The expert-parallel terms of one MoE layer on one shape: EP, experts per chip, and
    ns per byte of the dispatch / combine all-to-all (per byte a chip sends) and of an
    expert's gradient all-reduce over its DP / EP replicas (0 where nothing is exchanged)."""

    ep: int
    experts_per_chip: int
    all_to_all: float
    gradient_all_reduce: float


def expert_ratios(
    system: System,
    grp: Groups,
    num_expert: int,
    *,
    separate_rs_ag_for_ar: bool,
    quirks: Quirks,
) -> ExpertRatios:
    """Expert parallelism on the links of the data-parallel group (``grp.dp``, its
    dimension's kind; a part of a split dimension as ``group_links`` gives it): the
    all-to-all among EP chips is the kind's LLM all-to-all ratio for p = EP per byte of one
    message, a chip's bytes / EP (each chip sends 1/EP of its token rows to every chip of its
    expert group, itself included); the gradient all-reduce is the kind's reduce ratio for
    p = DP / EP, doubled where the dense gradient all-reduce is (no HBD blend). E = 0
    (a dense kernel) or DP = 1: EP = 1 and nothing is exchanged."""
    ep = expert_parallelism(num_expert, grp.dp)
    a2a = arp = 0.0
    links = None
    if num_expert > 0 and grp.dp > 1 and grp.placement is not None:  # groups() sets it
        links = group_links(system, grp.placement, Parallelism.DP)
    if links is not None:
        kind, bw, replicas = links.kind, links.bw, grp.dp // ep
        if ep > 1:
            a2a = _scaled(kind.all_to_all_ratio(ep, bw), links.factor) / ep
        if replicas > 1:
            arp = _scaled(kind.reduce_ratio(replicas, bw), links.factor)
            double = separate_rs_ag_for_ar or not quirks.half_volume_all_reduce
            if double and KINDS[system.network[links.dim].topology].doubles_gradient_all_reduce:
                arp *= 2.0
    return ExpertRatios(ep, experts_per_chip(num_expert, grp.dp), a2a, arp)
