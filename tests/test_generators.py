"""Workload generators (dfsearch.kernels.generators) against DFModel's own files and closed forms.

Expected values come from (a) DFModel inputs written by DFModel's generator scripts
(tests/data/dfmodel/<case>/setup.txt, copied from DFModel's result folders) and the FLOP
lines DFModel printed in the matching log.txt, and (b) the closed forms of each generator,
written out here.

tests/data/gen_llama3_8B_SN40L_decode_setup.txt is the dataflow_graph block of DFModel's
LLM_Serving/DSE/TP1_PP16/llama3_8B_SN40L_decode/user_input/setup.txt (fengqian-ayce/DFModel at
b9a3e2f), written by generate_LLM_fwd_decode.py for Llama-3 8B (h 4096, 32 heads x 128, mlp 14336,
seq_window 4096, tp 1, word 2); that setup additionally carries sram_extra/dram_extra on the
KV-cache kernels, which the generator itself does not write.

The setup.txt reader below is a deliberately tiny regex tokenizer for the protobuf text format,
enough for the fields compared here (the real importer lives in dfsearch.io).
"""

from __future__ import annotations

import inspect
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfsearch.codes import Collective, ComputeType, Dim, KernelKind, Phase
from dfsearch.errors import SpecError
from dfsearch.kernels import generators
from dfsearch.kernels.generators import (
    GENERATORS,
    Generator,
    GeneratorParam,
    dlrm,
    f32,
    fft,
    generate,
    hpl,
    llm_decode,
    llm_fwd,
    llm_fwdbwd,
)
from dfsearch.spec import Graph

DATA = Path(__file__).parent / "data"
CASES = DATA / "dfmodel"


# --------------------------------------------------------------------------- text-format reader
_TOKEN = re.compile(r'#[^\n]*|(\w+)\s*\{|\}|(\w+)\s*:\s*("[^"]*"|[^\s{}#]+)')


def read_text_proto(text: str) -> dict:
    """Nested dict of lists: every message and scalar field maps to the list of its values."""
    root: dict = {}
    stack = [root]
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok.startswith("#"):
            continue
        if m.group(1):
            child: dict = {}
            stack[-1].setdefault(m.group(1), []).append(child)
            stack.append(child)
        elif tok == "}":
            stack.pop()
        else:
            stack[-1].setdefault(m.group(2), []).append(m.group(3).strip('"'))
    assert len(stack) == 1, "unbalanced braces"
    return root


def as_float32(text: str) -> float:
    """What protobuf's float field holds after parsing the printed value."""
    return struct.unpack("<f", struct.pack("<f", float(text)))[0]


_VARIANTS = {k.dfmodel: k for k in KernelKind}


def expected_kernel(pk: dict) -> dict:
    """The fields we compare, as DFModel's importer would read them from one `kernels` block."""

    def one(d: dict, key: str, default=None):
        return d[key][0] if key in d else default

    (variant,) = [v for v in _VARIANTS if v in pk]
    body = pk[variant][0]

    def size(*keys: str):
        for key in keys:
            if key in body:
                return as_float32(body[key][0])
        return None

    def coll(key: str) -> Collective:
        return Collective.from_dfmodel(body[key][0]) if key in body else Collective.NONE

    return {
        "name": one(pk, "name"),
        "id": int(one(pk, "id")),
        "config": int(one(pk, "config", -1)),
        "phase": Phase.from_dfmodel(pk["fwd_bwd"][0]) if "fwd_bwd" in pk else Phase.NONE,
        "type": ComputeType.from_dfmodel(one(pk, "type")),
        "kind": _VARIANTS[variant],
        "outer": int(one(body, "outer")),
        "m": int(one(body, "M")),
        "k": int(one(body, "K", 1)),
        "n": int(one(body, "N")),
        "tiling": next(d for d in Dim if d.tiling_dfmodel == one(body, "tiling")),
        "input_bytes": size("input_tensor_size", "input_tensor_1_size"),
        "input2_bytes": size("input_tensor_2_size"),
        "weight_bytes": size("weight_tensor_size"),
        "output_bytes": size("output_tensor_size"),
        "communication": coll("communication_type"),
        "communication_bytes": size("communication_size") or 0.0,
        "communication2": coll("communication_type_2"),
        "communication2_bytes": size("communication_size_2") or 0.0,
        "memory_bytes": size("memory_size") or 0.0,
    }


def actual_kernel(k) -> dict:
    return {key: getattr(k, key) for key in expected_kernel_keys()}


def expected_kernel_keys() -> tuple[str, ...]:
    return (
        "name", "id", "config", "phase", "type", "kind", "outer", "m", "k", "n", "tiling",
        "input_bytes", "input2_bytes", "weight_bytes", "output_bytes", "communication",
        "communication_bytes", "communication2", "communication2_bytes", "memory_bytes",
    )


def read_graph(path: Path) -> tuple[list[dict], list[tuple[str, str, int, bool]], dict]:
    doc = read_text_proto(path.read_text())
    graph = doc["dataflow_graph"][0]
    kernels = [expected_kernel(pk) for pk in graph["kernels"]]
    names = {k["id"]: k["name"] for k in kernels}
    conns = [
        (names[int(c["startIdx"][0])], names[int(c["endIdx"][0])], int(c["id"][0]),
         c.get("zero_out", ["false"])[0] == "true")
        for c in graph.get("connections", [])
    ]
    return kernels, conns, graph


def assert_same_graph(g: Graph, path: Path) -> None:
    kernels, conns, _ = read_graph(path)
    assert len(g.kernels) == len(kernels)
    for ours, theirs in zip(g.kernels, kernels, strict=True):
        assert actual_kernel(ours) == theirs, theirs["name"]
    assert [(c.src, c.dst, c.id, c.zero_out) for c in g.connections] == conns


def log_flop_lines(case: str) -> list[tuple[str, str, int, int, int, int, float]]:
    """`<SIMD|SYSTOLIC> name M K N num_input FLOP` lines of DFModel's statistics."""
    out = []
    for line in (CASES / case / "log.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[0] in ("SIMD", "SYSTOLIC"):
            t, name, m, k, n, num, flop = parts
            out.append((t, name, int(m), int(k), int(n), int(num), float(flop)))
    return out


def log_value(case: str, label: str) -> float:
    for line in (CASES / case / "log.txt").read_text().splitlines():
        if line.startswith(label + " "):
            return float(line[len(label):].strip())
    raise AssertionError(f"{label!r} not in log")


# --------------------------------------------------------------------------- parameter sets
GPT3_1_5B = dict(hidden=2048, num_head=16, head_dim=128, seq=1024, word=2)
GPT3_1T = dict(hidden=25600, num_head=160, head_dim=160, seq=2048, word=2)
DLRM_A = dict(mlp_dim=3375, bottom_num_mlp=10, top_num_mlp=10, pooled_row=15, row=10658602,
              num_table=800, emb_dim=93, micro_batch_size=512, word=2)
HPL_CIRCE = dict(n=65536, b=1024, iteration=64, word=8)
FFT_1024 = dict(length=1073740000000, r=2, word=4)
LLAMA3_8B_DECODE = dict(hidden=4096, num_head=32, head_dim=128, word=2, seq_window=4096, tp=1,
                        mlp_dim=14336)

SMALL = {
    "llm": dict(hidden=64, num_head=4, head_dim=16, seq=32, word=2),
    "llm-fwd": dict(hidden=64, num_head=4, head_dim=16, seq=32, word=2),
    "llm-decode": dict(hidden=64, num_head=4, head_dim=16, word=2, seq_window=31, tp=2,
                       mlp_dim=256),
    "llm-serving": dict(hidden=64, num_head=4, head_dim=16, word=2, prompt_len=32, decode=1,
                        output_len=8),
    "dlrm": dict(mlp_dim=32, bottom_num_mlp=3, top_num_mlp=2, pooled_row=2, row=100,
                 num_table=4, emb_dim=8, micro_batch_size=16, word=4),
    "hpl": dict(n=4096, b=512, word=8),
    "fft": dict(length=1 << 20, word=4),
}


def llm_flop_closed_form(h: int, a: int, s: int) -> int:
    """LLM training layer, one sequence: systolic 72h²s + 12hs², SIMD 19hs + 4as²."""
    return 72 * h * h * s + 12 * h * s * s + 19 * h * s + 4 * a * s * s


# --------------------------------------------------------------------------- structure
@pytest.mark.parametrize(
    "name, params, n_kernels, n_edges",
    [
        ("llm", SMALL["llm"], 41, 53),
        ("llm-fwd", SMALL["llm-fwd"], 18, 21),
        ("llm-decode", SMALL["llm-decode"], 20, 23),
        ("dlrm", SMALL["dlrm"], 15, 16),  # n = 5 layers: 3n kernels, 4(n - 1) edges
        ("dlrm", DLRM_A, 60, 76),
        ("hpl", SMALL["hpl"], 8, 7),  # default iteration = n // b
        ("hpl", dict(n=4096, b=512, iteration=3, word=8), 3, 2),
        ("fft", SMALL["fft"], 2, 1),
    ],
)
def test_counts(name, params, n_kernels, n_edges):
    g = generate(name, params)
    assert (len(g.kernels), len(g.connections)) == (n_kernels, n_edges)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_ids_names_and_edges_are_consistent(name):
    g = generate(name, SMALL[name])
    assert [k.id for k in g.kernels] == list(range(1, len(g.kernels) + 1))
    assert [c.id for c in g.connections] == list(range(1, len(g.connections) + 1))
    assert len({k.name for k in g.kernels}) == len(g.kernels)
    pos = g.index()
    # every generator lists kernels in a topological order (all edges go forward)
    assert all(pos[c.src] < pos[c.dst] for c in g.connections)
    assert all(k.config == -1 and k.sharding is None for k in g.kernels)
    for k in g.kernels:
        if k.kind in (KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2):
            assert k.k == 1 and k.weight_bytes is None
        if k.kind is not KernelKind.GEMM_WEIGHT:
            assert k.weight_bytes is None
        if k.kind.num_inputs == 1:
            assert k.input2_bytes is None


def test_llm_fwd_is_the_forward_half_of_llm_fwdbwd():
    full, fwd = llm_fwdbwd(**GPT3_1_5B), llm_fwd(**GPT3_1_5B)
    assert fwd.kernels == full.kernels[:18]
    assert all(k.phase is Phase.FWD for k in fwd.kernels)
    assert all(k.phase is Phase.BWD for k in full.kernels[18:])
    names = {k.name for k in fwd.kernels}
    among = [c for c in full.connections if c.src in names and c.dst in names]
    assert fwd.connections == tuple(among)
    assert not fwd.is_training and full.is_training


def test_llm_weight_gradient_kernels():
    h, s, w = 2048, 1024, 2
    g = llm_fwdbwd(**GPT3_1_5B)
    updates = [k for k in g.kernels if k.name.endswith("_weight_update")]
    assert [k.name for k in updates] == [
        "FFN1_bwd_weight_update", "FFN0_bwd_weight_update", "PROJ_GEMM_bwd_weight_update",
        "V_bwd_weight_update", "K_bwd_weight_update", "Q_bwd_weight_update"]
    for k in updates:
        assert k.kind is KernelKind.GEMM and k.tiling is Dim.K and k.k == s
        assert k.communication is Collective.ALL_REDUCE_PERIODIC
        assert k.communication_bytes == k.output_bytes
    assert [k.communication_bytes for k in updates] == [4 * h * h * w] * 2 + [h * h * w] * 4
    others = [k for k in g.kernels if k not in updates]
    assert all(k.tiling is Dim.N and k.n == s for k in others)
    assert all(k.communication is Collective.NONE for k in others)
    v_bwd = g.kernels[g.index()["V_bwd"]]
    assert (v_bwd.outer, v_bwd.m, v_bwd.k) == (1, h, h)  # not (a, d, h) like Q_bwd / K_bwd


def test_loss_kernel_starts_the_disconnected_backward_half():
    g = llm_fwdbwd(**SMALL["llm"])
    assert not [c for c in g.connections if c.dst == "Loss_bwd"]
    fwd = {k.name for k in g.kernels[:18]}
    assert not [c for c in g.connections if c.src not in fwd and c.dst in fwd]


# --------------------------------------------------------------------------- FLOP closed forms
@pytest.mark.parametrize(
    "params",
    [GPT3_1_5B, GPT3_1T, SMALL["llm"], dict(hidden=96, num_head=3, head_dim=32, seq=7, word=4)],
)
def test_llm_flop_per_layer_closed_form(params):
    h, a, s = params["hidden"], params["num_head"], params["seq"]
    g = llm_fwdbwd(**params)
    systolic = sum(k.flop for k in g.kernels if k.type is ComputeType.SYSTOLIC)
    simd = sum(k.flop for k in g.kernels if k.type is ComputeType.SIMD)
    assert systolic == 72 * h * h * s + 12 * h * s * s
    assert simd == 19 * h * s + 4 * a * s * s
    assert g.flop == llm_flop_closed_form(h, a, s)


def test_gpt3_1t_flop_matches_readme_workload_flop():
    g = llm_fwdbwd(**GPT3_1T)
    assert g.flop == 9.7928934850560e13
    case = "readme_gpt3_1T_sn30_1024chips_r_r_8x128"
    assert log_value(case, "Workload FLOP") == 3.85072240461978e19
    assert g.flop * 128 * 3072 == pytest.approx(3.85072240461978e19, rel=1e-14)


def test_gpt3_1_5b_flop_matches_dfmodel_log():
    case = "gpt3_1.5B_seq1024_a100x4_ring_tp4"
    g = llm_fwdbwd(**GPT3_1_5B)
    lines = log_flop_lines(case)
    assert [(k.type.name, k.name, k.rows, k.k, k.n, 1, k.flop) for k in g.kernels] == lines
    # Workload FLOP = per-graph FLOP x num_layer 24 x global_batch_size 8192 (setup.txt)
    assert g.flop * 24 * 8192 == log_value(case, "Workload FLOP")


def test_dlrm_flop_matches_dfmodel_log():
    case = "dlrm_A_128gpu_r_fc_8x16"
    g = dlrm(**DLRM_A)
    assert [(k.type.name, k.name, k.rows, k.k, k.n, 1, k.flop) for k in g.kernels] == (
        log_flop_lines(case))
    # 60 GEMMs of 2 * 3375² * 512; x global_batch_size 128e6 graph executions
    assert g.flop == 60 * 2 * 3375 * 3375 * 512
    assert g.flop * 128_000_000 == log_value(case, "Workload FLOP")


def test_hpl_flop_closed_form_and_log():
    n, b, it = 65536, 1024, 64
    g = hpl(**HPL_CIRCE)
    sides = [n - i * b for i in range(it)]
    assert [k.flop for k in g.kernels] == [2 * side * side * b for side in sides]
    assert g.flop == sum(2 * side * side * b for side in sides)
    assert g.flop == log_value("hpl_circe_576gpu_sw_sw_24x24_cu09_legacy", "FLOP")
    assert g.flop == pytest.approx(2 * n**3 / 3, rel=0.03)  # Σ 2·side²·B ≈ 2N³/3


@pytest.mark.parametrize(
    "length, r, nf, k",
    [
        (1 << 20, 2, 1024, 80),  # 4·10/1·2
        (1 << 24, 4, 4096, 96),  # 4·12/2·4
        (1073740000000, 2, 1036214, 159),  # int(8·log2(1036214)) = int(159.86...)
        (4, 2, 2, 8),
    ],
)
def test_fft_dims_and_flop(length, r, nf, k):
    g = fft(length=length, r=r, word=4)
    for step in g.kernels:
        assert (step.outer, step.m, step.k, step.n) == (1, nf, k, nf)
        assert step.flop == 2 * nf * nf * k
        assert step.weight_bytes is None and step.tiling is Dim.NO
    assert [s.communication for s in g.kernels] == [Collective.NONE, Collective.ALL_TO_ALL]


def test_fft_flop_matches_dfmodel_log():
    case = "fft_1024gpu_sw_sw_8x128"
    g = fft(**FFT_1024)
    assert [(k.type.name, k.name, k.rows, k.k, k.n, 1, k.flop) for k in g.kernels] == (
        log_flop_lines(case))
    assert g.flop == log_value(case, "Workload FLOP")


# --------------------------------------------------------------------------- DFModel's files
@pytest.mark.parametrize(
    "function, params, case",
    [
        (llm_fwdbwd, GPT3_1_5B, "gpt3_1.5B_seq1024_a100x4_ring_tp4"),
        (llm_fwdbwd, GPT3_1T, "readme_gpt3_1T_sn30_1024chips_r_r_8x128"),
        (dlrm, DLRM_A, "dlrm_A_128gpu_r_fc_8x16"),
        (hpl, HPL_CIRCE, "hpl_circe_576gpu_sw_sw_24x24_cu09_legacy"),
        (fft, FFT_1024, "fft_1024gpu_sw_sw_8x128"),
    ],
)
def test_reproduces_dfmodel_setup(function, params, case):
    assert_same_graph(function(**params), CASES / case / "setup.txt")


def test_dlrm_pooled_row_from_memory_size():
    kernels, _, _ = read_graph(CASES / "dlrm_A_128gpu_r_fc_8x16" / "setup.txt")
    mem = next(k["memory_bytes"] for k in kernels if k["name"] == "MLP_10")
    # memory_size = num_table * pooled_row * emb_dim * micro_batch * word
    assert mem / (800 * 93 * 512 * 2) == DLRM_A["pooled_row"]


def test_reproduces_dfmodel_decode_setup():
    path = DATA / "gen_llama3_8B_SN40L_decode_setup.txt"
    assert_same_graph(llm_decode(**LLAMA3_8B_DECODE), path)
    _, _, graph = read_graph(path)
    extra = [k["name"][0] for k in graph["kernels"] if "sram_extra" in str(k)]
    assert extra == ["K_cache", "V_cache"]  # added by hand in that setup, not by the generator
    assert all(k.sram_extra_bytes == 0.0 for k in llm_decode(**LLAMA3_8B_DECODE).kernels)


def test_reproduces_first_half_of_the_case_with_llm_fwd():
    kernels, conns, _ = read_graph(CASES / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt")
    g = llm_fwd(**GPT3_1_5B)
    assert [actual_kernel(k) for k in g.kernels] == kernels[:18]
    assert [(c.src, c.dst, c.id, c.zero_out) for c in g.connections] == conns[:21]


# --------------------------------------------------------------------------- decode, DLRM, HPL
def test_decode_streams_weights_and_kv_cache():
    h, a, d, w, sw, tp, f = 64, 4, 16, 2, 31, 2, 256
    g = llm_decode(hidden=h, num_head=a, head_dim=d, word=w, seq_window=sw, tp=tp, mlp_dim=f)
    k = {x.name: x for x in g.kernels}
    L = sw + 1
    for name in ("Q", "K", "V", "PROJ_GEMM"):
        assert k[name].memory_bytes == h * h * w / tp and k[name].weight_bytes == h * h * w
    for name in ("FFN0", "FFN1"):
        assert k[name].memory_bytes == f * h * w / tp and k[name].weight_bytes == f * h * w
    for name in ("K_cache", "V_cache"):
        x = k[name]
        assert x.type is ComputeType.SYSTOLIC and x.kind is KernelKind.ELEMENTWISE
        assert (x.outer, x.m, x.n) == (a, d, L)
        assert x.memory_bytes == w * h * sw / tp
        assert (x.input_bytes, x.output_bytes) == (h * w, h * L * w)
        assert x.flop == 2 * a * d * L  # SYSTOLIC elementwise counts 2·M·N
    assert (k["MHA_GEMM_1"].m, k["MHA_GEMM_1"].k, k["MHA_GEMM_1"].n) == (1, d, L)
    assert (k["MHA_GEMM_2"].m, k["MHA_GEMM_2"].k, k["MHA_GEMM_2"].n) == (d, L, 1)
    assert k["MHA_GEMM_1"].output_bytes == L * a * w
    zero = [(c.src, c.dst, c.id) for c in g.connections if c.zero_out]
    assert zero == [("K_cache", "MHA_GEMM_1", 8), ("V_cache", "MHA_GEMM_2", 12)]
    assert all(x.phase is Phase.FWD and x.tiling is Dim.N for x in g.kernels)
    assert sum(x.memory_bytes for x in g.kernels) == (
        4 * h * h * w / tp + 2 * f * h * w / tp + 2 * w * h * sw / tp)


def test_dlrm_structure():
    p = SMALL["dlrm"]
    n = p["bottom_num_mlp"] + p["top_num_mlp"]
    g = dlrm(**p)
    names = [k.name for k in g.kernels]
    assert names[:n] == [f"MLP_{i}" for i in range(1, n + 1)]
    assert names[n:2 * n] == [f"MLP_{i}_bwd" for i in range(n, 0, -1)]
    assert names[2 * n:] == [f"MLP_{i}_bwd_weight_update" for i in range(n, 0, -1)]
    emb = p["num_table"] * p["pooled_row"] * p["emb_dim"] * p["micro_batch_size"] * p["word"]
    lookups = [k.name for k in g.kernels if k.memory_bytes]
    assert lookups == ["MLP_3", "MLP_3_bwd"]  # the last bottom layer, forward and backward
    for name in lookups:
        k = g.kernels[g.index()[name]]
        assert k.memory_bytes == emb
        assert (k.communication, k.communication_bytes) == (Collective.ALL_TO_ALL, emb)
    ids = {k.name: k.id for k in g.kernels}
    edges = [(ids[c.src], ids[c.dst]) for c in g.connections]
    assert edges == ([(i, i + 1) for i in range(1, n)] + [(j, j + 1) for j in range(n + 1, 2 * n)]
                     + [(i, 3 * n - i) for i in range(1, n)]
                     + [(j, j + n + 1) for j in range(n + 1, 2 * n)])


def test_hpl_default_iteration_and_comm():
    g = hpl(n=4096, b=512, word=8)
    assert [k.m for k in g.kernels] == [4096 - i * 512 for i in range(8)]
    for k in g.kernels:
        size = k.m * 512 * 8
        assert (k.input_bytes, k.output_bytes, k.input2_bytes) == (size, size, None)
        assert (k.communication, k.communication_bytes) == (Collective.BROADCAST, size)
        assert (k.communication2, k.communication2_bytes) == (Collective.POINT_TO_POINT, size)
        assert k.phase is Phase.NONE and k.type is ComputeType.SYSTOLIC
    # an explicit last partial iteration is allowed: ceil(4000 / 512) = 8
    assert hpl(n=4000, b=512, iteration=8, word=8).kernels[-1].m == 4000 - 7 * 512


# --------------------------------------------------------------------------- float32 sizes
def test_f32_matches_protobuf_float_storage():
    assert f32(2048 * 2048 * 160 * 2) == 1342177280.0  # prints as 1342177300.0
    assert f32(2048 * 2048 * 160 * 2) == as_float32("1342177300.0")
    assert as_float32("536870900.0") == f32(536870912) == 536870912.0
    assert f32(16777217) == 16777216.0  # 2^24 + 1 is not a float32
    assert f32(117440512) == as_float32("117440510.0")  # FFN weight of the decode setup
    assert isinstance(f32(3), float)


def test_sizes_are_float32_values():
    g = fft(length=1073740000000, r=2, word=4)
    exact = 1036214 * 1036214 * 4
    assert g.kernels[0].input_bytes != exact  # not representable in float32
    assert g.kernels[0].input_bytes == as_float32(str(exact)) == as_float32("4294957900000.0")


@settings(deadline=None, derandomize=True, max_examples=50)
@given(
    a=st.integers(1, 64), d=st.integers(1, 256), s=st.integers(1, 8192),
    w=st.sampled_from([1, 2, 4]),
)
def test_llm_property(a, d, s, w):
    h = a * d
    g = llm_fwdbwd(hidden=h, num_head=a, head_dim=d, seq=s, word=w)
    assert g.flop == llm_flop_closed_form(h, a, s)
    hs, ss = as_float32(str(h * s * w)), as_float32(str(a * s * s * w))
    k = {x.name: x for x in g.kernels}
    assert k["Q"].input_bytes == hs and k["SOFTMAX"].output_bytes == ss
    assert k["FFN0"].weight_bytes == as_float32(str(4 * h * h * w))
    for x in g.kernels:
        for v in (x.input_bytes, x.input2_bytes, x.weight_bytes, x.output_bytes):
            assert v is None or v == as_float32(repr(v))


# --------------------------------------------------------------------------- errors
def test_heads_must_multiply_to_hidden():
    with pytest.raises(SpecError) as err:
        llm_fwdbwd(hidden=2000, num_head=16, head_dim=128, seq=8, word=2)
    assert str(err.value) == (
        "graph.hidden must equal num_head * head_dim (16 * 128 = 2048). Got 2000 instead.")
    with pytest.raises(SpecError, match="num_head \\* head_dim"):
        llm_decode(hidden=60, num_head=4, head_dim=16, word=2, seq_window=4, tp=1, mlp_dim=8)


def test_non_positive_value_message():
    with pytest.raises(SpecError) as err:
        generate("llm", {**SMALL["llm"], "hidden": -3})
    assert str(err.value) == "graph.hidden must be > 0. Got -3 instead."
    assert err.value.issues[0].path == "graph.hidden"


def test_all_problems_are_collected_with_custom_path():
    with pytest.raises(SpecError) as err:
        generate("llm", {"hiden": 64, "num_head": 0, "head_dim": 2.5, "seq": True, "word": 2},
                 path="workload.graph")
    msgs = [i.render() for i in err.value.issues]
    assert msgs == [
        "workload.graph.hiden unknown key 'hiden'; did you mean 'hidden'?",
        "workload.graph.hidden is missing (required by generator 'llm').",
        "workload.graph.num_head must be > 0. Got 0 instead.",
        "workload.graph.head_dim must be an integer. Got 2.5 instead.",
        "workload.graph.seq must be an integer. Got True instead.",
    ]
    assert str(err.value).startswith("5 problems:\n")


def test_unknown_generator():
    with pytest.raises(SpecError) as err:
        generate("dlmr", {})
    assert str(err.value) == "graph.generator unknown generator 'dlmr'; did you mean 'dlrm'?"
    with pytest.raises(SpecError, match="expected one of: llm, llm-fwd, llm-decode"):
        generate("transformer", {})


@pytest.mark.parametrize(
    "name, params, path, fragment",
    [
        ("hpl", dict(n=512, b=1024, word=8), "graph.b", "must be <= n (512). Got 1024"),
        ("hpl", dict(n=4096, b=512, iteration=9, word=8), "graph.iteration",
         "must be <= ceil(n / b) = 8"),
        ("fft", dict(length=3, word=4), "graph.length", "must be >= 4"),
        ("fft", dict(length=1024, r=1, word=4), "graph.r", "must be >= 2. Got 1 instead."),
        ("dlrm", {**SMALL["dlrm"], "top_num_mlp": 0}, "graph.top_num_mlp", "must be > 0"),
        ("llm-decode", {**SMALL["llm-decode"], "tp": -1}, "graph.tp", "Got -1 instead."),
    ],
)
def test_inconsistent_values(name, params, path, fragment):
    with pytest.raises(SpecError) as err:
        generate(name, params)
    (issue,) = err.value.issues
    assert issue.path == path and fragment in issue.message


def test_direct_calls_validate_too():
    with pytest.raises(SpecError, match=r"graph.seq must be > 0"):
        llm_fwd(hidden=64, num_head=4, head_dim=16, seq=0, word=2)
    with pytest.raises(SpecError, match=r"graph.iteration"):
        hpl(n=1024, b=512, iteration=3, word=8)


# --------------------------------------------------------------------------- registry
def test_registry_names_and_parameters():
    expected = {
        "llm": ["hidden", "num_head", "head_dim", "seq", "word", "num_kv_head", "ffn_dim",
                "gated_ffn", "num_expert", "top_k", "layers", "vocab_size", "embedding",
                "lm_head"],
        "llm-fwd": ["hidden", "num_head", "head_dim", "seq", "word", "num_kv_head", "ffn_dim",
                    "gated_ffn", "num_expert", "top_k", "layers", "vocab_size", "embedding",
                    "lm_head"],
        "llm-decode": ["hidden", "num_head", "head_dim", "word", "seq_window", "tp", "mlp_dim",
                       "num_kv_head", "gated_ffn"],
        "llm-serving": ["hidden", "num_head", "head_dim", "word", "prompt_len", "decode",
                        "output_len", "num_kv_head", "ffn_dim", "gated_ffn", "kv_word",
                        "tokens", "fused_attention", "kv_per_query_head"],
        "dlrm": ["mlp_dim", "bottom_num_mlp", "top_num_mlp", "pooled_row", "row", "num_table",
                 "emb_dim", "micro_batch_size", "word"],
        "hpl": ["n", "b", "iteration", "word"],
        "fft": ["length", "r", "word"],
    }
    assert list(GENERATORS) == list(expected)
    for name, gen in GENERATORS.items():
        assert isinstance(gen, Generator) and gen.name == name and gen.help
        assert [p.name for p in gen.params] == expected[name]
        assert all(isinstance(p, GeneratorParam) and p.help for p in gen.params)
        assert all(p.type is (bool if p.name in ("embedding", "lm_head", "fused_attention",
                                                 "kv_per_query_head")
                              else int)
                   for p in gen.params)
        sig = inspect.signature(gen.function).parameters
        assert set(sig) == set(expected[name])
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.values())
    optional = {(g.name, p.name, p.default) for g in GENERATORS.values() for p in g.params
                if not p.required}
    llm_optional = {(g, p, d) for g in ("llm", "llm-fwd", "llm-decode")
                    for p, d in (("num_kv_head", None), ("ffn_dim", None), ("gated_ffn", 0))
                    if (g, p) != ("llm-decode", "ffn_dim")}  # llm-decode keeps its mlp_dim
    moe_optional = {(g, p, None) for g in ("llm", "llm-fwd") for p in ("num_expert", "top_k")}
    serving_optional = {("llm-serving", p, d) for p, d in (
        ("num_kv_head", None), ("ffn_dim", None), ("gated_ffn", 0), ("output_len", 1),
        ("kv_word", None), ("tokens", 1), ("fused_attention", False),
        ("kv_per_query_head", False))}  # fmt: skip
    assert optional == ({("hpl", "iteration", None), ("fft", "r", 2)} | llm_optional
                        | moe_optional | serving_optional
                        | {("llm", "layers", 1), ("llm-fwd", "layers", 1)}
                        | {(g, p, d) for g in ("llm", "llm-fwd") for p, d in (
                            ("vocab_size", None), ("embedding", False), ("lm_head", False))})
    with pytest.raises(TypeError):
        GENERATORS["x"] = GENERATORS["llm"]  # read-only


def test_generate_equals_direct_call():
    assert generate("llm", GPT3_1_5B) == llm_fwdbwd(**GPT3_1_5B)
    assert generate("fft", {"length": 1 << 20, "word": 4}) == fft(length=1 << 20, r=2, word=4)
    assert generate("hpl", {"n": 4096, "b": 512, "word": 8}) == hpl(
        n=4096, b=512, iteration=8, word=8)


def test_import_is_light():
    code = ("import sys, dfsearch.kernels.generators as g; "
            "assert 'numba' not in sys.modules and 'numpy' not in sys.modules, "
            "sorted(m for m in ('numba', 'numpy') if m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)



# --------------------------------------------------------------------------- current LLM layers
# Grouped-query attention (num_kv_head), FFN width (ffn_dim) and SwiGLU (gated_ffn). The
# closed forms below are written from the layer's algebra (docs/spec.md, "(a) a generator"),
# not from the generator's output.
LLAMA3_8B = dict(hidden=4096, num_head=32, head_dim=128, seq=8192, word=2, num_kv_head=8,
                 ffn_dim=14336, gated_ffn=1)
GQA_SMALL = dict(hidden=256, num_head=8, head_dim=32, seq=128, word=2, num_kv_head=2,
                 ffn_dim=704, gated_ffn=1)


def gemm_flop(g: Graph) -> float:
    return sum(k.flop for k in g.kernels if k.type is ComputeType.SYSTOLIC)


def simd_flop(g: Graph) -> float:
    return sum(k.flop for k in g.kernels if k.type is ComputeType.SIMD)


def llm_fwd_gemm_closed_form(h: int, a: int, d: int, g: int, f: int, s: int, gated: bool) -> int:
    """Forward GEMM FLOP of one layer on s tokens: Q, K, V projections 2·s·h·(h + 2·g·d),
    output projection 2·s·h·h, scores and context 2·2·s·s·h (a·d = h), FFN 2·s·h·f·(3|2)."""
    assert a * d == h
    return (2 * s * h * (h + 2 * g * d) + 2 * s * h * h + 2 * 2 * s * s * h
            + 2 * s * h * f * (3 if gated else 2))


def _shape(p: dict) -> tuple[int, int, int, int, int, int, bool]:
    h, a = p["hidden"], p["num_head"]
    f = p.get("ffn_dim") or p.get("mlp_dim") or 4 * h
    return (h, a, p["head_dim"], p.get("num_kv_head") or a, f, p.get("seq", 1),
            bool(p.get("gated_ffn", 0)))


LLM_VARIANTS = [
    GPT3_1_5B,  # defaults: DFModel's layer
    LLAMA3_8B,
    GQA_SMALL,
    {**GQA_SMALL, "gated_ffn": 0},  # GQA, GeLU FFN of width 704
    {**GQA_SMALL, "num_kv_head": 1},  # multi-query attention
    {**GQA_SMALL, "num_kv_head": 8, "ffn_dim": 1},  # full MHA, degenerate FFN
    dict(hidden=96, num_head=6, head_dim=16, seq=7, word=4, num_kv_head=3, gated_ffn=1),
]


@pytest.mark.parametrize("params", LLM_VARIANTS)
def test_llm_variant_gemm_flop_closed_form(params):
    h, a, d, g, f, s, gated = _shape(params)
    fwd = llm_fwd_gemm_closed_form(h, a, d, g, f, s, gated)
    # backward = 2 x forward: every weight GEMM has a data- and a weight-gradient GEMM of its
    # FLOP, each of the two attention GEMMs two backward GEMMs of its FLOP
    assert gemm_flop(llm_fwdbwd(**params)) == 3 * fwd
    assert gemm_flop(llm_fwd(**params)) == fwd
    # elementwise: forward 7hs + 2as² + fs, backward 4hs + 2as² + fs (GeLU) or 2fs (SwiGLU)
    n_f = 3 if gated else 2
    assert simd_flop(llm_fwdbwd(**params)) == 11 * h * s + 4 * a * s * s + n_f * f * s
    assert simd_flop(llm_fwd(**params)) == 7 * h * s + 2 * a * s * s + f * s


def test_llama3_8b_layer_flop():
    g = llm_fwdbwd(**LLAMA3_8B)
    # 2·8192·4096·(4096 + 2·1024) + 2·8192·4096² + 4·8192²·4096 + 6·8192·4096·14336
    assert gemm_flop(llm_fwd(**LLAMA3_8B)) == 4_672_924_418_048
    assert gemm_flop(g) == 14_018_773_254_144
    # the weight GEMMs alone are 6 x parameters x tokens (the usual training estimate)
    params = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336
    weight_gemms = [k for k in g.kernels if k.type is ComputeType.SYSTOLIC
                    and not k.name.startswith("MHA_GEMM")]
    assert sum(k.flop for k in weight_gemms) == 6 * params * 8192


@pytest.mark.parametrize(
    "params",
    [LLAMA3_8B_DECODE, {**LLAMA3_8B_DECODE, "num_kv_head": 8, "gated_ffn": 1},
     {**SMALL["llm-decode"], "num_kv_head": 1, "gated_ffn": 1},
     {**SMALL["llm-decode"], "num_kv_head": 2}],
)
def test_llm_decode_variant_flop_closed_form(params):
    h, a, d, g, f, _, gated = _shape(params)
    L = params["seq_window"] + 1
    n_f = 3 if gated else 2
    decode = llm_decode(**params)
    # Q, K, V, PROJ + scores/context over L positions + the SYSTOLIC K/V-cache copies + FFN
    assert gemm_flop(decode) == (2 * h * (h + 2 * g * d) + 2 * h * h + 2 * 2 * h * L
                                 + 2 * 2 * g * d * L + 2 * h * f * n_f)
    assert simd_flop(decode) == 7 * h + 2 * a * L + f


@pytest.mark.parametrize(
    "name, params, explicit",
    [
        ("llm", GPT3_1_5B, dict(num_kv_head=16, ffn_dim=4 * 2048, gated_ffn=0)),
        ("llm", GPT3_1T, dict(num_kv_head=160, ffn_dim=4 * 25600, gated_ffn=0)),
        ("llm", SMALL["llm"], dict(num_kv_head=4, ffn_dim=256, gated_ffn=0)),
        ("llm-fwd", GPT3_1_5B, dict(num_kv_head=16, ffn_dim=8192, gated_ffn=0)),
        ("llm-decode", LLAMA3_8B_DECODE, dict(num_kv_head=32, gated_ffn=0)),
        ("llm-decode", SMALL["llm-decode"], dict(num_kv_head=4, gated_ffn=0)),
    ],
)
def test_defaults_are_the_old_layer(name, params, explicit):
    g = generate(name, params)
    assert g == generate(name, {**params, **explicit})
    counts = {"llm": (41, 53), "llm-fwd": (18, 21), "llm-decode": (20, 23)}[name]
    assert (len(g.kernels), len(g.connections)) == counts


def test_explicit_old_parameters_reproduce_dfmodel_files():
    explicit = dict(num_kv_head=16, ffn_dim=8192, gated_ffn=0)
    assert_same_graph(llm_fwdbwd(**GPT3_1_5B, **explicit),
                      CASES / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt")
    assert_same_graph(llm_decode(**LLAMA3_8B_DECODE, num_kv_head=32, gated_ffn=0),
                      DATA / "gen_llama3_8B_SN40L_decode_setup.txt")


@pytest.mark.parametrize(
    "name, params, n_kernels, n_edges",
    [
        ("llm", GQA_SMALL, 45, 63),
        ("llm", {**GQA_SMALL, "gated_ffn": 0}, 41, 53),
        ("llm-fwd", GQA_SMALL, 19, 23),
        ("llm-decode", {**SMALL["llm-decode"], "gated_ffn": 1, "num_kv_head": 2}, 21, 25),
    ],
)
def test_variant_counts_order_and_validity(name, params, n_kernels, n_edges):
    from dfsearch.validate import validate_graph

    g = generate(name, params)
    assert (len(g.kernels), len(g.connections)) == (n_kernels, n_edges)
    assert validate_graph(g) == []
    assert [k.id for k in g.kernels] == list(range(1, n_kernels + 1))
    pos = g.index()
    assert all(pos[c.src] < pos[c.dst] for c in g.connections)
    phases = [k.phase for k in g.kernels]
    assert phases == sorted(phases, key=lambda p: p is Phase.BWD)  # forward kernels first
    # every tensor is one of its consumer's inputs: producers feed matching operands
    by_name = {k.name: k for k in g.kernels}
    for c in g.connections:
        dst = by_name[c.dst]
        assert by_name[c.src].output_bytes in (dst.input_bytes, dst.input2_bytes), c


def test_llm_fwd_is_the_forward_half_of_every_variant():
    for params in LLM_VARIANTS:
        full, fwd = llm_fwdbwd(**params), llm_fwd(**params)
        n = sum(k.phase is Phase.FWD for k in full.kernels)
        assert fwd.kernels == full.kernels[:n]
        names = {k.name for k in fwd.kernels}
        assert fwd.connections == tuple(c for c in full.connections
                                        if c.src in names and c.dst in names)


def test_gated_ffn_kernels_and_edges():
    h, f, s, w = 256, 704, 128, 2
    g = llm_fwdbwd(**GQA_SMALL)
    k = {x.name: x for x in g.kernels}
    assert [x.name for x in g.kernels[13:18]] == [
        "FFN_gate", "FFN_up", "SwiGLU", "FFN_down", "DropOut_3"]
    assert not {"FFN0", "FFN1", "GeLU"} & set(k)
    for name in ("FFN_gate", "FFN_up"):
        assert (k[name].m, k[name].k, k[name].n) == (f, h, s)
    assert (k["FFN_down"].m, k["FFN_down"].k) == (h, f)
    assert k["SwiGLU"].kind is KernelKind.ELEMENTWISE2 and k["SwiGLU"].type is ComputeType.SIMD
    edges = {(c.src, c.dst) for c in g.connections}
    assert {("LayerNorm_2", "FFN_gate"), ("LayerNorm_2", "FFN_up"), ("FFN_gate", "SwiGLU"),
            ("FFN_up", "SwiGLU"), ("SwiGLU", "FFN_down"), ("FFN_down", "DropOut_3"),
            ("DropOut_3_bwd", "FFN_down_bwd"), ("FFN_down_bwd", "SwiGLU_bwd_gate"),
            ("FFN_down_bwd", "SwiGLU_bwd_up"), ("SwiGLU_bwd_gate", "FFN_gate_bwd"),
            ("SwiGLU_bwd_up", "FFN_up_bwd"), ("FFN_gate_bwd", "LayerNorm_2_bwd"),
            ("FFN_up_bwd", "LayerNorm_2_bwd")} <= edges
    # each weight GEMM: one data-gradient GEMM (same FLOP, same weight) and one weight-gradient
    # GEMM (same FLOP) whose output, its weight's bytes, is all-reduced periodically
    weighted = [x for x in g.kernels if x.kind is KernelKind.GEMM_WEIGHT and x.phase is Phase.FWD]
    assert [x.name for x in weighted] == ["Q", "K", "V", "PROJ_GEMM", "FFN_gate", "FFN_up",
                                          "FFN_down"]
    for x in weighted:
        bwd, upd = k[f"{x.name}_bwd"], k[f"{x.name}_bwd_weight_update"]
        assert bwd.flop == upd.flop == x.flop and bwd.weight_bytes == x.weight_bytes
        assert upd.kind is KernelKind.GEMM and upd.tiling is Dim.K and upd.k == s
        assert upd.communication is Collective.ALL_REDUCE_PERIODIC
        assert upd.communication_bytes == upd.output_bytes == x.weight_bytes
        assert {c.src for c in g.connections if c.dst == upd.name} <= {x.name for x in g.kernels}
    assert k["FFN_gate"].weight_bytes == f * h * w
    assert [x.name for x in g.kernels if x.name.endswith("_weight_update")] == [
        "FFN_down_bwd_weight_update", "FFN_gate_bwd_weight_update", "FFN_up_bwd_weight_update",
        "PROJ_GEMM_bwd_weight_update", "V_bwd_weight_update", "K_bwd_weight_update",
        "Q_bwd_weight_update"]


def test_grouped_query_attention_sizes():
    h, a, d, gkv, s, w = 256, 8, 32, 2, 128, 2
    g = llm_fwdbwd(**GQA_SMALL)
    k = {x.name: x for x in g.kernels}
    kv_act, kv_wt = gkv * d * s * w, h * gkv * d * w
    for name in ("K", "V"):
        assert (k[name].outer, k[name].m, k[name].k) == (gkv, d, h)
        assert (k[name].weight_bytes, k[name].output_bytes) == (kv_wt, kv_act)
        assert k[f"{name}_bwd_weight_update"].communication_bytes == kv_wt
        assert k[f"{name}_bwd"].flop == k[name].flop == 2 * h * gkv * d * s
    assert (k["Q"].outer, k["Q"].weight_bytes) == (a, h * h * w)
    # the attention GEMMs keep all a query heads; each K/V head serves a / g of them
    for name in ("MHA_GEMM_1", "MHA_GEMM_2", "MHA_GEMM_1_bwd1", "MHA_GEMM_2_bwd2"):
        assert k[name].outer == a
    assert k["MHA_GEMM_1"].input2_bytes == k["MHA_GEMM_2"].input_bytes == kv_act
    assert k["MHA_GEMM_1_bwd2"].output_bytes == k["MHA_GEMM_2_bwd2"].output_bytes == kv_act
    dec = llm_decode(**{**SMALL["llm-decode"], "num_kv_head": 2})
    kd = {x.name: x for x in dec.kernels}
    sw, tp = SMALL["llm-decode"]["seq_window"], SMALL["llm-decode"]["tp"]
    assert kd["K_cache"].memory_bytes == w * 2 * 16 * sw / tp  # g·d·window·word / tp
    assert kd["V"].memory_bytes == 64 * 2 * 16 * w / tp
    assert (kd["K_cache"].outer, kd["K_cache"].n) == (2, sw + 1)


@pytest.mark.parametrize(
    "name, change, path, message",
    [
        ("llm", {"num_kv_head": 5}, "graph.num_kv_head",
         "must divide num_head (4): each key/value head serves the same number of query "
         "heads. Got 5 instead."),
        ("llm-fwd", {"num_kv_head": 3}, "graph.num_kv_head", "must divide num_head (4)"),
        ("llm-decode", {"num_kv_head": 3}, "graph.num_kv_head", "must divide num_head (4)"),
        ("llm", {"num_kv_head": 0}, "graph.num_kv_head", "must be > 0. Got 0 instead."),
        ("llm", {"gated_ffn": 2}, "graph.gated_ffn", "must be 0 or 1. Got 2 instead."),
        ("llm-decode", {"gated_ffn": -1}, "graph.gated_ffn", "must be 0 or 1. Got -1 instead."),
        ("llm", {"gated_ffn": True}, "graph.gated_ffn", "must be an integer. Got True instead."),
        ("llm", {"ffn_dim": 0}, "graph.ffn_dim", "must be > 0. Got 0 instead."),
        ("llm-fwd", {"ffn_dim": -7}, "graph.ffn_dim", "must be > 0. Got -7 instead."),
    ],
)
def test_bad_new_parameters(name, change, path, message):
    with pytest.raises(SpecError) as err:
        generate(name, {**SMALL[name], **change})
    (issue,) = err.value.issues
    assert issue.path == path and message in issue.message


def test_bad_new_parameters_in_direct_calls_and_with_name_problems():
    with pytest.raises(SpecError, match=r"^graph.num_kv_head must divide num_head \(32\)"):
        llm_fwdbwd(**{**LLAMA3_8B, "num_kv_head": 6})
    with pytest.raises(SpecError) as err:  # reported next to an unknown key
        generate("llm", {**SMALL["llm"], "gated_ffn": 3, "ffn_dims": 8})
    assert [i.path for i in err.value.issues] == ["graph.ffn_dims", "graph.gated_ffn"]


_TINY_GQA_SPEC = """
# A tiny Llama-like training layer: grouped-query attention and a SwiGLU FFN.
[workload]
kind = "llm"
hidden_dim = 256
num_head = 8
head_dim = 32
seq_len = 128
num_layer = 2
global_batch_size = 4
micro_batch_size = 1

[graph]
generator = "llm"
num_kv_head = 2
ffn_dim = 704
gated_ffn = 1

[system]
num_chip = 2

[system.accelerator]
cores = 64
systolic_width = 16
systolic_height = 16
sram_bytes = 64e6
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 1000.0

[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 100.0
parallelism = "tp"

[execution]
num_config = 2
word_bytes = 2
"""


def test_spec_with_new_parameters_loads_and_runs(tmp_path):
    from typer.testing import CliRunner

    from dfsearch.cli import app
    from dfsearch.loader import load_spec, load_toml_spec

    path = tmp_path / "tiny_gqa.toml"
    path.write_text(_TINY_GQA_SPEC)
    spec = load_spec(path)
    assert spec.graph == llm_fwdbwd(**GQA_SMALL)  # hidden, heads, seq and word from the spec
    out = tmp_path / "out.json"
    r = CliRunner().invoke(app, ["run", str(path), "--quiet", "--json", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["final_s"] > 0 and 0 < res["utilization"] <= 1
    bad = _TINY_GQA_SPEC.replace("num_kv_head = 2", "num_kv_head = 3")
    with pytest.raises(SpecError) as err:
        load_toml_spec(bad, file="bad.toml", base_dir=tmp_path)
    (issue,) = err.value.issues
    assert issue.path == "graph.num_kv_head" and "must divide num_head (8)" in issue.message


def test_llama3_example_is_the_documented_layer():
    from dfsearch.loader import load_spec

    spec = load_spec(Path(generators.__file__).parents[1] / "examples" / "llama3_8b_layer.toml")
    assert spec.graph == llm_fwdbwd(**LLAMA3_8B)
    assert gemm_flop(spec.graph) == 3 * llm_fwd_gemm_closed_form(
        4096, 32, 128, 8, 14336, 8192, True)
