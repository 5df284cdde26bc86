"""Inputs that mean nothing are refused (issue 21, item 6): pinned configurations that no
mapping can honour (exit 2 with the rule named; pins that can hold are honoured by the
search, also when the configuration count is searched), a mapping's ``num_tile`` above the
tokens it tiles (exit 2), and every infeasible ``eval`` naming its kernel, edge or
configuration with units.

Golden values are closed forms: the pin rules (kernel i in configuration i with one
configuration per kernel; Config(src) <= Config(dst); forward kernels in 0..f with f =
C // 2 - 1 for even C), the token counts of the specs (seq_len 1 for a decode step), and the
evaluator's own violation amount, which the explanation (costed another way, per
configuration) must restate.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.codes import Phase, Status
from dfsearch.errors import SpecError
from dfsearch.explain import violation_text
from dfsearch.mapping import load_mapping
from dfsearch.result import format_bytes
from dfsearch.validate import validate_spec

from specs import random_spec

EXAMPLES = Path(__file__).parent.parent / "dfsearch" / "examples"
runner = CliRunner()

#: the three-kernel spec of docs/spec.md ("LayerNorm" -> "FFN0" -> "FFN1"), pins added below
DOC_SPEC = (Path(__file__).parent.parent / "docs" / "spec.md").read_text().split(
    "shape the search may change:\n\n```toml\n")[1].split("```")[0]


def doc_spec(tmp_path: Path, num_config: str, pins: dict[str, int]) -> Path:
    text = DOC_SPEC.replace('num_config = "auto"', f"num_config = {num_config}")
    text = text.replace("time_limit_s = 10", "")
    for name, c in pins.items():
        text = text.replace(f'name = "{name}"\n', f'name = "{name}"\nconfig = {c}\n')
    out = tmp_path / "spec.toml"
    out.write_text(text)
    return out


def invoke(*args: str):
    return runner.invoke(app, list(args))


# --------------------------------------------------------------------------------- pins
def test_pins_against_one_configuration_per_kernel_are_refused(tmp_path):
    """Before: the pins were dropped, the run said OPTIMAL with FFN1 in configuration 2."""
    spec = doc_spec(tmp_path, "3", {"FFN0": 1, "FFN1": 0})
    r = invoke("run", str(spec), "-q")
    assert r.exit_code == 2, r.output
    assert ('graph.kernels[2] ("FFN1").config must be 2 or -1 (free): with one configuration per '
            "kernel (3 configurations for 3 kernels) kernel 2 runs in configuration 2") in r.output
    assert "Got 0 instead." in r.output and "Traceback" not in r.output


def test_pins_against_the_order_rule_are_refused(tmp_path):
    """Before: exit 1, "no feasible mapping", no rule named."""
    spec = doc_spec(tmp_path, "2", {"FFN0": 1, "FFN1": 0})
    r = invoke("validate", str(spec))
    assert r.exit_code == 2, r.output
    assert 'graph.kernels[2] ("FFN1").config cannot be honoured' in r.output
    assert "'FFN0' is pinned to configuration 1 and 'FFN1' is pinned to configuration 0" in r.output
    assert "a kernel runs in the same or a later configuration than every kernel it reads" in r.output


def test_a_pin_upstream_through_a_free_kernel_counts(tmp_path):
    spec = doc_spec(tmp_path, "2", {"LayerNorm": 1, "FFN1": 0})  # FFN0 free in between
    r = invoke("validate", str(spec))
    assert r.exit_code == 2, r.output
    assert "'LayerNorm' is pinned to configuration 1 and 'FFN1' is pinned to configuration 0" in r.output


def test_auto_refuses_pins_no_count_holds_and_honours_the_others(tmp_path):
    bad = doc_spec(tmp_path, '"auto"', {"FFN0": 1, "FFN1": 0})
    r = invoke("validate", str(bad))
    assert r.exit_code == 2 and "num_config = 'auto' tries 1 to 3 configurations" in r.output, r.output
    # FFN0 and FFN1 in configuration 1: counts 2 and 3 may hold them, but 3 only with FFN1
    # in configuration 2 (one per kernel), which the pin forbids; before, that count dropped
    # the pins and won
    good = doc_spec(tmp_path, '"auto"', {"FFN0": 1, "FFN1": 1})
    out = tmp_path / "r.json"
    r = invoke("run", str(good), "-q", "--json", str(out))
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert (data["config"]["FFN0"], data["config"]["FFN1"]) == (1, 1)
    assert data["num_config"] == 2


def test_forward_and_backward_pins_follow_the_fwd_bwd_rule():
    """num_config 4: forward kernels in 0..1, backward in 2..3."""
    spec = random_spec(3, n=6, num_config=4, training=True)
    kernels = spec.graph.kernels
    fwd = next(i for i, k in enumerate(kernels) if k.phase is Phase.FWD)
    bwd = next(i for i, k in enumerate(kernels) if k.phase is Phase.BWD)

    def pinned(i: int, c: int):
        ks = tuple(replace(k, config=c if j == i else -1) for j, k in enumerate(kernels))
        return replace(spec, graph=replace(spec.graph, kernels=ks))

    assert validate_spec(pinned(fwd, 1)) == [] and validate_spec(pinned(bwd, 2)) == []
    (issue,) = validate_spec(pinned(fwd, 2))
    assert issue.path == f'graph.kernels[{fwd}] ("{kernels[fwd].name}").config'
    assert "is a forward kernel, in configurations 0..1 (FWD/BWD rule with 4 configurations)" in issue.message
    (issue,) = validate_spec(pinned(bwd, 1))
    assert "is a backward kernel, in configurations 2..3" in issue.message


def test_honoured_pins_survive_every_count(tmp_path):
    """Pins that agree with one configuration per kernel are kept (not dropped) and hold."""
    spec = doc_spec(tmp_path, "3", {"FFN0": 1, "FFN1": 2})
    out = tmp_path / "r.json"
    r = invoke("run", str(spec), "-q", "--json", str(out))
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["config"] == {"LayerNorm": 0, "FFN0": 1, "FFN1": 2}


# ------------------------------------------------------------------------ num_tile vs tokens
@pytest.fixture(scope="module")
def mappings(tmp_path_factory):
    """Mappings ``run --mapping-out`` writes for a decode step, a training layer and DLRM."""
    d = tmp_path_factory.mktemp("maps")
    out = {}
    for name in ("llm_decode", "gpt3_1.5B_a100x4", "dlrm_a100x128"):
        m = d / f"{name}.toml"
        r = invoke("run", str(EXAMPLES / f"{name}.toml"), "-q", "--mapping-out", str(m))
        assert r.exit_code == 0, r.output
        out[name] = m
    return out


def _with(path: Path, tmp_path: Path, **changes: int) -> Path:
    text = path.read_text()
    for key, value in changes.items():
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
        assert n == 1
    out = tmp_path / f"m_{'_'.join(f'{k}{v}' for k, v in changes.items())}.toml"
    out.write_text(text)
    return out


@pytest.mark.parametrize(("example", "tiles", "expected"), [
    ("llm_decode", 2, "num_tile must be <= workload.seq_len = 1: the tiles cut the 1 token(s) of a "
                      "sequence, one token at least per tile (a decode step has one token). Got 2 instead."),
    ("gpt3_1.5B_a100x4", 1025, "num_tile must be <= workload.seq_len = 1024"),
    ("dlrm_a100x128", 2, "num_tile must be 1: a dlrm workload is not tiled"),
])  # fmt: skip
def test_more_tiles_than_tokens_is_exit_2(mappings, tmp_path, example, tiles, expected):
    m = _with(mappings[example], tmp_path, num_tile=tiles)
    r = invoke("eval", str(EXAMPLES / f"{example}.toml"), "--mapping", str(m))
    assert r.exit_code == 2, r.output
    assert f"{m}: {expected}" in r.output and "Traceback" not in r.output


def test_as_many_tiles_as_tokens_is_accepted(mappings, tmp_path):
    m = _with(mappings["gpt3_1.5B_a100x4"], tmp_path, num_tile=1024)
    r = invoke("eval", str(EXAMPLES / "gpt3_1.5B_a100x4.toml"), "--mapping", str(m))
    assert r.exit_code in (0, 1), r.output


# -------------------------------------------------------------------- eval violations
def _eval(spec: Path, mapping: Path, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / "e.json"
    r = invoke("eval", str(spec), "--mapping", str(mapping), "--json", str(out))
    assert r.exit_code == 1, r.output
    return r.output, json.loads(out.read_text())


def _edit(path: Path, tmp_path: Path, old: str, new: str, name: str) -> Path:
    text = path.read_text()
    assert old in text
    out = tmp_path / name
    out.write_text(text.replace(old, new, 1))
    return out


def test_sram_violation_names_the_configuration_and_bytes(mappings, tmp_path):
    spec = _edit(EXAMPLES / "gpt3_1.5B_a100x4.toml", tmp_path, "sram_bytes = 88080384 ", "sram_bytes = 880803 ", "s.toml")
    text, data = _eval(spec, mappings["gpt3_1.5B_a100x4"], tmp_path)
    assert data["evaluator_status"] == "sram" and data["violation_unit"] == "bytes"
    msg = data["violation_message"]
    assert msg.startswith("configuration ") and "kernels 'Loss_bwd'" in msg
    assert "the chip has 880.8 kB (880803 bytes)" in msg
    # the excess costed per configuration is the evaluator's own violation (bytes)
    assert f": {format_bytes(data['violation'])} too much" in msg
    assert msg in text


def test_cores_and_dram_violations_give_their_units(mappings, tmp_path):
    spec = _edit(EXAMPLES / "gpt3_1.5B_a100x4.toml", tmp_path, "cores = 432", "cores = 10", "c.toml")
    _, data = _eval(spec, mappings["gpt3_1.5B_a100x4"], tmp_path)
    assert data["violation_unit"] == "cores"
    assert f"needs {10 + data['violation']:.0f} cores, the chip has 10 cores" in data["violation_message"]
    spec = _edit(EXAMPLES / "gpt3_1.5B_a100x4.toml", tmp_path, "dram_bytes = 42949672960", "dram_bytes = 4294967", "d.toml")
    _, data = _eval(spec, mappings["gpt3_1.5B_a100x4"], tmp_path)
    assert data["violation_unit"] == "bytes"
    msg = data["violation_message"]
    assert msg.startswith("DRAM per chip needs ") and "the chip has 4.295 MB (4.29497e+06 bytes)" in msg
    assert "largest weight: kernel " in msg


def test_rule_violations_name_the_kernel_or_edge(mappings, tmp_path):
    spec = EXAMPLES / "gpt3_1.5B_a100x4.toml"
    m = _edit(mappings["gpt3_1.5B_a100x4"], tmp_path, "\nAdd_2 = 0", "\nAdd_2 = 1", "fb.toml")
    _, data = _eval(spec, m, tmp_path)
    assert data["violation_message"] == (
        "kernel 'Add_2' (graph.kernels[17]) is in configuration 1; a forward kernel runs in "
        "configurations 0..0 with 2 configurations (FWD/BWD rule; by 1 configurations)")
    m = _edit(mappings["gpt3_1.5B_a100x4"], tmp_path, "micro_batch_size = 1", "micro_batch_size = 3", "div.toml")
    _, data = _eval(spec, m, tmp_path)
    assert data["violation_message"] == (
        "workload.global_batch_size = 8192 sequences is not a multiple of micro-batch 3 x DP 1 = "
        "3 sequences (remainder 2 sequences)")  # 8192 = 3 x 2730 + 2


def test_order_violation_names_the_edge(tmp_path):
    spec = doc_spec(tmp_path, "2", {})
    m = tmp_path / "m.toml"
    m.write_text("shape = [8, 1]\nnum_tile = 512\n[config]\nLayerNorm = 0\nFFN0 = 1\nFFN1 = 0\n")
    _, data = _eval(spec, m, tmp_path)
    assert data["evaluator_status"] == "order" and data["violation_unit"] == "configurations"
    assert data["violation_message"] == (
        "edge 'FFN0' -> 'FFN1' (graph.connections[1]) runs from configuration 1 back to "
        "configuration 0 (by 1 configurations): a kernel runs in the same or a later "
        "configuration than every kernel it reads from")


def test_a_mapping_against_a_pin_names_the_pin(tmp_path):
    spec = doc_spec(tmp_path, "2", {"FFN1": 1})
    m = tmp_path / "m.toml"
    m.write_text("shape = [8, 1]\nnum_tile = 512\n[config]\nLayerNorm = 0\nFFN0 = 0\nFFN1 = 0\n")
    from dfsearch import api

    s = api.load(spec)
    ev, _ = api.evaluate_mapping(s, m)
    assert ev.status is Status.CONFIG
    assert violation_text(s, ev) == ("kernel 'FFN1' (graph.kernels[2]) is in configuration 0 but its "
                                     "config field pins it to configuration 1 (by 1 configurations)")


def test_load_mapping_rejects_tiles_for_untiled_kinds_in_python(mappings, tmp_path):
    from dfsearch import api

    m = _with(mappings["dlrm_a100x128"], tmp_path, num_tile=4)
    with pytest.raises(SpecError, match="num_tile must be 1"):
        load_mapping(m, api.load(EXAMPLES / "dlrm_a100x128.toml"))
