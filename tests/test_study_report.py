"""The figures' labels (names people know, log axes, labelled extremes) and the HTML report of
a study (``dfsearch report RESULTS --html OUT``), with and without matplotlib."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.study import about, html_report, names, plots
from dfsearch.study.table import TableWriter, columns, read_table

ACCS, TOPOS, LINKS = ["h100", "sn30"], ["torus2d", "dgx1"], ["pcie", "nvlink_all"]
#: catalogue keys a user never types: none may reach a figure or the page
INTERNAL = ("nvlink_all", "tpu_v4", "torus2d", "torus3d", "dgx1", "dgx2", "kernel_by_kernel", "h100", "sn30", "wse2")
FAILED = ("sn30", "dgx1", "pcie")
WHY = "SRAM: the configuration needs 1.5 x the chip's SRAM"
INFO = about.StudyInfo(
    name="toy", file="toy.toml", description="a toy grid", workload="DLRM, 600 tables",
    workload_detail="DLRM: 600 tables", axes=(("accelerator", tuple(ACCS)), ("topology", tuple(TOPOS)),
                                              ("interconnect", tuple(LINKS))),
    combine="cross", filters=(), points=8,
)  # fmt: skip


def _row(i: int, a: int, t: int, k: int) -> dict:
    """A feasible row whose numbers follow from its position: final_s = 10 / (1 + i) (the
    throughput spans 1 to 0.8 batches/s ... 0.1), cost = 100 x 3^a + 10 t, so every column is known."""
    final = 10.0 / (1 + i)
    cost = 100.0 * 3**a + 10.0 * t + k
    return {
        "status": "optimal", "final_s": final, "throughput_per_s": 1 / final, "utilization": 0.1 + 0.1 * i,
        "system_cost": cost, "system_power": 5.0 + i, "cost_efficiency": 1.0 / (final * cost),
        "power_efficiency": 2.0 + i, "tp": 2 ** (1 + a), "pp": 4, "dp": 1 + k,
        "compute_ns": 1.0 + a, "memory_ns": 2.0, "network_ns": 1.0 + t,
        "flop_per_chip": 1e9, "all_config_ii_ns": 1e4, "dram_bytes_per_chip": 1e6 * (1 + a),
        "network_bytes_per_chip": 1e5, "peak_gflops": 2e5, "dram_bw_GBps": 1e3, "link_bw_GBps": 50.0,
    }  # fmt: skip


def toy_table(folder: Path, info: bool = True) -> tuple[Path, list[dict]]:
    """8 points (accelerator x topology x interconnect), one infeasible (FAILED, with WHY)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    with TableWriter(folder / "results.csv", columns(["accelerator", "topology", "interconnect"])) as w:
        for a, acc in enumerate(ACCS):
            for t, topo in enumerate(TOPOS):
                for k, link in enumerate(LINKS):
                    i = len(rows)
                    row = {"point": i, "accelerator": acc, "topology": topo, "interconnect": link}
                    if (acc, topo, link) == FAILED:
                        row |= {"status": "infeasible", "message": WHY}
                    else:
                        row |= _row(i, a, t, k)
                    w.write(row)
                    rows.append(row)
    if info:
        about.write_info(folder, INFO)
    return folder, rows


def _dominated(r: dict, rows: list[dict]) -> bool:
    """Brute force: another feasible row at least as fast and as cheap, better in one."""
    return any(o is not r and o["final_s"] <= r["final_s"] and o["system_cost"] <= r["system_cost"]
               and (o["final_s"] < r["final_s"] or o["system_cost"] < r["system_cost"])
               for o in rows if o.get("final_s") is not None)  # fmt: skip


def _section(page: str, ident: str) -> str:
    start = page.index(f'id="{ident}"')
    return page[start:page.index("</table>", start)]


def test_html_report_has_every_table_and_an_img_per_figure(tmp_path):
    folder, rows = toy_table(tmp_path / "r")
    out = tmp_path / "study.html"
    r = CliRunner().invoke(app, ["report", str(folder), "--html", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="ascii")
    for ident in ("summary-table", "failures", "best-points", "pareto-set", "axis-accelerator", "axis-topology",
                  "axis-interconnect"):  # fmt: skip
        assert f'<table id="{ident}">' in page, ident
    # one embedded PNG per figure: a heat map per metric, the Pareto plot, the breakdown, the roofline
    captions = [f"Heat map: {names.metric_title(m)}" for m in html_report.HEATMAP_METRICS]
    captions += ["Pareto plot: throughput, cost", "Compute, memory and network time per point", "Hierarchical roofline"]
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert [html.unescape(alt) for alt, _ in images] == captions
    assert all(len(data) > 1000 for _, data in images)
    assert not re.search(r'(src|href)="(?!data:|#)', page) and "<script" not in page  # nothing to fetch
    for anchor in re.findall(r'href="#([^"]+)"', page):
        assert f'id="{anchor}"' in page
    # the summary: workload, counts, failures and why
    summary = _section(page, "summary-table")
    assert "DLRM: 600 tables" in summary and "<th>infeasible (failures)</th><td>1</td>" in summary
    assert WHY.replace("'", "&#x27;") in _section(page, "failures") and "SN30, DGX-1, PCIe" in _section(page, "failures")
    # the Pareto set is the brute-force front, and the best throughput is the last point (i = 7)
    front = {r["point"] for r in rows if r.get("final_s") is not None and not _dominated(r, rows)}
    listed = {int(p) for p in re.findall(r'<tr><td class="num">(\d+)</td>', _section(page, "pareto-set"))}
    assert listed == front
    best = _section(page, "best-points")
    assert re.search(r'<th>highest throughput</th><td class="num">7</td><td>SN30, DGX-1, NVLink, every dimension</td><td>TP4 PP4 DP2</td>', best)
    for internal in INTERNAL:
        assert f">{internal}<" not in page and f"{internal}," not in page


def test_report_is_the_same_twice_and_names_the_folder_without_study_json(tmp_path):
    folder, _ = toy_table(tmp_path / "r", info=False)
    pages = []
    for name in ("a.html", "b.html"):
        assert CliRunner().invoke(app, ["report", str(folder), "--html", str(tmp_path / name)]).exit_code == 0
        pages.append((tmp_path / name).read_bytes())
    assert pages[0] == pages[1]
    r = CliRunner().invoke(app, ["report", str(folder), "--html", "-"])  # to stdout
    assert r.exit_code == 0 and r.stdout.encode("ascii") == pages[0]
    assert b"no study.json" in pages[0] and f"dfsearch study {folder}".encode() in pages[0]


def test_report_without_matplotlib_still_writes_the_tables(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] or ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # import matplotlib... -> ImportError
    with pytest.raises(ImportError):
        import matplotlib.figure  # noqa: F401
    folder, _ = toy_table(tmp_path / "r")
    out = tmp_path / "study.html"
    r = CliRunner().invoke(app, ["report", str(folder), "--html", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="ascii")
    assert "<img" not in page and 'pip install &quot;dfsearch[plot]&quot;' in page
    for ident in ("summary-table", "best-points", "pareto-set", "axis-accelerator"):
        assert f'<table id="{ident}">' in page


def test_report_refuses_a_missing_table_with_exit_2(tmp_path):
    r = CliRunner().invoke(app, ["report", str(tmp_path / "nothing"), "--html", str(tmp_path / "x.html")])
    assert r.exit_code == 2 and "has no results table" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x.html").exists()


# ----------------------------------------------------------------------------- figures
def _texts(fig) -> list[str]:
    out = [fig.get_suptitle()]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    return out


def test_heatmap_ticks_are_names_people_know_never_json(tmp_path):
    """A table-valued axis (JSON cells), a catalogue axis with an internal name (nvlink_all),
    field path numbers: the ticks and titles read as names and units."""
    pytest.importorskip("matplotlib")
    memories = ['{"dram_bw_GBps": 300, "dram_bytes": 100000000000}', '{"dram_bw_GBps": 3072, "dram_bytes": 100000000000}']
    path = tmp_path / "results.csv"
    with TableWriter(path, columns(["system.memory", "interconnect", "system.accelerator.sram_bytes"])) as w:
        i = 0
        for mem in memories:
            for link in LINKS:
                for sram in (150e6, 300e6):
                    w.write({"point": i, "system.memory": mem, "interconnect": link, "system.accelerator.sram_bytes": sram,
                             "status": "optimal", "final_s": 1.0 + i, "utilization": 0.05 + 0.05 * i,
                             "system_cost": 1.0, "system_power": 1.0})  # fmt: skip
                    i += 1
    header, rows = read_table(path)
    fig = plots.heatmap_figure(header, rows, "utilization", workload="LLM training, 174B parameters")
    texts = _texts(fig)
    assert fig.get_suptitle() == "LLM training, 174B parameters \N{EM DASH} utilization (fraction of peak FLOP/s)"
    panels = [ax for ax in fig.axes if ax.images]
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["PCIe", "NVLink, every dimension"]
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["DRAM 300 GB/s, DRAM size 100 GB", "DRAM 3,072 GB/s, DRAM size 100 GB"]
    assert [ax.get_title() for ax in panels] == ["SRAM per chip 150 MB", "SRAM per chip 300 MB"]
    assert fig.axes[-1].get_ylabel() == "utilization (fraction of peak FLOP/s)"  # the colour bar
    for text in texts:
        assert "{" not in text and "nvlink_all" not in text and "sram_bytes" not in text and "e+08" not in text, text


def test_log_axis_when_the_span_exceeds_a_decade(tmp_path):
    pytest.importorskip("matplotlib")
    assert not plots.log_scale([1.0, 10.0]) and plots.log_scale([1.0, 10.01]) and not plots.log_scale([-1.0, 50.0])
    folder, rows = toy_table(tmp_path / "r")
    header, rows = read_table(folder / "results.csv")
    fig = plots.pareto_figure(header, rows, ("throughput", "cost"), workload="DLRM, 600 tables")
    ax = fig.axes[0]
    # throughput 0.1 ... 0.8 batches/s: 8x, linear; cost 100 ... 321 $: linear
    assert (ax.get_xscale(), ax.get_yscale()) == ("linear", "linear")
    fast = [dict(r, final_s=r["final_s"] / 100 if r["point"] == 7 else r["final_s"]) for r in rows]  # 800x
    ax = plots.pareto_figure(header, fast, ("throughput", "power")).axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    assert ax.get_xlabel() == "throughput (batches/s)" and ax.get_ylabel() == "system power (W)"


def test_pareto_labels_its_extremes_by_name_and_parallelism(tmp_path):
    pytest.importorskip("matplotlib")
    folder, _ = toy_table(tmp_path / "r")
    header, rows = read_table(folder / "results.csv")
    fig = plots.pareto_figure(header, rows, ("throughput", "cost"), workload="DLRM, 600 tables")
    ax = fig.axes[0]
    labels = {t.get_text().split("\n")[0]: t.get_text().split("\n")[1] for t in ax.texts}
    # fastest: point 7 (SN30, DGX-1, NVLink all, TP4 PP4 DP2); cheapest: point 0 (H100, 2-D torus, PCIe)
    assert labels["best throughput"] == "SN30, DGX-1, NVLink, every dimension \N{MIDDLE DOT} TP4 PP4 DP2"
    assert labels["best cost"] == "H100, 2-D torus, PCIe \N{MIDDLE DOT} TP2 PP4 DP1"
    assert ax.get_title().startswith("DLRM, 600 tables \N{EM DASH} ")


def test_knee_is_the_front_point_farthest_towards_the_best_corner():
    """Front (throughput, cost): (1, 100) (1/2, 20) (1/4, 15) (1/8, 1). Scaled to the unit
    square the chord runs from (1, 1) to (0, 0); (1/2, 20) -> (3/7, 19/99) lies 0.167 below it
    (towards the best corner (1, 0)), (1/4, 15) -> (1/7, 14/99) 0.001: the knee is the first."""
    front = [{"point": i, "final_s": t, "system_cost": c, "system_power": 1.0}
             for i, (t, c) in enumerate([(1.0, 100.0), (2.0, 20.0), (4.0, 15.0), (8.0, 1.0)])]  # fmt: skip
    marks = plots.pareto_extremes(front, "throughput", "cost")
    assert {k: r["point"] for k, r in marks.items()} == {"best throughput": 0, "best cost": 3, "knee": 1}
    # a front bulging away from the best corner has no knee
    away = [{"point": i, "final_s": t, "system_cost": c, "system_power": 1.0}
            for i, (t, c) in enumerate([(1.0, 100.0), (1.1, 99.0), (8.0, 1.0)])]  # fmt: skip
    assert "knee" not in plots.pareto_extremes(away, "throughput", "cost")


def test_workload_names_from_their_sizes():
    """Parameters of the transformer layers, 12 x hidden^2 x layers: GPT-3 1T (25600, 128)
    gives 1.007e12, GPT-3 175B (12288, 96) 1.74e11."""
    from dfsearch.workload_specs import FFTWorkload, HPLWorkload, LLMWorkload

    def llm(h: int, layers: int) -> LLMWorkload:
        return LLMWorkload(hidden_dim=h, head_dim=128, num_head=h // 128, seq_len=2048, num_layer=layers, global_batch_size=8)

    assert names.workload_name(llm(25600, 128)) == "LLM training, 1.0T parameters"
    assert names.workload_name(llm(12288, 96)) == "LLM training, 174B parameters"
    assert names.workload_name(HPLWorkload(n=1048576, b=2048)) == "HPL, n = 1,048,576"
    assert names.workload_name(FFTWorkload(length=2**40)) == "FFT, 2^40 points"


def test_sweep_keeps_the_study_for_the_titles_and_report_reads_it(tmp_path):
    """'dfsearch sweep' writes DIR/study.json (the workload and axes); 'dfsearch report' titles
    its page and figures with them, and --study gives them for a folder without it."""
    from tests.test_study_sweep import make_study

    study = make_study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [100, 1555]\n', head='name = "bw"')
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    info = about.read_info(out)
    assert info is not None and info.name == "bw" and info.points == 2
    assert info.axes == (("system.memory.dram_bw_GBps", (100, 1555)),)
    assert info.workload == "LLM training, 1.2B parameters"  # GPT-3 1.5B's layers: 12 x 2048^2 x 24 = 1.21e9
    assert info.workload_detail.startswith("LLM: hidden 2048, ")
    page_of = {}
    for name, extra in (("saved", []), ("given", ["--study", str(study)])):
        if name == "given":
            (out / about.INFO_NAME).unlink()
        dest = tmp_path / f"{name}.html"
        r = CliRunner().invoke(app, ["report", str(out), "--html", str(dest), *extra])
        assert r.exit_code == 0, r.output
        page_of[name] = dest.read_text(encoding="ascii")
        assert f"<h1>dfsearch study bw &#8212; {html.escape(info.workload)}</h1>" in page_of[name]
        assert "<th>axis: DRAM bandwidth</th><td>100, 1,555</td>" in page_of[name]
    assert page_of["saved"] == page_of["given"]


def test_report_names_the_figures_a_one_axis_table_cannot_give(tmp_path):
    """One axis: no heat map (it needs two), named with the reason; the Pareto plot is drawn."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "r" / "results.csv"
    path.parent.mkdir()
    with TableWriter(path, columns(["accelerator"])) as w:
        for i, acc in enumerate(["h100", "tpu_v4", "wse2"]):
            w.write({"point": i, "accelerator": acc, **_row(i, i % 2, 0, 0)})
    out = tmp_path / "one.html"
    assert CliRunner().invoke(app, ["report", str(path.parent), "--html", str(out)]).exit_code == 0
    page = html.unescape(out.read_text(encoding="ascii"))
    for m in html_report.HEATMAP_METRICS:
        assert f"Heat map: {names.metric_title(m)}: not drawn: heatmap needs a table with at least 2 axes. Got 1 (accelerator)." in page
    assert 'alt="Pareto plot: throughput, cost"' in page and "<th>TPU v4</th>" in page
    assert "<p>Every point has a feasible mapping.</p>" in page
