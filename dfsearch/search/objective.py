"""What the search minimises: an ``Objective`` scores an evaluation and turns a lower bound of
the time per batch of one outer choice into a lower bound of its own value.

The search relies on one property: for fixed outer choices (shape, tile count, configuration
count) the value never decreases when final_ns grows. Then a bound of final_ns gives a bound
of the value, and the configuration-count dominance of the engine holds for it too.
Objectives are registered in ``OBJECTIVES`` under their ``codes.ObjectiveKind``.

>>> objective_for(ObjectiveKind.TIME).unit
'ns'
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from dfsearch.codes import ObjectiveKind
from dfsearch.cost.model import Evaluation

__all__ = ["Objective", "TimePerBatch", "OBJECTIVES", "objective_for"]


class Objective(abc.ABC):
    """The quantity the search minimises (smaller is better)."""

    kind: ObjectiveKind
    unit: str

    @abc.abstractmethod
    def value(self, ev: Evaluation) -> float:
        """The objective of a feasible evaluation."""

    @abc.abstractmethod
    def bound(self, shape: tuple[int, ...], final_ns_bound: float) -> float:
        """A lower bound of the value of every mapping with network shape ``shape`` whose
        final_ns is at least ``final_ns_bound``."""


@dataclass(frozen=True, slots=True)
class TimePerBatch(Objective):
    """Time per global batch in ns (DFModel's objective; reported as final_s)."""

    kind: ObjectiveKind = ObjectiveKind.TIME
    unit: str = "ns"

    def value(self, ev: Evaluation) -> float:
        return ev.final_ns

    def bound(self, shape: tuple[int, ...], final_ns_bound: float) -> float:
        return final_ns_bound


OBJECTIVES: dict[ObjectiveKind, Objective] = {ObjectiveKind.TIME: TimePerBatch()}


def objective_for(kind: ObjectiveKind) -> Objective:
    """The registered objective of a kind."""
    return OBJECTIVES[kind]
