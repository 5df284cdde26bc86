"""What a workload needs of the network, and the one function that prices it.

A workload never computes nanoseconds: its ``WorkloadModel.network`` hook returns
``NetworkNeeds``, a list of ``CollectiveNeed`` (operation, bytes per chip, group, where it is
charged, and plain counts), and ``price_needs`` asks the ``Fabric`` for each one's time and
fills the per-kernel, per-edge and pipeline terms the evaluator reads (``NetworkTerms``).
Refinements of collective pricing belong in the fabric and in this function, once for every
workload: under the realistic execution model the fabric prices alpha-beta and this function
routes each kernel's tensor-parallel collectives to ``exposed_tile_ns`` (not overlapped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsearch.codes import Collective, NetworkTerm, Parallelism

if TYPE_CHECKING:
    from dfsearch.system.fabric import Fabric, Group

__all__ = ["CollectiveNeed", "NetworkNeeds", "NetworkTerms", "price_needs"]


@dataclass(frozen=True, slots=True)
class CollectiveNeed:
    """One collective a workload needs: ``op`` of ``nbytes`` per chip over ``group``
    (``Fabric.collective_time_ns``; ``None``: every chip of a copy), charged at ``term`` of
    kernel or edge ``index``. Its time is fabric time x ``count`` / ``per`` (in that order):
    ``count`` repeats (a recomputed kernel's second run, the layers of a pipeline's p2p,
    PP - 1 hops), ``per`` spreads it (a gradient all-reduce over the micro-batches).
    ``experts``: the kernel's E (MoE); ``hop``: a pipeline hop, the PP links' latency added
    to every message (``Fabric.hop_ns``)."""

    op: Collective
    nbytes: float
    group: Group
    term: NetworkTerm
    index: int = -1
    count: float = 1.0
    per: float = 1.0
    experts: int = 0
    hop: bool = False


@dataclass(frozen=True, slots=True)
class NetworkNeeds:
    """Every collective of one lowered problem, and how TP all-reduces are run:
    ``split_all_reduce``: as a reduce-scatter + all-gather (sequence parallelism);
    ``all_reduce_latency``: each all-reduce kernel pays the TP links' latency."""

    needs: tuple[CollectiveNeed, ...] = ()
    split_all_reduce: bool = False
    all_reduce_latency: bool = False


@dataclass(frozen=True, slots=True)
class NetworkTerms:
    """The network terms of one lowered problem (ns; ``docs/model.md``). ``None`` = all
    zero. Per kernel: ``kernel_tile_ns`` (every tile), ``kernel_once_ns`` (once per
    execution), ``channel_ns`` (n rows of one entry per network dimension: all-to-all / grid
    traffic, combined by max of sums), ``kernel_all_reduce`` (1: pays the all-reduce latency);
    per edge: ``edge_tile_ns``, ``edge_all_reduce``; ``ar_latency_ns`` per all-reduce;
    ``p2p_ns`` pipeline point-to-point time per batch."""

    kernel_tile_ns: list[float] | None = None
    kernel_once_ns: list[float] | None = None
    channel_ns: list[list[float]] | None = None
    kernel_all_reduce: list[int] | None = None
    edge_tile_ns: list[float] | None = None
    edge_all_reduce: list[int] | None = None
    ar_latency_ns: float = 0.0
    p2p_ns: float = 0.0
    #: realistic model: per kernel, ns per tile of the TP collectives that no compute hides
    #: (added to the kernel's compute time by lowering); None under DFModel's equations
    exposed_tile_ns: list[float] | None = None


def _need_ns(fabric: Fabric, need: CollectiveNeed, split: bool) -> float:
    """One need's time: the fabric's, times its count, over its spread."""
    if need.hop:
        t = fabric.hop_ns(need.nbytes)
    else:
        t = fabric.collective_time_ns(need.op, need.nbytes, need.group, experts=need.experts,
                                      split_all_reduce=split)  # fmt: skip
    return t * need.count / need.per


def price_needs(fabric: Fabric, needs: NetworkNeeds, kernels: int, edges: int) -> NetworkTerms:
    """The evaluator's network terms of ``needs`` for a graph of ``kernels`` kernels and
    ``edges`` edges on ``fabric``: each need's time added to its term (module docstring);
    a TP all-reduce of a non-empty tensor flags its kernel for the all-reduce latency."""
    tile, once, edge = [0.0] * kernels, [0.0] * kernels, [0.0] * edges
    ndim = len(fabric.system.network)
    chan = [[0.0] * ndim for _ in range(kernels)]
    flags = [0] * kernels
    p2p = 0.0
    split = needs.split_all_reduce
    realistic = fabric.alpha_beta is not None
    exposed = [0.0] * kernels if realistic else None
    for need in needs.needs:
        if need.term is NetworkTerm.CHANNEL:
            if need.group is None:
                times = fabric.channel_times_ns(need.op, need.nbytes)
                for j, t in enumerate(times):
                    chan[need.index][j] += t * need.count / need.per
            else:
                chan[need.index][need.group] += _need_ns(fabric, need, split)
            continue
        t = _need_ns(fabric, need, split)
        if exposed is not None and _exposed(need):
            exposed[need.index] += t
        elif need.term is NetworkTerm.KERNEL_TILE:
            tile[need.index] += t
            if need.op is Collective.ALL_REDUCE and need.nbytes > 0:
                flags[need.index] = 1
        elif need.term is NetworkTerm.KERNEL_ONCE:
            once[need.index] += t
        elif need.term is NetworkTerm.EDGE_TILE:
            edge[need.index] += t
        else:
            p2p += t
    # the realistic model's alpha term holds the latency of every collective
    with_latency = needs.all_reduce_latency and not realistic
    latency = fabric.all_reduce_latency_ns(split_all_reduce=split) if with_latency else 0.0
    return NetworkTerms(
        kernel_tile_ns=tile, kernel_once_ns=once, channel_ns=chan, kernel_all_reduce=flags,
        edge_tile_ns=edge, ar_latency_ns=latency, p2p_ns=p2p, exposed_tile_ns=exposed,
    )  # fmt: skip


def _exposed(need: CollectiveNeed) -> bool:
    """Realistic model: a kernel's tensor-parallel collective runs after the kernel on the
    critical path (Megatron-LM does not overlap it), so it adds to the kernel's time instead
    of overlapping it; the DP gradient all-reduce and the pipeline's p2p stay network terms
    (overlapped with compute as the execution's ``overlap`` says)."""
    return need.term is NetworkTerm.KERNEL_TILE and need.group is Parallelism.TP
