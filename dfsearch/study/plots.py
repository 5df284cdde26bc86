"""Figures of a results table (optional extra ``dfsearch[plot]``: matplotlib).

* ``heatmap``: a metric per (first axis x second axis), by default accelerator x topology,
  one panel per combination of the other axes (memory/interconnect pairs in the paper's grid);
  infeasible cells are blank and marked "-".
* ``breakdown``: per point, stacked bars of the compute, memory and network time of its
  configurations (sums over configurations, as fractions of their total).
* ``pareto``: every feasible point by two objectives, the exact front highlighted, its best
  point of each objective and its knee labelled (:func:`pareto_extremes`).
* ``roofline``: the hierarchical roofline, GFLOP/s per chip against operational intensity
  over DRAM and over the network, one point per mapping, with each system's roofs.

Labels are names people know (:mod:`dfsearch.study.names`: "H100", "2-D torus", "DRAM
bandwidth (GB/s)", "TP8 PP128 DP1"), titles name the workload when given (``workload=``), and
an axis or colour scale is logarithmic when its values span more than a decade (:func:`log_scale`).

Each ``*_figure`` function returns a matplotlib ``Figure`` (Agg canvas, no display needed);
``save`` writes it. matplotlib is imported only here, only when a figure is made.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dfsearch.errors import Issue, SolverUnavailableError, SpecError
from dfsearch.study import names
from dfsearch.study.pareto import OBJECTIVES, pareto_front
from dfsearch.study.table import FLOAT_COLUMNS, INT_COLUMNS, METRICS

__all__ = [
    "KINDS", "heatmap_figure", "breakdown_figure", "pareto_figure", "roofline_figure", "roofline_points",
    "pareto_extremes", "log_scale", "save", "png_bytes",
]  # fmt: skip

KINDS = ("heatmap", "breakdown", "pareto", "roofline")
#: image formats of ``--output`` (by extension) when matplotlib cannot be asked (``formats``)
FORMATS = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".ps")
#: figure limits: a figure's size grows with what it draws, so a large table is refused
#: (heatmap, breakdown) or drawn without per-point labels (pareto, roofline)
MAX_PANELS, MAX_VALUES, MAX_BARS, MAX_LABELS = 16, 60, 500, 40
#: the largest figure side (inches; 120 dots per inch)
MAX_INCHES = 30.0
_PREFERRED = ("accelerator", "topology")
#: the catalogue axes: a panel title names their values alone (``DDR, PCIe``)
_PRESET_AXES = ("accelerator", "memory", "interconnect", "topology", "style")
#: a range wider than this (max / min) is drawn on a log scale: more than one decade
LOG_SPAN = 10.0
#: the objective -> its table column as an axis label (throughput is drawn as throughput_per_s)
_OBJECTIVE_COLUMN = {"throughput": "throughput_per_s", "cost": "system_cost", "power": "system_power"}


def _figure(**kwargs: Any) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SolverUnavailableError(
            "plots need matplotlib: pip install \"dfsearch[plot]\" (or pip install matplotlib)."
        ) from None
    if "figsize" in kwargs:
        kwargs["figsize"] = tuple(min(v, MAX_INCHES) for v in kwargs["figsize"])
    return Figure(**kwargs)


def _axes_of(header: Sequence[str]) -> list[str]:
    return [c for c in header if c != "point" and c not in METRICS]


def _distinct(rows: Sequence[Mapping[str, Any]], name: str) -> list[Any]:
    """The values of column ``name`` in first-seen order (one pass, hashing)."""
    return list(dict.fromkeys(r[name] for r in rows))


def _too_many(kind: str, what: str, count: int, limit: int) -> SpecError:
    msg = (f"{kind} draws {what}: this table has {count:,}, more than {limit:,} fit in a readable "
           "figure. Plot a smaller table (a study with fewer values), or choose another --kind.")  # fmt: skip
    return SpecError(Issue("--kind", msg))


def columns_of(kind: str, metric: str) -> tuple[str, ...]:
    """The metric columns a figure of ``kind`` reads (with ``point`` and the axes)."""
    return {
        "heatmap": ("final_s", metric), "breakdown": ("final_s", "compute_ns", "memory_ns", "network_ns"),
        "pareto": ("final_s", "system_cost", "system_power", "tp", "pp", "dp"),
        "roofline": ("final_s", "flop_per_chip", "all_config_ii_ns", "dram_bytes_per_chip", "network_bytes_per_chip",
                     "peak_gflops", "dram_bw_GBps", "link_bw_GBps"),
    }[kind]  # fmt: skip


def formats() -> tuple[str, ...]:
    """The extensions ``--output`` may have: matplotlib's formats (:data:`FORMATS` without it)."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return FORMATS
    return tuple(f".{f}" for f in sorted(FigureCanvasBase.get_supported_filetypes()))


def format_problem(path: str | Path) -> str | None:
    """Why a figure cannot be written to ``path`` (its extension names no format), or None."""
    suffix = Path(path).suffix.lower()
    known = formats()
    if suffix in known:
        return None
    got = f"{suffix!r}" if suffix else "no extension"
    return f"the file extension must name an image format: {', '.join(known)}. Got {got} instead."


def _numeric(metric: str) -> None:
    if metric not in FLOAT_COLUMNS | (INT_COLUMNS - {"point", "seed"}):
        allowed = ", ".join(m for m in METRICS if m in FLOAT_COLUMNS or m in INT_COLUMNS)
        raise SpecError(Issue("--metric", f"must be a numeric column of the table: {allowed}. Got {metric!r} instead."))


def log_scale(values: Sequence[float]) -> bool:
    """Whether ``values`` are drawn on a log scale: all > 0 and spanning more than one decade
    (max / min > :data:`LOG_SPAN`).

    >>> log_scale([1.0, 5.0]), log_scale([1.0, 50.0]), log_scale([0.0, 50.0])
    (False, True, False)
    """
    return bool(values) and min(values) > 0 and max(values) / min(values) > LOG_SPAN


def _titled(workload: str | None, what: str) -> str:
    return f"{workload} \N{EM DASH} {what}" if workload else what


def _panel_title(others: Sequence[str], key: tuple[Any, ...]) -> str:
    """A panel by the other axes' values: a preset by its name alone (``DDR, PCIe``), any
    other axis with its name (``DRAM bandwidth 100 GB/s``)."""
    parts = []
    for o, v in zip(others, key):
        text = names.value_name(o, v)
        parts.append(text if o in _PRESET_AXES else f"{names.axis_name(o)} {text}")
    return ", ".join(parts)


def _heat_layout(header: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> tuple[str, str, list[str], list[Any], list[Any], list[tuple[Any, ...]]]:
    """(y axis, x axis, other axes, y values, x values, panels), checked against the limits."""
    axes = _axes_of(header)
    if len(axes) < 2:
        raise SpecError(Issue("--kind", f"heatmap needs a table with at least 2 axes. Got {len(axes)} ({', '.join(axes)})."))
    shown = [a for a in _PREFERRED if a in axes] if all(a in axes for a in _PREFERRED) else axes[:2]
    y_name, x_name = shown
    others = [a for a in axes if a not in shown]
    ys, xs = _distinct(rows, y_name), _distinct(rows, x_name)
    panels = list(itertools.product(*[_distinct(rows, o) for o in others])) or [()]
    if len(panels) > MAX_PANELS:
        raise _too_many("heatmap", f"one panel per combination of {', '.join(others)}", len(panels), MAX_PANELS)
    for name, values in ((y_name, ys), (x_name, xs)):
        if len(values) > MAX_VALUES:
            raise _too_many("heatmap", f"one row or column per value of {name}", len(values), MAX_VALUES)
    return y_name, x_name, others, ys, xs, panels


def heatmap_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]], metric: str, workload: str | None = None) -> Any:
    """One figure of one metric, titled ``<workload> — <metric> (<unit>)``: a heat map panel
    per combination of the axes other than the two shown, ticks and panel titles by the names
    of the catalogue entries and values (:mod:`dfsearch.study.names`), a colour bar with the
    metric and its unit (a log scale when the values span more than a decade)."""
    _numeric(metric)
    y_name, x_name, others, ys, xs, panels = _heat_layout(header, rows)
    values = [float(r[metric]) for r in rows if r[metric] is not None]
    if not values:
        raise SpecError(Issue("--metric", f"{metric}: the table has no value of this column (empty in every row)."))
    cols = min(len(panels), 2)
    nrows = math.ceil(len(panels) / cols)
    width = max(5.5, 0.9 * len(xs) + 3.0)
    fig = _figure(figsize=(width * cols, 0.5 * len(ys) * nrows + 2.0 * nrows + 0.4), layout="constrained")
    lo, hi = min(values), max(values)
    norm = _norm(lo, hi, log_scale(values))
    grids = {key: [[math.nan] * len(xs) for _ in ys] for key in panels}
    y_at, x_at = {y: i for i, y in enumerate(ys)}, {x: i for i, x in enumerate(xs)}
    for r in rows:
        if r[metric] is not None:
            grids[tuple(r[o] for o in others)][y_at[r[y_name]]][x_at[r[x_name]]] = float(r[metric])
    for i, key in enumerate(panels):
        ax = fig.add_subplot(nrows, cols, i + 1)
        grid = grids[key]
        image = ax.imshow(grid, cmap="viridis", norm=norm, aspect="auto")
        ax.set_xticks(range(len(xs)), [names.value_name(x_name, x) for x in xs])
        ax.set_yticks(range(len(ys)), [names.value_name(y_name, y) for y in ys])
        ax.set_xlabel(names.axis_title(x_name))
        ax.set_ylabel(names.axis_title(y_name))
        if others:
            ax.set_title(_panel_title(others, key), fontsize=10)
        for yi, xi in itertools.product(range(len(ys)), range(len(xs))):
            v = grid[yi][xi]
            text = "-" if math.isnan(v) else (f"{v:.0f}" if 100 <= abs(v) < 1e5 else f"{v:.3g}")
            dark = not math.isnan(v) and float(norm(v)) < 0.5
            ax.text(xi, yi, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    bar = fig.colorbar(image, ax=fig.axes, label=names.metric_title(metric))
    if log_scale(values):
        _plain_log_ticks(bar.ax.yaxis)
    fig.suptitle(_titled(workload, names.metric_title(metric)))
    return fig


def _plain_log_ticks(axis: Any) -> None:
    """Ticks at 1, 2, 5 x 10^k written as plain numbers (``0.02``, ``500``, ``5M``), not ``10^-2``."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: names.tick(v)))
    axis.set_minor_formatter(NullFormatter())


def _norm(lo: float, hi: float, log: bool) -> Any:
    from matplotlib.colors import LogNorm, Normalize

    return LogNorm(vmin=lo, vmax=hi) if log else Normalize(vmin=lo, vmax=hi)


def _point_label(row: Mapping[str, Any], axes: Sequence[str]) -> str:
    return names.point_name(row, axes, mapping=False)


def breakdown_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]], workload: str | None = None) -> Any:
    """Stacked fractions of compute, memory and network time per feasible point."""
    axes = _axes_of(header)
    feasible = [r for r in rows if r["final_s"] is not None]
    if len(feasible) > MAX_BARS:
        raise _too_many("breakdown", "one bar per feasible point", len(feasible), MAX_BARS)
    fig = _figure(figsize=(max(6.0, 0.3 * len(feasible) + 2.0), 5.5), layout="constrained")
    ax = fig.add_subplot()
    bottom = [0.0] * len(feasible)
    totals = [sum(r[c] or 0.0 for c in ("compute_ns", "memory_ns", "network_ns")) or 1.0 for r in feasible]
    for column, name in (("compute_ns", "compute"), ("memory_ns", "memory"), ("network_ns", "network")):
        heights = [(r[column] or 0.0) / t for r, t in zip(feasible, totals)]
        ax.bar(range(len(feasible)), heights, bottom=bottom, label=name)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(feasible)), [_point_label(r, axes) for r in feasible], rotation=90, fontsize=7)
    ax.set_ylabel("share of configuration time")
    ax.set_xlabel(", ".join(names.axis_name(a) for a in axes) or "point")
    ax.set_title(_titled(workload, "compute, memory and network time per point (sums over configurations)"))
    ax.set_xlim(-0.6, len(feasible) - 0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _objective_value(row: Mapping[str, Any], name: str) -> float:
    """The value drawn for an objective: throughput as 1 / final_s, cost and power as they are."""
    return 1.0 / row["final_s"] if name == "throughput" else float(row[OBJECTIVES[name][0]])


def pareto_extremes(front: Sequence[Mapping[str, Any]], x_name: str, y_name: str,
                    log_x: bool = False, log_y: bool = False) -> dict[str, Mapping[str, Any]]:
    """The front's points worth a label: ``best <x>`` and ``best <y>`` (highest throughput,
    lowest cost or power; the first in table order on a tie) and, with 3 or more distinct
    points, the ``knee``: the point farthest from the straight line joining the two best
    points on the side of the best corner (both best values), in the drawn coordinates (log10
    on a log axis) scaled to the unit square.

    >>> front = [{"point": i, "final_s": t, "system_cost": c, "system_power": 1.0}
    ...          for i, (t, c) in enumerate([(1.0, 100.0), (2.0, 20.0), (4.0, 15.0), (8.0, 1.0)])]
    >>> {k: r["point"] for k, r in pareto_extremes(front, "throughput", "cost").items()}
    {'best throughput': 0, 'best cost': 3, 'knee': 1}
    """
    if not front:
        return {}

    def drawn(r: Mapping[str, Any], name: str, log: bool) -> float:
        v = _objective_value(r, name)
        return math.log10(v) if log else v

    def better(name: str) -> float:
        return -1.0 if name == "throughput" else 1.0  # throughput: higher is better

    best_x = min(front, key=lambda r: better(x_name) * _objective_value(r, x_name))
    best_y = min(front, key=lambda r: better(y_name) * _objective_value(r, y_name))
    out = {f"best {x_name}": best_x, f"best {y_name}": best_y}
    pts = [(drawn(r, x_name, log_x), drawn(r, y_name, log_y)) for r in front]
    (x0, y0), (x1, y1) = (drawn(best_x, x_name, log_x), drawn(best_x, y_name, log_y)), (drawn(best_y, x_name, log_x), drawn(best_y, y_name, log_y))
    sx, sy = (max(p[0] for p in pts) - min(p[0] for p in pts)) or 1.0, (max(p[1] for p in pts) - min(p[1] for p in pts)) or 1.0
    dx, dy = (x1 - x0) / sx, (y1 - y0) / sy
    length = math.hypot(dx, dy)
    if length == 0 or len(set(pts)) < 3:
        return out
    def side(x: float, y: float) -> float:  # signed distance from the line, scaled
        return (dx * (y - y0) / sy - dy * (x - x0) / sx) / length

    ideal = side(x0, y1)  # the corner with both best values: the knee bulges towards it
    distance = [side(*p) * (1.0 if ideal > 0 else -1.0) for p in pts]
    knee = max(range(len(front)), key=lambda i: (distance[i], -i))
    if distance[knee] > 0 and front[knee] is not best_x and front[knee] is not best_y:
        out["knee"] = front[knee]
    return out


def _label_extremes(ax: Any, marks: Mapping[str, Mapping[str, Any]], axes: Sequence[str], x_name: str, y_name: str) -> None:
    """An annotation per extreme: what it is, the point by name and its parallelism, placed
    towards the middle of the plot so that it stays inside the figure."""
    x_lo, x_hi = ax.get_xlim()
    y_lo, y_hi = ax.get_ylim()
    log_x, log_y = ax.get_xscale() == "log", ax.get_yscale() == "log"

    def frac(v: float, lo: float, hi: float, log: bool) -> float:
        return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) if log else (v - lo) / (hi - lo)

    for k, (what, r) in enumerate(marks.items()):
        x, y = _objective_value(r, x_name), _objective_value(r, y_name)
        right = frac(x, x_lo, x_hi, log_x) > 0.5
        up = frac(y, y_lo, y_hi, log_y) > 0.5
        offset = (-12 if right else 12, (-18 if up else 18) - 6 * k)
        ax.annotate(f"{what}\n{names.point_name(r, axes)}", (x, y), xytext=offset, textcoords="offset points",
                    ha="right" if right else "left", va="top" if up else "bottom", fontsize=7,
                    bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "0.6", "alpha": 0.9},
                    arrowprops={"arrowstyle": "-", "color": "0.4", "lw": 0.7})  # fmt: skip


def pareto_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]], objectives: Sequence[str],
                  workload: str | None = None) -> Any:
    """Feasible points by the first two objectives, the exact front (over all given
    objectives) highlighted; each axis on a log scale when its values span more than a
    decade; the best point of each drawn objective and the front's knee labelled by name
    and parallelism (:func:`pareto_extremes`)."""
    x_name, y_name = objectives[0], objectives[1]
    feasible = [r for r in rows if r["final_s"] is not None]
    front = pareto_front(rows, objectives)
    fig = _figure(figsize=(8.0, 5.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter([_objective_value(r, x_name) for r in feasible], [_objective_value(r, y_name) for r in feasible],
               color="lightgray", label=f"points ({len(feasible)})")  # fmt: skip
    ordered = sorted(front, key=lambda r: _objective_value(r, x_name))
    ax.plot([_objective_value(r, x_name) for r in ordered], [_objective_value(r, y_name) for r in ordered], "o-",
            color="tab:red", label=f"Pareto front ({len(front)}; {', '.join(objectives)})")  # fmt: skip
    ax.set_xlabel(names.metric_title(_OBJECTIVE_COLUMN[x_name]))
    ax.set_ylabel(names.metric_title(_OBJECTIVE_COLUMN[y_name]))
    logs = []
    for name, setter, axis in ((x_name, ax.set_xscale, ax.xaxis), (y_name, ax.set_yscale, ax.yaxis)):
        logs.append(log_scale([_objective_value(r, name) for r in feasible]))
        if logs[-1]:
            setter("log")
            _plain_log_ticks(axis)
    ax.margins(0.08)
    ax.set_title(_titled(workload, f"{len(front)} of {len(feasible)} points on the Pareto front"))
    ax.grid(True, which="major", color="0.9", lw=0.6)
    _label_extremes(ax, pareto_extremes(ordered, x_name, y_name, *logs), _axes_of(header), x_name, y_name)
    ax.legend(loc="best", fontsize=8)
    return fig


def roofline_points(rows: Sequence[Mapping[str, Any]], level: str) -> list[tuple[Mapping[str, Any], float, float]]:
    """(row, operational intensity in FLOP/byte, GFLOP/s per chip) of every feasible row with
    traffic at ``level`` (``"memory"``: DRAM bytes, ``"network"``: network bytes at the first
    dimension's link bandwidth), for one execution of the graph on one chip
    (dfsearch.study.point.roofline_cells)."""
    column = "dram_bytes_per_chip" if level == "memory" else "network_bytes_per_chip"
    out = []
    for r in rows:
        flop, t, moved = r.get("flop_per_chip"), r.get("all_config_ii_ns"), r.get(column)
        if r.get("final_s") is None or not flop or not t or not moved:
            continue
        out.append((r, flop / moved, flop / t))  # FLOP per ns = GFLOP/s
    return out


def roofline_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]], workload: str | None = None) -> Any:
    """The hierarchical roofline: GFLOP/s per chip against operational intensity over DRAM
    (left) and over the network (right), one point per point's mapping, coloured by the
    first axis; each distinct (peak, bandwidth) pair draws its roof min(peak, OI x bandwidth).
    A point with no traffic at a level (everything on chip) is left out of that panel."""
    if "flop_per_chip" not in header:
        raise SpecError(Issue("--kind", "roofline needs the columns flop_per_chip, dram_bytes_per_chip, ... of a table written by this version of 'dfsearch sweep'; run the sweep again with --fresh."))
    axes = _axes_of(header)
    group = axes[0] if axes and len(_distinct(rows, axes[0])) <= MAX_LABELS else None
    fig = _figure(figsize=(11.0, 4.5), layout="constrained")
    colours = itertools.cycle(f"C{i}" for i in range(10))
    colour = {g: next(colours) for g in (_distinct(rows, group) if group else [None])}
    for k, (level, bw_column, title) in enumerate((("memory", "dram_bw_GBps", "DRAM"), ("network", "link_bw_GBps", "network (first dimension's link)"))):
        ax = fig.add_subplot(1, 2, k + 1)
        points = roofline_points(rows, level)
        xs = [x for _, x, _ in points] or [1.0]
        span = np.geomspace(min(xs) / 10.0, max(xs) * 10.0, 200)
        for peak, bw in sorted({(r["peak_gflops"], r[bw_column]) for r, _, _ in points}):
            ax.plot(span, np.minimum(peak, span * bw), "-", color="gray", lw=0.8, label="_roof")
        for g in colour:
            mine = [(x, y) for r, x, y in points if group is None or r[group] == g]
            if mine:
                ax.scatter([x for x, _ in mine], [y for _, y in mine], color=colour[g], s=18,
                           label=names.value_name(group, g) if group else "points")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"operational intensity over {title} (FLOP/byte)")
        ax.set_ylabel("GFLOP/s per chip (one graph execution)")
        ax.set_title(f"{title}: {len(points)} points")
        if points:
            ax.legend(fontsize=7, title=names.axis_name(group) if group else None)
    if workload:
        fig.suptitle(_titled(workload, "hierarchical roofline"))
    return fig


def save(fig: Any, path: str | Path) -> None:
    """Write ``fig`` to ``path`` (its format from the extension: :func:`format_problem`).

    Raises
    ------
    SpecError
        The extension names no format, or the file cannot be written (exit 2).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if (problem := format_problem(path)) is not None:
        raise SpecError(Issue("--output", f"{path}: {problem}"))
    FigureCanvasAgg(fig)
    try:
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise SpecError(Issue("--output", f"{path}: cannot write: {e.strerror or e}.")) from None


def png_bytes(fig: Any, dpi: int = 100) -> bytes:
    """``fig`` as PNG bytes (for an HTML page), without the matplotlib version in its
    metadata: the same figure gives the same bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()
