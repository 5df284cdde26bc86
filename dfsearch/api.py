"""The programmatic entry points: ``run`` (search) and ``evaluate`` (one given mapping).

>>> import dfsearch
>>> callable(dfsearch.run)
True
"""

from __future__ import annotations

from pathlib import Path

from dfsearch import plan
from dfsearch.codes import Equations
from dfsearch.cost.model import Evaluation
from dfsearch.cost.model import evaluate as _evaluate
from dfsearch.cost.partition import PartitionPlan, is_partitioned
from dfsearch.cost.stages import StagePlan, is_staged
from dfsearch.decision import Decision
from dfsearch.errors import InfeasibleError, Issue, SpecError
from dfsearch.loader import load_spec
from dfsearch.mapping import with_mapping_training
from dfsearch.result import RunResult
from dfsearch.search.engine import Progress
from dfsearch.spec import Spec
from dfsearch.validate import seed_issue, validate_spec

__all__ = ["run", "evaluate", "evaluate_mapping", "load", "with_mapping_training"]


def load(source: str | Path | Spec, *, equations: Equations | None = None) -> Spec:
    """A Spec from a path (dfsearch TOML or DFModel setup.txt) or an existing Spec.

    A Spec object is validated again (it may come from ``dataclasses.replace``, which skips
    validation; ``dfsearch.replace(spec, path, value)`` is the validated way to change a field).
    ``equations`` picks the equation set of a pre-v1 DFModel input, which its text cannot
    tell (``loader.load_spec``); any other input must already use it.
    """
    if isinstance(source, Spec):
        issues = validate_spec(source)
        if issues:
            raise SpecError(issues, file="<Spec object>")
        if equations is not None and source.execution.equations is not equations:
            raise SpecError(f"equations: the Spec uses {source.execution.equations.label!r}; "
                            f"change it with dfsearch.replace(spec, 'execution.equations', "
                            f"{equations.label!r}). Got {equations.label!r}.",
                            file="<Spec object>")  # fmt: skip
        return source
    return load_spec(source, equations=equations)


def run(
    source: str | Path | Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    max_evaluations: int | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Search the best mapping of a spec (its plan: ``dfsearch.plan.run``).

    The result depends on (spec, seed) only. ``max_evaluations`` (work) and
    ``time_limit_s`` (wall clock, 0 = none) default to the spec's ``[search]`` settings;
    a result they stop is labelled ``stopped_by_limit`` (``result.status``). Ctrl-C returns
    the best mapping found so far, labelled ``interrupted``.

    Raises
    ------
    SpecError
        Bad input.
    InfeasibleError
        No feasible mapping was found; the message says which constraints bind and by how
        much, and ``exc.result`` is the full result (status, violations, lower bound).
    """
    _check_run_args(seed, time_limit_s, max_evaluations)
    result = plan.run(
        load(source), seed=seed, time_limit_s=time_limit_s, max_evaluations=max_evaluations,
        progress=progress,
    )  # fmt: skip
    if result.evaluation is None:
        raise InfeasibleError(result.infeasible_message(), result=result)
    return result


def _check_run_args(seed: object, time_limit_s: object, max_evaluations: object) -> None:
    """The keyword arguments of ``run`` get the checks of the spec's ``[search]`` table."""
    issues = [seed_issue("seed", seed)] if seed is not None else []
    if time_limit_s is not None and not (isinstance(time_limit_s, (int, float)) and time_limit_s >= 0):
        issues.append(Issue("time_limit_s", f"must be a number >= 0 s. Got {time_limit_s!r} instead."))
    if max_evaluations is not None and not (
        isinstance(max_evaluations, int) and not isinstance(max_evaluations, bool) and max_evaluations >= 1
    ):
        issues.append(Issue("max_evaluations", f"must be an integer >= 1. Got {max_evaluations!r} instead."))
    issues = [i for i in issues if i is not None]
    if issues:
        raise SpecError(issues, file="dfsearch.run")


def evaluate(source: str | Path | Spec, decision: Decision) -> Evaluation:
    """Evaluate one complete decision with DFModel's equations (no search).

    Raises
    ------
    SpecError
        Bad input, or a whole model in pipeline pieces (``evaluate_mapping`` evaluates its
        mapping files: one decision per piece).
    """
    spec = load(source)
    if is_partitioned(spec):
        raise SpecError("a graph cut into pipeline partitions (workload.partition_graph) needs "
                        "its partition besides the decision: use dfsearch.api.evaluate_mapping "
                        "with a mapping file", file="dfsearch.evaluate")  # fmt: skip
    if is_staged(spec):
        raise SpecError("a whole model in pipeline pieces (an embedding or LM head with "
                        "num_layer_in_graph < num_layer) has one decision per piece: use "
                        "dfsearch.api.evaluate_mapping with a mapping file",
                        file="dfsearch.evaluate")  # fmt: skip
    return _evaluate(spec, decision)


def evaluate_mapping(source: str | Path | Spec, mapping: str | Path
                     ) -> tuple[Evaluation, StagePlan | PartitionPlan | None]:
    """Evaluate the mapping file ``mapping`` (docs/mapping.md) on a spec: (the evaluation,
    the pipeline stages of a whole model in pieces, or the partitions of a graph cut into
    pipeline partitions, else None).

    Raises
    ------
    SpecError
        Bad spec or mapping file.
    """
    return plan.evaluate_mapping(with_mapping_training(load(source), mapping), mapping)
