"""The outer strategy "enumerate": every outer choice, best-bound-first, with pruning.

Every (shape, tile count) is bounded (``state.bound_pairs``); every (pair, configuration
count) goes into a heap ordered by bound, larger counts first at equal bounds. The loop
solves the smallest bound and stops as soon as the next bound cannot beat the incumbent:
everything left is pruned. A count is skipped when a solved larger count of the same pair
dominates it (``state.dominating_value``). When every solved choice was solved exactly the
run is proven optimal. With ``search.gap`` > 0 the loop also stops as soon as the incumbent
is within that relative gap of the lowest open bound (``state.gap_reached``).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from dfsearch.codes import Status
from dfsearch.search.strategies.base import OuterSpace, OuterState, Progress

__all__ = ["BestFirst"]


@dataclass(frozen=True, slots=True)
class BestFirst:
    """Best-bound-first enumeration of the outer choices (proves optimality)."""

    name: str = "enumerate"
    summary: str = ("every outer choice, lowest lower bound first, pruning what cannot beat "
                    "the best so far (can prove optimality)")
    proves_optimality: bool = True

    def available(self) -> bool:
        return True

    def explore(self, state: OuterState, space: OuterSpace, progress: Progress | None) -> str:
        bounded = state.bound_pairs(space.pairs, space.counts[0])
        if bounded is None:
            return self.name
        heap = []
        for i, p in enumerate(bounded):
            if p.status is not Status.OK:
                state.note_outer_violation(p)
                state.pruned += len(space.counts)
                continue
            for j, c in enumerate(space.counts):  # larger counts first at equal bounds
                heapq.heappush(heap, (p.bound, i, j, c))
        state.lookahead([(bounded[i], c) for _, i, _, c in sorted(heap)])  # the pop order
        while heap:
            lb, i, j, c = heap[0]
            if lb >= state.best_value():
                state.pruned += len(heap)  # nothing left can beat the incumbent
                break
            if state.gap_reached(lb) or state.out_of_budget():
                state.open_bound = min(state.open_bound, lb)
                break
            heapq.heappop(heap)
            p = bounded[i]
            dominated = state.dominating_value(p, c)
            if dominated is not None and dominated >= state.best_value():
                state.pruned += 1
            else:
                state.solve(p, c)
                state.solved += 1
            if progress:
                frontier = heap[0][0] if heap else math.inf
                progress(state.progress_record(state.solved + state.pruned, space.total, frontier))
        if progress:
            done = space.total if not state.stop else state.solved + state.pruned
            progress(state.progress_record(done, space.total))
        return self.name
