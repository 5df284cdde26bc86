"""Sampling a study too large to enumerate: Optuna's NSGA-II over the axes, the exact mapping
search inside each trial (``dfsearch sweep --sample nsga2 --trials N --seed S``).

Each trial picks one value per axis (for ``combine = "zip"``: one position), which is a point
of the study; the point is searched exactly like in :func:`dfsearch.study.runner.sweep` and
its row goes to the same ``results.csv`` (same columns, same digests), so the table can be
resumed, mixed with an enumerated sweep of the same study, given to ``dfsearch pareto`` and
plotted. The objectives (2 or 3 of throughput, cost, power) are what NSGA-II optimises; the
front reported is the exact front of the rows found.

* **Deterministic**: the sampler is seeded; trials are asked and told one after the other, so
  the same study, seed and trial count give the same sequence of points and the same table
  (the ``seconds`` column aside).
* **Each point once**: a point proposed again (NSGA-II does) takes its row from the table; a
  point the filters drop, or without a feasible mapping, is a failed trial (no objective).
* **Resumable**: run again after an interrupt, the sampler replays the same trials and every
  point already in the table is read back instead of searched (a row that no longer matches
  the study is refused, as in a sweep).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dfsearch.errors import Issue, SpecError
from dfsearch.study.folder import folder_lock, output_folder
from dfsearch.study.pareto import OBJECTIVES
from dfsearch.study.runner import (
    CTRL_C,
    Progress,
    SweepInterrupted,
    SweepSummary,
    Task,
    point_digest,
    precheck,
    run_point,
)
from dfsearch.study.study import Point, Study, cell
from dfsearch.study.table import TableWriter, columns, drop_partial_line, read_table, table_path

__all__ = ["nsga_sweep", "DEFAULT_OBJECTIVES"]

DEFAULT_OBJECTIVES = ("throughput", "cost")


def _objective_values(row: dict[str, Any], objectives: Sequence[str]) -> list[float] | None:
    """The row's objectives as Optuna minimises/maximises them (throughput = 1 / final_s)."""
    if row.get("final_s") is None:
        return None
    values = []
    for name in objectives:
        value = row.get(OBJECTIVES[name][0])
        if value is None:
            return None
        values.append(1.0 / value if name == "throughput" else float(value))
    return values


def _old_rows(path: Path, header: list[str], fresh: bool, file: str) -> dict[int, dict[str, Any]]:
    if path.exists() and not path.is_file():
        raise SpecError(Issue("", f"{path} is not a regular file; expected the results table."), file=file)
    try:
        if fresh:
            path.unlink(missing_ok=True)
        if not path.exists():
            return {}
        drop_partial_line(path)
    except OSError as e:
        raise SpecError(Issue("", f"{path}: cannot update: {e.strerror or e}."), file=file) from None
    old_header, rows = read_table(path)
    if old_header and old_header != header:
        msg = f"{path} has the columns of another study ({', '.join(old_header[:6])}, ...). Use --fresh to start the table anew, or another output folder."
        raise SpecError(Issue("", msg), file=file)
    return {r["point"]: r for r in rows}


def _choose(trial: Any, study: Study) -> Point:
    if study.combine == "zip":
        n = len(study.axes[0].values) if study.axes else 1
        return study.point_of((trial.suggest_categorical("position", list(range(n))),))
    return study.point_of(tuple(trial.suggest_categorical(a.name, list(range(len(a.values)))) for a in study.axes))


def _sampler_study(objectives: Sequence[str], seed: int, population: int | None) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kwargs = {"population_size": population} if population else {}
    sampler = optuna.samplers.NSGAIISampler(seed=seed, **kwargs)
    directions = ["maximize" if n == "throughput" else "minimize" for n in objectives]
    return optuna.create_study(directions=directions, sampler=sampler)


def nsga_sweep(
    study: Study,
    folder: str | Path,
    *,
    trials: int,
    seed: int = 0,
    objectives: Sequence[str] = DEFAULT_OBJECTIVES,
    population: int | None = None,
    fresh: bool = False,
    progress: Progress | None = None,
) -> SweepSummary:
    """Run ``trials`` NSGA-II trials over the axes of ``study``; each new point is searched
    and appended to ``folder/results.csv``.

    Raises
    ------
    SpecError
        A proposed point's spec is invalid, or the table belongs to another study.
    SweepInterrupted
        Ctrl-C; the rows written so far stay.
    """
    t0 = time.perf_counter()
    if study.serves:
        msg = ("is a serving-capacity study (its base spec has a [serve] table); --sample nsga2 samples mapping "
               "studies only: sweep its points (docs/studies.md, \"Serving-capacity studies\").")
        raise SpecError(Issue("study.base", msg), file=study.file)
    precheck(study)
    folder = output_folder(folder)
    with folder_lock(folder):
        return _nsga_locked(study, table_path(folder), trials, seed, objectives, population, fresh, progress, t0)


def _nsga_locked(
    study: Study, path: Path, trials: int, seed: int, objectives: Sequence[str], population: int | None,
    fresh: bool, progress: Progress | None, t0: float,
) -> SweepSummary:
    from optuna.trial import TrialState

    header = columns(a.name for a in study.axes)
    rows = _old_rows(path, header, fresh, study.file)
    before = len(rows)
    sampler_study = _sampler_study(objectives, seed, population)
    seen: set[int] = set()
    written = 0
    with TableWriter(path, header) as table:
        for n in range(trials):
            trial = sampler_study.ask()
            point = _choose(trial, study)
            if not study.kept(point):
                sampler_study.tell(trial, state=TrialState.FAIL)
                continue
            row = _row(study, point, rows)
            if row is None:
                raise SweepInterrupted(len(rows), trials)
            if point.index not in rows:
                table.write(row)
                rows[point.index] = row
                written += 1
                if row.get(CTRL_C):  # Ctrl-C came during this point's search, which finished
                    raise SweepInterrupted(len(rows), trials)
            seen.add(point.index)
            values = _objective_values(row, objectives)
            if values is None:
                sampler_study.tell(trial, state=TrialState.FAIL)
            else:
                sampler_study.tell(trial, values)
            if progress is not None:
                progress(n + 1, trials, time.perf_counter() - t0, n + 1)
    _, table_rows = read_table(path)
    feasible = sum(r["final_s"] is not None for r in table_rows)
    return SweepSummary(study.file, str(path), len(seen), before, written, feasible,
                        len(table_rows) - feasible, time.perf_counter() - t0, 1, f"nsga2 ({trials} trials, seed {seed})")  # fmt: skip


def _row(study: Study, point: Point, rows: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The point's row: from the table when there (its digest checked), else searched now
    (None when Ctrl-C stopped the search)."""
    spec = study.point_spec(point)
    seed = study.seed if study.seed is not None else spec.search.seed
    digest = point_digest(spec, seed)
    old = rows.get(point.index)
    if old is not None:
        if old["digest"] != digest:
            msg = (f"the row of point {point.index} was computed for another spec or seed (the study, its base spec "
                   "or an included file changed). Use --fresh to start the table anew, or another output folder.")  # fmt: skip
            raise SpecError(Issue("", msg), file=study.file)
        return old
    metrics = run_point(Task(point.index, spec, seed))
    if metrics["status"] == "interrupted":
        return None
    axes = {a.name: cell(v) for a, v in zip(study.axes, point.values)}
    return {"point": point.index, **axes, **metrics, "digest": digest}
