"""Running a study: every point searched once, in this process, in a process pool or on a
Dask cluster, each finished point appended to the results table at once.

Resuming: a sweep writes ``results.csv`` row by row (flushed and synced). Run again on the
same folder, it skips the points already in the table. Every row carries the digest of its
point's spec and seed; if a row no longer matches the study (the study, the base spec or a
file it includes changed), the sweep refuses (``SpecError``, exit 2) unless ``fresh`` is
set, which starts the table anew.

Determinism: the rows are written in point order whatever the number of workers (a pool's
results are taken in submission order), and each point's search depends on its spec and seed
only, so the table is the same for any ``jobs`` except the ``seconds`` column.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsearch.errors import Issue, SpecError
from dfsearch.spec import Spec
from dfsearch.study.study import Point, Study, cell
from dfsearch.study.table import TableWriter, columns, drop_partial_line, read_table, table_path

__all__ = ["Task", "SweepSummary", "SweepInterrupted", "run_point", "sweep", "point_digest"]

#: progress(done, total, elapsed_s, ran): called after each point written
Progress = Callable[[int, int, float, int], None]


@dataclass(frozen=True, slots=True)
class Task:
    """What a worker needs for one point."""

    point: int
    spec: Spec
    seed: int


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


class SweepInterrupted(Exception):
    """Ctrl-C: the rows written so far stay; running the sweep again resumes."""

    def __init__(self, written: int, total: int) -> None:
        super().__init__(f"interrupted after {written} of {total} points; run the same command again to resume.")
        self.written = written
        self.total = total


def point_digest(spec: Spec, seed: int) -> str:
    """A short digest of a point's spec (every field, the graph too) and seed."""
    from dfsearch.loader import spec_to_data

    text = json.dumps([spec_to_data(spec), seed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_point(task: Task) -> dict[str, Any]:
    """Search one point and return its metric cells (the worker function)."""
    from dfsearch.plan import run

    result = run(task.spec, seed=task.seed)
    row = _metrics(result)
    if result.evaluation is not None:
        row |= roofline_cells(result.evaluation, task.spec.system.network[0].link_bw_GBps)
    return row


def roofline_cells(ev: Any, link_bw_GBps: float) -> dict[str, float]:
    """One chip during one execution of the graph (its configurations in turn, without the
    pipeline bubble and the once-per-batch p2p): the time T (``all_config_ii_ns``), the FLOP
    done, the DRAM bytes moved (memory time x DRAM bandwidth) and the network time as bytes
    over one link of the first dimension (network time x its bandwidth). The FLOP are the
    chip's share of the batch divided by the graph executions per batch,
    E = (ns_per_batch - p2p) / (T x pipeline factor). Since T sums max(compute, memory,
    network) per configuration, FLOP / T <= min(peak, FLOP / bytes x bandwidth): the point of
    a hierarchical roofline lies under both roofs."""
    t = ev.all_config_ii_ns
    executions = (ev.ns_per_batch - ev.p2p_ns) / (t * ev.pipeline_factor) if t > 0 else 0.0
    flop = ev.workload_flop / ev.num_chip / executions if executions > 0 else 0.0
    return {
        "all_config_ii_ns": t, "flop_per_chip": flop,
        "dram_bytes_per_chip": sum(c.memory_ns for c in ev.configs) * ev.dram_bw_GBps,
        "network_bytes_per_chip": sum(c.network_ns for c in ev.configs) * link_bw_GBps,
        "peak_gflops": ev.peak_gflops, "dram_bw_GBps": ev.dram_bw_GBps, "link_bw_GBps": link_bw_GBps,
    }  # fmt: skip


def _metrics(result: Any) -> dict[str, Any]:
    s = result.search
    row: dict[str, Any] = {
        "status": result.status.label, "lower_bound_s": s.lower_bound_s,
        "evaluations": s.evaluations, "seconds": s.seconds, "seed": s.seed,
    }  # fmt: skip
    ev = result.evaluation
    if ev is None:
        row["message"] = result.violations[0].message() if result.violations else result.infeasible_message().splitlines()[0]
        return row
    gflops = ev.workload_flop / ev.final_s / 1e9
    row |= {
        "final_s": ev.final_s, "throughput_per_s": 1.0 / ev.final_s, "utilization": ev.utilization,
        "system_cost": ev.price.system_cost, "system_power": ev.price.system_power,
        "cost_efficiency": gflops / ev.price.system_cost if ev.price.system_cost > 0 else None,
        "power_efficiency": gflops / ev.price.system_power if ev.price.system_power > 0 else None,
        "tp": ev.tp, "pp": ev.pp, "dp": ev.dp, "num_config": len(ev.configs),
        "compute_ns": sum(c.compute_ns for c in ev.configs),
        "memory_ns": sum(c.memory_ns for c in ev.configs),
        "network_ns": sum(c.network_ns for c in ev.configs),
    }  # fmt: skip
    lb = s.lower_bound_s
    row["gap"] = max(0.0, ev.final_s / lb - 1.0) if lb else None
    return row


def _prepare(study: Study) -> tuple[list[Point], list[Task], list[str]]:
    """Every kept point with its validated spec, seed and digest (all checked before any
    search runs: bad input fails at once)."""
    points = study.points()
    tasks, digests = [], []
    for p in points:
        spec = study.point_spec(p)
        seed = study.seed if study.seed is not None else spec.search.seed
        tasks.append(Task(p.index, spec, seed))
        digests.append(point_digest(spec, seed))
    return points, tasks, digests


def _done_points(path: Path, header: list[str], digests: dict[int, str], fresh: bool, file: str) -> set[int]:
    """Points already in the table; refuse a table another study wrote."""
    if not path.exists():
        return set()
    if fresh:
        path.unlink()
        return set()
    drop_partial_line(path)
    old_header, rows = read_table(path)
    hint = "Use --fresh to start the table anew, or another output folder."
    if old_header and old_header != header:
        msg = f"{path} has the columns of another study ({', '.join(old_header[:6])}, ...). {hint}"
        raise SpecError(Issue("", msg), file=file)
    done = set()
    for row in rows:
        if digests.get(row["point"]) != row["digest"]:
            what = "is not a point of this study" if row["point"] not in digests else "was computed for another spec or seed"
            msg = f"{path}: the row of point {row['point']} {what} (the study, its base spec or an included file changed). {hint}"
            raise SpecError(Issue("", msg), file=file)
        done.add(row["point"])
    return done


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

    Raises
    ------
    SpecError
        A point's spec is invalid, or the table was written by another study (see module
        docstring).
    SweepInterrupted
        Ctrl-C; the rows written so far stay.
    """
    t0 = time.perf_counter()
    points, tasks, digests = _prepare(study)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = table_path(folder)
    header = columns(a.name for a in study.axes)
    by_index = {p.index: d for p, d in zip(points, digests)}
    done = _done_points(path, header, by_index, fresh, study.file)
    todo = [(p, t, d) for p, t, d in zip(points, tasks, digests) if p.index not in done]
    backend = "dask" if dask else ("process-pool" if jobs > 1 and len(todo) > 1 else "in-process")
    written = 0
    with TableWriter(path, header) as table:
        for (p, _, d), metrics in zip(todo, _results([t for _, t, _ in todo], jobs, dask)):
            if metrics["status"] == "interrupted":
                raise SweepInterrupted(len(done) + written, len(points))
            axes = {a.name: cell(v) for a, v in zip(study.axes, p.values)}
            table.write({"point": p.index, **axes, **metrics, "digest": d})
            written += 1
            if progress is not None:
                progress(len(done) + written, len(points), time.perf_counter() - t0, written)
    _write_parquet(path)
    _, rows = read_table(path)
    feasible = sum(r["final_s"] is not None for r in rows)
    return SweepSummary(study.file, str(path), len(points), len(done), written, feasible,
                        len(rows) - feasible, time.perf_counter() - t0, jobs, backend)  # fmt: skip


def _results(tasks: list[Task], jobs: int, dask: str | None) -> Iterator[dict[str, Any]]:
    """Each task's metrics, in task order."""
    if dask:
        from dfsearch.study.distributed import dask_results

        yield from dask_results(tasks, dask)
    elif jobs > 1 and len(tasks) > 1:
        yield from _pool_results(tasks, jobs)
    else:
        for t in tasks:
            yield run_point(t)


def _pool_results(tasks: list[Task], jobs: int) -> Iterator[dict[str, Any]]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    pool = ctx.Pool(min(jobs, len(tasks)))
    try:
        yield from pool.imap(run_point, tasks, chunksize=1)
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
