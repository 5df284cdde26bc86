"""The programmatic entry points: ``run`` (search) and ``evaluate`` (one given mapping).

>>> import dfsearch
>>> callable(dfsearch.run)
True
"""

from __future__ import annotations

from pathlib import Path

from dfsearch.cost.model import Evaluation
from dfsearch.decision import Decision
from dfsearch.result import RunResult
from dfsearch.search.engine import Progress
from dfsearch.spec import Spec

__all__ = ["run", "evaluate", "load"]


def load(source: str | Path | Spec) -> Spec:
    """A Spec from a path (dfsearch TOML or DFModel setup.txt) or an existing Spec."""
    if isinstance(source, Spec):
        return source
    from dfsearch.load import load_spec

    return load_spec(source)


def run(
    source: str | Path | Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Search the best mapping of a spec.

    Raises
    ------
    SpecError
        Bad input.
    InfeasibleError
        No feasible mapping; the message says which constraint binds and by how much.
    """
    from dfsearch.search.engine import search

    return search(load(source), seed=seed, time_limit_s=time_limit_s, progress=progress)


def evaluate(source: str | Path | Spec, decision: Decision) -> Evaluation:
    """Evaluate one complete decision with DFModel's equations (no search)."""
    from dfsearch.cost.model import evaluate as _evaluate

    return _evaluate(load(source), decision)
