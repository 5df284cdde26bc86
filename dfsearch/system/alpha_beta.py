"""Collectives priced alpha-beta: the realistic execution model's network (docs/model.md,
"The realistic execution model").

A ring collective of ``bytes`` per chip over ``p`` chips takes ``steps`` steps, each paying a
fixed latency alpha, and moves ``bytes x volume(p)`` per chip at the achievable bus
bandwidth (a fraction of the link bandwidth, the ``busbw`` of nccl-tests):

=================  ===============  ===========
operation          volume(p)        steps
=================  ===============  ===========
all-reduce         2 (p - 1) / p    2 (p - 1)
all-gather, a2a    (p - 1) / p      p - 1
point-to-point     1                1
=================  ===============  ===========

On a part of a split dimension (``TopologyKind.sub_group``) the strided groups share the
links: the bandwidth is divided by the sub-group's factor. A group of one chip costs 0.

An all-reduce may also run as a tree (NCCL switches to its double binary tree where that is
faster): 2 ceil(log2 p) latency steps, each chip sending and receiving the whole message
twice (volume 2). ``time_ns`` takes the faster of ring and tree unless ``ring_only`` (a
reduce-scatter + all-gather pair, which has no tree form). The tree wins below
``tree_crossover_bytes``: ring - tree = alpha (2 (p - 1) - 2 ceil(log2 p)) - 2 bytes / (p
busbw), positive while bytes < alpha busbw p ((p - 1) - ceil(log2 p)).

>>> ab = AlphaBeta(bus_efficiency=0.8, step_ns=1000.0)
>>> round(ab.time_ns(Collective.ALL_REDUCE, 8e6, degree=8, link_bw_GBps=300.0), 3)
72333.333

(14 steps x 1 us + 8e6 bytes x 1.75 / (0.8 x 300 GB/s).)

A fabric may also carry a measured all-reduce curve: nccl-tests ``busbw`` (GB/s) at message
sizes (bytes). ``curve_busbw`` reads it at a size: linear in log2(size) between two points,
the last value above the largest size, and below the smallest size the busbw of a fixed time
(proportional to the size). An all-reduce of ``bytes`` per chip then takes at least
``bytes x 2 (p - 1) / p / curve_busbw(bytes)``, the time nccl-tests measured, divided among
``share`` groups like the link bandwidth. busbw is normalised by nccl-tests to be the same
for every group size, so a curve measured on 8 GPUs stands for every group of the fabric.

>>> round(curve_busbw(3e6, (1e6, 4e6), (50.0, 150.0)), 3)
129.248
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsearch.codes import Collective

__all__ = ["AlphaBeta", "BusbwCurve", "curve_busbw", "volume_and_steps", "tree_steps",
           "tree_crossover_bytes"]

#: a measured all-reduce curve: (message sizes in bytes, increasing; busbw in GB/s)
BusbwCurve = tuple[tuple[float, ...], tuple[float, ...]]


def volume_and_steps(op: Collective, degree: int) -> tuple[float, int]:
    """(bytes moved per chip per byte of the message, ring steps) of ``op`` over ``degree``
    chips; (0, 0) for one chip."""
    p = degree
    if p <= 1:
        return 0.0, 0
    if op in (Collective.ALL_REDUCE, Collective.ALL_REDUCE_PERIODIC):
        return 2.0 * (p - 1) / p, 2 * (p - 1)
    if op in (Collective.ALL_GATHER, Collective.ALL_TO_ALL, Collective.EXPERT_ALL_TO_ALL):
        return (p - 1) / p, p - 1
    if op in (Collective.POINT_TO_POINT, Collective.BROADCAST):
        return 1.0, 1
    raise ValueError(f"no alpha-beta form of {op.label}")


def tree_steps(degree: int) -> int:
    """Latency steps of a tree all-reduce over ``degree`` chips: up and down the tree,
    2 ceil(log2 p); 0 for one chip."""
    return 2 * (degree - 1).bit_length() if degree > 1 else 0


def tree_crossover_bytes(degree: int, step_ns: float, busbw_GBps: float) -> float:
    """The message size (bytes per chip) below which a tree all-reduce over ``degree`` chips
    is faster than a ring (module docstring); 0 when the ring always wins (p <= 2)."""
    extra_steps = (degree - 1) - tree_steps(degree) // 2
    return max(0.0, step_ns * busbw_GBps * degree * extra_steps)


def curve_busbw(nbytes: float, sizes: tuple[float, ...], busbw: tuple[float, ...]) -> float:
    """The measured bus bandwidth (GB/s) at ``nbytes`` of a curve (module docstring)."""
    if nbytes <= sizes[0]:
        return busbw[0] * nbytes / sizes[0]
    if nbytes >= sizes[-1]:
        return busbw[-1]
    hi = next(j for j, s in enumerate(sizes) if s >= nbytes)
    lo = hi - 1
    t = math.log2(nbytes / sizes[lo]) / math.log2(sizes[hi] / sizes[lo])
    return busbw[lo] + t * (busbw[hi] - busbw[lo])


@dataclass(frozen=True, slots=True)
class AlphaBeta:
    """The achievable fraction of the link bandwidth and the latency of one ring step."""

    bus_efficiency: float
    step_ns: float

    def time_ns(self, op: Collective, nbytes: float, *, degree: int, link_bw_GBps: float,
                share: int = 1, bus_efficiency: float | None = None,
                ring_only: bool = False, curve: BusbwCurve | None = None) -> float:
        """ns of one ``op`` of ``nbytes`` per chip over ``degree`` chips whose links carry
        ``link_bw_GBps`` (GB/s = bytes per ns), shared by ``share`` groups;
        ``bus_efficiency``: the dimension's own (None: this object's); an all-reduce runs as
        the faster of ring and tree unless ``ring_only``, and never faster than the measured
        all-reduce ``curve`` of the fabric (None or empty: none)."""
        volume, steps = volume_and_steps(op, degree)
        if steps == 0 or nbytes <= 0:
            return 0.0
        eff = self.bus_efficiency if bus_efficiency is None else bus_efficiency
        busbw = eff * link_bw_GBps / share
        ring = self.step_ns * steps + nbytes * volume / busbw
        if op not in (Collective.ALL_REDUCE, Collective.ALL_REDUCE_PERIODIC):
            return ring
        best = ring if ring_only else min(ring, self.step_ns * tree_steps(degree)
                                           + nbytes * 2.0 / busbw)
        if not curve or not curve[0]:
            return best
        measured = nbytes * volume / (curve_busbw(nbytes, *curve) / share)
        return max(best, measured)
