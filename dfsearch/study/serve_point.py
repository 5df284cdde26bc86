"""A point of a serving-capacity study (docs/studies.md, "Serving-capacity studies"): its
spec, ``[serve]`` table included, searched by ``dfsearch serve``'s own search
(``capacity.command.answer_of``) and flattened into the cells of its row: the deployment
found (the closest one when none meets the SLOs) with the figures ``dfsearch serve --json``
gives for it, under the same names (``table.SERVE_METRICS``)."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from dfsearch.capacity.command import Answer, answer_of, infeasible_message, row
from dfsearch.capacity.serve_spec import split_serve
from dfsearch.codes import RunStatus
from dfsearch.study.study import ServePoint

__all__ = ["serve_cells", "serve_status"]


def serve_cells(point: ServePoint, seed: int) -> dict[str, Any]:
    """The metric cells of a serving-capacity point searched with the search seed ``seed``
    (the study's, else the spec's own: then the data is the file's)."""
    t0 = time.perf_counter()
    data = copy.deepcopy(point.data)
    data.setdefault("search", {})["seed"] = seed
    rest, serve = split_serve(data, point.path)
    a = answer_of(rest, serve, Path(point.path))
    r = a.result
    shown = r.best or r.closest
    cells: dict[str, Any] = row(shown) if shown is not None else {}
    cells |= {"status": serve_status(a).label, "seed": seed, "evaluations": r.simulations,
              "simulations": r.simulations, "step_searches": a.step_searches,
              "binding": shown.binding if shown is not None else None,
              "seconds": time.perf_counter() - t0}  # fmt: skip
    if r.best is None:
        cells["message"] = infeasible_message(a)
    return cells


def serve_status(a: Answer) -> RunStatus:
    """Optimal: the exhaustive search with bounds proved the deployment the cheapest;
    feasible, not proven: sampled; stopped: ``serve.max_simulations`` stopped the search;
    infeasible: no deployment meets the SLOs (the row shows the closest)."""
    r = a.result
    if r.stopped:
        return RunStatus.STOPPED_BY_LIMIT
    if r.best is None:
        return RunStatus.INFEASIBLE
    return RunStatus.FEASIBLE_NOT_PROVEN if r.sampled else RunStatus.OPTIMAL
