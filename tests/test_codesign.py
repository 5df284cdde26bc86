"""Hardware co-design (``dfsearch codesign``): the chip model against hand computations, the
technology catalogue's sources, the study's errors, the budgets, and the search landing on
the optimum of the exhaustive area-split grid (computed here by the sweep)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.codesign.chip import (
    ChipDesign,
    Core,
    chip_figures,
    die_cost,
    dies_per_wafer,
    poisson_yield,
    spec_edits,
    split_units,
    sram_mm2_per_byte,
)
from dfsearch.codesign.technology import load_technology
from dfsearch.errors import SpecError
from dfsearch.loader import load_spec, parse_toml, read_text
from dfsearch.study.catalogue import area_split_edits

EXAMPLES = Path(__file__).resolve().parent.parent / "dfsearch" / "examples"
TECH = load_technology()
#: the [set] of the area-split examples: GPT-3 175B training on 8 chips, a 4 x 2 torus
GPT3_175B = """\
"workload.hidden_dim" = 12288
"workload.num_head" = 96
"workload.head_dim" = 128
"workload.num_layer" = 96
"workload.global_batch_size" = 1536
"system.num_chip" = 8
"system.network[0].size" = 4
"system.network[1].size" = 2
"execution.num_config" = "auto"
"""
N7 = TECH.process["n7"]


# ----------------------------------------------------------------------------- catalogue
def test_every_coefficient_has_a_unit_and_a_source_with_a_year():
    coefficients = TECH.coefficients()
    assert len(coefficients) > 40
    for path, c in coefficients:
        assert c.unit, path
        assert any(str(y) in c.source for y in range(1990, 2030)) or c.source.startswith("assumption:"), (path, c.source)


def test_a_coefficient_without_a_source_is_refused_with_its_path(tmp_path):
    data = json.loads(Path(TECH.file).read_text())
    del data["memory"]["hbm3"]["energy_pJ_per_bit"]["source"]
    data["link"]["serdes-112g"]["lane_GBps"]["value"] = -1
    bad = tmp_path / "tech.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SpecError) as exc:
        load_technology(bad)
    text = str(exc.value)
    assert "memory.hbm3.energy_pJ_per_bit.source" in text and "must cite" in text
    assert "link.serdes-112g.lane_GBps.value" in text and "Got -1" in text


# ----------------------------------------------------------------------------- chip model
def test_the_unit_split_is_the_grid_study_rule():
    for share in (0.2, 0.25, 0.5, 0.7, 0.8):
        cores, sram = split_units(2080, share, 524288)
        assert area_split_edits(share, 2080, 524288) == {"system.accelerator.cores": cores, "system.accelerator.sram_bytes": sram}
    assert split_units(2080, 0.7, 524288) == (1456, 624 * 524288.0)


def test_sram_area_dies_yield_and_cost_by_hand():
    # 1 MiB = 8,388,608 bits x 0.027 um^2 / 0.7 array efficiency = 0.32357 mm^2
    assert sram_mm2_per_byte(N7) * 2**20 == pytest.approx(8 * 2**20 * 0.027e-6 / 0.7)
    assert sram_mm2_per_byte(N7) * 2**20 == pytest.approx(0.32357, abs=1e-5)
    # 300 mm wafer, 400 mm^2 die: 70685.8 / 400 - 942.48 / 28.284 = 176.71 - 33.32 = 143.39 -> 143
    assert dies_per_wafer(400.0, 300.0) == 143
    assert poisson_yield(400.0, 0.09) == pytest.approx(math.exp(-0.36))
    n, y, cost = die_cost(400.0, N7)
    assert (n, y) == (143, pytest.approx(0.69768, abs=1e-5))
    assert cost == pytest.approx(9346 / (143 * 0.697676), rel=1e-5)  # = 93.68 $
    assert die_cost(1e6, N7)[2] == math.inf  # no die fits the wafer


def test_chip_figures_by_hand():
    design = ChipDesign(units=2080, memory_unit_bytes=524288, compute_share=0.5, memory="hbm3", memory_units=4,
                        link="serdes-112g", link_lanes=(8, 2))  # fmt: skip
    f = chip_figures(design, Core(32, 6, 1.25), TECH)
    assert (f.cores, f.sram_bytes) == (1040, 1040 * 524288.0)
    logic = 2080 * 524288 * 8 * 0.027e-6 / 0.7  # 336.50 mm^2: a core takes the area of a memory unit
    assert f.logic_area_mm2 == pytest.approx(logic)
    assert f.serdes_area_mm2 == pytest.approx(10 * 0.22)
    assert f.die_area_mm2 == pytest.approx(logic + 2.2)
    assert f.peak_gflops == pytest.approx(1040 * 2 * 32 * 6 * 1.25)  # 499.2 TFLOP/s
    assert f.compute_power_W == pytest.approx(499.2e12 * 1.268e-12)  # 633.0 W
    assert f.dram_bw_GBps == pytest.approx(4 * 819.2)
    assert f.dram_power_W == pytest.approx(4 * 819.2 * 3.97 * 8e-3)  # GB/s x J/GB
    assert f.chip_power_W == pytest.approx(f.compute_power_W + f.dram_power_W)
    assert f.link_bw_GBps == (112.0, 28.0)
    edits = spec_edits(f)
    assert edits["system.memory.dram_bytes"] == 4 * 24 * 2**30
    assert edits["cost.link_power_J_per_GB"] == [pytest.approx(0.052)] * 2
    assert edits["system.network[1].link_bw_GBps"] == 28.0


# ----------------------------------------------------------------------------- study file
def _study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cd.toml"
    spec = (EXAMPLES / "gpt3_1T_sn30.toml").as_posix()
    path.write_text(f'[[workload]]\nspec = "{spec}"\n' + text)
    return path


def test_bad_input_exits_2_with_file_field_value_and_expectation(tmp_path):
    path = _study(tmp_path, '[chip]\nunits = 2080\nmemory_unit_bytes = 524288\nmemory = "hbm4"\n'
                            '[variables]\ncompute_share = [0.5, 1.5]\n[codesign]\nsampler = "random"\n')  # fmt: skip
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2
    err = r.stderr
    assert "cd.toml" in err and "Traceback" not in err
    assert "chip.memory" in err and "'hbm4'" in err and "'hbm3'" in err
    assert "variables.compute_share[1]" in err and "1.5" in err and "0 < share < 1" in err
    assert "codesign.sampler" in err and "'random'" in err and "'nsga2'" in err


def test_a_design_over_the_area_budget_is_recorded_with_the_budget_and_not_searched(tmp_path):
    path = _study(tmp_path, '[codesign]\ntrials = 5\n[chip]\nmemory_unit_bytes = 524288\nmemory = "hbm"\ncompute_share = 0.5\n'
                            '[variables]\nunits = [1000, 2000, 4000]\n[budget]\narea_mm2 = 100\n')  # fmt: skip
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert "no design is feasible" in r.stdout
    rows = (out / "trials.csv").read_text().splitlines()
    assert len(rows) == 6
    assert all(",over_budget,area_mm2 (" in row for row in rows[1:])
    assert not (out / "best_chip.toml").exists()


# ----------------------------------------------------------------------------- the search
@pytest.mark.slow
def test_codesign_lands_on_the_area_split_grid_optimum_and_writes_a_runnable_best_chip(tmp_path):
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import study_from_data
    from dfsearch.study.table import read_table

    grid_file = EXAMPLES / "studies" / "area_split.toml"
    data = parse_toml(read_text(grid_file), str(grid_file))
    data["axes"]["system.memory.dram_bw_GBps"] = [1000]  # the HBM column of the grid
    grid = study_from_data(data, file=str(grid_file), folder=grid_file.parent)
    sweep(grid, tmp_path / "grid")
    _, rows = read_table(tmp_path / "grid" / "results.csv")
    grid_best = min((r for r in rows if r["final_s"] is not None), key=lambda r: r["final_s"])

    out = tmp_path / "codesign"
    r = CliRunner().invoke(app, ["codesign", str(EXAMPLES / "codesign" / "area_split.toml"), "-o", str(out), "-q", "--json", str(out.parent / "s.json")])
    assert r.exit_code == 0, r.output
    best = json.loads((out.parent / "s.json").read_text())["best"]
    assert best["compute_share"] == grid_best["compute_share"]
    assert best["final_s"] == grid_best["final_s"]

    from dfsearch.api import run

    again = run(load_spec(out / "best_chip.toml"))
    assert again.evaluation.final_s == best["final_s"]
    assert again.evaluation.price.system_cost == pytest.approx(best["system_cost"])


@pytest.mark.parametrize("sampler", ["nsga2", "tpe"])
def test_same_study_and_seed_give_the_same_trials(tmp_path, sampler):
    from dfsearch.codesign.runner import run_codesign
    from dfsearch.codesign.study import load_codesign

    # four die sizes, the area budget admits the smallest only: one design is searched
    path = _study(tmp_path, f'[codesign]\ntrials = 8\nsampler = "{sampler}"\nobjectives = ["throughput", "power"]\n'
                            f"[set]\n{GPT3_175B}"
                            '[chip]\nmemory_unit_bytes = 524288\nmemory = "hbm"\ncompute_share = 0.6\n'
                            '[variables]\nunits = [2080, 4160, 8320, 16640]\n[budget]\narea_mm2 = 400\n')  # fmt: skip
    study = load_codesign(path)
    first, second = run_codesign(study), run_codesign(study)
    strip = [{k: v for k, v in t.row.items() if k != "seconds"} for t in first.trials]
    assert strip == [{k: v for k, v in t.row.items() if k != "seconds"} for t in second.trials]
    assert len(first.trials) == 8
    statuses = {t.values["units"]: t.row["status"] for t in first.trials}
    assert statuses[2080] == "ok"
    assert all(s == "over_budget" for u, s in statuses.items() if u > 2080)
    over = [t.row for t in first.trials if t.row["status"] == "over_budget"]
    assert all(r["violation"] == pytest.approx(r["die_area_mm2"] / 400 - 1) for r in over)


@pytest.mark.slow
def test_memory_technology_conclusion(tmp_path):
    """3-D stacked DRAM is never faster than HBM on the fixed die (SRAM and compute bind
    from 1 TB/s on) and costs more, so it is never on the front; HBM beats DDR."""
    out = tmp_path / "mem"
    r = CliRunner().invoke(app, ["codesign", str(EXAMPLES / "codesign" / "memory_technology.toml"), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(json.dumps(x)) for x in json.loads((out / "summary.json").read_text())["pareto"]]
    assert rows and all(x["memory"] != "3d" for x in rows)
    import csv

    trials = [t for t in csv.DictReader((out / "trials.csv").open()) if t["status"] == "ok"]
    by = {(t["memory"], t["compute_share"]): float(t["final_s"]) for t in trials}
    pairs = [(s, by[("hbm", s)], by[("3d", s)]) for (m, s) in by if m == "3d" and ("hbm", s) in by]
    assert pairs
    for _, hbm, stacked in pairs:
        assert stacked <= hbm and stacked >= 0.95 * hbm  # little or nothing gained over HBM
    best = {m: min(v for (mm, _), v in by.items() if mm == m) for m in ("ddr", "hbm")}
    assert best["hbm"] < 0.8 * best["ddr"]


@pytest.mark.slow
def test_gpt3_power_budget_best_chip_is_within_the_budgets_and_runs(tmp_path):
    out = tmp_path / "gpt3"
    r = CliRunner().invoke(app, ["codesign", str(EXAMPLES / "codesign" / "gpt3_power_budget.toml"), "-o", str(out), "-q", "--json", "-"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    best = summary["best"]
    assert best["chip_power_W"] <= 700 and best["die_area_mm2"] <= 826
    import csv

    for t in csv.DictReader((out / "trials.csv").open()):
        if t["status"] == "over_budget":
            assert float(t["chip_power_W"]) > 700 or float(t["die_area_mm2"]) > 826
        if t["status"] == "ok":
            assert float(t["final_s"]) >= best["final_s"]
    from dfsearch.api import run

    again = run(load_spec(out / "best_chip.toml"))
    assert again.evaluation.final_s == best["final_s"]
    spec = load_spec(out / "best_chip.toml")
    assert spec.system.accelerator.cores == best["cores"]
    assert spec.system.memory.dram_bw_GBps == best["dram_bw_GBps"]


def test_a_bad_field_path_value_or_lane_list_stops_the_study_before_any_search(tmp_path):
    chip = '[chip]\nunits = 2080\nmemory_unit_bytes = 524288\nmemory = "hbm"\ncompute_share = 0.5\n'
    path = _study(tmp_path, chip + '[variables]\n"system.num_chip" = [1024, -4]\n')
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    assert "cd.toml" in r.stderr and "system.num_chip" in r.stderr and "-4" in r.stderr
    assert not (tmp_path / "out").exists()  # nothing searched, nothing written

    path = _study(tmp_path, chip + 'link = "serdes-112g"\nlink_lanes = [4, 4, 4]\n[set]\n"system.nope" = 1\n')
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert "chip.link_lanes" in r.stderr and "[4, 4, 4]" in r.stderr and "one lane count per network dimension (2)" in r.stderr


def test_a_weighted_mix_runs_every_workload_on_the_same_chip(tmp_path):
    path = tmp_path / "mix.toml"
    path.write_text(f'[[workload]]\nspec = "{(EXAMPLES / "gpt3_1.5B_a100x4.toml").as_posix()}"\nweight = 1\n'
                    f'[[workload]]\nspec = "{(EXAMPLES / "llama3_8b_layer.toml").as_posix()}"\nweight = 3\n'
                    '[codesign]\ntrials = 3\nobjectives = ["throughput"]\n'
                    '[chip]\nunits = 2080\nmemory_unit_bytes = 524288\nmemory = "hbm2e"\nmemory_units = 4\n'
                    '[variables]\ncompute_share = [0.5]\n')  # fmt: skip
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(out), "-q", "--json", "-"])
    assert r.exit_code == 0, r.output
    best = json.loads(r.stdout)["best"]
    assert best["final_s"] == pytest.approx((best["final_s_0"] + 3 * best["final_s_1"]) / 4)
    assert (out / "pareto.png").read_bytes().startswith(b"\x89PNG")  # matplotlib: a test extra
    specs = [load_spec(out / "best_chip.toml"), load_spec(out / "best_chip_1.toml")]
    assert specs[0].system.accelerator == specs[1].system.accelerator
    assert specs[0].system.accelerator.cores == 1040 and specs[1].system.memory.dram_bw_GBps == pytest.approx(4 * 460.8)
    from dfsearch.api import run

    assert [run(s).evaluation.final_s for s in specs] == [best["final_s_0"], best["final_s_1"]]


def test_ctrl_c_stops_the_study_with_exit_130(tmp_path, monkeypatch):
    from dfsearch.codesign import runner

    def interrupted(spec):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_search", interrupted)
    path = _study(tmp_path, '[chip]\nunits = 2080\nmemory_unit_bytes = 524288\nmemory = "hbm"\ncompute_share = 0.5\n')
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 130 and "interrupted" in r.stderr and "resume" in r.stderr
    assert len((tmp_path / "out" / "trials.csv").read_text().splitlines()) == 1  # the header: no trial finished


def test_topology_and_chip_count_are_variables_like_any_spec_field(tmp_path):
    path = _study(tmp_path, '[codesign]\ntrials = 6\nobjectives = ["throughput", "cost"]\n'
                            f"[set]\n{GPT3_175B}"
                            '[chip]\nunits = 2080\nmemory_unit_bytes = 524288\nmemory = "hbm"\ncompute_share = 0.7\n'
                            '[variables]\n"system.network[1].topology" = ["ring", "switch"]\n'
                            '"system.num_chip" = [8]\n')  # fmt: skip
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["codesign", str(path), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    import csv

    rows = {t["system.network[1].topology"]: t for t in csv.DictReader((out / "trials.csv").open()) if not t["repeat_of"]}
    assert set(rows) == {"ring", "switch"} and all(t["status"] == "ok" for t in rows.values())
    assert rows["ring"]["system_cost"] != rows["switch"]["system_cost"]  # switch ports are priced
    from dfsearch.codes import Topology

    best = load_spec(out / "best_chip.toml")
    assert best.system.network[1].topology in (Topology.RING, Topology.SWITCH)


def test_a_second_run_reads_the_trials_back_and_an_interrupted_one_resumes(tmp_path, monkeypatch):
    from dfsearch.codesign import runner

    path = _study(tmp_path, '[codesign]\ntrials = 8\nobjectives = ["throughput", "power"]\n'
                            f"[set]\n{GPT3_175B}"
                            '[chip]\nmemory_unit_bytes = 524288\nmemory = "hbm"\ncompute_share = 0.6\n'
                            '[variables]\nunits = [2080, 4160, 8320, 16640]\n[budget]\narea_mm2 = 400\n')  # fmt: skip
    out = tmp_path / "out"
    args = ["codesign", str(path), "-o", str(out), "-q"]
    assert CliRunner().invoke(app, args).exit_code == 0
    table = (out / "trials.csv").read_text()
    search = runner._search

    def refuse(spec):
        raise AssertionError("searched again")

    monkeypatch.setattr(runner, "_search", refuse)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert (out / "trials.csv").read_text() == table  # every row read back, none searched
    assert (out / "best_chip.toml").is_file()

    lines = table.splitlines()
    (out / "trials.csv").write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # one row, a cut line
    monkeypatch.setattr(runner, "_search", search)
    assert CliRunner().invoke(app, args).exit_code == 0
    resumed = (out / "trials.csv").read_text().splitlines()
    assert len(resumed) == len(lines) and resumed[:2] == lines[:2]
    column = lines[0].split(",").index("seconds")
    assert [x.split(",")[:column] for x in resumed] == [x.split(",")[:column] for x in lines]

    path.write_text(path.read_text() + "# changed\n")
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "another version of the study" in r.stderr and "--fresh" in r.stderr
    assert CliRunner().invoke(app, [*args, "--fresh"]).exit_code == 0
