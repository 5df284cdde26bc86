"""DFModel inputs from the command line (issue 21, item 3): ``--equations`` for the pre-v1
inputs whose equation set their text cannot tell, and the inference latency DFModel prints
for an LLM graph without backward kernels (``final_latency_ns``).

Golden numbers:

* tests/data/dfmodel/serving/llama3_8B_SN40L_decode_tp2_pp8/: a DFModel v2 serving input and
  the lines its d818f8b script printed (README.md there). The mapping DFModel chose (its
  ``sharding[i,j]`` and ``Config[i]`` lines) is evaluated as given; its printed
  ``Per_Config_II`` and ``final_latency_ns`` must come back to 1e-9.
* the closed form of that latency (docs/model.md, "Inference latency"):
  layers per stage x PP x all-config II + (PP - 1) x (hidden x seq_len x word / TP / beta_pp
  + link latency) = 4 x 8 x II + 7 x (4096 / 50 + 150) ns for this case.
* tests/data/dfmodel/design_space/<case>/log.txt: the final_s DFModel printed for its
  design-space runs, which ``dfsearch run --equations design_space`` must reproduce.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.codes import Dim, Equations
from dfsearch.cost.model import evaluate
from dfsearch.decision import Decision
from dfsearch.io.dfmodel import load_dfmodel_file
from dfsearch.loader import replace_field

DATA = Path(__file__).parent / "data" / "dfmodel"
SERVING = DATA / "serving" / "llama3_8B_SN40L_decode_tp2_pp8"
DESIGN = DATA / "design_space"
EXAMPLES = Path(__file__).parent.parent / "dfsearch" / "examples"
runner = CliRunner()


def logged(path: Path, label: str) -> float:
    found = re.findall(rf"^{re.escape(label)} (\S+)$", path.read_text(), re.MULTILINE)
    assert found, f"{label!r} not in {path}"
    return float(found[-1])


def logged_decision() -> Decision:
    """DFModel's mapping: sharding[i, j] = 1 names kernel i's choice (j + 1 = Dim value),
    Config[i] its configuration, Shape[d] the network, num_tile, Micro_Batch_Size 1."""
    text = (SERVING / "log.txt").read_text()
    chosen = {int(i): int(j) for i, j, v in re.findall(r"^sharding\[(\d+),(\d+)\] (\S+)$", text, re.M)
              if float(v) == 1.0}  # fmt: skip
    configs = [int(float(v)) for v in re.findall(r"^Config\[\d+\] (\S+)$", text, re.M)]
    shape = tuple(int(float(v)) for v in re.findall(r"^Shape\[\d+\] (\S+)$", text, re.M))
    return Decision(
        shape=shape, sharding=tuple(Dim(chosen[i] + 1) for i in range(len(chosen))),
        micro_batch_size=1, num_tile=int(logged(SERVING / "log.txt", "num_tile")),
        config=tuple(configs),
    )  # fmt: skip


@pytest.fixture(scope="module")
def serving_eval():
    spec = load_dfmodel_file(SERVING / "setup.txt")
    return spec, evaluate(spec, logged_decision())


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# --------------------------------------------------------------------- final_latency_ns
def test_serving_case_is_the_logged_v2_input():
    text = (SERVING / "setup.txt").read_text()
    assert len(text) == 7467
    spec = load_dfmodel_file(SERVING / "setup.txt")
    assert spec.execution.equations is Equations.V2
    assert not spec.graph.is_training and len(spec.graph.kernels) == 20


def test_dfmodel_mapping_reproduces_the_printed_ii_and_latency(serving_eval):
    _, ev = serving_eval
    log = SERVING / "log.txt"
    assert ev.feasible
    assert (ev.tp, ev.pp, ev.layers_per_stage) == (2, 8, int(logged(log, "layer_per_stage")))
    assert rel(ev.all_config_ii_ns, logged(log, "Per_Config_II[0]")) < 1e-9
    assert rel(ev.final_latency_ns, logged(log, "final_latency_ns")) < 1e-9
    assert rel(ev.final_latency_ns, 4305162.7567000985) < 1e-9
    assert rel(ev.final_s, logged(log, "final_ii_s")) < 1e-9
    assert rel(ev.price.system_cost, logged(log, "total_cost")) < 1e-9
    assert rel(ev.price.system_power, logged(log, "total_power")) < 1e-9


def test_latency_is_the_closed_form(serving_eval):
    """4 layers per stage x 8 stages x II + 7 hops of (4096 B / 50 GB/s + 150 ns)."""
    _, ev = serving_eval
    hops = 7 * (4096 * 2 / 2 / 50.0 + 150.0)
    assert hops == pytest.approx(logged(SERVING / "log.txt", "vvv2") + logged(SERVING / "log.txt", "vvv3"), rel=1e-12)
    assert ev.final_latency_ns == pytest.approx(32 * ev.all_config_ii_ns + hops, rel=1e-12)


def test_no_latency_for_training_graphs_or_infeasible_mappings(serving_eval):
    spec, _ = serving_eval
    path = DATA / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt"
    train = load_dfmodel_file(path)
    assert train.graph.is_training
    n = len(train.graph.kernels)
    half = sum(1 for k in train.graph.kernels if k.phase.name == "FWD")
    d = Decision(shape=(4,), sharding=tuple(k.sharding or Dim.NO for k in train.graph.kernels),
                 micro_batch_size=1, num_tile=512, config=(0,) * half + (1,) * (n - half))  # fmt: skip
    assert evaluate(train, d).final_latency_ns is None
    tiny = replace_field(spec, "system.accelerator.sram_bytes", 1000.0)
    bad = evaluate(tiny, logged_decision())
    assert not bad.feasible and bad.final_latency_ns is None


def test_without_pipeline_the_latency_is_layers_times_ii(serving_eval):
    """PP = 1 (the second dimension carries DP instead): no hop, latency = num_layer x II."""
    spec, _ = serving_eval
    flat = replace_field(spec, "system.network[1].parallelism", "dp")
    ev = evaluate(flat, logged_decision())
    assert ev.feasible and (ev.pp, ev.dp) == (1, 8)
    assert ev.final_latency_ns == pytest.approx(32 * ev.all_config_ii_ns, rel=1e-12)


def test_cli_reports_the_latency_in_text_and_json(tmp_path):
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["run", str(SERVING / "setup.txt"), "--json", str(out), "-q"])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    ii = sum(c["ii_ns"] for c in data["configs"])
    assert data["final_latency_ns"] == pytest.approx(32 * ii + 7 * (4096 / 50 + 150), rel=1e-12)
    assert f"final_latency_ns {data['final_latency_ns']:.10g}" in r.output
    assert "final_latency_ns" not in json.dumps(_run_json(tmp_path, DESIGN / "fft_h100_2d_torus_r_r_32x32" / "setup.txt"))


def _run_json(tmp_path: Path, spec: Path, *extra: str) -> dict:
    out = tmp_path / f"{spec.parent.name}.json"
    r = runner.invoke(app, ["run", str(spec), "--json", str(out), "-q", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


# ------------------------------------------------------------------------- --equations
@pytest.mark.parametrize("case", ["fft_h100_dgx1_r_sw_8x128", "dlrm_h100_dragonfly_fc_fc_32x32"])
def test_run_with_design_space_equations_reproduces_the_log(case, tmp_path):
    """Without the option the pre-v1 input is read as 'legacy' and misses the log (FFT dgx1:
    +214 %, DLRM dragonfly: -48 %); with it, final_s is DFModel's."""
    setup = DESIGN / case / "setup.txt"
    want = logged(DESIGN / case / "log.txt", "final_s")
    assert rel(_run_json(tmp_path, setup)["final_s"], want) > 0.4
    got = _run_json(tmp_path, setup, "--equations", "design_space")["final_s"]
    assert rel(got, want) < 1e-6


def test_validate_and_convert_take_the_option(tmp_path):
    setup = DESIGN / "fft_h100_2d_torus_r_r_32x32" / "setup.txt"
    out = tmp_path / "v.json"
    r = runner.invoke(app, ["validate", str(setup), "--equations", "design_space", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["equations"] == "design_space"
    toml = tmp_path / "c.toml"
    r = runner.invoke(app, ["convert", str(setup), "-o", str(toml), "--equations", "design_space"])
    assert r.exit_code == 0, r.output
    assert 'equations = "design_space"' in toml.read_text()
    r = runner.invoke(app, ["validate", str(toml), "--equations", "design_space"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("cmd", ["run", "eval", "check", "convert", "validate"])
def test_every_input_command_has_the_option(cmd):
    r = runner.invoke(app, [cmd, "--help"])
    assert r.exit_code == 0 and "--equations" in r.output


@pytest.mark.parametrize(("spec", "name", "expected"), [
    (DESIGN / "fft_h100_2d_torus_r_r_32x32" / "setup.txt", "v2",
     "--equations must be 'legacy' or 'design_space' for this pre-v1 input (field 'miscellany' on line"),
    (DATA / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt", "design_space",
     "--equations must be 'v2' (or left out) for this input: its content tells its equation set"),
    (DATA / "readme_gpt3_1T_sn30_1024chips_r_r_8x128" / "setup.txt", "legacy",
     "--equations must be 'v1' (or left out) for this input"),
    (EXAMPLES / "gpt3_1T_sn30.toml", "design_space",
     "--equations must be 'v1' (or left out) for a dfsearch spec"),
    (EXAMPLES / "gpt3_1T_sn30.toml", "v3", "--equations must be one of 'v1', 'v2', 'legacy', 'design_space'. Got 'v3' instead."),
])  # fmt: skip
def test_an_equation_set_that_does_not_fit_is_exit_2(spec, name, expected):
    for cmd in (["validate", str(spec)], ["run", str(spec), "-q"]):
        r = runner.invoke(app, [*cmd, "--equations", name])
        assert r.exit_code == 2, r.output
        assert expected in r.output and f"Got {name!r}" in r.output
        assert "Traceback" not in r.output


def test_a_graph_file_takes_no_equations(tmp_path):
    graph = tmp_path / "g.toml"
    r = runner.invoke(app, ["generate", "fft", "--length", "1048576", "--r", "2", "--word", "4", "-o", str(graph)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["validate", str(graph), "--equations", "legacy"])
    assert r.exit_code == 2 and "does not apply to a graph file" in r.output
