"""Plans: a run as phases on pools of chips, composed by a rule (``plan/base.py``).

``run(spec, ...)`` is the one entry point of a search (``evaluate_mapping`` the one of a
mapping file): it picks the plan kind of the spec
(the first in ``PLAN_KINDS`` that applies; ``single`` when none does), runs its
search and returns a ``RunResult`` naming the kind (``result.plan``) with its phases' own
results (``result.phases``) and a status whose optimality claim composes: ``optimal`` only
when every phase is proven and the plan's bound meets its value (``base.composed_status``).

Adding a kind: a frozen dataclass with ``name``, ``summary``, ``applies(spec)``,
``plan(spec)``, ``search(spec, ...)``, ``evaluate_mapping(spec, mapping)`` and
``mapping_result(...)`` (``base.PlanKind``), its result's ``section`` (``result.PlanSection``:
what it adds to the report and the JSON), registered in ``PLAN_KINDS``
(``tests/test_plan.py`` adds a toy kind: two pools, two phases, a transfer between them).
The searches of the kinds live here too: ``stages.py``, ``partition.py`` (its cut:
``partition_cut.py``) and ``speculative.py`` run ``search.engine.search`` (one spec, one
graph) on each of their phases; nothing below this package knows a plan.

>>> list(PLAN_KINDS)
['partition', 'stages', 'speculative', 'single']
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dfsearch.cost.model import Evaluation
from dfsearch.plan.base import Phase, Plan, PlanKind, Pool, composed_status
from dfsearch.plan.partition import PARTITION
from dfsearch.plan.single import SINGLE
from dfsearch.plan.speculative import SPECULATIVE
from dfsearch.plan.stages import STAGES
from dfsearch.plan.training_choices import run_choices, searches_choices
from dfsearch.result import RunResult
from dfsearch.search.objective import objective_of
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec

__all__ = ["PLAN_KINDS", "kind_of", "run", "evaluate_mapping", "Pool", "Phase", "Plan", "PlanKind"]

#: the plan kinds by name; the first that applies to a spec runs it (``kind_of``)
PLAN_KINDS: dict[str, PlanKind] = {k.name: k for k in (PARTITION, STAGES, SPECULATIVE, SINGLE)}


def kind_of(spec: Spec) -> PlanKind:
    """The plan kind that runs ``spec``: the first registered kind other than ``single``
    that applies, else ``single``."""
    return next((k for k in PLAN_KINDS.values() if k is not SINGLE and k.applies(spec)), SINGLE)


def run(
    spec: Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    max_evaluations: int | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """The best mapping of ``spec`` under its plan kind (module docstring). Always returns a
    result (``result.evaluation`` is None when nothing feasible was found); the arguments
    are those of ``search.engine.search``. Training choices left to the search are searched
    as outer choices around the plan (``plan/training_choices.py``)."""
    if searches_choices(spec):
        return run_choices(spec, lambda one: _run_kind(one, seed, time_limit_s,
                                                       max_evaluations, progress))
    return _run_kind(spec, seed, time_limit_s, max_evaluations, progress)


def _run_kind(spec: Spec, seed: int | None, time_limit_s: float | None,
              max_evaluations: int | None, progress: Progress | None) -> RunResult:
    """One concrete spec run by its plan kind, with the composed status."""
    kind = kind_of(spec)
    r = kind.search(spec, seed=seed, time_limit_s=time_limit_s,
                    max_evaluations=max_evaluations, progress=progress)  # fmt: skip
    if r.evaluation is not None:
        value = objective_of(spec).value(r.evaluation)
        status = composed_status(r.status, value, r.search.lower_bound, r.phases)
        if status is not r.status:
            r = replace(r, search=replace(r.search, status=status))
    return replace(r, plan=kind.name)


def evaluate_mapping(spec: Spec, mapping: str | Path) -> tuple[Evaluation, Any]:
    """The mapping file ``mapping`` (docs/mapping.md) evaluated on ``spec`` by its plan kind:
    (the evaluation, the kind's plan record: ``StagePlan``, ``PartitionPlan`` or None)."""
    return kind_of(spec).evaluate_mapping(spec, mapping)
