"""The two kinds of search strategy, what they exchange with the engine, and the control array.

An :class:`AssignmentStrategy` solves one lowered ``Problem`` (fixed outer choices) and
returns an ``Assignment``. An :class:`OuterStrategy` decides which outer choices (shape, parallelism
placement, tile count, micro-batch size, configuration count) are solved and in which order; it works on the engine's
:class:`OuterState` (incumbent, open bound, counters, budget) and solves a choice only
through ``state.solve``, which runs the selected assignment strategy and re-scores the
winner with the full evaluator. docs/design.md ("Search strategies") states the contract.

Importing this module is free of work: no numpy, numba, optuna or OR-Tools.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dfsearch.cost.layout import Control, no_control

if TYPE_CHECKING:
    import numpy as np

    from dfsearch.codes import Dim, Status
    from dfsearch.cost.lower import Problem
    from dfsearch.cost.model import Evaluation
    from dfsearch.search.assign import Assignment
    from dfsearch.search.objective import Objective
    from dfsearch.spec import Spec
    from dfsearch.system.placement import Placement

__all__ = [
    "AssignmentStrategy",
    "OuterStrategy",
    "OuterState",
    "OuterSpace",
    "Pair",
    "Progress",
    "SearchProgress",
    "control_array",
    "stop_requested",
    "evaluation_allowance",
    "stopped_before_start",
]

@dataclass(frozen=True, slots=True)
class SearchProgress:
    """Where a running search stands: what the progress callback receives after each outer
    choice and, inside a long assignment search, every ``TICK_EVALUATIONS`` evaluations.

    Every field is counted work or a value the search proved; none reads a clock."""

    done: int  #: outer choices solved or pruned
    total: int  #: outer choices in the space
    best_s: float | None = None  #: the incumbent's final_s (None: no feasible mapping yet)
    #: a lower bound of the objective of every mapping in s (time objectives only; None:
    #: unknown, e.g. sampled outer choices)
    bound_s: float | None = None
    #: (best - bound) / best of the objective (None: either unknown); 0 = proven optimal
    gap: float | None = None
    evaluations: int = 0  #: configuration costings used so far
    budget: int = 0  #: the work budget (``search.max_evaluations``; 0: not given)


#: progress callback, called with a ``SearchProgress``
Progress = Callable[[SearchProgress], None]


@dataclass(frozen=True, slots=True)
class Pair:
    """One (shape, tile count, micro-batch size) with its sharding and the lower bound of its
    objective (the name predates the micro-batch size)."""

    shape: tuple[int, ...]
    num_tile: int
    sharding: tuple[Dim, ...]
    bound: float  #: lower bound of the objective over this pair; 0 = unbounded
    status: Status  #: infeasibility caused by the outer choices alone (OK otherwise)
    violation: float
    micro_batch_size: int = 1
    #: what each dimension carries (``dfsearch.system.placement``); None: the spec's fixed roles
    placement: Placement | None = None


@dataclass(frozen=True, slots=True)
class OuterSpace:
    """The outer choices of a spec and the limits an outer strategy works with."""

    #: (shape, tile count, micro-batch size, placement), shapes outermost, then placements
    pairs: tuple[tuple[tuple[int, ...], int, int, Placement | None], ...]
    counts: tuple[int, ...]  #: distinct effective configuration counts, largest first
    bound_limit: int  #: pairs above which "auto" samples instead of bounding every pair
    trials: int  #: distinct outer choices a sampler solves

    @property
    def total(self) -> int:
        """Outer choices in the space (pairs x configuration counts)."""
        return len(self.pairs) * len(self.counts)


class AssignmentStrategy(Protocol):
    """Configuration assignment for one lowered problem.

    Contract (``tests/test_strategies.py`` checks it for every registered strategy):

    * ``assign`` returns an ``Assignment`` whose ``config``, re-scored by the evaluator, has
      the sum of configuration IIs ``value_ns``; None (value inf) when nothing feasible was
      found, and then ``violations`` names at least one binding constraint;
    * ``bound_ns`` never exceeds the optimum; ``exhaustive`` (a proof) means ``value_ns`` is
      the optimum up to ``proof_rel_gap`` and ``bound_ns >= value_ns * (1 - proof_rel_gap)``
      (a forced assignment, the only one possible, is exhaustive for every strategy); a
      strategy with ``proves_optimality`` proves small problems when nothing stops it;
    * the same ``seed`` gives the same answer; the ``control`` array is honoured: a stop flag
      or a passed deadline found at the start returns at once, ``stopped`` with no claim, and
      the evaluation budget stops the work (``stopped``, not exhaustive).
    """

    name: str  #: registry key and the word used in ``SearchStats.method``
    summary: str  #: one sentence for ``--help`` and the docs
    proves_optimality: bool  #: it can prove its answer optimal (``exhaustive``)
    proof_rel_gap: float  #: a proven value is within this relative gap of its bound

    def available(self) -> bool:
        """Whether its optional dependencies are installed."""
        ...

    def assign(self, problem: Problem, *, seed: int, control: np.ndarray,
               tick: Callable[[], None] | None = None) -> Assignment:  # fmt: skip
        """The best assignment it finds for ``problem`` (see the class contract); ``tick``,
        when given, is called between its jitted calls (progress display only: it must not
        change the answer)."""
        ...


class OuterState(Protocol):
    """What the engine offers an outer strategy (``engine.SearchState`` implements it).

    A strategy reads ``best`` / ``best_value()``, checks ``out_of_budget()`` before each
    solve, solves outer choices with ``solve``, counts them in ``solved`` / ``pruned`` and
    leaves ``open_bound`` at most the objective of every outer choice it did not solve
    exactly (0 when it cannot bound them)."""

    spec: Spec
    seed: int
    objective: Objective
    best: Evaluation | None
    open_bound: float
    solved: int
    pruned: int
    stop: str

    def best_value(self) -> float:
        """The incumbent's objective (inf without one)."""
        ...

    def out_of_budget(self) -> bool:
        """True (and ``stop`` says why) once the budget, time limit or Ctrl-C says stop."""
        ...

    def bound_pairs(self, pairs: tuple, c_any: int) -> list[Pair] | None:
        """Sharding, outer feasibility and lower bound of every pair; None when stopped
        while bounding (``stop`` then says so and ``open_bound`` is 0)."""
        ...

    def unbounded_pair(
        self, shape: tuple[int, ...], num_tile: int, c: int, micro_batch_size: int,
        placement: Placement | None = None,
    ) -> Pair:
        """A pair with its sharding and outer feasibility, without a bound."""
        ...

    def solve(self, pair: Pair, c: int) -> float:
        """Solve one outer choice; returns its objective (inf when nothing feasible)."""
        ...

    def dominating_value(self, pair: Pair, c: int) -> float | None:
        """The proven objective of a larger configuration count that dominates ``c``."""
        ...

    def note_outer_violation(self, pair: Pair) -> None:
        """Record the violation of a pair that breaks an outer constraint."""
        ...

    def progress_record(self, done: int, total: int, frontier: float = math.inf) -> SearchProgress:
        """The progress record after ``done`` of ``total`` outer choices; ``frontier`` bounds
        the objective of the choices not yet solved (inf: none left or none known)."""
        ...

    def lookahead(self, order: list[tuple[Pair, int]]) -> None:
        """The (pair, configuration count) the strategy will visit, in its order (each
        then solved or pruned, up to where it stops): the engine may solve them ahead on
        other cores (``search.jobs``); what it returns never changes."""
        ...

    def gap_reached(self, frontier: float) -> bool:
        """True (and ``stop`` says "gap") once the incumbent is within ``search.gap`` of the
        lower bound min(``open_bound``, ``frontier``) (never when ``search.gap`` is 0)."""
        ...


class OuterStrategy(Protocol):
    """Which outer choices are solved, and in which order.

    Contract: after ``explore``, every outer choice was solved through ``state.solve``,
    pruned by a bound, or is covered by ``state.open_bound`` (0 if unbounded). A strategy
    without ``proves_optimality`` must leave ``open_bound`` at 0 so that no run claims a
    proof through it. ``explore`` returns the name of the strategy that ran (a composite
    such as "auto" returns the one it delegated to); it appears in ``SearchStats.method``.
    """

    name: str  #: registry key and the word used in ``SearchStats.method``
    summary: str  #: one sentence for ``--help`` and the docs
    proves_optimality: bool  #: it can prove the run optimal

    def available(self) -> bool:
        """Whether its optional dependencies are installed."""
        ...

    def explore(self, state: OuterState, space: OuterSpace, progress: Progress | None) -> str:
        """Solve outer choices of ``space`` through ``state`` (see the class contract)."""
        ...


# --------------------------------------------------------------------------- control array
def control_array(
    *, deadline: float = math.inf, max_evaluations: float = math.inf, stop: bool = False
) -> np.ndarray:
    """A control array (``cost.layout.no_control()`` layout): a deadline in ``time.perf_counter``
    seconds, the evaluations a search may spend and the stop flag that Ctrl-C sets."""
    control = no_control()
    control[Control.DEADLINE] = deadline
    control[Control.MAX_EVALS] = max_evaluations
    control[Control.FLAG] = 1.0 if stop else 0.0
    return control


def stop_requested(control: np.ndarray) -> bool:
    """True when the control array's stop flag is set or its deadline has passed."""
    return bool(control[Control.FLAG] != 0.0 or time.perf_counter() > control[Control.DEADLINE])


def evaluation_allowance(control: np.ndarray) -> float:
    """The evaluations the current search may spend (inf = no limit)."""
    return float(control[Control.MAX_EVALS])


def seconds_left(control: np.ndarray) -> float:
    """Seconds until the control array's deadline (inf = none)."""
    deadline = float(control[Control.DEADLINE])
    return deadline - time.perf_counter() if math.isfinite(deadline) else math.inf


def stopped_before_start(name: str) -> Assignment:
    """The answer of a strategy called after the stop flag or the deadline: nothing found,
    nothing proven."""
    from dfsearch.search.assign import Assignment

    return Assignment(
        config=None, value_ns=math.inf, method=name, exhaustive=False, evaluations=0,
        violations={}, bound_ns=0.0, stopped=True,
    )  # fmt: skip
