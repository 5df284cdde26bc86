"""Outer choices: network shapes, parallelism placements, micro-batch sizes, tile counts,
configuration counts and a lower bound of the objective for one set of outer choices.
"""

from __future__ import annotations

import math

from dfsearch.cost.lower import Problem
from dfsearch.cost.overlap import combine_overlap
from dfsearch.spec import AUTO, Spec
from dfsearch.system.placement import Placement, has_searched_dims
from dfsearch.system.placement import placements as all_placements
from dfsearch.system.ratios import groups, placement_key
from dfsearch.workloads import model_of
from dfsearch.workloads.base import divisors  # re-exported

__all__ = [
    "divisors",
    "factorizations",
    "shapes",
    "placements",
    "tile_counts",
    "config_counts",
    "micro_batch_size",
    "micro_batch_sizes",
    "lower_bound_ns",
    "final_from_ii",
]


def factorizations(n: int, k: int) -> list[tuple[int, ...]]:
    """Ordered factorisations of n into k positive factors, lexicographic.

    >>> factorizations(4, 2)
    [(1, 4), (2, 2), (4, 1)]
    """
    if k == 0:
        return [()] if n == 1 else []
    divs = divisors(n)

    def rec(m: int, j: int) -> list[tuple[int, ...]]:
        if j == 1:
            return [(m,)]
        return [(d,) + rest for d in divs if d <= m and m % d == 0 for rest in rec(m // d, j - 1)]

    return rec(n, k)


def shapes(spec: Spec) -> list[tuple[int, ...]]:
    """Every network shape consistent with the fixed sizes that the workload admits
    (``WorkloadModel.admits_shape``: an LLM's PP <= num_layer), or the one shape the workload
    always uses (``WorkloadModel.only_shape``: a 1D LLM network spans every chip)."""
    net = spec.system.network
    chips = spec.system.num_chip // spec.num_copy
    model = model_of(spec.workload)
    only = model.only_shape(spec.system, chips)
    if only is not None:
        return [only]
    fixed = [d.size for d in net]
    prod = math.prod(s for s in fixed if s > 0)
    free = [i for i, s in enumerate(fixed) if s == 0]
    if chips % prod:
        return []
    out = []
    for f in factorizations(chips // prod, len(free)):
        shape = list(fixed)
        for i, v in zip(free, f):
            shape[i] = v
        if model.admits_shape(spec, tuple(shape)):
            out.append(tuple(shape))
    return out


def placements(spec: Spec, shape: tuple[int, ...]) -> list[Placement | None]:
    """The parallelism placements searched on ``shape``: [None] (the spec's fixed roles) when
    every dimension's parallelism is given or the workload has no roles (a kind that does not
    shard across chips: DLRM, HPL, FFT); else every placement ``dfsearch.system.placement``
    enumerates that the workload admits (an LLM's PP <= num_layer), one per distinct
    ``network.placement_key`` (same degrees and group links: the same problem), the first
    of each in enumeration order."""
    model = model_of(spec.workload)
    if not (model.shards_across_chips and has_searched_dims(spec.system)):
        return [None]
    out: list[Placement | None] = []
    seen: set[tuple] = set()
    for pl in all_placements(spec.system, shape):
        key = placement_key(spec.system, pl)
        if key not in seen and model.admits_shape(spec, shape, pl):
            seen.add(key)
            out.append(pl)
    return out


def tile_counts(spec: Spec) -> list[int]:
    """Candidate tile counts T, ascending (``WorkloadModel.tile_counts``: LLM every divisor
    of seq_len, those >= ceil(seq/tile_size) plus that ceiling when a tile size is given;
    other workloads 1)."""
    return model_of(spec.workload).tile_counts(spec)


def config_counts(spec: Spec) -> list[int]:
    """Configuration counts to try: the spec's, or 1..min(n, 12) and n for ``auto``."""
    n = len(spec.graph.kernels)
    if spec.execution.num_config != AUTO:
        return [spec.execution.num_config]
    return sorted(set(range(1, min(n, 12) + 1)) | {n})


def micro_batch_size(spec: Spec) -> int:
    """The default micro-batch size, for a mapping file that gives none
    (``WorkloadModel.micro_batch_size``: an LLM spec's, else 1)."""
    return model_of(spec.workload).micro_batch_size(spec)


def micro_batch_sizes(
    spec: Spec, shape: tuple[int, ...], placement: Placement | None = None
) -> list[int]:
    """Micro-batch sizes searched on ``shape`` and ``placement``, ascending
    (``WorkloadModel.micro_batch_sizes``: an LLM spec's, or with 0 every divisor of
    global_batch_size / DP).

    Only the smallest is kept when it dominates the others: the workload says it is never
    slower nor less feasible with everything else fixed
    (``WorkloadModel.smallest_micro_batch_wins``; docs/model.md, "Micro-batch size") and the
    objective is a time (per batch, or a serving step's latency: ``minimises_time``), which is
    all it compares; not for the serving throughput, which a larger batch may raise.
    """
    model = model_of(spec.workload)
    sizes = model.micro_batch_sizes(spec, groups(spec.system, shape, placement).dp)
    if (
        len(sizes) > 1
        and spec.search.objective.minimises_time
        and model.smallest_micro_batch_wins(spec)
    ):
        return sizes[:1]
    return sizes


def lower_bound_ns(problem: Problem) -> float:
    """A lower bound of final_ns over every configuration assignment of ``problem``.

    Sum over configurations of II(c) >= the total compute (FLOP model: exact sum; cycle
    model: total work / cores), >= the total network time (assignment-independent kernel
    and edge terms; all-to-all channels via max of sums) and >= the explicit memory traffic.
    """
    kt, et, k = problem.kernels, problem.edges, problem.constants
    t = 1 if k.per_config_tiles else k.num_tile
    if k.cycle_model:
        work = kt.a.astype(float) * kt.b * kt.z
        comp = t * float(work.sum()) / k.cores / k.freq_GHz
    else:
        comp = t * float(kt.compute_ns.sum())
    net = t * float(kt.net_tile_ns.sum() + et.net_tile_ns.sum()) + float(kt.net_once_ns.sum())
    net += float(kt.channel_ns.sum(axis=0).max()) if kt.channel_ns.size else 0.0
    net += k.ar_latency_ns * float(kt.all_reduce.sum() + et.all_reduce.sum())
    bw = k.dram_bw
    if k.dram2_cap > 0:
        bw = max(bw, k.dram2_bw)
    mem = float(kt.memory_bytes.sum()) / bw
    return final_from_ii(problem, combine_overlap(comp, mem, net, k.overlap))


def final_from_ii(problem: Problem, all_config_ii_ns: float) -> float:
    """final_ns for a given sum of configuration IIs: monotone in the sum."""
    k = problem.constants
    return (all_config_ii_ns * k.batch_mult + k.p2p_ns) / k.num_copy
