"""Several cores on one search: outer choices solved ahead of time in worker processes,
their answers used only where the one-core search would have computed the same.

The best-bound-first enumeration (``strategies/best_first.py``) visits the outer choices in
an order fixed once every pair is bounded (bound, then pair, then configuration count), and
solving one choice depends on nothing but its lowered problem, the seed and the evaluations
left in the budget. So the search itself runs as on one core: the same loop, the same
pruning by the same incumbent, the same budget, in the same order. Only the assignment
search of the next outer choices in that order (those not yet pruned by the incumbent, nor
dominated by a solved larger configuration count) runs ahead on the ``WorkerPool``, each
with the budget that is left when it is sent. When the loop reaches a choice, its answer is
taken from the worker if the one-core search would have produced the same one:

* the allowance it ran with equals the one left now, or
* it finished without being stopped and spent fewer evaluations than are left now: the
  budget is compared with a search's count at fixed points only (``_dp.must_stop``, counts
  only grow), so a run that never reached the budget runs identically under any budget
  above what it spent.

Otherwise (the budget runs out in it, or no worker has it) the search's own process solves
it. Work a worker did on a choice that the loop then prunes is thrown away. The result,
every counter of ``SearchStats`` included, is therefore that of the one-core search bit for
bit, whatever the number of workers, their speed or the machine's load; only the seconds
differ. Strategies whose answer depends on the allowance in other ways (``cp-sat`` turns it
into CP-SAT's work limit) are not run ahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from dfsearch.search.workers import Done, WorkerPool, can_start_workers, task_of

if TYPE_CHECKING:
    from dfsearch.cost.lower import Problem
    from dfsearch.search.assign import Assignment
    from dfsearch.search.strategies.base import Pair

__all__ = ["Speculation", "AheadState", "runs_ahead"]

#: seconds between two looks at the stop flag while waiting for a worker
POLL_S = 0.1
#: assignment strategies whose answer depends on the evaluation allowance only through
#: stopping at it (``DPStrategy``: the dynamic programmes and annealing)
ALLOWANCE_ONLY_STOPS = ("auto", "ideal-dp", "order-dp", "anneal")


def runs_ahead(jobs: int, strategy: str) -> bool:
    """Whether a search with ``jobs`` cores and this assignment strategy uses workers."""
    return jobs > 1 and strategy in ALLOWANCE_ONLY_STOPS and can_start_workers()


class AheadState(Protocol):
    """What the speculation reads from the search (``engine.SearchState``)."""

    def best_value(self) -> float: ...

    def dominating_value(self, pair: Pair, c: int) -> float | None: ...

    def problem_for(self, pair: Pair, c: int) -> Problem: ...

    def must_stop(self) -> bool: ...

    def tick(self) -> None: ...


@dataclass
class Speculation:
    """The workers of one search and the outer choices they solve ahead (mutable, private
    to one ``engine.search`` call). The workers start on the first ``take``."""

    jobs: int  #: worker processes
    strategy: str  #: the assignment strategy's registry name
    seed: int
    deadline: float  #: the search's deadline (``time.perf_counter`` seconds, inf = none)
    order: list[tuple[Pair, int]] = field(default_factory=list)
    place: dict[tuple[int, int], int] = field(default_factory=dict)  #: (id(pair), c) -> index
    running: dict[int, int] = field(default_factory=dict)  #: index -> worker
    done: dict[int, Done] = field(default_factory=dict)
    skipped: set[int] = field(default_factory=set)  #: dominated: never solved
    pool: WorkerPool | None = None

    def plan(self, order: Sequence[tuple[Pair, int]]) -> None:
        """The outer choices the search will visit, in its order."""
        self.order = list(order)
        self.place = {(id(p), c): i for i, (p, c) in enumerate(self.order)}
        self.running.clear()
        self.done.clear()
        self.skipped.clear()

    def take(self, pair: Pair, c: int, allowance: float, state: AheadState) -> Assignment | None:
        """The answer to (pair, c) that the one-core search would compute with ``allowance``
        evaluations left, or None: then the caller solves it."""
        here = self.place.get((id(pair), c))
        if here is None:
            return None
        if self.pool is None and not self._more_after(here, state.best_value()):
            return None  # a last choice alone: not worth starting workers for
        if self.pool is None:
            self.pool = WorkerPool(self.jobs)
        for i in [i for i in self.done if i < here]:
            del self.done[i]  # pruned or taken
        while here not in self.done:
            self._fill(here, allowance, state)
            if here not in self.running or state.must_stop():
                return None  # no worker has it (all died): solved by the caller
            self._collect()
            state.tick()  # a progress display may redraw while the search waits
        d = self.done.pop(here)
        a = d.assignment
        if d.allowance == allowance or (not a.stopped and a.evaluations < allowance):
            return a
        return None

    def _more_after(self, here: int, best: float) -> bool:
        """Whether the search may solve another choice after ``here`` (the order is by
        bound, so the next one tells)."""
        return here + 1 < len(self.order) and self.order[here + 1][0].bound < best

    def _fill(self, here: int, allowance: float, state: AheadState) -> None:
        """Give every idle worker the next outer choice the search may still solve, with
        the ``allowance`` left now (``here`` is the choice the search is at)."""
        assert self.pool is not None
        idle = self.pool.idle()
        best = state.best_value()
        i = here
        while idle and i < len(self.order):
            pair, c = self.order[i]
            if pair.bound >= best:
                return  # the search stops before this one: it and all after are pruned
            if i not in self.running and i not in self.done and i not in self.skipped:
                dom = state.dominating_value(pair, c)
                if dom is not None and dom >= best:
                    self.skipped.add(i)  # stays dominated: the incumbent only improves
                else:
                    task = task_of(i, state.problem_for(pair, c), self.strategy, self.seed,
                                   self.deadline, allowance)  # fmt: skip
                    w = idle.pop(0)
                    if not self.pool.submit(w, task):
                        continue  # that worker died: the next idle one gets the choice
                    self.running[i] = w
            i += 1

    def _collect(self) -> None:
        """Wait up to ``POLL_S`` for answers; forget the tasks of workers that died."""
        assert self.pool is not None
        done, died = self.pool.collect(POLL_S)
        for d in done:
            self.running.pop(d.index, None)
            self.done[d.index] = d
        for w in died:
            for i in [i for i, x in self.running.items() if x == w]:
                del self.running[i]

    def close(self) -> None:
        """Stop the workers (the search has ended)."""
        if self.pool is not None:
            self.pool.close()
        self.pool = None
