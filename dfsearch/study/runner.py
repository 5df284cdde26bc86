"""Running a study: every point searched once, in this process, in a process pool or on a
Dask cluster, each finished point appended to the results table at once.

Resuming: a sweep writes ``results.csv`` row by row (each row handed to the operating system
at once; the file synced to disk a second after the previous sync at most, as rows come, and
at the end). Run again on the
same folder, it skips the points already in the table. Every row carries the digest of its
point's spec and seed; if a row no longer matches the study (the study, the base spec or a
file it includes changed), the sweep refuses (``SpecError``, exit 2) unless ``fresh`` is
set, which starts the table anew.

Determinism: the rows are written in point order whatever the number of workers (a pool or a
Dask cluster gets chunks of consecutive points; their results are taken in submission
order), and each point's search depends on its spec and seed
only, so the table is the same for any ``jobs`` except the ``seconds`` column.
"""

from __future__ import annotations

import collections
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsearch import __version__
from dfsearch.errors import Issue, SpecError
from dfsearch.study.distributed import dask_results
from dfsearch.study.folder import folder_lock, output_folder
from dfsearch.study.point import (  # Task, point_digest and run_point re-exported
    CTRL_C,
    Task,
    chunk_size,
    chunks,
    is_feasible,
    point_digest,
    run_chunk,
    run_point,
    task_of,
)
from dfsearch.study.study import Point, Study, cell
from dfsearch.study.table import (
    METRICS,
    TableReader,
    TableWriter,
    axis_value,
    cell_text,
    columns,
    drop_partial_line,
    table_path,
)

__all__ = ["Task", "SweepSummary", "SweepInterrupted", "run_point", "sweep", "point_digest"]

#: progress(done, total, elapsed_s, ran): called after each point written
Progress = Callable[[int, int, float, int], None]
#: the study fingerprint of the table in the folder (see ``_resume``)
STAMP_NAME = ".dfsearch-study"


@dataclass(frozen=True, slots=True)
class SweepSummary:
    """What a sweep did (``--json``)."""

    study: str
    table: str
    points: int  #: points of the study after filters
    done_before: int  #: rows already in the table (resumed)
    ran: int
    feasible: int  #: in the whole table
    infeasible: int
    seconds: float
    jobs: int
    backend: str

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C: the rows written so far stay; running the sweep again resumes. A
    ``KeyboardInterrupt``, so that code catching ``Exception`` does not swallow it."""

    def __init__(self, written: int, total: int) -> None:
        super().__init__(f"interrupted after {written} of {total} points; run the same command again to resume.")
        self.written = written
        self.total = total


def _tasks(study: Study, done: AbstractSet[int]) -> Iterator[tuple[Point, str, Task]]:
    """Each kept point not yet in the table, with its validated spec, seed and digest, built
    only when the sweep reaches it (a million-point study starts at once; a bad point fails
    when reached, after the rows before it are written)."""
    for p in study.iter_points():
        if p.index in done:
            continue
        yield p, *task_of(study, p)


def precheck(study: Study, limit: int = 1000) -> int:
    """Build, before any search, one point per axis value (that value, the other axes at
    their first value; ``zip``: the first ``limit`` positions) when the filters keep it, so
    a bad value fails at once rather than when the sweep reaches it. At most ``limit``
    points, whatever the study's size. Returns the number built.

    Raises
    ------
    SpecError
        One of these points breaks a rule.
    """
    if study.combine == "zip":
        choices = [(i,) for i in range(min(study.size(), limit))]
    else:
        choices = [tuple(j if k == i else 0 for k in range(len(study.axes)))
                   for i, a in enumerate(study.axes) for j in range(len(a.values))]  # fmt: skip
        choices = list(dict.fromkeys(choices or [()]))[:limit]
    built = 0
    for choice in choices:
        point = study.point_of(choice)
        if study.kept(point):
            study.point_spec(point)
            built += 1
    return built


def study_fingerprint(study: Study) -> str:
    """A digest of everything a point's spec depends on besides its axis values (the base
    spec, its defaults and included files as loaded, the edits, networks, area, seed, axes,
    filters) and of the dfsearch version: equal fingerprints mean every row of the table is
    still right when its axis values match."""
    data = [__version__, study.base_data, study.defaults, list(study.fixed), study.combine,
            [[a.name, list(a.values)] for a in study.axes], [c.text for c in study.filters],
            study.seed, dict(study.network_sizes), study.area]  # fmt: skip
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Resumed:
    done: AbstractSet[int]  #: the points in the table (a set, not copied: a long table's ids)
    feasible: int  #: rows of ``done`` with a feasible mapping


def _row_checker(study: Study, path: Path, hint: str, filters: bool) -> Callable[[dict[str, Any]], None]:
    """A check of a row already in the table: a point of the study with the same axis values
    and (``filters``) one the filters keep. Cheap: no spec is built, each axis value is
    converted once."""
    typed = [[axis_value(cell_text(cell(v))) for v in a.values] for a in study.axes]
    names = [a.name for a in study.axes]
    size = study.size()

    def check(row: dict[str, Any]) -> None:
        index = row["point"]
        ok = index < size
        if ok and study.combine == "zip":
            ok = all(row[n] == t[index] for n, t in zip(names, typed))
        elif ok:
            rest = index
            for n, t in zip(reversed(names), reversed(typed)):
                rest, c = divmod(rest, len(t))
                ok = ok and row[n] == t[c]
        if not ok or (filters and not study.kept(study.point_at(index))):  # type: ignore[arg-type]
            msg = f"{path}: the row of point {index} is not a point of this study (its axes or filters changed). {hint}"
            raise SpecError(Issue("", msg), file=study.file)

    return check


def _check_digest(study: Study, row: dict[str, Any], path: Path, hint: str) -> None:
    """Rebuild the row's point and compare its digest with the row's."""
    point = study.point_at(row["point"])
    assert point is not None
    spec = study.point_spec(point)
    seed = study.seed if study.seed is not None else spec.search.seed
    if point_digest(spec, seed, study.point_serve(point)) != row["digest"]:
        msg = f"{path}: the row of point {row['point']} was computed for another spec or seed (the study, its base spec or an included file changed). {hint}"
        raise SpecError(Issue("", msg), file=study.file)


def _resume(study: Study, path: Path, header: list[str], fresh: bool) -> _Resumed:
    """The points already in the table; refuse a table another study wrote.

    Every row's axis values are checked against the study; the digest of the first row is
    checked by rebuilding its point, and of every row only when the study's fingerprint
    (``.dfsearch-study``, written after a check) differs: a resume rebuilds nothing done."""
    stamp = path.parent / STAMP_NAME
    fingerprint = study_fingerprint(study)
    if path.exists() and not path.is_file():
        raise SpecError(Issue("", f"{path} is not a regular file; expected the results table."), file=study.file)
    try:
        if fresh:
            path.unlink(missing_ok=True)
        if not path.exists():
            _write_stamp(stamp, fingerprint, study.file)
            return _Resumed(set(), 0)
        drop_partial_line(path)
        trusted = stamp.is_file() and stamp.read_text(errors="replace").strip() == fingerprint
    except OSError as e:
        raise SpecError(Issue("", f"{path}: cannot update: {e.strerror or e}."), file=study.file) from None
    hint = "Use --fresh to start the table anew, or another output folder."
    done: set[int] = set()
    feasible = 0
    check = _row_checker(study, path, hint, filters=not trusted)  # same fingerprint, same filters
    with TableReader(path) as reader:
        if reader.header and reader.header != header:
            msg = f"{path} has the columns of another study ({', '.join(reader.header[:6])}, ...). {hint}"
            if [c for c in reader.header if c not in METRICS] == [c for c in header if c not in METRICS]:
                msg = f"{path} has the result columns of another version of dfsearch. {hint}"
            raise SpecError(Issue("", msg), file=study.file)
        for row in reader.rows(seen=done):  # adds each row's point to done
            check(row)
            if not trusted or len(done) == 1:
                _check_digest(study, row, path, hint)
            feasible += is_feasible(row)
    _write_stamp(stamp, fingerprint, study.file)
    return _Resumed(done, feasible)


def _write_stamp(stamp: Path, fingerprint: str, file: str) -> None:
    try:
        stamp.write_text(fingerprint + "\n")
    except OSError as e:
        raise SpecError(Issue("", f"{stamp}: cannot write: {e.strerror or e}."), file=file) from None


def sweep(
    study: Study,
    folder: str | Path,
    *,
    jobs: int = 1,
    fresh: bool = False,
    dask: str | None = None,
    progress: Progress | None = None,
) -> SweepSummary:
    """Run every point of ``study`` not yet in ``folder/results.csv`` and append its row.
    Points are built and searched one after the other (with ``jobs`` > 1 or ``dask``, a few
    ahead of the workers), never all at once.

    Raises
    ------
    SpecError
        A point's spec is invalid, the output folder cannot be written or another sweep
        holds it, or the table was written by another study (see module docstring).
    SweepInterrupted
        Ctrl-C; the rows written so far stay.
    """
    t0 = time.perf_counter()
    precheck(study)
    folder = output_folder(folder)
    with folder_lock(folder):
        path = table_path(folder)
        header = columns((a.name for a in study.axes), serve=study.serves)
        resumed = _resume(study, path, header, fresh)
        before = len(resumed.done)
        total = _total(study)
        backend = "dask" if dask else ("process-pool" if jobs > 1 else "in-process")
        written = feasible = 0
        with TableWriter(path, header, sync_every_s=SYNC_EVERY_S) as table:
            try:
                for p, d, metrics in _results(study, resumed.done, jobs, dask):
                    if metrics["status"] == "interrupted":
                        raise SweepInterrupted(before + written, total)
                    axes = {a.name: cell(v) for a, v in zip(study.axes, p.values)}
                    table.write({"point": p.index, **axes, **metrics, "digest": d})
                    written += 1
                    feasible += is_feasible(metrics)
                    if metrics.get(CTRL_C):
                        raise SweepInterrupted(before + written, total)
                    if progress is not None:
                        progress(before + written, max(total, before + written), time.perf_counter() - t0, written)
            except KeyboardInterrupt as exc:  # Ctrl-C between two points: say how far it got
                if isinstance(exc, SweepInterrupted):
                    raise
                raise SweepInterrupted(before + written, total) from None
        _write_parquet(path)
    feasible += resumed.feasible
    return SweepSummary(study.file, str(path), before + written, before, written, feasible,
                        before + written - feasible, time.perf_counter() - t0, jobs, backend)  # fmt: skip


def _total(study: Study) -> int:
    """The points of the study after filters, counted when the filters read axis values
    only (cheap); else the count before filters (an upper bound, for the progress line)."""
    if not study.filters or study.filters_read_fields():
        return study.size()
    return sum(1 for _ in study.iter_points())


Row = tuple[Point, str, dict[str, Any]]
#: seconds between two syncs of the table to disk (each row reaches the OS at once)
SYNC_EVERY_S = 1.0


def _results(study: Study, done: AbstractSet[int], jobs: int, dask: str | None) -> Iterator[Row]:
    """Each point not yet in the table with its digest and metrics, in point order. With a
    pool or Dask, the workers get chunks of points (``point.run_chunk``) and build their
    specs themselves; results are taken in submission order."""
    if not dask and jobs <= 1:
        for p, d, t in _tasks(study, done):
            yield p, d, run_point(t)
        return
    todo = (p for p in study.iter_points() if p.index not in done)
    remaining = max(_total(study) - len(done), 1)
    if dask:
        source = dask_results(study, todo, remaining, dask)
    else:
        source = _pool_results(study, chunks(todo, chunk_size(remaining, jobs)), jobs)
    for chunk, results in source:
        for p, r in zip(chunk, results):
            if r is None:  # the point's spec breaks a rule: raise its error here, in order
                d, t = task_of(study, p)
                r = d, run_point(t)
            yield p, r[0], r[1]


def _worker_ignores_ctrl_c() -> None:
    """In a pool worker: Ctrl-C at a terminal reaches the whole process group, and a worker
    it stopped while waiting for a task would die holding the task queue's lock (the pool's
    terminate then waits for ever). Workers ignore it; the parent stops them. A search in a
    worker still polls its own flag (``engine._ctrl_c_sets_flag``)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pool_results(
    study: Study, parts: Iterator[tuple[Point, ...]], jobs: int
) -> Iterator[tuple[tuple[Point, ...], list]]:
    """A pool of ``jobs`` long-lived processes (each compiles or loads the compiled code
    once) fed chunks of points a few ahead (2 per worker), so that the work in memory stays
    bounded however many points the study has; each chunk with its results, in order."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    pool = ctx.Pool(jobs, initializer=_worker_ignores_ctrl_c)
    pending: collections.deque = collections.deque()
    try:
        for part in parts:
            pending.append((part, pool.apply_async(run_chunk, (study, part))))
            if len(pending) >= 2 * jobs:
                part, result = pending.popleft()
                yield part, result.get()
        while pending:
            part, result = pending.popleft()
            yield part, result.get()
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _write_parquet(path: Path) -> None:
    """``results.parquet`` next to the CSV when pyarrow is installed (optional)."""
    try:
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq
    except ImportError:
        return
    pq.write_table(pacsv.read_csv(path), path.with_suffix(".parquet"))
