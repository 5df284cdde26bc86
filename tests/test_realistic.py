"""The realistic execution model (issue 23 item 2; docs/model.md, "The realistic execution
model"): its closed forms on tiny specs, which specs select it, its input errors and the
physics floors it keeps.

Every expected number below is computed by hand in the test's docstring from the formulas
of docs/model.md, not read from the code's output.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
from dfsearch.cli import app
from dfsearch.codes import Collective, Dim, ExecutionModel, Parallelism
from dfsearch.cost.lower import Outer, gemm_work_flop, k_steps_per_core, lower
from dfsearch.kernels.generators import llm_serving
from dfsearch.loader import load_spec, load_toml_spec
from dfsearch.presets.expand import GEMM_CEILING_SERVING
from dfsearch.sanity import spec_warnings
from dfsearch.spec import Execution
from dfsearch.system.fabric import Fabric

ROOT = Path(__file__).parent.parent
DFMODEL_SETUP = ROOT / "tests" / "data" / "dfmodel"

ONE_GEMM = """
[workload]
kind = "llm"
hidden_dim = 64
num_head = 1
head_dim = 64
seq_len = 300
num_layer = 1
global_batch_size = 1
micro_batch_size = 1

[[graph.kernels]]
name = "G"
kind = "gemm_weight"
m = 200
k = 100
n = 300
tiling = "none"
sharding = "m"
input_bytes = 60000
weight_bytes = 40000
output_bytes = 120000

[system]
num_chip = 1
[system.accelerator]
cores = 4
systolic_width = 16
systolic_height = 16
sram_bytes = 1e12
freq_GHz = 1.0
[system.memory]
dram_bw_GBps = 1000.0
dram_bytes = 1e12
[[system.network]]
topology = "switch"
size = 1
link_bw_GBps = 100.0
parallelism = "tp"

[execution]
compute_util = 0.5
{extra}
"""


def _one_gemm(extra: str = 'model = "realistic"'):
    return load_toml_spec(ONE_GEMM.format(extra=extra), file="g.toml", base_dir=ROOT)


def _outer(shape: tuple[int, ...] = (1,), n: int = 1) -> Outer:
    return Outer(shape=shape, sharding=tuple(Dim.M for _ in range(n)), micro_batch_size=1,
                 num_tile=1, num_config=1)


# --------------------------------------------------------------------------- closed forms
def test_one_gemm_is_launch_plus_quantised_work_at_u_times_peak():
    """Peak = 2 x 16 x 16 x 4 cores x 1 GHz = 2048 FLOP/ns, u = 0.5: 1024 FLOP/ns.
    The 200 x 300 output in 128 x 128 tiles: 2 x 3 = 6 tiles; 6 tiles fill a wave of 4 cores
    (no split-K); 2 waves. K = 100 padded to 2 steps of 64 = 128. Work = 2 x 2 waves x 4
    cores x 128 x 128 x 128 = 33,554,432 FLOP = 32,768 ns, plus 4.5 us launch: 37,268 ns.
    DFModel's equations: 2 x 200 x 300 x 100 / 1024 = 11,718.75 ns."""
    realistic = lower(_one_gemm(), _outer())
    assert realistic.kernels.compute_ns[0] == pytest.approx(37_268.0, rel=1e-12)
    plain = lower(_one_gemm(extra=""), _outer())
    assert plain.kernels.compute_ns[0] == pytest.approx(11_718.75, rel=1e-12)


def test_the_kernel_overhead_and_tile_fields_enter_the_closed_form():
    """No launch overhead and 64 x 64 x 100 tiles: 4 x 5 = 20 tiles on 4 cores = 5 waves, K
    = 100 in one step: 2 x 5 x 4 x 64 x 64 x 100 = 16,384,000 FLOP = 16,000 ns."""
    spec = _one_gemm('model = "realistic"\nkernel_overhead_us = 0\ngemm_tile_m = 64\n'
                     'gemm_tile_n = 64\ngemm_tile_k = 100')
    assert lower(spec, _outer()).kernels.compute_ns[0] == pytest.approx(16_000.0, rel=1e-12)


def test_split_k_fills_idle_cores_and_skinny_operands_get_narrow_tiles():
    """A 128 x 4096 x 8 GEMM on 16 cores: N = 8 gets a 16-wide tile (the power of two >= 8,
    at least 16), 1 output tile; K's 64 steps split 16 ways (4 steps of 64 = 256 each), one
    wave: 2 x 1 x 16 x 128 x 16 x 256 = 16,777,216 FLOP."""
    ex = Execution()
    assert gemm_work_flop(128, 4096, 8, ex, 16) == 16_777_216.0


def test_an_under_filled_grid_shares_its_k_steps_evenly_over_the_cores_stream_k():
    """A 8,192 x 8,192 x 128 GEMM (a 128-token pass's 8,192-wide projection) on 108 cores:
    64 x 1 tiles of 128 x 128, 128 K steps of 64. Whole waves would give one core a full
    tile, 128 steps, for 64 busy cores; stream-K gives each core ceil(64 x 128 / 108) = 76
    steps: 2 x 108 x 128 x 128 x 64 x 76 = 17,213,423,616 FLOP, 1.002 x the GEMM's FLOP. A
    grid of 108 tiles or more keeps its waves: 256 x 1 tiles are 3 waves of 128 steps."""
    ex = Execution()
    assert k_steps_per_core(64, 128, 108) == 76
    assert gemm_work_flop(8192, 8192, 128, ex, 108) == 2.0 * 108 * 128 * 128 * 64 * 76
    assert k_steps_per_core(256, 128, 108) == 3 * 128
    assert gemm_work_flop(32768, 8192, 128, ex, 108) == 2.0 * 108 * 128 * 128 * 64 * 3 * 128


def test_an_all_reduce_on_eight_gpus_is_alpha_beta():
    """8 chips on a switch at 300 GB/s, bus efficiency 0.8, 1 us per ring step: 2 (8 - 1) =
    14 steps = 14,000 ns, plus 8e6 bytes x 2 x 7/8 / (0.8 x 300 GB/s) = 58,333.33 ns."""
    text = ONE_GEMM.format(extra='model = "realistic"').replace("num_chip = 1", "num_chip = 8")
    text = text.replace("size = 1\nlink_bw_GBps = 100.0", "size = 8\nlink_bw_GBps = 300.0")
    spec = load_toml_spec(text, file="g.toml", base_dir=ROOT)
    fabric = Fabric.of(spec, (8,))
    got = fabric.collective_time_ns(Collective.ALL_REDUCE, 8e6, Parallelism.TP)
    assert got == pytest.approx(14_000.0 + 8e6 * 1.75 / 240.0, rel=1e-12)
    assert fabric.collective_time_ns(Collective.ALL_GATHER, 8e6, Parallelism.TP) == pytest.approx(
        7_000.0 + 8e6 * 0.875 / 240.0, rel=1e-12)
    dfmodel = Fabric.of(load_toml_spec(text.replace('model = "realistic"', ""), file="g.toml",
                                       base_dir=ROOT), (8,))
    # DFModel's switch all-reduce with its half-volume quirk: (p - 1) / (p bw) per byte
    assert dfmodel.collective_time_ns(Collective.ALL_REDUCE, 8e6, Parallelism.TP) == pytest.approx(
        8e6 * 7 / (8 * 300.0), rel=1e-12)


def test_a_tensor_parallel_all_reduce_is_exposed_not_overlapped():
    """A K-sharded GEMM on 8 chips needs a TP all-reduce of its output: under the realistic
    model its time is added to the kernel's compute time and the network term stays 0."""
    text = ONE_GEMM.format(extra='model = "realistic"').replace("num_chip = 1", "num_chip = 8")
    text = text.replace("size = 1\nlink_bw_GBps = 100.0", "size = 8\nlink_bw_GBps = 300.0")
    text = text.replace('sharding = "m"', 'sharding = "k"')
    spec = load_toml_spec(text, file="g.toml", base_dir=ROOT)
    p = lower(spec, Outer(shape=(8,), sharding=(Dim.K,), micro_batch_size=1, num_tile=1,
                          num_config=1))
    # the shard: 200 x ceil(100/8) = 13 x 300 -> 2 x 3 tiles x 1 K step of 64 on 4 cores
    work = 2.0 * 2 * 4 * 128 * 128 * 64 / 1024.0
    # 120 kB per chip: a tree (6 steps, volume 2) beats the ring (14 steps, volume 1.75)
    ring = 14_000.0 + (200 * 300 * 2) * 1.75 / 240.0
    tree = 6_000.0 + (200 * 300 * 2) * 2.0 / 240.0
    assert tree < ring
    assert p.kernels.compute_ns[0] == pytest.approx(4_500.0 + work + tree, rel=1e-12)
    assert p.kernels.net_tile_ns[0] == 0.0


# --------------------------------------------------------------------------- selection
def test_plain_specs_and_dfmodel_inputs_keep_dfmodel_s_equations():
    assert _one_gemm(extra="").execution.model is ExecutionModel.DFMODEL
    setups = sorted(DFMODEL_SETUP.rglob("setup.txt"))
    assert setups
    assert load_spec(setups[0]).execution.model is ExecutionModel.DFMODEL


PRESET = """
[workload]
model = "llama2-7b"
kind = "llm_serving"
phase = "decode"
prompt_len = 1024
output_len = 128
batch_size = 8
[system]
preset = "h100"
num_chip = 1
[[system.network]]
fabric = "nvlink"
size = 1
parallelism = "tp"
{extra}
"""


def test_a_chip_preset_selects_the_realistic_model_unless_the_spec_says_dfmodel():
    spec = load_toml_spec(PRESET.format(extra=""), file="p.toml", base_dir=ROOT)
    assert spec.execution.model is ExecutionModel.REALISTIC
    assert spec.execution.compute_util == GEMM_CEILING_SERVING  # a serving spec with 2-byte words
    own = load_toml_spec(PRESET.format(extra='[execution]\nmodel = "dfmodel"'), file="p.toml",
                         base_dir=ROOT)
    assert own.execution.model is ExecutionModel.DFMODEL
    assert own.execution.compute_util == 0.0  # DFModel's cycle model, as without a preset


@pytest.mark.parametrize(("line", "needle"), [
    ('model = "fast"', "execution.model must be one of 'dfmodel', 'realistic'. Got 'fast'"),
    ('model = "realistic"\nbus_efficiency = 0', "execution.bus_efficiency must be > 0. Got 0"),
    ('model = "realistic"\ngemm_tile_n = 0', "execution.gemm_tile_n must be >= 1. Got 0"),
    ('model = "realistic"\nkernel_overhead_us = -1',
     "execution.kernel_overhead_us must be >= 0. Got -1"),
])
def test_bad_execution_model_values_are_one_line_exit_2_errors(tmp_path, line, needle):
    bad = tmp_path / "bad.toml"
    bad.write_text(ONE_GEMM.format(extra=line))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert f"{bad}: {needle} instead" in r.output
    assert "Traceback" not in r.output


def test_a_bad_fused_attention_value_is_a_one_line_exit_2_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(PRESET.format(extra='[graph]\ngenerator = "llm-serving"\n'
                                       'fused_attention = "yes"'))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert f"{bad}: graph.fused_attention must be true or false. Got 'yes' instead" in r.output
    assert "Traceback" not in r.output


def test_the_realistic_model_needs_the_flop_model(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(ONE_GEMM.format(extra='model = "realistic"').replace(
        "compute_util = 0.5", "compute_util = 0"))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert "execution.compute_util must be > 0 with execution.model = 'realistic'" in r.output


# --------------------------------------------------------------------------- floors
@pytest.mark.parametrize("dims", [(1, 1, 1), (200, 100, 300), (4096, 4096, 2048),
                                  (12288, 49152, 7), (129, 65, 257)])
def test_a_gemm_never_beats_its_flop_at_the_peak(dims):
    """Quantised work >= the GEMM's 2 m k n FLOP, so time >= FLOP / peak at any u <= 1."""
    m, k, n = dims
    for cores in (1, 4, 108, 132):
        assert gemm_work_flop(m, k, n, Execution(), cores) >= 2.0 * m * k * n


def test_a_realistic_decode_step_is_no_faster_than_its_flop_and_its_weight_reads():
    """One decode step of Llama 2 7B (batch 8) on an H100: time >= FLOP / peak and >= the
    weights streamed once from HBM / its bandwidth."""
    spec = load_toml_spec(PRESET.format(extra=""), file="p.toml", base_dir=ROOT)
    ev = dfsearch.run(spec).evaluation
    acc, mem = spec.system.accelerator, spec.system.memory
    assert ev.final_s * 1e9 >= ev.workload_flop / acc.peak_gflops
    wl = spec.workload
    h, f, layers = wl.hidden_dim, wl.ffn_dim, wl.num_layer
    weights = layers * (4 * h * h + 3 * h * f) * spec.execution.word_bytes
    assert ev.final_s * 1e9 >= weights / mem.dram_bw_GBps
    assert math.isfinite(ev.final_s)


# --------------------------------------------------------------------------- validation set
_VAL = importlib.util.spec_from_file_location("validate_runs", ROOT / "benchmarks" / "validate.py")
V = importlib.util.module_from_spec(_VAL)
sys.modules["validate_runs"] = V  # the dataclass needs its module registered
_VAL.loader.exec_module(V)


def test_every_compared_run_is_in_the_data_file_and_builds_a_valid_spec_under_both_models():
    """benchmarks/validate.py: each selected run exists, the fit anchors are training runs it
    compares, and each run's spec (both models; a decode also its batch's prefill) loads."""
    runs = {r["id"]: r for r in json.loads(V.DATA.read_text())}
    ids = V.TRAINING + V.PREFILL + V.DECODE
    assert len(ids) >= 15 and set(ids) <= set(runs)
    assert set(V.FIT_IDS) <= set(V.TRAINING)
    for rid in ids:
        run = runs[rid]
        for model in ("realistic", "dfmodel"):
            if run["kind"] == "training":
                texts = [V.training_toml(run, model)]
            else:
                bs = run["config"].get("batch_size") or 1
                texts = [V.serving_toml(run, model, "prefill", bs)]
                if run["kind"] == "decode":
                    texts.append(V.serving_toml(run, model, "decode", bs))
            for text in texts:
                spec = load_toml_spec(text, file=f"{rid}.toml", base_dir=ROOT)
                assert spec.execution.model is ExecutionModel.from_label(model)


def test_megatron_flop_is_the_paper_s_formula():
    """Megatron-LM SC'21 Eq. 3 for the 1.7B row (B 512, s 2048, l 24, h 2304, V 51200):
    96 x 512 x 2048 x 24 x 2304^2 x (1 + 2048 / 13824 + 51200 / 884736)."""
    runs = {r["id"]: r for r in json.loads(V.DATA.read_text())}
    want = 96 * 512 * 2048 * 24 * 2304**2 * (1 + 2048 / 13824 + 51200 / 884736)
    assert V.megatron_flop(runs["megatron21-t1-gpt-1p7b"]) == pytest.approx(want, rel=1e-12)


def test_a_training_run_carries_the_logit_gemms_megatron_s_formula_counts():
    """The training spec of benchmarks/validate.py holds the embedding and the LM head, so the
    predicted time covers what Megatron's Eq. 3 counts in its V / (16 l h) term: per
    sequence 96 s l h^2 x V / (16 l h) = 6 s h V FLOP, three GEMMs of 2 s h V (forward, data
    and weight gradient); 1.7B row: s 2048, h 2304, V 51200."""
    runs = {r["id"]: r for r in json.loads(V.DATA.read_text())}
    spec = load_toml_spec(V.training_toml(runs["megatron21-t1-gpt-1p7b"], "realistic"),
                          file="t.toml", base_dir=ROOT)
    head = [k for k in spec.graph.kernels if k.name.startswith("LM_Head")]
    assert {k.name for k in head} == {"LM_Head", "LM_Head_bwd", "LM_Head_bwd_weight_update"}
    assert sum(2.0 * k.m * k.k * k.n for k in head) == 6.0 * 2048 * 2304 * 51200
    assert [k.name for k in spec.graph.kernels if k.name.startswith("Embedding")] == [
        "Embedding", "Embedding_bwd"]


def test_fused_attention_is_one_causal_kernel_with_half_the_unfused_flop():
    """docs/model.md "Fused attention": h 64, a 4 heads of d 16, s 32 tokens, w 2. The
    unfused pair MHA_GEMM_1 + MHA_GEMM_2 is 2 x 2 a s^2 d = 262,144 FLOP; FMHA skips the
    masked half, 2 a s^2 d = 131,072, with an h s w = 4,096-byte output (not a s^2 w =
    8,192); SOFTMAX and DropOut_1 are gone (18 - 3 = 15 kernels, 21 - 7 + 4 = 18 edges)."""
    kw = dict(hidden=64, num_head=4, head_dim=16, word=2, prompt_len=32, decode=0)
    unfused, fused = llm_serving(**kw), llm_serving(**kw, fused_attention=True)
    pair = [k for k in unfused.kernels if k.name in ("MHA_GEMM_1", "MHA_GEMM_2")]
    assert sum(2 * k.outer * k.m * k.k * k.n for k in pair) == 262_144
    (fmha,) = [k for k in fused.kernels if k.name == "FMHA"]
    assert 2 * fmha.outer * fmha.m * fmha.k * fmha.n == 131_072
    assert fmha.outer * fmha.m * fmha.n * 2 == 4_096 == fmha.output_bytes
    assert len(unfused.kernels) == 18 and len(fused.kernels) == 15
    assert not {"SOFTMAX", "DropOut_1", "MHA_GEMM_1", "MHA_GEMM_2"} & {
        k.name for k in fused.kernels}
    edges = {(c.src, c.dst) for c in fused.connections}
    assert {("Q", "FMHA"), ("K", "FMHA"), ("V", "FMHA"), ("FMHA", "PROJ_GEMM")} <= edges
    # the 7 unfused edges at the four kernels (Q, K -> MHA_GEMM_1 -> SOFTMAX -> DropOut_1,
    # V, DropOut_1 -> MHA_GEMM_2 -> PROJ_GEMM) become FMHA's 4
    assert len(fused.connections) == 21 - 7 + 4


def test_the_validation_prefills_run_the_engine_s_fused_attention():
    """TensorRT-LLM's build commands (performance.md) set ``--enable_context_fmha``, so the
    serving specs of benchmarks/validate.py ask for ``fused_attention``."""
    runs = {r["id"]: r for r in json.loads(V.DATA.read_text())}
    spec = load_toml_spec(V.serving_toml(runs[V.PREFILL[0]], "realistic", "prefill"),
                          file="p.toml", base_dir=ROOT)
    assert "FMHA" in {k.name for k in spec.graph.kernels}


@pytest.mark.parametrize(("chip", "model", "want"), [
    ("h100-sxm-80gb", "realistic", 3350 * 0.867),  # measured 2,903 GB/s = 86.7 % of 3,350
    ("h100-sxm-80gb", "dfmodel", 3350.0),
    ("a100-sxm-80gb", "realistic", 2039.0),  # no published measurement: the peak
])
def test_the_realistic_model_reads_hbm_at_the_chip_s_measured_fraction(chip, model, want):
    text = PRESET.replace('preset = "h100"', f'preset = "{chip}"').format(
        extra=f'[execution]\nmodel = "{model}"')
    spec = load_toml_spec(text, file="h.toml", base_dir=ROOT)
    assert spec.system.memory.dram_bw_GBps == pytest.approx(want, rel=1e-9)


def test_a_realistic_only_key_under_dfmodel_s_equations_is_warned_about():
    from_dfmodel = spec_warnings(_one_gemm(extra="kernel_overhead_us = 2.0"))
    assert [w.path for w in from_dfmodel] == ["execution.kernel_overhead_us"]
    assert spec_warnings(_one_gemm('model = "realistic"\nkernel_overhead_us = 2.0')) == ()


def test_the_report_names_the_realistic_model_and_its_constants(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(PRESET.format(extra=""))
    r = CliRunner().invoke(app, ["run", str(path)])
    assert r.exit_code == 0, r.output
    assert ("realistic model: launch 4.5 us per kernel, GEMM tiles 128x128x64, collectives at "
            "0.8 x link bandwidth + 1 us per step") in r.output


def test_a_dimension_s_own_bus_efficiency_overrides_the_execution_s():
    """The 8-chip all-reduce above with ``bus_efficiency = 0.5`` on its dimension: 14 steps
    x 1 us + 8e6 x 1.75 / (0.5 x 300 GB/s) = 14,000 + 93,333.33 ns."""
    text = ONE_GEMM.format(extra='model = "realistic"').replace("num_chip = 1", "num_chip = 8")
    text = text.replace("size = 1\nlink_bw_GBps = 100.0",
                        "size = 8\nlink_bw_GBps = 300.0\nbus_efficiency = 0.5")
    spec = load_toml_spec(text, file="g.toml", base_dir=ROOT)
    got = Fabric.of(spec, (8,)).collective_time_ns(Collective.ALL_REDUCE, 8e6, Parallelism.TP)
    assert got == pytest.approx(14_000.0 + 8e6 * 1.75 / 150.0, rel=1e-12)


def test_the_nvlink4_preset_fills_its_published_all_gather_bus_bandwidth():
    """nccl-tests on H100 NVLink: 370 GB/s busbw on all-gather at a 450 GB/s line rate:
    370 / 450 = 0.8222 -> 0.822; NVLink 3 publishes no figure (execution.bus_efficiency)."""
    spec = load_toml_spec(PRESET.format(extra=""), file="p.toml", base_dir=ROOT)
    assert spec.system.network[0].bus_efficiency == 0.822
    a100 = load_toml_spec(PRESET.format(extra="").replace('"h100"', '"a100"'), file="p.toml",
                          base_dir=ROOT)
    assert a100.system.network[0].bus_efficiency is None


def test_a_bad_dimension_bus_efficiency_is_a_one_line_exit_2_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(ONE_GEMM.format(extra="").replace("link_bw_GBps = 100.0",
                                                     "link_bw_GBps = 100.0\nbus_efficiency = -2"))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert f"{bad}: system.network[0].bus_efficiency must be > 0. Got -2 instead." in r.output
