"""``dfsearch serve`` end to end on a small model: the answer, its outputs and exit codes."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.capacity.command import COLUMNS, chip_dram_bytes, chip_figures
from dfsearch.capacity.serve_spec import read_serve_spec
from dfsearch.cli import app

EXAMPLE = Path(__file__).resolve().parents[1] / "dfsearch/examples/serve/serve_llama3_70b.toml"

SMALL = {  # a small Llama-like model, so the step searches take a moment
    "hidden_dim = 8192": "hidden_dim = 1024",
    "num_head = 64": "num_head = 8",
    "ffn_dim = 28672": "ffn_dim = 4096",
    "num_layer = 80": "num_layer = 4",
    "rate_per_s = 20.0": "rate_per_s = 1000.0",
    "requests = 2000": "requests = 400",
    "tp = [1, 2, 4, 8]": "tp = [1, 2]",
    "max_chips = 64": "max_chips = 8",
    "batch_caps = [32, 64, 128, 256]": "batch_caps = [16, 64]",
    "ttft_p99_s = 1.0": "ttft_p99_s = 0.02",
    "tpot_p99_s = 0.050": "tpot_p99_s = 0.0002",
}


def small_spec(tmp_path: Path, **more: str) -> Path:
    text = EXAMPLE.read_text()
    for old, new in {**SMALL, **more}.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "serve.toml"
    path.write_text(text)
    return path


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_serve_answers_explains_and_writes_every_metric(tmp_path):
    spec = small_spec(tmp_path)
    r = invoke("serve", spec, "--csv", tmp_path / "all.csv", "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    assert "best: " in r.output and "  binds: " in r.output and "  load (" in r.output
    rows = list(csv.DictReader((tmp_path / "all.csv").open()))
    assert rows and tuple(rows[0]) == COLUMNS
    answer = json.loads((tmp_path / "a.json").read_text())
    best = answer["best"]
    assert best["meets_slos"] and best["ttft_p99_s"] <= 0.02 and best["tpot_p99_s"] <= 0.0002
    # no deployment that meets the SLOs has fewer chips than the answer, and some with fewer fail
    assert all(int(x["chips"]) >= best["chips"] for x in rows if x["meets_slos"] == "True")
    assert any(int(x["chips"]) < best["chips"] and x["note"] == "" for x in rows)
    assert answer["runner_up"]["chips"] < best["chips"] and not answer["runner_up"]["meets_slos"]
    assert answer["step_searches"] >= 1
    # every chip at the spec's 700 W (its [cost] chip_power_W) over the window, per output token,
    # and output tokens per second = output tokens / the window
    assert best["joules_per_token"] == pytest.approx(best["chips"] * 700.0 / best["output_tokens_per_s"])
    assert 0 < best["kv_utilisation"] <= 1
    assert f"KV utilisation {best['kv_utilisation']:.1%}" in r.output
    assert f"energy {best['joules_per_token']:.4g} J per output token" in r.output


def test_watts_per_chip_are_a_preset_chips_tdp_else_the_specs_and_nan_without_a_figure(tmp_path):
    spec = small_spec(tmp_path, **{"dollars_per_chip_hour = 3.0\n": ""})
    spec.write_text(spec.read_text() + """
[serve.chips.spec]
dollars_per_chip_hour = 3.0
[serve.chips.a100]
preset = "a100-sxm-80gb"
dollars_per_chip_hour = 2.0
[serve.chips.mi300x]
preset = "mi300x"
dollars_per_chip_hour = 6.0
[serve.chips.v5p]
preset = "tpu-v5p"
dollars_per_chip_hour = 4.0
accelerator = { sram_bytes = 100e6 }
""")
    data, serve = read_serve_spec(spec)
    watts = [chip_figures(spec, data, c)[1] for c in serve.chips]
    assert watts[:3] == [700.0, 400.0, 750.0]  # the spec's chip_power_W; the A100's and MI300X's TDPs
    assert math.isnan(watts[3])  # the preset publishes no TDP
    no_power = small_spec(tmp_path, **{"chip_power_W = 700.0": "chip_power_W = 0.0"})
    data, serve = read_serve_spec(no_power)
    assert math.isnan(chip_figures(no_power, data, serve.chips[0])[1])


def test_serve_is_deterministic(tmp_path):
    spec = small_spec(tmp_path)
    assert invoke("serve", spec, "--csv", tmp_path / "a.csv").exit_code == 0
    assert invoke("serve", spec, "--csv", tmp_path / "b.csv").exit_code == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_slos_no_deployment_meets_exit_1_naming_the_binding_slo(tmp_path):
    r = invoke("serve", small_spec(tmp_path, **{"tpot_p99_s = 0.050": "tpot_p99_s = 1e-6"}))
    assert r.exit_code == 1
    assert "no deployment of <= 8 chips meets the SLOs" in r.output and "binding: TPOT" in r.output


@pytest.mark.parametrize(("change", "message"), [
    ({"max_chips = 64": "max_chips = 0"}, "serve.max_chips must be an integer >= 1. Got 0 instead."),
    ({"modes = [": "mode = ["}, "serve.mode is not a [serve] key"),
    ({"[serve]": "[served]"}, "serve is required"),
    ({"dram_bytes = 80000000000": "dram_bytes = 0"}, "system.memory.dram_bytes must be > 0 for dfsearch serve"),
])
def test_bad_serve_input_is_one_line_and_exit_2(tmp_path, change, message):
    r = invoke("serve", small_spec(tmp_path, **change))
    assert r.exit_code == 2 and message in r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_serve_help_names_the_rate_and_the_slos():
    r = invoke("serve", "--help")
    assert r.exit_code == 0
    for word in ("rate_per_s", "ttft_p99_s", "tpot_p99_s", "cheapest"):
        assert word in r.output


TWO_CHIPS = """
[serve.chips.base]
dollars_per_chip_hour = 3.0

[serve.chips.big]                 # more and faster memory, same compute
dollars_per_chip_hour = 4.0
memory = { dram_bw_GBps = 4800.0, dram_bytes = 141000000000 }
"""


def test_serve_chips_offer_several_chips_and_the_answer_names_its_chip(tmp_path):
    spec = small_spec(tmp_path, **{"dollars_per_chip_hour = 3.0\n": ""})
    spec.write_text(spec.read_text() + TWO_CHIPS)
    r = invoke("serve", spec, "--csv", tmp_path / "all.csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((tmp_path / "all.csv").open()))
    assert {x["chip"] for x in rows} == {"base", "big"}
    best = min(float(x["dollars_per_hour"]) for x in rows if x["meets_slos"] == "True")
    assert f"cost ${best:,.2f}/h" in r.output


@pytest.mark.parametrize(("chips", "message"), [
    (TWO_CHIPS, "serve.chips must be tables [serve.chips.<name>], each with its own dollars_per_chip_hour"),
    ("\n[serve.chips.x]\ndollars_per_chip_hour = 1.0\nmemory = { dram_bw_GBps = 0 }\n",
     "serve.chips.x: system.memory.dram_bw_GBps must be > 0"),
    ("\n[serve.chips.x]\nprice = 1.0\n", "serve.chips.x.price is not a key of a chip"),
])
def test_a_bad_chip_table_is_named(tmp_path, chips, message):
    spec = small_spec(tmp_path)
    text = spec.read_text()
    if "dollars_per_chip_hour = 1.0" in chips or "price" in chips:
        text = text.replace("dollars_per_chip_hour = 3.0\n", "")
    spec.write_text(text + chips)
    r = invoke("serve", spec)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_a_preset_chip_takes_the_presets_memory_in_place_of_the_specs_and_its_own_keys_win(tmp_path):
    spec = small_spec(tmp_path, **{"dollars_per_chip_hour = 3.0\n": ""})
    spec.write_text(spec.read_text() + """
[serve.chips.spec]
dollars_per_chip_hour = 3.0
[serve.chips.h200]
preset = "h200-sxm-141gb"
dollars_per_chip_hour = 3.8
[serve.chips.h200small]
preset = "h200"
dollars_per_chip_hour = 3.0
memory = { dram_bytes = 100e9 }
""")
    data, serve = read_serve_spec(spec)
    # the spec's chip has 80 GB; the H200's datasheet 141 GB; a chip's own key wins over its preset
    assert [chip_dram_bytes(spec, data, c) for c in serve.chips] == [80e9, 141e9, 100e9]


def test_a_misspelt_chip_preset_exits_2_naming_the_field_and_the_value(tmp_path):
    spec = small_spec(tmp_path, **{"dollars_per_chip_hour = 3.0\n": ""})
    spec.write_text(spec.read_text() + '\n[serve.chips.x]\npreset = "h200-sxm-14"\ndollars_per_chip_hour = 1.0\n')
    r = invoke("serve", spec)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "serve.chips.x.preset must name a chip preset" in r.output and "Got 'h200-sxm-14' instead." in r.output


@pytest.mark.parametrize("path", sorted(EXAMPLE.parent.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_serve_examples_are_valid(path):
    data, serve = read_serve_spec(path)
    assert all(chip_dram_bytes(path, data, chip) > 0 for chip in serve.chips)
    if path.stem.startswith("serve_llama3_70b"):  # the documented capacity question
        assert serve.rate_per_s == 20.0 and serve.ttft_p99_s == 1.0 and serve.tpot_p99_s == 0.05


def test_a_step_cache_file_makes_a_second_run_search_nothing_and_answer_the_same(tmp_path):
    spec, store = small_spec(tmp_path), tmp_path / "steps.json"
    first = invoke("serve", spec, "--step-cache", store, "--csv", tmp_path / "a.csv", "--json", tmp_path / "a.json")
    assert first.exit_code == 0 and json.loads((tmp_path / "a.json").read_text())["step_searches"] > 0
    again = invoke("serve", spec, "--step-cache", store, "--csv", tmp_path / "b.csv", "--json", tmp_path / "b.json")
    assert again.exit_code == 0 and json.loads((tmp_path / "b.json").read_text())["step_searches"] == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    other = small_spec(tmp_path, **{"dram_bw_GBps = 3350.0": "dram_bw_GBps = 3000.0"})  # another chip
    invoke("serve", other, "--step-cache", store, "--json", tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text())["step_searches"] > 0


def test_a_file_that_is_not_a_step_cache_is_refused(tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]")
    r = invoke("serve", small_spec(tmp_path), "--step-cache", tmp_path / "x.json")
    assert r.exit_code == 2 and "x.json: is not a step cache of dfsearch serve" in r.output


def test_the_simulation_budget_stops_the_search_and_says_so(tmp_path):
    r = invoke("serve", small_spec(tmp_path, **{"max_chips = 64": "max_chips = 8\nmax_simulations = 2"}),
               "--json", tmp_path / "a.json")
    answer = json.loads((tmp_path / "a.json").read_text())
    assert answer["stopped_by_budget"] and answer["simulations"] == 2
    assert r.exit_code == 1 and "within serve.max_simulations = 2 (the search stopped there)" in r.output


def test_a_rate_no_deployment_can_carry_exits_1_saying_overloaded(tmp_path):
    spec = small_spec(tmp_path, **{"max_chips = 64": "max_chips = 2", "rate_per_s = 20.0": "rate_per_s = 20000.0"})
    r = invoke("serve", spec)
    assert r.exit_code == 1
    assert "no deployment of <= 2 chips meets the SLOs at 20000 requests/s" in r.output
    assert "ruled out: overloaded: at least" in r.output


def test_a_sampled_search_says_it_sampled_in_the_report_and_the_json(tmp_path):
    spec = small_spec(tmp_path, **{"max_chips = 64": "max_chips = 8\nsampler = \"tpe\"\ntrials = 40"})
    r = invoke("serve", spec, "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    assert "sampled, not exhaustive (TPE, seed 0, 40 trials)" in r.output
    answer = json.loads((tmp_path / "a.json").read_text())
    assert answer["sampled"] == "TPE, seed 0, 40 trials" and answer["simulations"] <= 40
    exact = json.loads(invoke("serve", small_spec(tmp_path), "--json", "-").output)
    assert exact["sampled"] is None  # on this small space 40 trials find the exhaustive answer
    assert (answer["best"]["dollars_per_hour"], answer["best"]["chips"]) == (exact["best"]["dollars_per_hour"],
                                                                             exact["best"]["chips"])


def test_auto_samples_above_the_exhaustive_limit_and_says_so(tmp_path):
    """sampler = "auto" (the default): exhaustive while the space holds at most
    serve.exhaustive_limit deployments, TPE above it; the report and --json say which ran."""
    from dfsearch.capacity.search import space_size

    size = space_size(read_serve_spec(small_spec(tmp_path))[1])
    exact = json.loads(invoke("serve", small_spec(tmp_path, **{"max_chips = 64": f"max_chips = 8\n"
                                                               f"exhaustive_limit = {size}"}), "--json", "-").output)
    assert exact["sampled"] is None and exact["deployments_in_space"] == size
    spec = small_spec(tmp_path, **{"max_chips = 64": f"max_chips = 8\nexhaustive_limit = {size - 1}\ntrials = 30"})
    r = invoke("serve", spec)
    assert r.exit_code == 0, r.output
    assert (f"sampled, not exhaustive (auto: {size:,} deployments > serve.exhaustive_limit = {size - 1:,}; TPE, "
            "seed 0, 30 trials): not proven the cheapest") in r.output
    sampled = json.loads(invoke("serve", spec, "--json", "-").output)
    assert sampled["sampled"].startswith("auto: ") and sampled["simulations"] <= 30
