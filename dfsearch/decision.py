"""A complete decision (a mapping): everything the evaluator needs beyond the spec.

>>> from dfsearch.codes import Dim
>>> d = Decision(shape=(4,), sharding=(Dim.M,), micro_batch_size=1, num_tile=2, config=(0,))
>>> d.with_config((0,)) == d
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dfsearch.codes import Dim
from dfsearch.system.placement import Placement

__all__ = ["Decision"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One mapping of a spec's graph onto its system.

    ``shape``: size of every network dimension; ``sharding``: inter-chip choice of every
    kernel (file order); ``num_tile``: T, temporal tiles of the tiled dimension;
    ``config``: configuration index of every kernel; ``num_config``: the number of
    configurations C (0 = max(config) + 1; it matters because the FWD/BWD rule depends on C
    and trailing configurations may be empty); ``par_lane``/``par_stage``: cores of every
    kernel in the cycle model (0 = chosen optimally by the evaluator); ``placement``: what
    each network dimension carries (``dfsearch.system.placement``; None = the spec's fixed roles).
    """

    shape: tuple[int, ...]
    sharding: tuple[Dim, ...]
    micro_batch_size: int
    num_tile: int
    config: tuple[int, ...]
    num_config: int = 0
    par_lane: tuple[int, ...] = ()
    par_stage: tuple[int, ...] = ()
    placement: Placement | None = None

    def with_config(self, config: tuple[int, ...]) -> Decision:
        return replace(self, config=tuple(int(c) for c in config))
