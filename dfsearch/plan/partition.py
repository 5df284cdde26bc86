"""The plan kind ``partition``: DFModel's pipeline partitioning (``workload.partition_graph``,
``cost/partition.py``): on every shape the graph is cut into PP partitions, and the slowest,
which every stage runs, is searched as one phase pinned to the shape
(``search/partition.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dfsearch.cost.model import Evaluation, evaluate
from dfsearch.cost.partition import PartitionPlan, is_partitioned
from dfsearch.mapping import load_partitioned_mapping
from dfsearch.plan.base import Max, Phase, Plan, Pool
from dfsearch.result import RunResult
from dfsearch.search.partition import search_partitioned
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec

__all__ = ["PARTITION", "Partition"]


@dataclass(frozen=True, slots=True)
class Partition:
    name: str = "partition"
    summary: str = "DFModel's pipeline partitioning: the slowest partition runs on every stage"

    def applies(self, spec: Spec) -> bool:
        return is_partitioned(spec)

    def plan(self, spec: Spec) -> Plan:
        """One phase, the kept partition; its spec depends on the shape (the cut is made per
        shape: ``search/partition.py``), so the phase holds the whole graph's spec."""
        return Plan(self.name, (Pool("all", spec.system),),
                    (Phase("kept partition", spec, role="partition"),), Max())  # fmt: skip

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        return search_partitioned(spec, seed=seed, time_limit_s=time_limit_s,
                                  max_evaluations=max_evaluations, progress=progress)  # fmt: skip


    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, PartitionPlan]:
        """The mapping file's partition evaluated on ``spec``: its kept partition's decision."""
        d, plan, kept = load_partitioned_mapping(mapping, spec)
        return evaluate(kept, d), plan


PARTITION = Partition()
