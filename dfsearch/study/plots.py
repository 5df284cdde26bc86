"""Figures of a results table (optional extra ``dfsearch[plot]``: matplotlib).

* ``heatmap``: a metric per (first axis x second axis), by default accelerator x topology,
  one panel per combination of the other axes (memory/interconnect pairs in the paper's grid);
  infeasible cells are blank and marked "-".
* ``breakdown``: per point, stacked bars of the compute, memory and network time of its
  configurations (sums over configurations, as fractions of their total).
* ``pareto``: every feasible point by two objectives, the exact front highlighted.
* ``roofline``: the hierarchical roofline, GFLOP/s per chip against operational intensity
  over DRAM and over the network, one point per mapping, with each system's roofs.

Each ``*_figure`` function returns a matplotlib ``Figure`` (Agg canvas, no display needed);
``save`` writes it. matplotlib is imported only here, only when a figure is made.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dfsearch.errors import Issue, SolverUnavailableError, SpecError
from dfsearch.study.pareto import OBJECTIVES, pareto_front
from dfsearch.study.table import FLOAT_COLUMNS, INT_COLUMNS, METRICS

__all__ = ["KINDS", "heatmap_figure", "breakdown_figure", "pareto_figure", "roofline_figure", "roofline_points", "save"]

KINDS = ("heatmap", "breakdown", "pareto", "roofline")
#: image formats of ``--output`` (by extension) when matplotlib cannot be asked (``formats``)
FORMATS = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".ps")
#: figure limits: a figure's size grows with what it draws, so a large table is refused
#: (heatmap, breakdown) or drawn without per-point labels (pareto, roofline)
MAX_PANELS, MAX_VALUES, MAX_BARS, MAX_LABELS = 16, 60, 500, 40
#: the largest figure side (inches; 120 dots per inch)
MAX_INCHES = 30.0
_PREFERRED = ("accelerator", "topology")
_LABELS = {
    "final_s": "time per batch (s)", "throughput_per_s": "throughput (batches/s)",
    "utilization": "utilization", "system_cost": "system cost ($)", "system_power": "system power (W)",
    "cost_efficiency": "cost efficiency (GFLOP/s per $)", "power_efficiency": "power efficiency (GFLOP/s per W)",
}  # fmt: skip


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
        "pareto": ("final_s", "system_cost", "system_power"),
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


def heatmap_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]], metric: str) -> Any:
    """One heat map panel per combination of the axes other than the two shown."""
    _numeric(metric)
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
    cols = min(len(panels), 2)
    nrows = math.ceil(len(panels) / cols)
    width = max(5.5, 0.8 * len(xs) + 3.0)
    fig = _figure(figsize=(width * cols, 0.5 * len(ys) * nrows + 2.0 * nrows), layout="constrained")
    values = [r[metric] for r in rows if r[metric] is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    grids = {key: [[math.nan] * len(xs) for _ in ys] for key in panels}
    y_at, x_at = {y: i for i, y in enumerate(ys)}, {x: i for i, x in enumerate(xs)}
    for r in rows:
        if r[metric] is not None:
            grids[tuple(r[o] for o in others)][y_at[r[y_name]]][x_at[r[x_name]]] = float(r[metric])
    for i, key in enumerate(panels):
        ax = fig.add_subplot(nrows, cols, i + 1)
        grid = grids[key]
        image = ax.imshow(grid, cmap="viridis", vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_yticks(range(len(ys)), [str(y) for y in ys])
        ax.set_xlabel(x_name)
        ax.set_ylabel(y_name)
        ax.set_title(", ".join(f"{o}={v}" for o, v in zip(others, key)) or metric)
        for (yi, xi) in itertools.product(range(len(ys)), range(len(xs))):
            v = grid[yi][xi]
            text = "-" if math.isnan(v) else (f"{v:.0f}" if 100 <= abs(v) < 1e5 else f"{v:.3g}")
            ax.text(xi, yi, text, ha="center", va="center", fontsize=7,
                    color="white" if not math.isnan(v) and v < (lo + hi) / 2 else "black")  # fmt: skip
    fig.colorbar(image, ax=fig.axes, label=_LABELS.get(metric, metric))
    fig.suptitle(f"{_LABELS.get(metric, metric)} per {y_name} x {x_name}")
    return fig


def _point_label(row: Mapping[str, Any], axes: Sequence[str]) -> str:
    return "/".join(str(row[a]) for a in axes) or str(row["point"])


def breakdown_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Any:
    """Stacked fractions of compute, memory and network time per feasible point."""
    axes = _axes_of(header)
    feasible = [r for r in rows if r["final_s"] is not None]
    if len(feasible) > MAX_BARS:
        raise _too_many("breakdown", "one bar per feasible point", len(feasible), MAX_BARS)
    fig = _figure(figsize=(max(6.0, 0.3 * len(feasible) + 2.0), 4.5), layout="constrained")
    ax = fig.add_subplot()
    bottom = [0.0] * len(feasible)
    totals = [sum(r[c] or 0.0 for c in ("compute_ns", "memory_ns", "network_ns")) or 1.0 for r in feasible]
    for column, name in (("compute_ns", "compute"), ("memory_ns", "memory"), ("network_ns", "network")):
        heights = [(r[column] or 0.0) / t for r, t in zip(feasible, totals)]
        ax.bar(range(len(feasible)), heights, bottom=bottom, label=name)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(feasible)), [_point_label(r, axes) for r in feasible], rotation=90, fontsize=7)
    ax.set_ylabel("share of configuration time")
    ax.set_xlabel(" / ".join(axes) or "point")
    ax.set_title("compute / memory / network time per point (sums over configurations)")
    ax.set_xlim(-0.6, len(feasible) - 0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def pareto_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]], objectives: Sequence[str]) -> Any:
    """Feasible points by the first two objectives; the exact front (over all given
    objectives) highlighted."""
    x_name, y_name = objectives[0], objectives[1]
    feasible = [r for r in rows if r["final_s"] is not None]
    front = pareto_front(rows, objectives)

    def value(r: Mapping[str, Any], name: str) -> float:
        return 1.0 / r["final_s"] if name == "throughput" else float(r[OBJECTIVES[name][0]])

    fig = _figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter([value(r, x_name) for r in feasible], [value(r, y_name) for r in feasible],
               color="lightgray", label="points")  # fmt: skip
    ordered = sorted(front, key=lambda r: value(r, x_name))
    ax.plot([value(r, x_name) for r in ordered], [value(r, y_name) for r in ordered], "o-",
            color="tab:red", label=f"Pareto front ({', '.join(objectives)})")  # fmt: skip
    axes = _axes_of(header)
    for r in ordered[:MAX_LABELS]:  # a label per front point while they stay readable
        ax.annotate(_point_label(r, axes), (value(r, x_name), value(r, y_name)), fontsize=6)
    unit = {"throughput": "throughput (batches/s)", "cost": "system cost ($)", "power": "system power (W)"}
    ax.set_xlabel(unit[x_name])
    ax.set_ylabel(unit[y_name])
    for name, setter in ((x_name, ax.set_xscale), (y_name, ax.set_yscale)):
        span = [value(r, name) for r in feasible]
        if span and min(span) > 0 and max(span) / min(span) > 100:
            setter("log")  # the paper's grid spans 3 orders of magnitude of cost
    ax.set_title(f"{len(front)} of {len(feasible)} points on the Pareto front")
    ax.legend()
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


def roofline_figure(header: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Any:
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
                           label=str(g) if group else "points")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"operational intensity over {title} (FLOP/byte)")
        ax.set_ylabel("GFLOP/s per chip (one graph execution)")
        ax.set_title(f"{title}: {len(points)} points")
        if points:
            ax.legend(fontsize=7, title=group)
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
