"""What the search minimises: an ``Objective`` scores an evaluation and turns a lower bound of
the final_ns of one lowered outer choice into a lower bound of its own value.

The search relies on one property: for fixed outer choices (shape, placement, tile count,
micro-batch or serving batch, configuration count) the value never decreases when final_ns
grows. Then a bound of final_ns gives a bound of the value, and the configuration-count
dominance of the engine holds for it too. ``bound`` receives the lowered ``Problem`` of the
outer choice, so it can read what turns final_ns into its value (the serving step: batch,
PP, DP, layers, hop). Objectives are registered in ``OBJECTIVES`` under their
``codes.ObjectiveKind``; ``objective_of(spec)`` adds the spec's latency bound.

The serving objectives (docs/model.md, "LLM serving"): for an ``llm_serving`` workload
final_ns is the step latency, so ``ttft`` and ``tpot`` minimise it as ``time`` does (the
phase must match); ``throughput`` minimises the stage time per token of the system,
stage / (B x s_step x DP), i.e. maximises tokens per second; it increases with final_ns
since stage = lps / layers x (final - (PP - 1) x hop) + hop.

>>> objective_for(ObjectiveKind.TIME).unit
'ns'
>>> objective_for(ObjectiveKind.THROUGHPUT).unit
'ns/token'
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsearch.codes import ObjectiveKind
from dfsearch.cost.model import Evaluation

if TYPE_CHECKING:
    from dfsearch.cost.lower import Problem
    from dfsearch.spec import Spec

__all__ = [
    "Objective",
    "TimePerBatch",
    "StepLatency",
    "Throughput",
    "LatencyBounded",
    "OBJECTIVES",
    "objective_for",
    "objective_of",
]


class Objective(abc.ABC):
    """The quantity the search minimises (smaller is better)."""

    kind: ObjectiveKind
    unit: str

    @abc.abstractmethod
    def value(self, ev: Evaluation) -> float:
        """The objective of a feasible evaluation (inf: it breaks a constraint of the
        objective, ``latency_excess_ns``)."""

    @abc.abstractmethod
    def bound(self, problem: Problem, final_ns_bound: float) -> float:
        """A lower bound of the value of every mapping of the outer choice lowered to
        ``problem`` whose final_ns is at least ``final_ns_bound``."""

    def latency_excess_ns(self, final_ns: float) -> float:
        """How far a step latency of ``final_ns`` is above the objective's latency bound
        (0: within it, or no bound)."""
        return 0.0


@dataclass(frozen=True, slots=True)
class TimePerBatch(Objective):
    """Time per global batch in ns (DFModel's objective; reported as final_s). For a
    serving workload final_ns is the step latency (TTFT or TPOT)."""

    kind: ObjectiveKind = ObjectiveKind.TIME
    unit: str = "ns"

    def value(self, ev: Evaluation) -> float:
        return ev.final_ns

    def bound(self, problem: Problem, final_ns_bound: float) -> float:
        return final_ns_bound


@dataclass(frozen=True, slots=True)
class StepLatency(Objective):
    """The step latency of a serving phase in ns: TTFT (prefill) or TPOT (decode)."""

    kind: ObjectiveKind = ObjectiveKind.TPOT
    unit: str = "ns"

    def value(self, ev: Evaluation) -> float:
        return ev.final_ns

    def bound(self, problem: Problem, final_ns_bound: float) -> float:
        return final_ns_bound


@dataclass(frozen=True, slots=True)
class Throughput(Objective):
    """ns per token of the whole system, stage time / (B x s_step x DP) = 1e9 / tokens per
    second (minimised: tokens per second maximised)."""

    kind: ObjectiveKind = ObjectiveKind.THROUGHPUT
    unit: str = "ns/token"

    def value(self, ev: Evaluation) -> float:
        s = ev.step
        if s is None:
            raise ValueError("the throughput objective needs an llm_serving workload")
        return s.stage_ns(ev.all_config_ii_ns) / s.tokens_per_step

    def bound(self, problem: Problem, final_ns_bound: float) -> float:
        s = problem.step
        if s is None:
            raise ValueError("the throughput objective needs an llm_serving workload")
        if not math.isfinite(final_ns_bound):
            return final_ns_bound
        return s.stage_from_final(final_ns_bound) / s.tokens_per_step


@dataclass(frozen=True, slots=True)
class LatencyBounded(Objective):
    """``inner``, with every mapping whose step latency (final_ns) exceeds ``limit_ns``
    infeasible (value inf): ``search.latency_bound_ms``."""

    inner: Objective
    limit_ns: float

    @property
    def kind(self) -> ObjectiveKind:  # type: ignore[override]
        return self.inner.kind

    @property
    def unit(self) -> str:  # type: ignore[override]
        return self.inner.unit

    def value(self, ev: Evaluation) -> float:
        return self.inner.value(ev) if ev.final_ns <= self.limit_ns else math.inf

    def bound(self, problem: Problem, final_ns_bound: float) -> float:
        if final_ns_bound > self.limit_ns:
            return math.inf
        return self.inner.bound(problem, final_ns_bound)

    def latency_excess_ns(self, final_ns: float) -> float:
        return max(0.0, final_ns - self.limit_ns)


OBJECTIVES: dict[ObjectiveKind, Objective] = {
    ObjectiveKind.TIME: TimePerBatch(),
    ObjectiveKind.TTFT: StepLatency(kind=ObjectiveKind.TTFT),
    ObjectiveKind.TPOT: StepLatency(kind=ObjectiveKind.TPOT),
    ObjectiveKind.THROUGHPUT: Throughput(),
}


def objective_for(kind: ObjectiveKind) -> Objective:
    """The registered objective of a kind."""
    return OBJECTIVES[kind]


def objective_of(spec: Spec) -> Objective:
    """The objective a spec asks for (``search.objective``), bounded by its
    ``search.latency_bound_ms`` when that is set."""
    base = objective_for(spec.search.objective)
    limit_ms = spec.search.latency_bound_ms
    return LatencyBounded(base, limit_ms * 1e6) if limit_ms > 0 else base
