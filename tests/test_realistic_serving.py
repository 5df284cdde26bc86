"""The realistic model's serving terms (issue 23, serving accuracy; docs/model.md, "The
realistic execution model" and "KV reads per query head"): launches and tensor-parallel
collectives charged after each kernel, the FP8 GEMM ceiling, and a decode kernel that reads
the KV cache once per query head.

Every expected number is computed by hand in the test's docstring from those formulas.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.codes import Dim, Overlap
from dfsearch.cost.lower import Outer, lower
from dfsearch.kernels.generators import llm_serving
from dfsearch.loader import load_toml_spec
from dfsearch.presets.expand import GEMM_CEILING, GEMM_CEILING_FP8, GEMM_CEILING_SERVING
from tests.test_realistic import ONE_GEMM

ROOT = Path(__file__).parent.parent

_VAL = importlib.util.spec_from_file_location("validate_runs_serving",
                                              ROOT / "benchmarks" / "validate.py")
V = importlib.util.module_from_spec(_VAL)
sys.modules["validate_runs_serving"] = V  # the dataclass needs its module registered
_VAL.loader.exec_module(V)


def _spec(extra: str, chips: int = 1, sharding: str = "m"):
    text = ONE_GEMM.format(extra=extra).replace("num_chip = 1", f"num_chip = {chips}")
    text = text.replace("size = 1\nlink_bw_GBps = 100.0", f"size = {chips}\nlink_bw_GBps = 300.0")
    text = text.replace('sharding = "m"', f'sharding = "{sharding}"')
    return load_toml_spec(text, file="g.toml", base_dir=ROOT)


def _outer(chips: int, dim: Dim) -> Outer:
    return Outer(shape=(chips,), sharding=(dim,), micro_batch_size=1, num_tile=1, num_config=1)


# --------------------------------------------------------------------------- serial launch
def test_under_compute_memory_the_launch_is_charged_after_the_kernel_not_under_its_reads():
    """The one GEMM of tests/test_realistic.py: work 32,768 ns at u x peak, launch 4.5 us.
    With ``overlap = "compute_memory"`` (II = max(Tc, Tm) + Tn) the compute column holds the
    work alone and the launch is the kernel's network term, so a memory-bound kernel can no
    longer hide its launch; under "perfect" the launch stays in the compute column."""
    serial = lower(_spec('model = "realistic"\noverlap = "compute_memory"'), _outer(1, Dim.M))
    assert serial.kernels.compute_ns[0] == pytest.approx(32_768.0, rel=1e-12)
    assert serial.kernels.net_tile_ns[0] == pytest.approx(4_500.0, rel=1e-12)
    assert serial.constants.overlap == Overlap.COMPUTE_MEMORY
    perfect = lower(_spec('model = "realistic"'), _outer(1, Dim.M))
    assert perfect.kernels.compute_ns[0] == pytest.approx(37_268.0, rel=1e-12)
    assert perfect.kernels.net_tile_ns[0] == 0.0


def test_under_compute_memory_the_tensor_parallel_all_reduce_follows_the_kernel():
    """K-sharded on 8 chips (tests/test_realistic.py's exposed all-reduce): the shard's work
    2 x 2 x 4 x 128 x 128 x 64 / 1024 = 16,384 ns; the all-reduce of 200 x 300 x 2 bytes is
    14 ring steps of 1 us + 120,000 x 1.75 / 240 = 14,875 ns as a ring, or as a tree
    2 x log2(8) = 6 steps of 1 us + 120,000 x 2 / 240 = 7,000 ns, the faster. Serial:
    compute = work, network = launch + all-reduce."""
    p = lower(_spec('model = "realistic"\noverlap = "compute_memory"', 8, "k"), _outer(8, Dim.K))
    assert p.kernels.compute_ns[0] == pytest.approx(16_384.0, rel=1e-12)
    assert p.kernels.net_tile_ns[0] == pytest.approx(4_500.0 + 7_000.0, rel=1e-12)


def test_dfmodel_s_equations_ignore_the_serial_rule():
    """Without the realistic model the overlap only combines DFModel's terms: the GEMM's
    FLOP at u x peak, 2 x 200 x 300 x 100 / 1024 = 11,718.75 ns, and no launch anywhere."""
    p = lower(_spec('overlap = "compute_memory"'), _outer(1, Dim.M))
    assert p.kernels.compute_ns[0] == pytest.approx(11_718.75, rel=1e-12)
    assert p.kernels.net_tile_ns[0] == 0.0


# --------------------------------------------------------------------------- preset defaults
SERVING = """
[workload]
model = "llama2-7b"
kind = "llm_serving"
phase = "prefill"
prompt_len = 128
output_len = 1
batch_size = 1
[system]
preset = "h100"
num_chip = 1
[[system.network]]
fabric = "nvlink"
size = 1
parallelism = "tp"
[execution]
{extra}
"""


@pytest.mark.parametrize(("extra", "util", "overlap"), [
    ("", GEMM_CEILING_SERVING, Overlap.COMPUTE_MEMORY),
    ("word_bytes = 2", GEMM_CEILING_SERVING, Overlap.COMPUTE_MEMORY),
    ("word_bytes = 1", GEMM_CEILING_FP8, Overlap.COMPUTE_MEMORY),
    ('overlap = "perfect"', GEMM_CEILING_SERVING, Overlap.PERFECT),  # the spec's value wins
    ("word_bytes = 1\ncompute_util = 0.3", 0.3, Overlap.COMPUTE_MEMORY),
])
def test_a_preset_serving_spec_gets_the_serial_overlap_and_its_precision_s_ceiling(
        extra, util, overlap):
    spec = load_toml_spec(SERVING.format(extra=extra), file="s.toml", base_dir=ROOT)
    assert spec.execution.compute_util == util
    assert spec.execution.overlap is overlap


def test_the_serving_ceiling_is_an_inference_ceiling_above_the_training_fit():
    """An inference engine's 2-byte GEMMs run without the optimizer, recomputation and
    pipeline time the training fit absorbs: the serving ceiling lies above the training one
    and below the peak; a GEMM runs at it: the one GEMM of tests/test_realistic.py, 2 waves x 4
    cores x 2 x 128 x 128 x 128 FLOP at u x 2,048 GFLOP/s (16 x 16 x 4 cores x 2 x 1 GHz)."""
    assert GEMM_CEILING < GEMM_CEILING_SERVING < 1.0
    text = ONE_GEMM.format(extra='model = "realistic"\noverlap = "compute_memory"').replace(
        "compute_util = 0.5", f"compute_util = {GEMM_CEILING_SERVING}")
    p = lower(load_toml_spec(text, file="g.toml", base_dir=ROOT), _outer(1, Dim.M))
    work = 2 * 4 * 2 * 128 * 128 * 128
    assert p.kernels.compute_ns[0] == pytest.approx(work / (GEMM_CEILING_SERVING * 2048.0),
                                                     rel=1e-12)


def test_the_validation_models_only_tensorrt_llm_v0_5_passes_without_overlap():
    """The v0.5 prefills add a kernel's HBM traffic to its math (``overlap = "none"``); the
    v0.6.1 decodes and NIM keep the serving default; DFModel's equations never get it."""
    runs = {r["id"]: r for r in json.loads(V.DATA.read_text())}
    for rid in V.PREFILL + V.DECODE:
        text = V.serving_toml(runs[rid], "realistic", "prefill")
        assert ('overlap = "none"' in text) == rid.startswith("trtllm-v05"), rid
        assert 'overlap = "none"' not in V.serving_toml(runs[rid], "dfmodel", "prefill")


def test_a_preset_training_spec_keeps_the_perfect_overlap():
    text = ONE_GEMM.format(extra="").replace(
        "[system]\nnum_chip = 1", '[system]\npreset = "a100"\nnum_chip = 1')
    text = text.replace("compute_util = 0.5\n", "")
    text = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("cores", "systolic", "sram_bytes", "freq_GHz",
                                             "dram_bw_GBps", "dram_bytes")))
    spec = load_toml_spec(text, file="t.toml", base_dir=ROOT)
    assert spec.execution.overlap is Overlap.PERFECT
    assert spec.execution.compute_util == GEMM_CEILING


# --------------------------------------------------------------------------- KV per query head
def test_a_decode_kernel_without_grouped_query_reuse_reads_the_kv_once_per_query_head():
    """a = 8 query heads, g = 2 KV heads of d = 16, 2-byte words; prompt 10, output 4: L = 10
    + ceil(4 / 2) = 12. K_cache reads L g d w = 12 x 2 x 16 x 2 = 768 bytes; read once per
    query head, a / g = 4 times that: 3,072. Nothing else changes."""
    kw = dict(hidden=128, num_head=8, head_dim=16, word=2, prompt_len=10, decode=1,
              output_len=4, num_kv_head=2)
    shared, per_head = llm_serving(**kw), llm_serving(**kw, kv_per_query_head=True)
    mem = {k.name: k.memory_bytes for k in shared.kernels}
    mem2 = {k.name: k.memory_bytes for k in per_head.kernels}
    assert mem["K_cache"] == mem["V_cache"] == 768.0
    assert mem2["K_cache"] == mem2["V_cache"] == 3_072.0
    assert {n: v for n, v in mem2.items() if n not in ("K_cache", "V_cache")} == {
        n: v for n, v in mem.items() if n not in ("K_cache", "V_cache")}


def test_kv_per_query_head_leaves_the_prefill_and_multi_head_attention_alone():
    """The prefill has no KV-cache kernel; with a = g (MHA) the factor a / g is 1."""
    pre = dict(hidden=128, num_head=8, head_dim=16, word=2, prompt_len=10, decode=0)
    assert llm_serving(**pre) == llm_serving(**pre, kv_per_query_head=True)
    mha = dict(pre, decode=1, output_len=4)
    assert llm_serving(**mha) == llm_serving(**mha, kv_per_query_head=True)


def test_a_bad_kv_per_query_head_value_is_a_one_line_exit_2_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SERVING.format(extra="").replace(
        "[system]", '[graph]\ngenerator = "llm-serving"\nkv_per_query_head = 3\n[system]'))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert "graph.kv_per_query_head must be true or false. Got 3" in r.output
    assert "Traceback" not in r.output


def test_the_validation_decodes_of_pre_0_7_1_engines_read_the_kv_per_query_head():
    """TensorRT-LLM 0.7.1's release notes add "MMHA optimization for MQA and GQA" and the
    FP8 KV cache for its XQA kernel: the v0.6.1 rows read per query head, NIM's do not."""
    runs = {r["id"]: r for r in json.loads(V.DATA.read_text())}
    for rid in V.DECODE:
        text = V.serving_toml(runs[rid], "realistic", "decode", 8)
        assert ("kv_per_query_head = true" in text) == ("v061" in rid), rid


# --------------------------------------------------------------------------- fused decode
def test_fused_decode_attention_is_one_kernel_with_both_attention_gemms_flop_and_kv_reads():
    """a = 8 heads of d = 16, g = 2 KV heads, w = 2; prompt 10, output 4: L = 12. The
    unfused MHA_GEMM_1 + MHA_GEMM_2 are 2 x 2 a L d = 6,144 FLOP; MMHA (a, d, 2L, 1) is
    2 x 8 x 16 x 24 = 6,144 too. Its memory_bytes are both caches, 2 x L g d w = 1,536
    (x a / g = 6,144 read per query head). K_cache, V_cache, SOFTMAX and DropOut_1 are gone:
    21 - 6 + 1 = 16 gated kernels; their 9 edges (K, V -> caches -> GEMMs, Q -> GEMM_1 ->
    SOFTMAX -> DropOut_1 -> GEMM_2 -> PROJ) become MMHA's 4: 25 - 9 + 4 = 20."""
    kw = dict(hidden=128, num_head=8, head_dim=16, word=2, prompt_len=10, decode=1,
              output_len=4, num_kv_head=2, gated_ffn=1)
    unfused, fused = llm_serving(**kw), llm_serving(**kw, fused_attention=True)
    pair = [k for k in unfused.kernels if k.name in ("MHA_GEMM_1", "MHA_GEMM_2")]
    assert sum(2 * k.outer * k.m * k.k * k.n for k in pair) == 6_144
    (mmha,) = [k for k in fused.kernels if k.name == "MMHA"]
    assert 2 * mmha.outer * mmha.m * mmha.k * mmha.n == 6_144
    assert mmha.memory_bytes == 1_536.0
    per_head = llm_serving(**kw, fused_attention=True, kv_per_query_head=True)
    assert next(k for k in per_head.kernels if k.name == "MMHA").memory_bytes == 6_144.0
    assert len(unfused.kernels) == 21 and len(fused.kernels) == 16
    assert len(unfused.connections) == 25 and len(fused.connections) == 20
    edges = {(c.src, c.dst) for c in fused.connections}
    assert {("Q", "MMHA"), ("K", "MMHA"), ("V", "MMHA"), ("MMHA", "PROJ_GEMM")} <= edges
    assert not any(c.zero_out for c in fused.connections)
    weights = {k.name: k.memory_bytes for k in unfused.kernels if k.weight_bytes}
    assert weights == {k.name: k.memory_bytes for k in fused.kernels if k.weight_bytes}


def test_a_fused_decode_step_reads_the_same_kv_bytes_under_the_serving_model():
    """The same Llama-2-7B decode step on one H100 (batch 8, context 1,024 + 64): the DRAM
    bytes its KV kernels read per layer are 2 x 8 x 1,088 x 4,096 x 2 with either graph, so
    only the kernel count (launches) and the attention kernels' own buffers differ."""
    text = SERVING.format(extra="").replace('phase = "prefill"', 'phase = "decode"')
    text = text.replace("prompt_len = 128\noutput_len = 1\nbatch_size = 1",
                        "prompt_len = 1024\noutput_len = 128\nbatch_size = 8")
    fused_text = text.replace("[system]", '[graph]\ngenerator = "llm-serving"\n'
                                          "fused_attention = true\n[system]")
    plain = load_toml_spec(text, file="d.toml", base_dir=ROOT)
    fused = load_toml_spec(fused_text, file="d.toml", base_dir=ROOT)
    outer = lambda s: Outer(shape=(1,), sharding=tuple(Dim.NO for _ in s.graph.kernels),  # noqa: E731
                            micro_batch_size=8, num_tile=1, num_config=len(s.graph.kernels))
    kv = 2 * 8 * 1_088 * 4_096 * 2
    p_plain, p_fused = lower(plain, outer(plain)), lower(fused, outer(fused))
    names_plain, names_fused = p_plain.names, p_fused.names
    mem_plain = sum(p_plain.kernels.memory_bytes[i] for i, n in enumerate(names_plain)
                    if n in ("K_cache", "V_cache"))
    mem_fused = p_fused.kernels.memory_bytes[names_fused.index("MMHA")]
    assert mem_plain == pytest.approx(kv, rel=1e-12)
    assert mem_fused == pytest.approx(kv, rel=1e-12)
