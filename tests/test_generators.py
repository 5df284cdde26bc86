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
        "llm": ["hidden", "num_head", "head_dim", "seq", "word"],
        "llm-fwd": ["hidden", "num_head", "head_dim", "seq", "word"],
        "llm-decode": ["hidden", "num_head", "head_dim", "word", "seq_window", "tp", "mlp_dim"],
        "dlrm": ["mlp_dim", "bottom_num_mlp", "top_num_mlp", "pooled_row", "row", "num_table",
                 "emb_dim", "micro_batch_size", "word"],
        "hpl": ["n", "b", "iteration", "word"],
        "fft": ["length", "r", "word"],
    }
    assert list(GENERATORS) == list(expected)
    for name, gen in GENERATORS.items():
        assert isinstance(gen, Generator) and gen.name == name and gen.help
        assert [p.name for p in gen.params] == expected[name]
        assert all(isinstance(p, GeneratorParam) and p.type is int and p.help for p in gen.params)
        sig = inspect.signature(gen.function).parameters
        assert set(sig) == set(expected[name])
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.values())
    optional = {(g.name, p.name, p.default) for g in GENERATORS.values() for p in g.params
                if not p.required}
    assert optional == {("hpl", "iteration", None), ("fft", "r", 2)}
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

