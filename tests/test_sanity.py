"""Plausibility warnings: each fires on the mix-up it names, none fires on real inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

import dfsearch
from dfsearch.loader import load_spec, replace_field
from dfsearch.sanity import spec_warnings

EXAMPLES = sorted((Path(dfsearch.__file__).parent / "examples").glob("*.toml"))
CASES = sorted((Path(__file__).parent / "data").rglob("setup.txt"))
BASE = Path(dfsearch.__file__).parent / "examples" / "gpt3_1.5B_a100x4.toml"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples_raise_no_warning(path):
    assert spec_warnings(load_spec(path)) == ()


@pytest.mark.parametrize(
    ("field", "value", "path", "words"),
    [
        # 25 GB/s typed in kB/s (bytes/s, 2.5e10, is beyond the validated range: an error)
        ("system.network[0].link_bw_GBps", 2.5e7, "system.network[0].link_bw_GBps", "large"),
        # TB/s typed as GB/s (2 "GB/s" meant 2 TB/s is plausible; 0.002 is not)
        ("system.memory.dram_bw_GBps", 0.002, "system.memory.dram_bw_GBps", "small"),
        # a 0.9 GHz clock typed in MHz (above 1000 "GHz" validation rejects it)
        ("system.accelerator.freq_GHz", 900.0, "system.accelerator.freq_GHz", "MHz"),
        # 40 MB of SRAM written as 40
        ("system.accelerator.sram_bytes", 40.0, "system.accelerator.sram_bytes", "small"),
        # 80 GB of DRAM written as 80
        ("system.memory.dram_bytes", 80.0, "system.memory.dram_bytes", "GB written"),
        # 150 ns written as 1.5e-7 (seconds)
        ("system.accelerator.link_latency_ns", 1.5e-7, "system.accelerator.link_latency_ns",
         "seconds"),
    ],
)
def test_unit_mixups_are_named(field, value, path, words):
    spec = replace_field(load_spec(BASE), field, value)
    found = [w for w in spec_warnings(spec) if w.path == path]
    assert len(found) == 1, spec_warnings(spec)
    assert words in found[0].message


def test_chip_above_100_pflops_is_flagged():
    # 108 cores x 16 x 16 x 2 x f: f = 1000 GHz gives 55 PFLOP/s (no warning from the peak),
    # 2000 cores at 1000 GHz give ~1 EFLOP/s
    spec = load_spec(BASE)
    acc = spec.system.accelerator
    cores_for_200_pflops = int(2e8 / (2 * acc.systolic_width * acc.systolic_height
                                      * acc.freq_GHz)) + 1
    spec = replace_field(spec, "system.accelerator.cores", cores_for_200_pflops)
    paths = [w.path for w in spec_warnings(spec)]
    assert paths == ["system.accelerator"]


def test_inputs_without_effect():
    spec = load_spec(BASE)
    assert [w.path for w in spec_warnings(replace_field(spec, "execution.effective_stage", 4))] == [
        "execution.effective_stage"
    ]
    tier = replace_field(spec, "execution.equations", "v1")
    tier = replace_field(tier, "system.memory.second_dram_bw_GBps", 50.0)
    tier = replace_field(tier, "system.memory.second_dram_bytes", 1e12)
    assert spec_warnings(tier) == ()  # a v1 feature: used
    v2 = replace_field(tier, "execution.equations", "v2")
    assert [w.path for w in spec_warnings(v2)] == ["system.memory.second_dram_bytes"]


def test_a_warned_input_changes_nothing_but_the_warning():
    """effective_stage without a kernel that uses it: the evaluation is bit for bit the same."""
    from dfsearch.api import run

    spec = load_spec(BASE)
    a = run(spec)
    b = run(replace_field(spec, "execution.effective_stage", 4))
    assert a.evaluation.final_ns == b.evaluation.final_ns


def test_warnings_reach_the_report_and_the_json(tmp_path):
    """`dfsearch run` prints each warning in the report and lists it in --json."""
    import json

    from typer.testing import CliRunner

    from dfsearch.cli import app

    text = BASE.read_text().replace("[execution]", "[execution]\neffective_stage = 4", 1)
    assert "effective_stage = 4" in text
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", str(spec), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "WARNING   execution.effective_stage: no kernel sets use_effective_stage" in res.output
    data = json.loads(out.read_text())
    assert [w["path"] for w in data["warnings"]] == ["execution.effective_stage"]
