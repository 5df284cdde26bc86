"""The command line: help, exit codes (0 ok, 1 infeasible, 2 bad input), JSON outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parent.parent / "dfsearch" / "examples"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_help_lists_commands_and_exit_codes():
    r = invoke("--help")
    assert r.exit_code == 0
    for cmd in ("run", "eval", "validate", "convert", "generate"):
        assert cmd in r.output
    assert "Exit codes" in r.output


@pytest.mark.parametrize("cmd", ["run", "eval", "validate", "convert", "generate"])
def test_every_command_has_help(cmd):
    r = invoke(cmd, "--help")
    assert r.exit_code == 0 and "Usage" in r.output


def test_bare_command_prints_help_and_exits_2():
    r = invoke()
    assert r.exit_code == 2 and "Usage" in r.output


def test_validate_readme_example_json(tmp_path):
    out = tmp_path / "v.json"
    r = invoke("validate", str(EXAMPLES / "gpt3_1T_sn30.toml"), "--json", str(out))
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    # the README GPT-3 1T layer: 41 kernels, 53 connections, 72h²s+12hs²+19hs+4as² FLOP
    h, s, a = 25600, 2048, 160
    assert (data["kernels"], data["connections"]) == (41, 53)
    assert data["flop_per_layer"] == pytest.approx(72 * h * h * s + 12 * h * s * s + 19 * h * s + 4 * a * s * s, rel=1e-12)
    assert data["flop_per_layer"] == pytest.approx(9.792893485056e13, rel=1e-12)


def test_validate_dfmodel_setup_detected_by_content(tmp_path):
    src = DATA / "dfmodel" / "fft_1024gpu_sw_sw_8x128" / "setup.txt"
    renamed = tmp_path / "fft.input"  # no .txt suffix: detection is by content
    renamed.write_text(src.read_text())
    r = invoke("validate", str(renamed))
    assert r.exit_code == 0, r.output
    assert "2 kernels" in r.output


def test_bad_input_exit_2_with_path_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    text = (EXAMPLES / "gpt3_1.5B_a100x4.toml").read_text()
    bad.write_text(text.replace("link_bw_GBps = 600.0", "link_bw_GBps = -25.0"))
    assert text != bad.read_text()
    r = invoke("validate", str(bad))
    assert r.exit_code == 2
    assert "link_bw_GBps must be > 0. Got -25" in r.output
    assert "Traceback" not in r.output


def test_missing_file_exit_2(tmp_path):
    r = invoke("run", str(tmp_path / "nope.toml"))
    assert r.exit_code == 2 and "nope.toml" in r.output


def test_broken_protobuf_text_exit_2(tmp_path):
    bad = tmp_path / "setup.txt"
    bad.write_text("dataflow_graph {\n kernels {\n name: \"x\"\n")
    r = invoke("validate", str(bad))
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_run_infeasible_exit_1(tmp_path):
    text = (EXAMPLES / "gpt3_1.5B_a100x4.toml").read_text()
    spec = tmp_path / "tiny_sram.toml"
    spec.write_text(text.replace("sram_bytes = 88080384 ", "sram_bytes = 1000 "))
    assert text != spec.read_text()
    r = invoke("run", str(spec))
    assert r.exit_code == 1
    assert "SRAM" in r.output and "needs" in r.output and "too much" in r.output


def test_run_json_and_eval_roundtrip(tmp_path):
    spec = EXAMPLES / "gpt3_1.5B_a100x4.toml"
    out = tmp_path / "r.json"
    r = invoke("run", str(spec), "--json", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    for key in ("final_s", "ns_per_batch", "utilization", "workload_flop", "system_cost",
                "system_power", "tp", "pp", "dp", "shape", "num_tile", "micro_batch_size",
                "configs", "sharding", "search"):  # fmt: skip
        assert key in res
    for key in ("method", "seconds", "evaluations", "seed", "optimal", "lower_bound_s"):
        assert key in res["search"]
    # the run's JSON is a mapping file: evaluating it gives the same numbers
    out2 = tmp_path / "e.json"
    r2 = invoke("eval", str(spec), "--mapping", str(out), "--json", str(out2))
    assert r2.exit_code == 0, r2.output
    assert json.loads(out2.read_text())["final_s"] == pytest.approx(res["final_s"], rel=1e-12)


def test_mapping_out_toml_evaluates(tmp_path):
    setup = DATA / "dfmodel" / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup_sharded.txt"
    m = tmp_path / "m.toml"
    r = invoke("run", str(setup), "--mapping-out", str(m), "--quiet")
    assert r.exit_code == 0, r.output
    r2 = invoke("eval", str(setup), "--mapping", str(m), "--json", "-")
    assert r2.exit_code == 0
    # DFModel's log: "final_s 58.693817311518465"
    assert json.loads(r2.output)["final_s"] == pytest.approx(58.693817311518465, rel=1e-6)


def test_eval_bad_mapping_exit_2(tmp_path):
    setup = DATA / "dfmodel" / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup_sharded.txt"
    m = tmp_path / "m.toml"
    m.write_text('num_tile = 512\n[config]\nNoSuchKernel = 0\n')
    r = invoke("eval", str(setup), "--mapping", str(m))
    assert r.exit_code == 2 and "NoSuchKernel" in r.output


def test_generate_then_validate(tmp_path):
    g = tmp_path / "g.toml"
    r = invoke("generate", "llm", "--hidden", "25600", "--num-head", "160", "--head-dim", "160",
               "--seq", "2048", "--word", "2", "-o", str(g))  # fmt: skip
    assert r.exit_code == 0, r.output
    r2 = invoke("validate", str(g), "--json", "-")
    data = json.loads(r2.output)
    assert (data["kernels"], data["connections"]) == (41, 53)
    assert data["flop_per_layer"] == pytest.approx(9.792893485056e13, rel=1e-12)


def test_generate_bad_param_exit_2(tmp_path):
    r = invoke("generate", "llm", "--hiden", "4", "-o", str(tmp_path / "g.toml"))
    assert r.exit_code == 2 and "hidden" in r.output


def test_generate_help_params_says_required_optional_or_the_default(tmp_path):
    r = invoke("generate", "llm", "--help-params", "-o", str(tmp_path / "g.toml"))
    assert r.exit_code == 0, r.output
    assert "None" not in r.output and "False" not in r.output
    lines = {ln.split()[0]: ln for ln in r.output.splitlines() if ln.startswith("  --")}
    assert lines["--hidden"].endswith("(required)")
    assert lines["--ffn-dim"].endswith("(optional)")
    assert lines["--layers"].endswith("(default 1)")
    assert lines["--embedding"].endswith("(default 0)")


def test_convert_then_load_gives_same_spec(tmp_path):
    from dfsearch.loader import load_spec

    setup = DATA / "dfmodel" / "dlrm_A_128gpu_r_fc_8x16" / "setup.txt"
    out = tmp_path / "dlrm.toml"
    r = invoke("convert", str(setup), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert load_spec(out) == load_spec(setup)


def test_console_script_runs_as_module():
    r = subprocess.run([sys.executable, "-m", "dfsearch", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "run" in r.stdout


@pytest.mark.parametrize("source", [EXAMPLES / "llm_decode.toml",
                                    DATA / "dfmodel" / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt"])
def test_an_output_option_never_writes_over_a_spec(tmp_path: Path, source: Path) -> None:
    """`dfsearch run --json spec.toml` (the option took the spec's path as its value) used to
    run the built-in example and write its JSON over the user's spec."""
    spec = tmp_path / source.name
    spec.write_bytes(source.read_bytes())
    for option in ("--json", "--mapping-out"):
        r = CliRunner().invoke(app, ["run", "--quiet", option, str(spec)])
        assert r.exit_code == 2 and "refusing to overwrite" in r.output, r.output
        assert spec.read_bytes() == source.read_bytes()
    out = tmp_path / "out.json"  # an earlier output is still replaced as asked
    out.write_text("{}")
    assert CliRunner().invoke(app, ["run", "--quiet", "--json", str(out)]).exit_code == 0
    assert json.loads(out.read_text())["status"] == "optimal"
