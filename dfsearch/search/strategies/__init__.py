"""The registry of search strategies (``search.strategy`` and ``search.assignment`` of a spec).

Outer strategies decide which outer choices (shape, tile count, configuration count) are
solved; assignment strategies solve the configuration assignment of one of them.

>>> sorted(OUTER_STRATEGIES)
['auto', 'enumerate', 'optuna']
>>> sorted(ASSIGNMENT_STRATEGIES)
['anneal', 'auto', 'cp-sat', 'ideal-dp', 'order-dp']

A new strategy is an object that satisfies ``base.AssignmentStrategy`` or
``base.OuterStrategy`` and an entry here; ``tests/test_strategies.py`` then runs the shared
contract on it (docs/extending.md, "Adding a search strategy").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from dfsearch.errors import SolverUnavailableError
from dfsearch.search.strategies.assignment import CpSat, DPStrategy
from dfsearch.search.strategies.base import (
    AssignmentStrategy,
    OuterSpace,
    OuterState,
    OuterStrategy,
    Progress,
)
from dfsearch.search.strategies.best_first import BestFirst
from dfsearch.search.strategies.sampling import OptunaTPE

__all__ = [
    "ASSIGNMENT_STRATEGIES",
    "OUTER_STRATEGIES",
    "AssignmentStrategy",
    "OuterStrategy",
    "assignment_strategy",
    "outer_strategy",
]


@dataclass(frozen=True, slots=True)
class AutoOuter:
    """Enumerate best-bound-first when the space has at most ``space.bound_limit``
    (shape, tile count) pairs, otherwise sample it with Optuna."""

    name: str = "auto"
    summary: str = "enumerate up to 10,000 (shape, tile count) pairs, optuna above (can prove optimality)"
    proves_optimality: bool = True  #: when the space is small enough to enumerate

    def available(self) -> bool:
        return True

    def explore(self, state: OuterState, space: OuterSpace, progress: Progress | None) -> str:
        chosen = BestFirst() if len(space.pairs) <= space.bound_limit else OptunaTPE()
        return chosen.explore(state, space, progress)


#: assignment strategies by name ("auto" first: the default)
ASSIGNMENT_STRATEGIES: Mapping[str, AssignmentStrategy] = MappingProxyType({
    "auto": DPStrategy(
        "auto", "auto", "ideal-dp, falling back to order-dp + anneal on graphs too wide for "
        "it or when A* runs out of states (can prove optimality)", proves_optimality=True),
    "ideal-dp": DPStrategy(
        "ideal-dp", "ideal-dp", "exact A* over chains of order ideals, up to 62 kernels (proven "
        "optimal when it finishes)", proves_optimality=True),
    "order-dp": DPStrategy(
        "order-dp", "order-dp", "the best split of one topological order into contiguous "
        "configurations (fast, not proven)", proves_optimality=False),
    "anneal": DPStrategy(
        "anneal", "anneal", "order-dp inside seeded simulated annealing over topological "
        "orders (not proven)", proves_optimality=False),
    "cp-sat": CpSat(),
})  # fmt: skip

#: outer strategies by name ("auto" first: the default)
OUTER_STRATEGIES: Mapping[str, OuterStrategy] = MappingProxyType({
    "auto": AutoOuter(),
    "enumerate": BestFirst(),
    "optuna": OptunaTPE(),
})  # fmt: skip


def assignment_strategy(name: str) -> AssignmentStrategy:
    """The registered assignment strategy ``name``.

    Raises
    ------
    KeyError
        If no strategy has that name (specs are validated against the registry first).
    SolverUnavailableError
        If its optional dependency is missing (``cp-sat`` needs OR-Tools).
    """
    return _available(ASSIGNMENT_STRATEGIES[name])


def outer_strategy(name: str) -> OuterStrategy:
    """The registered outer strategy ``name`` (errors as :func:`assignment_strategy`)."""
    return _available(OUTER_STRATEGIES[name])


def _available(strategy):
    if not strategy.available():
        needs = getattr(strategy, "requires", "an optional dependency")
        raise SolverUnavailableError(
            f"the search strategy {strategy.name!r} needs {needs}, which is not installed; "
            "install it or choose another strategy"
        )
    return strategy
