"""Figures of a results table: the data inside each figure (axis labels, tick labels,
plotted values), not only that a file appears. Needs matplotlib (the plot extra)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("matplotlib")

from dfsearch.cli import app
from dfsearch.errors import SpecError
from dfsearch.study import plots
from dfsearch.study.table import METRICS, TableWriter, columns, read_table

ACCS, TOPOS, MEMS = ["h100", "sn30"], ["torus2d", "dgx1", "dgx2"], ["ddr", "hbm"]


def fake_table(tmp_path: Path) -> Path:
    """A results table with known values: utilization = 0.1 x (acc + 1) + 0.01 x topo +
    0.5 x mem; point (sn30, dgx2, ddr) infeasible."""
    path = tmp_path / "results.csv"
    with TableWriter(path, columns(["accelerator", "topology", "memory"])) as w:
        i = 0
        for m, mem in enumerate(MEMS):
            for a, acc in enumerate(ACCS):
                for t, topo in enumerate(TOPOS):
                    row = {"point": i, "accelerator": acc, "topology": topo, "memory": mem, "status": "optimal"}
                    if (acc, topo, mem) != ("sn30", "dgx2", "ddr"):
                        row |= {"final_s": 1.0 + i, "utilization": 0.1 * (a + 1) + 0.01 * t + 0.5 * m,
                                "system_cost": 100.0 - i, "system_power": 10.0 + i,
                                "compute_ns": 1.0 + a, "memory_ns": 2.0, "network_ns": 1.0 + t}  # fmt: skip
                    else:
                        row["status"] = "infeasible"
                    w.write(row)
                    i += 1
    return path


def test_heatmap_panels_ticks_and_values(tmp_path):
    header, rows = read_table(fake_table(tmp_path))
    fig = plots.heatmap_figure(header, rows, "utilization")
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["DDR", "HBM"]  # the catalogue's names
    for m, ax in enumerate(panels):
        assert [t.get_text() for t in ax.get_xticklabels()] == ["2-D torus", "DGX-1", "DGX-2"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["H100", "SN30"]
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("topology", "accelerator")
        grid = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
        for a in range(2):
            for t in range(3):
                expected = 0.1 * (a + 1) + 0.01 * t + 0.5 * m
                if (a, t, m) == (1, 2, 0):
                    assert math.isnan(float(grid[a][t]))
                else:
                    assert float(grid[a][t]) == pytest.approx(expected)
    texts = [t.get_text() for t in panels[0].texts]
    assert "-" in texts and "0.21" in texts  # h100 x dgx1 x ddr = 0.1 + 0.01 + 0
    assert "utilization" in fig.get_suptitle()


def test_breakdown_bars_are_fractions(tmp_path):
    header, rows = read_table(fake_table(tmp_path))
    fig = plots.breakdown_figure(header, rows)
    ax = fig.axes[0]
    feasible = [r for r in rows if r["final_s"] is not None]
    bars = ax.patches
    assert len(bars) == 3 * len(feasible)
    n = len(feasible)
    for i, r in enumerate(feasible):
        total = r["compute_ns"] + r["memory_ns"] + r["network_ns"]
        heights = [bars[k * n + i].get_height() for k in range(3)]
        assert heights == pytest.approx([r["compute_ns"] / total, r["memory_ns"] / total, r["network_ns"] / total])
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "H100, 2-D torus, DDR" and "SN30, DGX-2, DDR" not in labels
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["compute", "memory", "network"]


def test_pareto_scatter_marks_the_front(tmp_path):
    header, rows = read_table(fake_table(tmp_path))
    fig = plots.pareto_figure(header, rows, ("throughput", "cost"))
    ax = fig.axes[0]
    points = ax.collections[0].get_offsets()
    assert len(points) == 11
    line = ax.get_lines()[0]
    # cost falls as the point index rises and time grows: every feasible point is on the front
    assert len(line.get_xdata()) == 11
    assert sorted(line.get_xdata()) == pytest.approx(sorted(1.0 / r["final_s"] for r in rows if r["final_s"]))
    assert ax.get_xlabel() == "throughput (batches/s)" and ax.get_ylabel() == "system cost ($)"
    assert ax.get_title() == "11 of 11 points on the Pareto front"


def test_heatmap_metric_must_be_numeric(tmp_path):
    header, rows = read_table(fake_table(tmp_path))
    with pytest.raises(SpecError, match="--metric must be a numeric column"):
        plots.heatmap_figure(header, rows, "status")


@pytest.mark.slow
def test_cli_plot_writes_each_kind(tmp_path):
    fake_table(tmp_path)
    for kind in plots.KINDS:
        r = CliRunner().invoke(app, ["plot", str(tmp_path), "--kind", kind])
        assert r.exit_code == 0, r.output
    assert {p.name for p in tmp_path.glob("*.png")} == {"heatmap_utilization.png", "breakdown.png", "pareto.png", "roofline.png"}
    r = CliRunner().invoke(app, ["plot", str(tmp_path), "--kind", "scatter"])
    assert r.exit_code == 2 and "--kind must be one of" in r.output
    assert set(METRICS) >= {"utilization"}


def test_roofline_points_lie_under_their_roofs(tmp_path):
    """A real sweep (DRAM 100 vs 1555 GB/s, FLOP model vs cycle model): one point per row
    and panel at (FLOP / bytes, FLOP / time), every point under min(peak, OI x bandwidth),
    the roofs drawn for each distinct (peak, bandwidth)."""
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import load_study
    from tests.test_study_sweep import make_study

    axes = '[axes]\n"system.memory.dram_bw_GBps" = [100, 1555]\n"execution.compute_util" = [0, 0.9]\n'
    sweep(load_study(make_study(tmp_path, axes)), tmp_path / "out")
    header, rows = read_table(tmp_path / "out" / "results.csv")
    fig = plots.roofline_figure(header, rows)
    assert len(fig.axes) == 2
    for ax, level, bw in zip(fig.axes, ("memory", "network"), ("dram_bw_GBps", "link_bw_GBps")):
        expected = plots.roofline_points(rows, level)
        assert len(expected) == 4  # every point moves bytes at both levels
        drawn = np.concatenate([c.get_offsets() for c in ax.collections])
        assert np.array(sorted(map(tuple, drawn.tolist()))) == pytest.approx(
            np.array(sorted((x, y) for _, x, y in expected)))
        for r, x, y in expected:
            assert y <= min(r["peak_gflops"], x * r[bw]) * (1 + 1e-9)
            assert y == pytest.approx(r["flop_per_chip"] / r["all_config_ii_ns"])
        roofs = {(r["peak_gflops"], r[bw]) for r, _, _ in expected}
        lines = ax.get_lines()
        assert len(lines) == len(roofs)
        for line, (peak, b) in zip(lines, sorted(roofs)):
            assert line.get_ydata() == pytest.approx(np.minimum(peak, line.get_xdata() * b))
        assert ax.get_ylabel() == "GFLOP/s per chip (one graph execution)"
        assert ax.get_xlabel().startswith("operational intensity over") and ax.get_xscale() == "log"
    mem = {r["system.memory.dram_bw_GBps"]: r for r, _, _ in plots.roofline_points(rows, "memory") if r["execution.compute_util"] == 0.9}
    # the same mapping's DRAM bytes: same FLOP, memory time x bandwidth
    assert mem[100]["flop_per_chip"] == pytest.approx(mem[1555]["flop_per_chip"])
    assert sum(r["flop_per_chip"] > 0 for r in rows) == 4


def test_roofline_needs_the_new_columns(tmp_path):
    header, rows = read_table(fake_table(tmp_path))
    header = [c for c in header if c != "flop_per_chip"]
    with pytest.raises(SpecError, match="roofline needs the columns"):
        plots.roofline_figure(header, rows)
