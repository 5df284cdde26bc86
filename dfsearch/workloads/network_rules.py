"""Network rules the workload kinds share (``WorkloadModel.network_issues``): a searched
network (LLM, serving) or a fixed one (DLRM, HPL, FFT)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dfsearch.codes import Parallelism
from dfsearch.issues import IssueSink
from dfsearch.system.placement import searched

if TYPE_CHECKING:
    from dfsearch.spec import System
    from dfsearch.workload_specs import Workload

__all__ = ["check_searched_network", "check_fixed_network"]

_TP, _PP, _DP = Parallelism.TP, Parallelism.PP, Parallelism.DP
#: parallelism tuples DFModel accepts, dimension by dimension
_PAR_TUPLES = (
    (_TP,),
    (_PP,),
    (_DP,),
    (_TP, _PP),
    (_TP, _DP),
    (_PP, _DP),
    (_TP, _PP, _DP),
)


def _sizes_text(sizes: list[int]) -> str:
    prod = math.prod(sizes)
    return f"{' * '.join(map(str, sizes))} = {prod}" if len(sizes) > 1 else str(prod)


def _check_partial_roles(s: IssueSink, par: tuple[Parallelism, ...]) -> None:
    """With a dimension left to the search (``dfsearch.system.placement``), the fixed kinds may
    stand in any order but each on one dimension only."""
    first: dict[Parallelism, int] = {}
    for i, p in enumerate(par):
        if searched(p):
            continue
        if p in first:
            s.add(
                f"system.network[{i}].parallelism",
                f"must differ from system.network[{first[p]}].parallelism: each of tp, pp, dp "
                "is carried by one dimension at most (omit the field or write 'auto' to let "
                f"the search choose). Got {p.label!r} instead.",
            )
        first.setdefault(p, i)


def check_searched_network(s: IssueSink, sy: System) -> None:
    """Network rules of a workload whose free sizes are searched (LLM): parallelism roles
    (a DFModel tuple when every dimension fixes one; else fixed kinds on distinct
    dimensions, the rest placed by the search), fixed sizes that fit the chip count, the
    HBD rule (only on a fixed (tp, pp, dp) network)."""
    net = sy.network
    par = tuple(d.parallelism for d in net)
    if any(searched(p) for p in par):
        _check_partial_roles(s, par)
    elif par not in _PAR_TUPLES:
        got = ", ".join(p.label for p in par)
        s.add(
            "system.network",
            "parallelism must be one of tp | pp | dp (1 dimension); (tp, pp) | (tp, dp) | "
            "(pp, dp) (2 dimensions); (tp, pp, dp) (3 dimensions), in dimension order. "
            f"Got ({got}) instead.",
        )
    fixed = [d.size for d in net if d.size > 0]
    if any(d.size < 0 for d in net):
        pass  # reported by _check_system
    elif len(net) == 1 and fixed and fixed[0] != sy.num_chip:
        s.add(
            "system.network[0].size",
            f"must be 0 or system.num_chip = {sy.num_chip} for a 1-dimensional network. "
            f"Got {fixed[0]} instead.",
        )
    elif len(fixed) == len(net) and math.prod(fixed) != sy.num_chip:
        s.add(
            "system.network",
            f"sizes must multiply to system.num_chip = {sy.num_chip}. "
            f"Got {_sizes_text(fixed)} instead.",
        )
    elif fixed and sy.num_chip % math.prod(fixed):
        s.add(
            "system.network",
            f"fixed sizes must divide system.num_chip = {sy.num_chip}. "
            f"Got {_sizes_text(fixed)} instead.",
        )
    if sy.hbd > 0 and par != (_TP, _PP, _DP):
        s.add(
            "system.hbd",
            "must be 0 unless the network has 3 dimensions with parallelism (tp, pp, dp). "
            f"Got {sy.hbd} instead.",
        )


def check_fixed_network(
    s: IssueSink, sy: System, w: Workload, min_dims: int = 1, why: str = ""
) -> None:
    """Network rules of a workload on a fixed network (DLRM, HPL, FFT): at least
    ``min_dims`` dimensions (``why`` ends the message: for which workload and why), every
    size given, no parallelism roles, no HBD, ``num_copy`` copies (1 when the workload has
    no such field) that divide the chips and fill the network exactly."""
    net = sy.network
    kind = w.kind.label
    if sy.hbd > 0:
        s.add(
            "system.hbd",
            f"must be 0 for a {kind} workload (it only applies to LLMs on a (tp, pp, dp) "
            "network). "
            f"Got {sy.hbd} instead.",
        )
    if len(net) < min_dims:
        counts = " or ".join(str(c) for c in range(min_dims, 4))
        s.add("system.network", f"must have {counts} dimensions {why}. Got {len(net)} instead.")
    for i, d in enumerate(net):
        if d.size == 0:
            s.add(
                f"system.network[{i}].size",
                f"must be > 0 for a {kind} workload (only LLM workloads search the network "
                "shape). Got 0 instead.",
            )
        if d.parallelism is not Parallelism.NONE:
            s.add(
                f"system.network[{i}].parallelism",
                f"must be omitted for a {kind} workload (tp/pp/dp apply to LLM workloads only). "
                f"Got {d.parallelism.label!r} instead.",
            )
    copies = getattr(w, "num_copy", 1)
    if copies < 1:
        return
    if sy.num_chip % copies:
        s.add(
            "workload.num_copy",
            f"must divide system.num_chip = {sy.num_chip}. Got {copies} instead.",
        )
        return
    sizes = [d.size for d in net]
    if all(x > 0 for x in sizes) and math.prod(sizes) != sy.num_chip // copies:
        s.add(
            "system.network",
            "sizes must multiply to system.num_chip / workload.num_copy = "
            f"{sy.num_chip // copies}. "
            f"Got {_sizes_text(sizes)} instead.",
        )
