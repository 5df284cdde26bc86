"""The records of a plan: pools of chips, phases placed on them, a composition rule.

A *run* is a plan: one or more single-phase searches (``search.engine.search``: one spec,
one graph, one mapping), each on a pool of the system's chips, composed by a rule into the
figure the run reports. The plain case is one phase on all the chips (``single``); a whole
model in pipeline pieces (``stages``), DFModel's pipeline partitioning (``partition``) and
speculative decoding (``speculative``) are plan kinds of their own (``plan/__init__.py``).

A composition rule has a value (how the phases' figures make the plan's) and an admissible
bound (how the phases' lower bounds make one of the plan's: never above the value of any
mapping of the phases). A plan is proven optimal only when its bound meets its value and
every phase is proven (``composed_status``).

>>> rule = WeightedSum(weights=(4.0, 1.0), divisor=2.0)
>>> rule.value((1.0, 2.0)), rule.bound((0.5, 2.0))
(3.0, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dfsearch.codes import RunStatus
from dfsearch.cost.model import Evaluation
from dfsearch.result import PhaseResult, RunResult, SearchStats
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec, System
from dfsearch.system.placement import Placement

__all__ = ["Pool", "Phase", "Plan", "PlanKind", "Rule", "WeightedSum", "Max", "composed_status",
           "PROOF_REL_TOL"]

#: a composed bound "meets" the composed value within this relative distance (sums taken in
#: another order differ in the last bits); the engine's own tolerance
PROOF_REL_TOL = 1e-12


@dataclass(frozen=True, slots=True)
class Pool:
    """A named part of the system: its ``chips``, with their own chip type and fabric (the
    ``System`` they form, of as many chips)."""

    name: str
    chips: int
    system: System

    def __post_init__(self) -> None:
        if self.chips != self.system.num_chip:
            raise ValueError(f"pool {self.name!r}: {self.chips} chips, but its system has "
                             f"{self.system.num_chip}")  # fmt: skip

    @staticmethod
    def of(name: str, system: System) -> Pool:
        """The pool of all of ``system``'s chips."""
        return Pool(name, system.num_chip, system)


@dataclass(frozen=True, slots=True)
class Phase:
    """One single-phase search of a plan: its spec, its role, how often it repeats per unit
    of the plan's figure, and the pool it runs on."""

    name: str
    spec: Spec
    role: str = "main"
    repeats: float = 1.0
    pool: str = "all"


class Rule(Protocol):
    """How the phases' figures compose into the plan's."""

    def value(self, values: tuple[float, ...]) -> float:
        """The plan's figure from the phases' (in the phases' order)."""
        ...

    def bound(self, bounds: tuple[float, ...]) -> float:
        """An admissible bound of the plan's figure from admissible bounds of the phases'."""
        ...


@dataclass(frozen=True, slots=True)
class WeightedSum:
    """sum(w_i x v_i) / divisor: phases that run one after another (speculative decoding:
    K draft steps and one verification per E tokens). Admissible: positive weights."""

    weights: tuple[float, ...]
    divisor: float = 1.0

    def value(self, values: tuple[float, ...]) -> float:
        return sum(w * v for w, v in zip(self.weights, values)) / self.divisor

    def bound(self, bounds: tuple[float, ...]) -> float:
        return self.value(bounds)


@dataclass(frozen=True, slots=True)
class Max:
    """max(v_i): phases that run side by side (pipeline stages: the slowest sets the pace)."""

    def value(self, values: tuple[float, ...]) -> float:
        return max(values, default=0.0)

    def bound(self, bounds: tuple[float, ...]) -> float:
        return max(bounds, default=0.0)


@dataclass(frozen=True, slots=True)
class Plan:
    """Phases on pools of ``system``'s chips, the pins they share (a (shape, placement) every
    phase runs on, or None: each phase searches its own) and the rule that composes them.
    Every phase runs on one of the pools, and the pools hold at most the system's chips."""

    kind: str
    system: System
    pools: tuple[Pool, ...]
    phases: tuple[Phase, ...]
    rule: Rule
    pinned: tuple[tuple[int, ...], Placement | None] | None = None

    def __post_init__(self) -> None:
        names = [q.name for q in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"plan {self.kind!r}: pool names repeat: {names}")
        lost = [ph.name for ph in self.phases if ph.pool not in names]
        if lost:
            raise ValueError(f"plan {self.kind!r}: phases {lost} run on no pool of {names}")
        chips = sum(q.chips for q in self.pools)
        if chips > self.system.num_chip:
            raise ValueError(f"plan {self.kind!r}: its pools hold {chips} chips, the system "
                             f"{self.system.num_chip}")  # fmt: skip

    def pool(self, name: str) -> Pool:
        """The pool called ``name``."""
        return next(q for q in self.pools if q.name == name)


#: the search a plan kind runs: (spec, seed, time limit, work budget, progress) -> result
Search = Callable[..., RunResult]


class PlanKind(Protocol):
    """A kind of plan (registered in ``plan.PLAN_KINDS``)."""

    name: str
    summary: str

    def applies(self, spec: Spec) -> bool:
        """Whether ``spec`` is run as this kind of plan."""
        ...

    def plan(self, spec: Spec) -> Plan:
        """The plan of ``spec``: its pools, phases and rule."""
        ...

    def search(self, spec: Spec, *, seed: int | None, time_limit_s: float | None,
               max_evaluations: int | None, progress: Progress | None) -> RunResult:
        """The best mapping of the plan; ``result.phases`` holds its phases' results."""
        ...

    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, Any]:
        """The mapping file ``mapping`` evaluated on ``spec`` (``dfsearch eval``): (the
        evaluation, the kind's plan record: ``StagePlan``, ``PartitionPlan`` or None)."""
        ...

    def mapping_result(self, spec: Spec, evaluation: Evaluation, record: Any,
                       stats: SearchStats) -> RunResult:
        """The result of a given mapping (``evaluate_mapping``'s evaluation and record) with
        the kind's section, as ``dfsearch eval --json`` writes it."""
        ...


def composed_status(status: RunStatus, value: float, bound: float | None,
                    phases: tuple[PhaseResult, ...]) -> RunStatus:
    """A plan's status from its own search's: ``optimal`` only when the rule's ``bound``
    meets its ``value`` and every phase is proven optimal; else ``feasible_not_proven``
    (other statuses are kept).

    >>> composed_status(RunStatus.OPTIMAL, 1.0, 1.0, ()).label
    'optimal'
    >>> composed_status(RunStatus.OPTIMAL, 1.0, 0.5, ()).label
    'feasible_not_proven'
    """
    if status is not RunStatus.OPTIMAL:
        return status
    met = bound is not None and math.isfinite(value) and bound >= value - PROOF_REL_TOL * abs(value)
    if met and all(p.result.status is RunStatus.OPTIMAL for p in phases):
        return RunStatus.OPTIMAL
    return RunStatus.FEASIBLE_NOT_PROVEN
