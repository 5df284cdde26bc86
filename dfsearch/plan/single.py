"""The plan kind ``single``: one phase, the spec itself, on all the chips
(``search.engine.search``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dfsearch.cost.model import Evaluation, evaluate
from dfsearch.mapping import load_mapping
from dfsearch.plan.base import Phase, Plan, Pool, WeightedSum
from dfsearch.result import PhaseResult, RunResult, SearchStats
from dfsearch.search.engine import search
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec

__all__ = ["SINGLE", "Single"]


@dataclass(frozen=True, slots=True)
class Single:
    name: str = "single"
    summary: str = "one phase: the spec's graph searched on all its chips"

    def applies(self, spec: Spec) -> bool:
        return True

    def plan(self, spec: Spec) -> Plan:
        return Plan(self.name, spec.system, (Pool.of("all", spec.system),), (Phase("main", spec),),
                    WeightedSum((1.0,)))  # fmt: skip

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        r = search(spec, seed=seed, time_limit_s=time_limit_s, max_evaluations=max_evaluations,
                   progress=progress)  # fmt: skip
        return replace(r, phases=(PhaseResult("main", "main", r),))

    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, None]:
        """The mapping file's one decision evaluated on ``spec`` (``dfsearch eval``)."""
        return evaluate(spec, load_mapping(mapping, spec)), None

    def mapping_result(self, spec: Spec, evaluation: Evaluation, record: None,
                       stats: SearchStats) -> RunResult:
        return RunResult(spec, evaluation, stats, plan=self.name)


SINGLE = Single()
