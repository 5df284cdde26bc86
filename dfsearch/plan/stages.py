"""The plan kind ``stages``: a whole model in pipeline pieces (``cost/stages.py``), the
pieces searched on a shared (shape, placement, micro-batch) and split over stages of
different programs (``search/stages.py``); the slowest stage sets the pace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dfsearch.cost.model import Evaluation
from dfsearch.cost.stages import StagePlan, evaluate_staged, is_staged, members_of
from dfsearch.mapping import load_staged_mapping
from dfsearch.plan.base import Max, Phase, Plan, Pool
from dfsearch.result import RunResult
from dfsearch.search.stages import search_stages
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec

__all__ = ["STAGES", "Stages"]


@dataclass(frozen=True, slots=True)
class Stages:
    name: str = "stages"
    summary: str = ("a whole model in pipeline pieces (ends before and after the layers) over "
                    "stages that do not all run the same program")  # fmt: skip

    def applies(self, spec: Spec) -> bool:
        return is_staged(spec)

    def plan(self, spec: Spec) -> Plan:
        """One phase per piece present; a piece's own spec depends on the micro-batch size
        each outer choice pins (``search/stages.py`` builds it), so the phase holds the
        whole-model spec."""
        phases = tuple(Phase(name, spec, role="piece")
                       for name, members in members_of(spec).items() if members)  # fmt: skip
        return Plan(self.name, (Pool("all", spec.system),), phases, Max())

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        return search_stages(spec, seed=seed, time_limit_s=time_limit_s,
                             max_evaluations=max_evaluations, progress=progress)  # fmt: skip


    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, StagePlan]:
        """The mapping file's pieces and ``stage_layers`` evaluated on ``spec``."""
        m = load_staged_mapping(mapping, spec)
        return evaluate_staged(spec, m.decisions, m.stage_layers)


STAGES = Stages()
