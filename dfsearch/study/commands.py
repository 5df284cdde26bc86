"""The text side of ``dfsearch sweep`` and ``dfsearch pareto``: progress line, summary,
Pareto listing. The command line (dfsearch/cli.py) parses options and calls these."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dfsearch.errors import Issue, SpecError
from dfsearch.study.pareto import OBJECTIVES, pareto_front
from dfsearch.study.table import METRICS, TableReader, table_path

__all__ = ["progress_printer", "summary_lines", "results_path", "load_results", "front_lines", "front_json"]


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def progress_printer(stream: Any = None, *, what: str = "sweep", unit: str = "point"):
    """A progress callback writing ``sweep: 12/80 points, 0.41 s/point, ETA 0m24s`` to
    stderr (one line rewritten in place on a terminal, a line per step otherwise); ``what``
    and ``unit`` name the command and what it counts (``codesign``: trials)."""
    stream = stream or sys.stderr
    tty = stream.isatty()

    def show(done: int, total: int, elapsed: float, ran: int) -> None:
        per = elapsed / ran if ran else 0.0
        eta = per * (total - done)
        text = (f"  {what}: {done}/{total} {unit}s, {per:.3g} s/{unit}, elapsed {_clock(elapsed)}, "
                f"ETA {_clock(eta)}")
        stream.write(("\r" + text + "   ") if tty else text + "\n")
        if tty and done == total:
            stream.write("\n")
        stream.flush()

    return show


def summary_lines(summary: Any) -> list[str]:
    s = summary
    resumed = f", {s.done_before} already in the table" if s.done_before else ""
    return [
        f"swept {s.points} points ({s.ran} run{resumed}) in {s.seconds:.3g} s with {s.jobs} job(s), {s.backend}",
        f"feasible {s.feasible}, infeasible {s.infeasible}; table {s.table}",
    ]


def results_path(folder: str | Path) -> Path:
    """The table of a results folder, or the path itself when it is not a folder."""
    path = Path(folder)
    return table_path(path) if path.is_dir() else path


def load_results(
    folder: str | Path, option: str = "RESULTS", stream: Any = None, keep: Sequence[str] | None = None,
    points: set[int] | None = None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """The header and rows of a results folder (or a results.csv path), every row checked
    (``table.TableReader``); a last row cut by a killed sweep is left out with a note on
    ``stream`` (stderr). ``keep``: the metric columns each row holds (with ``point`` and the
    axes; default all); ``points``: only the rows of these points.

    Raises
    ------
    SpecError
        No results table there, or a table with a bad header, row, cell or encoding.
    """
    path = results_path(folder)
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise SpecError(Issue(option, f"has no results table: {str(path)!r} {what}. Run 'dfsearch sweep' first."))
    with TableReader(path) as reader:
        if not reader.header:
            raise SpecError(Issue(option, f"{str(path)!r} is empty: no header line. Run 'dfsearch sweep' first."))
        names = None if keep is None else [*axis_names(reader.header), *keep]
        rows = [r for r in reader.rows(keep=names) if points is None or r["point"] in points]
    if reader.cut_line is not None:
        (stream or sys.stderr).write(f"note: {path}, line {reader.cut_line} has no line end (a row cut by a killed sweep); left out.\n")
    return reader.header, rows


def axis_names(header: Sequence[str]) -> list[str]:
    return [c for c in header if c != "point" and c not in METRICS]


def front_lines(header: Sequence[str], rows: Sequence[Mapping[str, Any]], objectives: Sequence[str]) -> list[str]:
    front = pareto_front(rows, objectives)
    feasible = sum(r.get("final_s") is not None for r in rows)
    lines = [f"Pareto front over {', '.join(objectives)}: {len(front)} of {feasible} feasible points"]
    names = axis_names(header)
    for r in sorted(front, key=lambda r: r["final_s"]):
        where = ", ".join(f"{n}={r[n]}" for n in names)
        values = []
        for name in objectives:
            if name == "throughput":
                values.append(f"throughput {1.0 / r['final_s']:.6g}/s (final_s {r['final_s']:.6g})")
            else:
                column = OBJECTIVES[name][0]
                values.append(f"{name} {r[column]:.6g}")
        lines.append(f"  point {r['point']}: {where}: " + ", ".join(values))
    return lines


#: the columns the Pareto front reads
FRONT_COLUMNS = ("final_s", "system_cost", "system_power")


def front_json(header: Sequence[str], rows: Sequence[Mapping[str, Any]], objectives: Sequence[str],
               full: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The front as JSON: every column of its rows (``full``: the front's rows with every
    column, when ``rows`` hold only :data:`FRONT_COLUMNS`)."""
    front = pareto_front(rows, objectives)
    if full is not None:
        by_point = {r["point"]: r for r in full}
        front = [by_point[r["point"]] for r in front]
    return {"objectives": list(objectives), "points": [dict(r) for r in front]}
