"""``dfsearch report RESULTS --html OUT.html``: one self-contained HTML page of a study.

The page holds a summary (study, workload, axes, points, failures and why), the tables (best
points, the Pareto set, one summary per axis) and the figures (one heat map per metric, the
Pareto plot, the time breakdown, the roofline) as base64 PNG images inside the file: it reads
without the internet or any other file. Without matplotlib (the ``plot`` extra) the page
keeps its tables and says how to get the figures. The same table gives the same page, byte
for byte (no timestamp; the PNGs carry no version or date).
"""

from __future__ import annotations

import base64
import html
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dfsearch import __version__
from dfsearch.errors import SolverUnavailableError, SpecError
from dfsearch.study import names, plots
from dfsearch.study.about import StudyInfo
from dfsearch.study.pareto import pareto_front
from dfsearch.study.table import METRICS

__all__ = ["HEATMAP_METRICS", "Figure", "report_figures", "report_html", "PLOT_HINT"]

#: the metrics drawn as heat maps, one figure each
HEATMAP_METRICS = ("utilization", "throughput_per_s", "cost_efficiency", "power_efficiency")
#: the columns of the best-points and Pareto tables
_COLUMNS = ("final_s", "throughput_per_s", "utilization", "system_cost", "system_power", "cost_efficiency", "power_efficiency")
#: (label, column, highest wins)
_BEST = (
    ("highest throughput", "throughput_per_s", True), ("highest utilization", "utilization", True),
    ("lowest system cost", "system_cost", False), ("lowest system power", "system_power", False),
    ("best cost efficiency", "cost_efficiency", True), ("best power efficiency", "power_efficiency", True),
)  # fmt: skip
PLOT_HINT = 'Figures need matplotlib: pip install "dfsearch[plot]".'
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; overflow-x: auto; }
figcaption { font-size: 0.9em; color: #555; }
.note { color: #8a5a00; }
"""


_NAV = ('<nav><a href="#summary">Summary</a> | <a href="#best">Best points</a> | <a href="#pareto">Pareto set</a>'
        ' | <a href="#axes">Per-axis summaries</a> | <a href="#figures">Figures</a></nav>')


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure of the page: its caption and PNG bytes, or why it was not drawn."""

    caption: str
    png: bytes | None
    why_not: str = ""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "<td>-</td>"
    if isinstance(value, float):
        return f'<td class="num">{_esc(names.number(value))}</td>'
    return f'<td class="num">{_esc(value)}</td>' if isinstance(value, int) else f"<td>{_esc(value)}</td>"


def _table(head: Sequence[str], body: Sequence[Sequence[str]], table_id: str) -> str:
    """An HTML table; ``body`` cells are already HTML (``<td>...</td>``)."""
    top = "".join(f"<th>{_esc(h)}</th>" for h in head)
    rows = "\n".join("<tr>" + "".join(r) + "</tr>" for r in body)
    return f'<table id="{table_id}">\n<tr>{top}</tr>\n{rows}\n</table>'


def _axes(header: Sequence[str]) -> list[str]:
    return [c for c in header if c != "point" and c not in METRICS]


def _point_cells(row: Mapping[str, Any], axes: Sequence[str]) -> list[str]:
    return [_cell("point", row["point"]), f"<td>{_esc(names.point_name(row, axes, mapping=False))}</td>",
            f"<td>{_esc(names.parallelism(row) or '-')}</td>"]  # fmt: skip


def _points_head() -> list[str]:
    return ["point", "system", "mapping", *(names.metric_title(c) for c in _COLUMNS)]


def _summary(header: Sequence[str], rows: Sequence[Mapping[str, Any]], info: StudyInfo | None, source: str) -> str:
    axes = _axes(header)
    feasible = sum(r["final_s"] is not None for r in rows)
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    items = [("results", source)]
    if info is not None:
        items += [("study", f"{info.name} ({info.file})"), ("workload", info.workload_detail or info.workload)]
        if info.description:
            items.append(("description", info.description))
        items += [("points in the study", f"{info.points:,} ({info.combine} of the axes)"
                   + (f", filters: {'; '.join(info.filters)}" if info.filters else ""))]  # fmt: skip
    else:
        items.append(("study", "unknown: the folder has no study.json (written by 'dfsearch sweep'); pass --study STUDY.toml"))
    for a in axes:
        values = list(dict.fromkeys(r[a] for r in rows))
        items.append((f"axis: {names.axis_name(a)}", ", ".join(names.value_name(a, v) for v in values)))
    items += [("rows in the table", f"{len(rows):,}"), ("feasible", f"{feasible:,}"),
              ("infeasible (failures)", f"{len(rows) - feasible:,}"),
              ("status", ", ".join(f"{k} {v:,}" for k, v in sorted(statuses.items())))]  # fmt: skip
    body = "\n".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in items)
    table = f'<table id="summary-table">\n{body}\n</table>\n'
    return '<section id="summary">\n<h2>Summary</h2>\n' + table + _failures(rows, axes) + "</section>"


def _failures(rows: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> str:
    """The infeasible points grouped by why (the table's ``message``), most frequent first."""
    why: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["final_s"] is None:
            why.setdefault(r.get("message") or "(no message)", []).append(r)
    if not why:
        return "<p>Every point has a feasible mapping.</p>\n"
    ordered = sorted(why.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    body = []
    for message, group in ordered:
        first = ", ".join(names.point_name(r, axes, mapping=False) for r in group[:3]) + (" ..." if len(group) > 3 else "")
        body.append([_cell("", len(group)), f"<td>{_esc(message)}</td>", f"<td>{_esc(first)}</td>"])
    return "<h3>Failures and why</h3>\n" + _table(["points", "why (first binding constraint)", "for example"], body, "failures") + "\n"


def _best(header: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    axes = _axes(header)
    body = []
    for label, column, high in _BEST:
        have = [r for r in rows if r["final_s"] is not None and r.get(column) is not None]
        if have:
            r = max(have, key=lambda r: r[column]) if high else min(have, key=lambda r: r[column])  # first on ties
            body.append([f"<th>{_esc(label)}</th>", *_point_cells(r, axes), *(_cell(c, r.get(c)) for c in _COLUMNS)])
    text = _table(["best", *_points_head()], body, "best-points") if body else "<p>No feasible point.</p>"
    return f'<section id="best">\n<h2>Best points</h2>\n{text}\n</section>'


def _pareto(header: Sequence[str], rows: Sequence[Mapping[str, Any]], objectives: Sequence[str]) -> str:
    axes = _axes(header)
    front = sorted(pareto_front(rows, objectives), key=lambda r: (r["final_s"], r["point"]))
    body = [[*_point_cells(r, axes), *(_cell(c, r.get(c)) for c in _COLUMNS)] for r in front]
    feasible = sum(r["final_s"] is not None for r in rows)
    lead = (f"<p>{len(front)} of {feasible} feasible points are on the exact Pareto front over "
            f"{_esc(', '.join(objectives))} (throughput maximised, cost and power minimised), fastest first.</p>")  # fmt: skip
    return f'<section id="pareto">\n<h2>Pareto set</h2>\n{lead}\n{_table(_points_head(), body, "pareto-set")}\n</section>'


def _axis_summaries(header: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    head = ["value", "points", "feasible", "best time per batch (s)", "median utilization", "best utilization",
            "best cost efficiency (GFLOP/s per $)"]  # fmt: skip
    for a in _axes(header):
        body = []
        by_value: dict[Any, list[Mapping[str, Any]]] = {}
        for r in rows:  # one pass per axis
            by_value.setdefault(r[a], []).append(r)
        for v, mine in by_value.items():
            ok = [r for r in mine if r["final_s"] is not None]
            util = [r["utilization"] for r in ok if r.get("utilization") is not None]
            eff = [r["cost_efficiency"] for r in ok if r.get("cost_efficiency") is not None]
            body.append([f"<th>{_esc(names.value_name(a, v))}</th>", _cell("", len(mine)), _cell("", len(ok)),
                         _cell("", min((r["final_s"] for r in ok), default=None)),
                         _cell("", float(statistics.median(util)) if util else None),
                         _cell("", max(util, default=None)), _cell("", max(eff, default=None))])  # fmt: skip
        parts.append(f"<h3>{_esc(names.axis_name(a))}</h3>\n" + _table(head, body, f"axis-{_slug(a)}"))
    return '<section id="axes">\n<h2>Per-axis summaries</h2>\n' + "\n".join(parts) + "\n</section>"


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def report_figures(header: Sequence[str], rows: Sequence[Mapping[str, Any]], objectives: Sequence[str],
                   workload: str | None) -> list[Figure]:
    """Every figure of the page, drawn (one heat map per metric of :data:`HEATMAP_METRICS`, the
    Pareto plot, the breakdown, the roofline); one the table cannot give (too few axes, too
    many values, no roofline columns) carries why instead.

    Raises
    ------
    SolverUnavailableError
        matplotlib is not installed.
    """
    makers: list[tuple[str, Callable[[], Any]]] = [
        (f"Heat map: {names.metric_title(m)}", lambda m=m: plots.heatmap_figure(header, rows, m, workload))
        for m in HEATMAP_METRICS
    ]
    makers += [
        (f"Pareto plot: {', '.join(objectives)}", lambda: plots.pareto_figure(header, rows, objectives, workload)),
        ("Compute, memory and network time per point", lambda: plots.breakdown_figure(header, rows, workload)),
        ("Hierarchical roofline", lambda: plots.roofline_figure(header, rows, workload)),
    ]
    out = []
    for caption, make in makers:
        if caption == "Hierarchical roofline" and not any(plots.roofline_points(rows, level) for level in ("memory", "network")):
            out.append(Figure(caption, None, "no feasible point has the roofline columns (FLOP and bytes per chip)."))
            continue
        try:
            fig = make()
        except SpecError as exc:
            out.append(Figure(caption, None, "; ".join(i.message for i in exc.issues)))
            continue
        out.append(Figure(caption, plots.png_bytes(fig)))
    return out


def _figures(figures: Sequence[Figure] | None) -> str:
    if figures is None:
        return f'<section id="figures">\n<h2>Figures</h2>\n<p class="note">{_esc(PLOT_HINT)}</p>\n</section>'
    parts = []
    for i, f in enumerate(figures):
        if f.png is None:
            parts.append(f'<p class="note">{_esc(f.caption)}: not drawn: {_esc(f.why_not)}</p>')
            continue
        data = base64.b64encode(f.png).decode("ascii")
        parts.append(f'<figure id="figure-{i + 1}"><img alt="{_esc(f.caption)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>Figure {i + 1}. {_esc(f.caption)}</figcaption></figure>")  # fmt: skip
    return '<section id="figures">\n<h2>Figures</h2>\n' + "\n".join(parts) + "\n</section>"


def report_html(header: Sequence[str], rows: Sequence[Mapping[str, Any]], info: StudyInfo | None,
                objectives: Sequence[str], source: str) -> str:
    """The page of a results table (``source``: the folder, as the summary names it); the
    figures when matplotlib is installed, else a note saying how to get them."""
    workload = info.workload if info is not None else None
    try:
        figures: list[Figure] | None = report_figures(header, rows, objectives, workload)
    except SolverUnavailableError:
        figures = None
    title = f"dfsearch study {info.name}" if info is not None else f"dfsearch study {source}"
    heading = f"{title} \N{EM DASH} {workload}" if workload else title
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{_esc(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        f"<h1>{_esc(heading)}</h1>", _NAV,
        _summary(header, rows, info, source), _best(header, rows), _pareto(header, rows, objectives),
        _axis_summaries(header, rows), _figures(figures),
        f"<footer><p>Written by dfsearch {_esc(__version__)} (dfsearch report).</p></footer>", "</body>", "</html>", "",
    ])  # fmt: skip
    return page.encode("ascii", "xmlcharrefreplace").decode("ascii")  # any locale writes it
