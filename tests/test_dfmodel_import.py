"""The DFModel importer (dfsearch.io.dfmodel) and its protobuf-text reader (dfsearch.io.pbtxt).

Expected values come from the DFModel inputs themselves (tests/data/dfmodel/<case>/setup*.txt,
copied from DFModel's result folders), from what DFModel printed for them (log.txt: per-kernel FLOP
lines, "Per-Accelerator Throughput (GFLOPS)", "Workload FLOP", "Link BW"), from the inter-chip
solution DFModel logged for the GPT-3 1.5B case, and from closed forms of the generators written
out below. Float fields are expected as IEEE float32 values (docs/model.md), computed here with
numpy from the decimal text of the input.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase as HPhase
from hypothesis import given, settings
from hypothesis import strategies as st

from dfsearch.codes import (
    TOPOLOGY_VARIANTS,
    Collective,
    ComputeType,
    Dim,
    Equations,
    ExecutionStyle,
    KernelKind,
    MemoryModel,
    Overlap,
    Parallelism,
    Phase,
    Topology,
)
from dfsearch.errors import SpecError
from dfsearch.io.dfmodel import (
    V2_FIELDS,
    load_dfmodel,
    load_dfmodel_file,
    looks_like_dfmodel,
    to_float32,
)
from dfsearch.io.pbtxt import Message, parse_pbtxt
from dfsearch.spec import (
    Accelerator,
    Connection,
    Cost,
    DLRMWorkload,
    Execution,
    FFTWorkload,
    Graph,
    HPLWorkload,
    Kernel,
    LLMWorkload,
    Memory,
    NetworkDim,
    SearchSettings,
    Spec,
    System,
    Training,
)

DATA = Path(__file__).parent / "data" / "dfmodel"
SETUPS = sorted(DATA.glob("*/setup*.txt"))
GPT3 = DATA / "gpt3_1.5B_seq1024_a100x4_ring_tp4"
HPL = DATA / "hpl_circe_576gpu_sw_sw_24x24_cu09_legacy"
FFT = DATA / "fft_1024gpu_sw_sw_8x128"
DLRM = DATA / "dlrm_A_128gpu_r_fc_8x16"
README = DATA / "readme_gpt3_1T_sn30_1024chips_r_r_8x128"

HYPO = settings(deadline=None, derandomize=True, max_examples=50)


def f32(text: str | float) -> float:
    """What a protobuf float field holds for this decimal text, widened to Python float."""
    return float(np.float32(float(text)))


def load(case: Path, name: str = "setup.txt") -> Spec:
    return load_dfmodel_file(case / name)


def log_value(case: Path, label: str) -> str:
    """The value DFModel printed after ``label`` in the case's log.txt."""
    text = (case / "log.txt").read_text()
    m = re.search(rf"^{re.escape(label)} (.+)$", text, re.MULTILINE)
    assert m, f"{label!r} not in {case.name}/log.txt"
    return m.group(1).strip()


def error_text(text: str, **kw) -> str:
    with pytest.raises(SpecError) as info:
        load_dfmodel(text, **kw)
    return str(info.value)


# =========================================================================== real cases
def test_case_data_is_present():
    assert len(SETUPS) == 6
    assert {p.parent.name for p in SETUPS} == {
        "dlrm_A_128gpu_r_fc_8x16",
        "fft_1024gpu_sw_sw_8x128",
        "gpt3_1.5B_seq1024_a100x4_ring_tp4",
        "hpl_circe_576gpu_sw_sw_24x24_cu09_legacy",
        "readme_gpt3_1T_sn30_1024chips_r_r_8x128",
    }


@pytest.mark.parametrize("path", SETUPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_case_imports(path):
    spec = load_dfmodel_file(path)
    assert isinstance(spec, Spec)
    assert spec.search == SearchSettings()
    assert looks_like_dfmodel(path.read_text())
    # kernel names are unique and every connection refers to them
    names = [k.name for k in spec.graph.kernels]
    assert len(set(names)) == len(names)
    assert all(c.src in names and c.dst in names for c in spec.graph.connections)


@pytest.mark.parametrize("path", SETUPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kernel_count_matches_the_file(path):
    text = path.read_text()
    spec = load_dfmodel_file(path)
    assert len(spec.graph.kernels) == len(re.findall(r"^\s*kernels\s*\{", text, re.MULTILINE))
    assert len(spec.graph.connections) == len(
        re.findall(r"^\s*connections\s*\{", text, re.MULTILINE)
    )


@pytest.mark.parametrize("case", [GPT3, FFT, DLRM], ids=lambda p: p.name)
def test_kernels_match_dfmodels_flop_lines(case):
    """DFModel prints `<SIMD|SYSTOLIC> name outer*M K N num_input FLOP` per kernel."""
    lines = re.findall(
        r"^(SIMD|SYSTOLIC) (\S+) (\d+) (\d+) (\d+) (\d+) (\d+)$",
        (case / "log.txt").read_text(),
        re.MULTILINE,
    )
    kernels = load(case).graph.kernels
    assert len(lines) == len(kernels)
    for k, (typ, name, rows, kdim, n, num_input, flop) in zip(kernels, lines):
        assert (k.type.dfmodel, k.name) == (typ, name)
        got = (k.rows, k.k, k.n, max(k.num_input, 1))
        assert got == (int(rows), int(kdim), int(n), int(num_input))
        assert k.flop == float(flop)


@pytest.mark.parametrize(
    ("case", "layers", "batch"),
    [(GPT3, 24, 8192), (FFT, 1, 1), (DLRM, 1, 128000000), (README, 128, 3072)],
    ids=lambda v: v.name if isinstance(v, Path) else str(v),
)
def test_workload_flop_matches_the_log(case, layers, batch):
    """Workload FLOP = graph FLOP x layers x global batch; layers/batch from setup.txt."""
    assert load(case).graph.flop * layers * batch == float(log_value(case, "Workload FLOP"))


@pytest.mark.parametrize(
    ("case", "label"),
    [
        (GPT3, "Per-Accelerator Throughput (GFLOPS)"),
        (DLRM, "Per-Accelerator Throughput (GFLOPS)"),
        (FFT, "Per-Accelerator Throughput (GFLOPS)"),
        (HPL, "GFLOPS"),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else "",
)
def test_peak_uses_the_float32_frequency(case, label):
    """DFModel's printed peak only comes out with freq read as float32."""
    assert load(case).system.accelerator.peak_gflops == float(log_value(case, label))


@pytest.mark.parametrize("case", [GPT3, FFT, DLRM], ids=lambda p: p.name)
def test_link_and_dram_bandwidth_match_the_log(case):
    spec = load(case)
    logged = [float(x) for x in log_value(case, "Link BW").strip("[]").split(",")]
    assert [d.link_bw_GBps for d in spec.system.network] == logged
    assert spec.system.memory.dram_bw_GBps == float(log_value(case, "DRAM BW"))


def test_gpt3_1_5b_fields():
    spec = load(GPT3)
    g = spec.graph
    assert (len(g.kernels), len(g.connections)) == (41, 53)
    assert spec.system.num_chip == 4
    assert spec.system.network == (
        NetworkDim(topology=Topology.RING, link_bw_GBps=600.0, size=4, parallelism=Parallelism.TP),
    )
    assert spec.system.variant == "r"
    assert spec.system.accelerator == Accelerator(
        cores=432, systolic_width=16, systolic_height=16, sram_bytes=88080384.0,
        freq_GHz=f32("1.41"),
    )
    assert spec.system.accelerator.freq_GHz == 1.409999966621399
    assert spec.system.memory == Memory(dram_bw_GBps=1555.0, dram_bytes=42949672960.0)
    assert spec.execution == Execution(
        style=ExecutionStyle.DATAFLOW,
        num_config=2,
        overlap=Overlap.PERFECT,
        compute_util=f32("0.9"),
        word_bytes=2,
        equations=Equations.V2,  # `overlap: PERFECT_OVERLAP` is a v2 field
    )
    assert spec.execution.compute_util == 0.8999999761581421
    assert spec.workload == LLMWorkload(
        hidden_dim=2048, head_dim=128, num_head=16, seq_len=1024, num_layer=24,
        global_batch_size=8192, micro_batch_size=1, tile_size=0, num_layer_in_graph=1,
    )
    # link_unit_power_y is given but the ring has one dimension: one entry per dimension
    assert spec.cost == Cost(
        link_price_per_GBps=2.0, switch_price_per_GBps=24.0, dram_price_per_GBps=1.0,
        chip_price=33000.0, link_power_J_per_GB=(f32("0.0104"),),
        switch_power_J_per_GB=f32("0.052"), dram_power_J_per_GB=f32("0.16248"),
        chip_power_W=750.0,
    )
    assert g.kernels[0] == Kernel(
        name="Add_Prev_Layer", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD,
        phase=Phase.FWD, outer=1, m=2048, k=1, n=1024, tiling=Dim.N, sharding=None,
        config=-1, input_bytes=4194304.0, output_bytes=4194304.0, id=1,
    )
    q = g.kernels[2]
    assert (q.name, q.kind) == ("Q", KernelKind.GEMM_WEIGHT)
    assert (q.outer, q.m, q.k, q.n) == (16, 128, 2048, 1024)
    assert (q.input_bytes, q.weight_bytes, q.output_bytes) == (4194304.0, 8388608.0, 4194304.0)
    ffn1_wu = g.kernels[35]
    assert ffn1_wu.name == "FFN1_bwd_weight_update"
    assert (ffn1_wu.kind, ffn1_wu.phase, ffn1_wu.tiling) == (KernelKind.GEMM, Phase.BWD, Dim.K)
    assert ffn1_wu.communication is Collective.ALL_REDUCE_PERIODIC
    assert ffn1_wu.communication_bytes == 4 * 2048 * 2048 * 2  # 4h^2w, exact in float32
    # the edges of the LLM training layer, ids 1..53 in this order
    names = {k.id: k.name for k in g.kernels}
    assert list(g.connections) == [
        Connection(src=names[int(a)], dst=names[int(b)], id=i)
        for i, (a, b) in enumerate((e.split("->") for e in _LLM_EDGES.split(", ")), start=1)
    ]
    assert not any(c.zero_out for c in g.connections)


_LLM_EDGES = (
    "1->2, 2->3, 2->4, 2->5, 3->6, 4->6, 6->7, 7->8, 5->9, 8->9, 9->10, 10->11, 11->12, 1->12, "
    "12->13, 13->14, 14->15, 15->16, 16->17, 17->18, 12->18, 19->20, 20->21, 21->22, 22->23, "
    "23->24, 24->25, 25->26, 26->27, 5->27, 26->28, 8->28, 27->30, 28->29, 30->31, 31->32, "
    "31->33, 4->32, 3->33, 32->34, 33->35, 20->36, 15->36, 22->37, 13->37, 25->38, 9->38, "
    "28->39, 2->39, 33->40, 2->40, 32->41, 2->41"
)

#: The sharding DFModel logged for this case, per kernel index 0..40.
_LOGGED_SHARDING = (
    "0 NO,1 NO,2-8 OUTER,9 K,10-12 NO,13 M,14 M,15 K,16 M,17 M,18 NO,19 NO,20 M,21 M,22 K,"
    "23 NO,24 NO,25 M,26 OUTER,27 OUTER,28 K,29-34 OUTER,35-40 M"
)


def _expand(listing: str) -> list[Dim]:
    out: list[Dim] = []
    for item in listing.split(","):
        span, dim = item.split()
        lo, _, hi = span.partition("-")
        for i in range(int(lo), int(hi or lo) + 1):
            assert i == len(out)
            out.append(Dim[dim])
    return out


def test_sharded_setup_carries_the_logged_sharding():
    plain, sharded = load(GPT3), load(GPT3, "setup_sharded.txt")
    expected = _expand(_LOGGED_SHARDING)
    assert len(expected) == 41
    assert [k.sharding for k in sharded.graph.kernels] == expected
    assert all(k.sharding is None for k in plain.graph.kernels)  # absent = free
    # otherwise the two files are the same input
    from dataclasses import replace

    unpinned = tuple(replace(k, sharding=None) for k in sharded.graph.kernels)
    assert replace(sharded, graph=replace(sharded.graph, kernels=unpinned)) == plain


def test_hpl_legacy_case():
    spec = load(HPL)
    e = spec.execution
    assert e.equations is Equations.LEGACY  # `miscellany`
    assert e.separate_rs_ag_for_ar is True  # legacy: all-reduce as RS + AG
    assert (e.style, e.num_config) == (ExecutionStyle.KERNEL_BY_KERNEL, 0)
    assert e.overlap is Overlap.PERFECT
    assert (e.word_bytes, e.compute_util) == (8, f32("0.9"))
    assert spec.workload == HPLWorkload(n=65536, b=1024, num_copy=1)
    assert spec.system.variant == "sw_sw"
    assert [(d.topology, d.size, d.link_bw_GBps, d.parallelism) for d in spec.system.network] == [
        (Topology.SWITCH, 24, 12.5, Parallelism.NONE),
        (Topology.SWITCH, 24, 12.5, Parallelism.NONE),
    ]
    assert spec.system.memory.dram_bytes == 17179869184.0  # a float field written as an integer
    assert isinstance(spec.system.memory.dram_bytes, float)
    ks = spec.graph.kernels
    assert len(ks) == 64 and len(spec.graph.connections) == 63
    # HPL generator: iteration i has side = N - (i-1) B, bytes = side * B * word (as float32)
    for i, k in enumerate(ks, start=1):
        side = 65536 - (i - 1) * 1024
        assert (k.name, k.kind, k.type, k.phase) == (
            f"Iteration_{i}", KernelKind.GEMM, ComputeType.SYSTOLIC, Phase.NONE
        )
        assert (k.outer, k.m, k.k, k.n, k.tiling) == (1, side, side, 1024, Dim.NO)
        assert k.config == -1  # no `config` field, kernel-by-kernel: DFModel ignores pins
        assert k.communication is Collective.BROADCAST
        assert k.communication2 is Collective.POINT_TO_POINT
        assert k.communication_bytes == k.communication2_bytes == f32(side * 1024 * 8)
        assert k.input_bytes == k.output_bytes == f32(side * 1024 * 8)
        assert k.input2_bytes is None and k.weight_bytes is None
    assert spec.graph.flop == float(log_value(HPL, "FLOP"))  # one layer, batch 1 for HPL


def test_fft_case():
    spec = load(FFT)
    assert spec.execution.equations is Equations.V2
    assert spec.execution.style is ExecutionStyle.KERNEL_BY_KERNEL
    assert spec.execution.compute_util == 0.0  # commented out: the cycle model
    assert spec.execution.word_bytes == 4
    assert spec.workload == FFTWorkload(length=1073740000000, num_copy=1)  # int64 stays exact
    s1, s2 = spec.graph.kernels
    assert s1.weight_bytes is None  # the generator gives no weight size
    assert s2.communication is Collective.ALL_TO_ALL
    assert s2.communication_bytes == f32("4294957900000.0") == 4294957858816.0
    assert spec.cost.chip_price == 33000.0 and isinstance(spec.cost.chip_price, float)
    assert spec.cost.chip_power_W == 750.0 and isinstance(spec.cost.chip_power_W, float)


def test_dlrm_case():
    spec = load(DLRM)
    assert spec.execution.equations is Equations.V2  # uses `overlap:`
    assert spec.workload == DLRMWorkload(
        num_table=800, emb_dim=93, row=10658602, global_batch_size=128000000, num_copy=1
    )
    assert spec.system.variant == "r_fc"
    assert [(d.size, d.link_bw_GBps) for d in spec.system.network] == [(8, 300.0), (16, 25.0)]
    assert spec.cost.switch_power_J_per_GB == 0.0  # absent
    assert spec.cost.chip_price == f32("19999.99997") == 20000.0
    assert spec.cost.link_power_J_per_GB == (f32("0.0104"), f32("0.052"))
    bottom = spec.graph.kernels[9]
    assert bottom.name == "MLP_10"
    assert bottom.communication is Collective.ALL_TO_ALL
    assert bottom.memory_bytes == bottom.communication_bytes > 0


def test_readme_case_is_v1_with_the_doubled_all_reduce_option():
    spec = load(README)
    e = spec.execution
    # `perfect_overlap: true` is v1's form; separate_rs_ag_for_ar is a v2 option that acts on
    # v1 equations (the README describes v1)
    assert e.equations is Equations.V1
    assert e.separate_rs_ag_for_ar is True
    assert e.overlap is Overlap.PERFECT  # v1 `perfect_overlap: true`
    assert (e.style, e.num_config, e.word_bytes) == (ExecutionStyle.DATAFLOW, 6, 2)
    assert [(d.topology, d.size, d.link_bw_GBps, d.parallelism) for d in spec.system.network] == [
        (Topology.RING, 8, 50.0, Parallelism.TP),
        (Topology.RING, 128, 50.0, Parallelism.PP),
    ]
    assert spec.system.memory.dram_bytes == f32("1099511600000.0") == 2.0**40


def test_readme_graph_flop_is_the_closed_form():
    """LLM training layer: one layer, one sequence = 72 h^2 s + 12 h s^2 + 19 h s + 4 a s^2."""
    h, s, a = 25600, 2048, 160
    closed = 72 * h * h * s + 12 * h * s * s + 19 * h * s + 4 * a * s * s
    assert closed == 97928934850560
    assert load(README).graph.flop == 9.7928934850560e13 == closed


# =========================================================================== float32 / ints
def test_float_fields_are_float32_and_int_fields_stay_exact():
    text = _minimal(
        accelerator="core: 3 systolic_width: 2 systolic_height: 2 freq: 1.41 sram_cap: 1e-45",
        cost="accelerator_price: 33000 link_unit_power_x: 0.0104",
        memory="dram_bw: 0.1 dram_cap: 17179869185",
        workload="fft { length: 9007199254740993 }",
    )
    spec = load_dfmodel(text)
    acc = spec.system.accelerator
    assert acc.freq_GHz == 1.409999966621399 == f32("1.41")
    assert acc.sram_bytes == f32("1e-45") > 0  # a float32 subnormal, not rounded to 0
    assert spec.cost.chip_price == 33000.0 and type(spec.cost.chip_price) is float
    assert spec.cost.link_power_J_per_GB == (0.010400000028312206,)
    assert spec.system.memory.dram_bw_GBps == 0.10000000149011612
    assert spec.system.memory.dram_bytes == 17179869184.0  # 2^34 + 1 rounds to 2^34 in float32
    assert spec.workload.length == 2**53 + 1 and type(spec.workload.length) is int
    assert type(acc.cores) is int


def test_to_float32():
    assert to_float32(1.41) == float(np.float32(1.41))
    assert math.isinf(to_float32(1e39))


# =========================================================================== equations
@pytest.mark.parametrize(
    ("extra", "where", "expected"),
    [
        ("", "execution", Equations.V1),
        ("perfect_overlap: true", "execution", Equations.V1),
        ("overlap: NO_OVERLAP", "execution", Equations.V2),
        ("separate_rs_ag_for_ar: false", "execution", Equations.V1),
        ("skip_inter_chip_optimization: false", "execution", Equations.V2),
        ("effective_stage: 0", "execution", Equations.V2),
        ("link_latency: 0", "accelerator", Equations.V1),
        ("sram_extra: 0", "kernel", Equations.V1),
        ("dram_extra: 0", "kernel", Equations.V1),
        ("zero_out: false", "connection", Equations.V1),
        ("", "miscellany", Equations.LEGACY),
        ("overlap: PERFECT_OVERLAP", "miscellany", Equations.LEGACY),
    ],
)
def test_equation_set_follows_the_fields_used(extra, where, expected):
    kw = {"execution_extra": extra} if where in ("execution", "miscellany") else {}
    if where == "accelerator":
        kw["accelerator"] = "core: 1 systolic_width: 1 systolic_height: 1 freq: 1 " + extra
    if where == "kernel":
        kw["variant_extra"] = extra
    if where == "connection":
        kw["connection_extra"] = extra
    text = _minimal(execution_name="miscellany" if where == "miscellany" else "execution", **kw)
    spec = load_dfmodel(text)
    assert spec.execution.equations is expected
    # legacy inputs imply the doubled all-reduce; nothing else does by itself
    assert spec.execution.separate_rs_ag_for_ar is (expected is Equations.LEGACY)


def test_v2_field_list():
    assert V2_FIELDS == (
        "Accelerator.link_latency",
        "Connection.zero_out",
        "ElementWise_Input1.dram_extra",
        "ElementWise_Input1.sram_extra",
        "ElementWise_Input1_Input2.dram_extra",
        "ElementWise_Input1_Input2.sram_extra",
        "Execution.effective_stage",
        "Execution.overlap",
        "Execution.separate_rs_ag_for_ar",
        "Execution.skip_inter_chip_optimization",
        "GEMM_Input1_Input2.dram_extra",
        "GEMM_Input1_Input2.sram_extra",
        "GEMM_Input1_Weight.dram_extra",
        "GEMM_Input1_Weight.sram_extra",
    )


@pytest.mark.parametrize(
    ("extra", "overlap"),
    [
        ("", Overlap.NONE),  # v1: perfect_overlap absent = false = sum
        ("perfect_overlap: false", Overlap.NONE),
        ("perfect_overlap: true", Overlap.PERFECT),
        ("overlap: PERFECT_OVERLAP", Overlap.PERFECT),
        ("overlap: OVERLAP_COMPUTE_MEMORY", Overlap.COMPUTE_MEMORY),
        ("overlap: NO_OVERLAP", Overlap.NONE),
        ("overlap: 3", Overlap.COMPUTE_MEMORY),  # DFModel's own enum numbering
    ],
)
def test_overlap_mapping(extra, overlap):
    assert load_dfmodel(_minimal(execution_extra=extra)).execution.overlap is overlap


def test_explicit_separate_flag_wins_over_the_legacy_default():
    text = _minimal(execution_name="miscellany", execution_extra="separate_rs_ag_for_ar: false")
    e = load_dfmodel(text).execution
    assert (e.equations, e.separate_rs_ag_for_ar) == (Equations.LEGACY, False)


# =========================================================================== mapping details
def test_absent_config_is_dfmodels_zero_only_where_pins_are_honoured():
    """proto3: absent int64 = 0; DFModel honours pins for DATAFLOW with 0 < C < #kernels."""
    two = "kernels { name: \"b\" id: 2 type: SIMD elementwise_input1 { outer: 1 M: 2 N: 2 } }"
    for style, num_config, expected in [
        ("DATAFLOW", 1, 0),
        ("DATAFLOW", 0, -1),
        ("DATAFLOW", 2, -1),
        ("KERNEL_BY_KERNEL", 0, -1),
    ]:
        text = _minimal(
            extra_kernels=two,
            execution_extra=f"execution_style: {style} num_config: {num_config}",
            style=None,
        )
        assert [k.config for k in load_dfmodel(text).graph.kernels] == [expected] * 2


def test_duplicate_kernel_names_are_made_unique():
    text = _minimal(
        extra_kernels=(
            'kernels { name: "a" id: 7 type: SIMD elementwise_input1 { outer: 1 M: 2 N: 2 } }\n'
            'kernels { name: "a" type: SIMD elementwise_input1 { outer: 1 M: 2 N: 2 } }\n'
            'kernels { name: "a#7" id: 9 type: SIMD elementwise_input1 { outer: 1 M: 2 N: 2 } }'
        ),
        connections="connections { startIdx: 1 endIdx: 7 } connections { startIdx: 7 endIdx: 9 }",
    )
    spec = load_dfmodel(text)
    assert [k.name for k in spec.graph.kernels] == ["a", "a#7", "a#2", "a#7#9"]
    assert [(c.src, c.dst) for c in spec.graph.connections] == [("a", "a#7"), ("a#7", "a#7#9")]


def test_duplicate_kernel_ids_and_missing_names_are_errors():
    two = 'kernels { id: 1 type: SIMD elementwise_input1 { outer: 1 M: 2 N: 2 } }'
    with pytest.raises(SpecError) as info:
        load_dfmodel(_minimal(extra_kernels=two))
    assert [(i.path, i.message.split(" (line")[0]) for i in info.value.issues] == [
        ("dataflow_graph.kernels[1].name", "is required."),
        ("dataflow_graph.kernels[1].id", "1 is also the id of dataflow_graph.kernels[0]; "
                                         "kernel ids must be unique"),
    ]


def test_kernel_variants_map_to_kinds_and_byte_fields():
    kernels = """
    kernels { name: "w" id: 1 type: SYSTOLIC gemm_input1_weight { outer: 2 M: 3 K: 4 N: 5
        input_tensor_size: 1 weight_tensor_size: 2 output_tensor_size: 3 skip_weight: true
        use_effective_stage: true num_input: 2 memory_size: 7 sharding: NO_SHARDING
        tiling: M_TILING communication_type: ALL_REDUCE communication_size: 8
        communication_type_2: ALL_GATHER communication_size_2: 9 shard_K: 4 } }
    kernels { name: "g" id: 2 fwd_bwd: BWD type: SYSTOLIC gemm_input1_input2 { outer: 1 M: 3
        K: 4 N: 5 input_tensor_1_size: 1 input_tensor_2_size: 2 output_tensor_size: 3 } }
    kernels { name: "e2" id: 3 type: SIMD elementwise_input1_input2 { outer: 1 M: 3 N: 5
        input_tensor_1_size: 1 input_tensor_2_size: 2 sharding: NO_SHARDING } }
    """
    spec = load_dfmodel(_minimal(first_kernel=kernels, execution_extra="effective_stage: 1"))
    w, g, e2 = spec.graph.kernels
    assert w == Kernel(
        name="w", kind=KernelKind.GEMM_WEIGHT, type=ComputeType.SYSTOLIC, outer=2, m=3, k=4, n=5,
        tiling=Dim.M, sharding=Dim.NO, input_bytes=1.0, weight_bytes=2.0, output_bytes=3.0,
        communication=Collective.ALL_REDUCE, communication_bytes=8.0,
        communication2=Collective.ALL_GATHER, communication2_bytes=9.0, memory_bytes=7.0,
        num_input=2, skip_weight=True, use_effective_stage=True, id=1,
    )
    assert (g.kind, g.phase, g.input_bytes, g.input2_bytes, g.weight_bytes) == (
        KernelKind.GEMM, Phase.BWD, 1.0, 2.0, None
    )
    assert (e2.kind, e2.k, e2.input2_bytes, e2.output_bytes, e2.sharding, e2.tiling) == (
        KernelKind.ELEMENTWISE2, 1, 2.0, None, Dim.NO, Dim.NO
    )


@pytest.mark.parametrize("variant", list(TOPOLOGY_VARIANTS))
def test_every_topology_variant(variant):
    dims = TOPOLOGY_VARIANTS[variant]
    letters = "xyz"[: len(dims)]
    body = " ".join(f"{c}: 2 link_bw_{c}: {i + 1}.5" for i, c in enumerate(letters))
    powers = "link_unit_power_x: 1 link_unit_power_z: 3"
    text = _minimal(topology=f"{variant} {{ {body} }}", num_chip=2 ** len(dims), cost=powers,
                    workload="fft { length: 16 }")
    spec = load_dfmodel(text)
    assert spec.system.network == tuple(
        NetworkDim(topology=t, link_bw_GBps=i + 1.5, size=2) for i, t in enumerate(dims)
    )
    assert spec.system.variant == variant
    assert spec.cost.link_power_J_per_GB == (1.0, 0.0, 3.0)[: len(dims)]


def test_gurobi_block_and_dfmodel_outputs_are_accepted_and_ignored():
    text = _minimal(
        variant_extra="shard_outer_M: 3 shard_N: 4",
        kernel_extra="topological_number: 5",
        connection_extra=(
            'communication_type: ALL_GATHER communication_size: 5 buffer_depth: 2 tensor_size: 1 '
            'shard_tensor_size: 1 startName: "a" endName: "b" lane_stage_type: LANE'
        ),
        accelerator="core: 1 systolic_width: 1 systolic_height: 1 freq: 1 x: 2 y: 3 "
        'placement: "rowwise"',
        tail="gurobi { thread: 144 gap: 0.001 time: 1200 }",
    )
    assert load_dfmodel(text) == load_dfmodel(_minimal(connection_extra=" "))


# =========================================================================== errors
def test_broken_braces_report_line_and_column():
    text = "system {\n  num_chip: 4\n  accelerator {\n    core: 1\n}\n"
    msg = error_text(text, file="s.txt")
    assert msg == (
        "s.txt: line 6, column 1: expected '}' to close 'system' (opened at line 1, column 8); "
        "found end of input"
    )
    assert error_text("system {\n num_chip: 4 >\n") == (
        "line 2, column 14: expected '}' to close 'system' (opened at line 1, column 8); found '>'"
    )
    assert error_text("}") == "line 1, column 1: unexpected '}' (no open message)"


def test_unknown_field_suggests_the_closest_name():
    msg = error_text(_minimal(variant_extra="Mm: 3"), file="x.txt")
    assert msg.startswith("x.txt: dataflow_graph.kernels[0].elementwise_input1 unknown field 'Mm'")
    assert msg.endswith("; did you mean 'M'?")
    # a misspelt required field is reported once (not also as missing)
    text = _minimal().replace("num_chip: 1", "num_chips: 1")
    assert error_text(text) == (
        "system unknown field 'num_chips' (line 14, column 10); did you mean 'num_chip'?"
    )
    assert "did you mean 'system'?" in error_text(_minimal().replace("system {", "sytem {"))


def test_unknown_enum_value():
    msg = error_text(_minimal().replace("type: SIMD", "type: SIMDD"))
    assert msg.startswith(
        "dataflow_graph.kernels[0].type must be one of SYSTOLIC, SIMD. Got SIMDD instead"
    )
    assert msg.endswith("Did you mean SIMD?")
    msg = error_text(_minimal(variant_extra="sharding: K_SHARDING"))
    assert msg.startswith(
        "dataflow_graph.kernels[0].elementwise_input1.sharding must be one of OUTER_SHARDING, "
        "M_SHARDING, N_SHARDING, NO_SHARDING. Got K_SHARDING instead"
    )


def test_dangling_connection_names_path_and_id():
    msg = error_text(_minimal(connections="connections { startIdx: 1 endIdx: 1 }\n"
                                          "connections { startIdx: 1 endIdx: 42 }"))
    assert msg.startswith(
        "dataflow_graph.connections[1].endIdx refers to kernel id 42, but no kernel has that id"
    )


def test_execution_and_miscellany_together():
    text = _minimal(tail="miscellany { word: 2 }")
    assert "'execution' (line" in error_text(text)
    assert "are the same message (the legacy name of 'execution'); give only one." in (
        error_text(text)
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("num_chip: 1", "num_chip: 1.5"), "system.num_chip must be an integer. Got 1.5 instead"),
        (("num_chip: 1", "num_chip: -3"), "system.num_chip must be > 0. Got -3 instead"),
        (("num_chip: 1", "num_chip: 1 num_chip: 2"), "system.num_chip is given more than once"),
        (("dram_bw: 100", "dram_bw: fast"), "system.memory.dram_bw must be a number. Got fast"),
        (("dram_bw: 100", "dram_bw: nan"), "system.memory.dram_bw must be a finite number"),
        (("dram_bw: 100", "dram_bw: 1e39"), "system.memory.dram_bw must be within float32 range"),
        (("word: 2", ""), "execution.word is required."),
        (("word: 2", "word: 0"), "execution.word must be > 0. Got 0 instead"),
        (("par_x: \"DP\"", "par_x: DP"), "system.r.par_x must be a quoted string"),
        (("par_x: \"DP\"", "par_x: \"dp\""), "system.r.par_x must be \"TP\", \"PP\" or \"DP\""),
        (("link_bw_x: 10", ""), "system.r.link_bw_x is required."),
        (("r { x: 1 link_bw_x: 10 par_x: \"DP\" }", ""), "system needs one topology: r, sw,"),
        (("perfect_overlap: true", "perfect_overlap: yes"), "must be true or false. Got yes"),
        (("execution_style: DATAFLOW", ""), "execution.execution_style is required"),
        (("type: SIMD", ""), "dataflow_graph.kernels[0].type is required (SYSTOLIC or SIMD)."),
        (("N: 4", ""), "dataflow_graph.kernels[0].elementwise_input1.N is required."),
        (("name: \"a\"", "name: a"), "dataflow_graph.kernels[0].name must be a quoted string"),
        (("compute_util: 0.5", "compute_util: 2"), "execution.compute_util must be <= 1. Got 2"),
        (("num_chip: 1", "num_chip { }"), "system.num_chip is an int64 field"),
        (("cost {", "cost: 5 cost {"), "cost must be a message"),
    ],
)
def test_field_errors(change, expected):
    old, new = change
    base = _minimal(
        execution_extra="perfect_overlap: true compute_util: 0.5",
        topology='r { x: 1 link_bw_x: 10 par_x: "DP" }',
    )
    assert old in base
    assert expected in error_text(base.replace(old, new, 1))


def test_oneof_conflicts():
    text = _minimal(kernel_extra="gemm_input1_input2 { outer: 1 M: 1 K: 1 N: 1 }")
    assert error_text(text).startswith(
        "dataflow_graph.kernels[0] has both 'gemm_input1_input2' (line 2) and "
        "'elementwise_input1' (line 3), which are alternatives (oneof kernel_variant)"
    )
    text = _minimal(workload="hpl { n: 4 b: 2 } fft { length: 4 }")
    assert "are alternatives (oneof workload_variant)" in error_text(text)


def test_llm_checks():
    llm = ("llm { hidden_dim: 64 head_dim: 16 num_head: 3 seq_len: 8 num_layer: 2 "
           "global_batch_size: 4 num_layer_in_graph: 1 }")
    msg = error_text(_minimal(workload=llm, par='"TP"'))
    assert "num_head * head_dim must equal hidden_dim. Got 3 * 16 = 48 instead of 64" in msg
    no_gbs = llm.replace("num_head: 3", "num_head: 4").replace("global_batch_size: 4 ", "")
    assert "execution.llm.global_batch_size is required." in error_text(
        _minimal(workload=no_gbs, par='"TP"')
    )
    no_lig = llm.replace("num_head: 3", "num_head: 4").replace(" num_layer_in_graph: 1", "")
    assert "execution.llm.num_layer_in_graph is required." in error_text(
        _minimal(workload=no_lig, par='"TP"')
    )


def test_dlrm_needs_a_global_batch_size():
    text = _minimal(workload="dlrm { num_table: 1 emb_dim: 1 row: 1 }")
    assert "execution.dlrm.global_batch_size is required." in error_text(text)


@pytest.mark.parametrize("variant", ["gemm_fft_llm", "vector_fft_llm", "regular_fft_llm", "mamba"])
def test_v1_llm_like_variants_are_refused_clearly(variant):
    msg = error_text(_minimal(workload=f"{variant} {{ hidden: 8 seq_len: 4 }}"))
    assert msg.startswith(
        f"execution.{variant} is a v1 workload variant that dfsearch does not support"
    )


def test_all_problems_are_reported_at_once():
    text = (
        _minimal(variant_extra="Mm: 3")
        .replace("type: SIMD", "type: SIMDD")
        .replace("word: 2", "word: -1")
        .replace("dram_bw: 100", "dram_bw: -5")
    )
    with pytest.raises(SpecError) as info:
        load_dfmodel(text, file="bad.txt")
    paths = [i.path for i in info.value.issues]
    assert paths == [
        "dataflow_graph.kernels[0].type",
        "dataflow_graph.kernels[0].elementwise_input1",
        "system.memory.dram_bw",
        "execution.word",
    ]
    assert str(info.value).startswith("bad.txt: 4 problems:")


def test_second_dram_tier_with_v2_fields_is_refused():
    text = _minimal(memory="dram_bw: 100 second_dram_bw: 5", execution_extra="overlap: NO_OVERLAP")
    assert error_text(text).startswith(
        "system.memory.second_dram_bw is the second DRAM tier, which only DFModel v1 has"
    )
    v1 = load_dfmodel(_minimal(memory="dram_bw: 100 second_dram_bw: 5 second_dram_cap: 8"))
    assert v1.system.memory == Memory(
        dram_bw_GBps=100.0, second_dram_bw_GBps=5.0, second_dram_bytes=8.0
    )


def test_semantic_checks_of_validate_spec_are_applied():
    """dfsearch.validate finds problems the schema cannot see (here: a cycle)."""
    pytest.importorskip("dfsearch.validate")
    two = "kernels { name: \"b\" id: 2 type: SIMD elementwise_input1 { outer: 1 M: 2 N: 2 } }"
    cyc = "connections { startIdx: 1 endIdx: 2 } connections { startIdx: 2 endIdx: 1 }"
    with pytest.raises(SpecError) as info:
        load_dfmodel(_minimal(extra_kernels=two, connections=cyc), file="c.txt")
    assert any("cycle" in i.message for i in info.value.issues)
    assert info.value.file == "c.txt"


def test_file_errors(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_dfmodel_file(tmp_path / "missing.txt")
    bad = tmp_path / "bin.txt"
    bad.write_bytes(b"system {\xff}")
    with pytest.raises(SpecError, match=r"not UTF-8 text \(.* at byte 8\)"):
        load_dfmodel_file(bad)
    good = tmp_path / "ok.txt"
    good.write_text(_minimal())
    assert load_dfmodel_file(good) == load_dfmodel(_minimal())
    broken = tmp_path / "broken.txt"
    broken.write_text("system {")
    with pytest.raises(SpecError) as info:
        load_dfmodel_file(broken)
    assert str(info.value).startswith(f"{broken}: line 1, column 9: expected '}}'")


def test_looks_like_dfmodel():
    assert looks_like_dfmodel("# comment\ndataflow_graph {\n")
    assert looks_like_dfmodel("miscellany{word: 2}")
    assert looks_like_dfmodel("  execution: {")
    assert not looks_like_dfmodel("[system]\nnum_chip = 4\n")
    assert not looks_like_dfmodel('system = { num_chip = 4 }\n[graph]\n')
    assert not looks_like_dfmodel("")


def test_looks_like_dfmodel_finds_messages_that_share_a_line():
    # Protobuf text format needs no line breaks: a file may open with `cost` (or `gurobi`)
    # and put each later message right after the previous one's closer (found by Hypothesis).
    assert looks_like_dfmodel("cost <\naccelerator_price: 1\n>")
    assert looks_like_dfmodel("# c\n  gurobi { }")
    assert looks_like_dfmodel("x {\n} system <\nnum_chip: 1\n>")
    assert looks_like_dfmodel("x <\n>execution{word: 2}")
    assert looks_like_dfmodel("x: 1; system {")
    assert not looks_like_dfmodel("x = 1 # system {\n")


# =========================================================================== pbtxt
def test_pbtxt_syntax_variants():
    text = (
        "# header\n"
        "a: 1; b: -2.5e3, c: 'it\\'s' \"\\x41\\101\\u00e9\" \n"
        "m: { x: 0x10 } n < y: true > \t\tz: [1, 2.0f, -inf]\n"
        "l: [{ q: 1 }, { q: 2 }] empty: []\n"
    )
    msg = parse_pbtxt(text)
    assert msg.names() == ("a", "b", "c", "m", "n", "z", "z", "z", "l", "l")
    a, b, c, m, n, z1, z2, z3, l1, l2 = msg.entries
    assert (a.value.kind, a.value.text, a.line, a.col) == ("int", "1", 2, 1)
    assert (b.value.kind, b.value.text) == ("float", "-2.5e3")
    assert (c.value.kind, c.value.text) == ("string", "it'sAAé")
    assert isinstance(m.value, Message) and m.value.entries[0].value.text == "0x10"
    assert (m.line, m.col, m.value.line, m.value.col) == (3, 1, 3, 4)
    assert n.value.entries[0].value.text == "true"
    assert [(e.value.kind, e.value.text) for e in (z1, z2, z3)] == [
        ("int", "1"), ("float", "2.0"), ("ident", "-inf"),
    ]
    assert [e.value.entries[0].value.text for e in (l1, l2)] == ["1", "2"]
    assert parse_pbtxt("").entries == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "a {",
            "line 1, column 4: expected '}' to close 'a' (opened at line 1, column 3); "
            "found end of input",
        ),
        ("a { b: }", "line 1, column 8: expected a value after 'b:', found '}'"),
        ("a: 1 2", "line 1, column 6: expected a field name, found '2'"),
        ("a b", "line 1, column 3: expected ':' or '{' after field name 'a', found 'b'"),
        ('a: "x\n"', "line 1, column 4: unterminated string (missing closing \")"),
        (
            "a: 012",
            "line 1, column 4: ambiguous integer '012': the protobuf text format reads a "
            "leading 0 as octal; write it without leading zeros",
        ),
        ("a: 1.2.3", "line 1, column 4: invalid number '1.2.3'"),
        ("a: 12abc", "line 1, column 4: invalid number '12abc'"),
        (
            "\ta: [1 2]",
            "line 1, column 8: expected ',' or ']' in the list 'a' (opened at line 1, "
            "column 5), found '2'",
        ),
        ("a: $", "line 1, column 4: unexpected character '$'"),
        ('a: "\\q"', "line 1, column 5: invalid escape '\\q' in string"),
        ("a: -", "line 1, column 4: unexpected character '-'"),
        ("-a: 1", "line 1, column 1: expected a field name, found '-a'"),
    ],
)
def test_pbtxt_errors(text, expected):
    with pytest.raises(SpecError) as info:
        parse_pbtxt(text)
    assert str(info.value) == expected


def test_pbtxt_deep_nesting_is_not_a_recursion_error():
    depth = 20000
    msg = parse_pbtxt("a {" * depth + "}" * depth)
    for _ in range(depth):
        msg = msg.entries[0].value
    assert msg.entries == ()


_MUTATION_CHARS = st.sampled_from(list('{}<>[]:;,"\'#\n\t -.0123456789eExyz_\\'))


@HYPO
@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 3), _MUTATION_CHARS), min_size=1,
        max_size=4,
    )
)
def test_broken_input_never_raises_anything_but_specerror(edits):
    """Random deletions / insertions / replacements in a real input: a Spec or a SpecError."""
    text = (FFT / "setup.txt").read_text()
    for pos, op, ch in edits:
        pos %= len(text) + 1
        if op == 0:
            text = text[:pos] + text[pos + 1 :]
        elif op == 1:
            text = text[:pos] + ch + text[pos:]
        elif op == 2:
            text = text[:pos] + ch + text[pos + 1 :]
        else:
            text = text[:pos]
    try:
        load_dfmodel(text)
    except SpecError as err:
        assert str(err)


# =========================================================================== helpers
def _minimal(
    *,
    first_kernel: str | None = None,
    kernel_extra: str = "",
    variant_extra: str = "",
    extra_kernels: str = "",
    connections: str = "",
    connection_extra: str = "",
    num_chip: int = 1,
    accelerator: str = "core: 1 systolic_width: 1 systolic_height: 1 freq: 1",
    memory: str = "dram_bw: 100",
    topology: str | None = None,
    par: str = "",
    cost: str = "",
    execution_name: str = "execution",
    execution_extra: str = "",
    style: str | None = "execution_style: DATAFLOW",
    workload: str = "fft { length: 16 }",
    tail: str = "",
) -> str:
    """A small valid DFModel input; keyword arguments splice text into it.

    Line numbers of this template matter to a few assertions: `num_chip` is on line 14.
    """
    kernel = first_kernel or (
        f'kernels {{ name: "a" id: 1 type: SIMD {kernel_extra}\n'
        f"  elementwise_input1 {{ outer: 1 M: 4 N: 4 {variant_extra} }}\n}}"
    )
    if connection_extra and not connections:
        extra_kernels = (
            extra_kernels
            + '\nkernels { name: "b" id: 2 type: SIMD elementwise_input1 { outer: 1 M: 4 N: 4 } }'
        )
        connections = f"connections {{ startIdx: 1 endIdx: 2 {connection_extra} }}"
    if topology is None:
        topology = f"r {{ x: 1 link_bw_x: 10 {'par_x: ' + par if par else ''} }}"
    lines = [
        "dataflow_graph {",  # 1
        kernel,  # 2-4
        extra_kernels,  # 5
        connections,  # 6
        "}",  # 7
        "",  # 8
        "",  # 9
        "",  # 10
        "",  # 11
        "",  # 12
        "system {",  # 13
        f"         num_chip: {num_chip}",  # 14
        f"  accelerator {{ {accelerator} }}",
        f"  memory {{ {memory} }}",
        f"  {topology}",
        "}",
        f"cost {{ {cost} }}",
        f"{execution_name} {{",
        f"  {style or ''}",
        f"  {execution_extra}",
        f"  {workload}",
        "  word: 2",
        "}",
        tail,
    ]
    return "\n".join(lines)


# =========================================================================== round trip
# Random small DFModel inputs, written in varied but valid text layouts, with the Spec each one
# must import to, built here directly from the drawn values (float fields through float32).
_PAR_TUPLES = {
    1: [("TP",), ("PP",), ("DP",)],
    2: [("TP", "PP"), ("TP", "DP"), ("PP", "DP")],
    3: [("TP", "PP", "DP")],
}
_VARIANT_KIND = {
    "gemm_input1_weight": KernelKind.GEMM_WEIGHT,
    "gemm_input1_input2": KernelKind.GEMM,
    "elementwise_input1": KernelKind.ELEMENTWISE,
    "elementwise_input1_input2": KernelKind.ELEMENTWISE2,
}


@st.composite
def _float_text(draw, *, positive: bool = False, hi: float = 1e12) -> str:
    value = draw(st.floats(min_value=0.0, max_value=hi, allow_nan=False))
    fmt = draw(st.sampled_from(["{:.6g}", "{:.3e}", "{:.2f}", "int", "{!r}"]))
    text = str(int(value)) if fmt == "int" else fmt.format(value)
    if positive and not f32(text) >= 1e-3:  # bandwidths, frequencies: within their ranges
        text = draw(st.sampled_from(["1", "0.5", "1e3", "2.5E-1"]))
    return text


class _Doc:
    """A message under construction: (name, text-or-_Doc) pairs; repeated names allowed."""

    def __init__(self) -> None:
        self.fields: list[tuple[str, object]] = []

    def add(self, name: str, value: object) -> None:
        self.fields.append((name, value))

    def render(self, draw, depth: int = 0) -> str:
        fields = self.fields
        if len({n for n, _ in fields}) == len(fields):  # no repeated field: order is free
            fields = draw(st.permutations(fields))
        out = []
        for name, value in fields:
            pad = draw(st.sampled_from(["", "  ", "\t", " \t  "]))
            if isinstance(value, _Doc):
                opener, closer = draw(
                    st.sampled_from([(" {", "}"), ("{", "}"), (": {", "}"), (" <", ">")])
                )
                body = value.render(draw, depth + 1)
                out.append(f"{pad}{name}{opener}\n{body}\n{pad}{closer}")
            else:
                out.append(f"{pad}{name}: {value}")
            out.append(draw(st.sampled_from(["\n", " ", ";\n", ",\n", "  # note\n"])))
        return "".join(out)


@st.composite
def _dfmodel_input(draw) -> tuple[str, Spec]:
    workload_kind = draw(st.sampled_from(["fft", "hpl", "dlrm", "llm"]))
    legacy = draw(st.integers(0, 5)) == 0
    v2_used: list[str] = []
    opt = st.booleans()

    # ---- execution (drawn first: it decides how an absent `config` reads)
    exe = _Doc()
    n = draw(st.integers(1, 4))
    style = draw(st.sampled_from(["DATAFLOW", "KERNEL_BY_KERNEL"]))
    exe.add("execution_style", style)
    if style == "KERNEL_BY_KERNEL":
        num_config = draw(st.sampled_from([None, 0, n]))
    else:
        num_config = draw(st.one_of(st.none(), st.integers(0, n)))
    if num_config is not None:
        exe.add("num_config", str(num_config))
    pins = style == "DATAFLOW" and (num_config or 0) not in (0, n)
    overlap = Overlap.NONE
    how = draw(st.sampled_from(["none", "bool", "enum"]))
    if how == "bool":
        flag = draw(st.booleans())
        exe.add("perfect_overlap", "true" if flag else "false")
        overlap = Overlap.PERFECT if flag else Overlap.NONE
    elif how == "enum":
        overlap = draw(st.sampled_from(list(Overlap)))
        exe.add("overlap", overlap.dfmodel)
        v2_used.append("overlap")
    separate = None
    if draw(opt):
        separate = draw(st.booleans())
        exe.add("separate_rs_ag_for_ar", str(separate).lower())
    compute_util = 0.0
    if draw(opt):
        text = draw(_float_text(hi=1.0))
        compute_util = f32(text)
        if compute_util > 1.0:
            text, compute_util = "1", 1.0
        elif 0.0 < compute_util < 1e-6:  # below the accepted range (docs/spec.md, "Ranges")
            text, compute_util = "1e-3", f32("1e-3")
        exe.add("compute_util", text)
    word = draw(st.integers(1, 8))
    exe.add("word", str(word))
    skip = False
    if draw(opt):
        skip = draw(st.booleans())
        exe.add("skip_inter_chip_optimization", str(skip).lower())
        v2_used.append("skip")
    effective_stage = 0
    if draw(opt):
        effective_stage = draw(st.integers(0, 4))
        exe.add("effective_stage", str(effective_stage))
        v2_used.append("effective_stage")

    # ---- workload
    wl = _Doc()
    num_copy = 1
    if workload_kind == "llm":
        num_head, head_dim = draw(st.integers(1, 4)), draw(st.integers(1, 8))
        vals = dict(
            hidden_dim=num_head * head_dim, head_dim=head_dim, num_head=num_head,
            seq_len=draw(st.integers(1, 64)), num_layer=draw(st.integers(1, 4)),
            global_batch_size=draw(st.integers(1, 64)),
        )
        for key in ("micro_batch_size", "tile_size"):
            if draw(opt):
                vals[key] = draw(st.integers(0, 4))
        if not legacy or draw(opt):
            vals["num_layer_in_graph"] = 1
        for key, v in vals.items():
            wl.add(key, str(v))
        workload = LLMWorkload(**vals)
    elif workload_kind == "dlrm":
        vals = {k: draw(st.integers(1, 9)) for k in ("num_table", "emb_dim", "row")}
        vals["global_batch_size"] = draw(st.integers(1, 10**9))
        if draw(opt):
            vals["num_copy"] = num_copy = draw(st.integers(1, 2))
        for key, v in vals.items():
            wl.add(key, str(v))
        workload = DLRMWorkload(**vals)
    elif workload_kind == "hpl":
        vals = {"n": draw(st.integers(1, 10**5)), "b": draw(st.integers(1, 512))}
        if draw(opt):
            vals["num_copy"] = num_copy = draw(st.integers(1, 2))
        for key, v in vals.items():
            wl.add(key, str(v))
        workload = HPLWorkload(**vals)
    else:
        vals = {"length": draw(st.integers(1, 2**62))}
        if draw(opt):
            vals["num_copy"] = num_copy = draw(st.integers(1, 2))
        for key, v in vals.items():
            wl.add(key, str(v))
        workload = FFTWorkload(**vals)
    exe.add(workload_kind, wl)

    # ---- graph
    graph = _Doc()
    ids = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n, unique=True))
    kernel_kw: list[dict] = []
    kernel_docs: list[_Doc] = []
    names: list[str] = []
    used_names: set[str] = set()
    for pos, kid in enumerate(ids):
        kdoc, vdoc = _Doc(), _Doc()
        variant = draw(st.sampled_from(list(_VARIANT_KIND)))
        kind = _VARIANT_KIND[variant]
        name = draw(st.sampled_from(["a", "b", "Q", "kernel with spaces", 'quote"d']))
        kdoc.add("name", '"' + name.replace('"', '\\"') + '"')
        kdoc.add("id", str(kid))
        kw: dict = {"kind": kind, "id": kid}
        kw["config"] = 0 if pins else -1  # what an absent `config` reads as (see below)
        phase = draw(st.sampled_from([None, Phase.FWD, Phase.BWD]))
        if phase is not None:
            kdoc.add("fwd_bwd", phase.dfmodel)
        kw["phase"] = phase or Phase.NONE
        ctype = draw(st.sampled_from(list(ComputeType)))
        kdoc.add("type", ctype.dfmodel)
        kw["type"] = ctype
        # an LLM weight GEMM needs a shardable dimension besides the tiled N
        low_m = 2 if workload_kind == "llm" and kind is KernelKind.GEMM_WEIGHT else 1
        dims = {"outer": draw(st.integers(1, 8)), "M": draw(st.integers(low_m, 64))}
        if kind.has_k:
            dims["K"] = draw(st.integers(1, 64))
        dims["N"] = draw(st.integers(1, 64))
        for key, v in dims.items():
            vdoc.add(key, str(v))
        kw.update(outer=dims["outer"], m=dims["M"], k=dims.get("K", 1), n=dims["N"])
        size_fields = (
            [("input_tensor_1_size", "input_bytes"), ("input_tensor_2_size", "input2_bytes")]
            if kind.num_inputs == 2
            else [("input_tensor_size", "input_bytes")]
        )
        if kind is KernelKind.GEMM_WEIGHT:
            size_fields.append(("weight_tensor_size", "weight_bytes"))
        size_fields.append(("output_tensor_size", "output_bytes"))
        for field, attr in size_fields:
            if draw(opt):
                text = draw(_float_text())
                vdoc.add(field, text)
                kw[attr] = f32(text)
        if workload_kind == "llm":
            vdoc.add("tiling", "N_TILING")
            kw["tiling"] = Dim.N
        else:
            choices = [None, Dim.OUTER, Dim.M, Dim.N, Dim.NO] + ([Dim.K] if kind.has_k else [])
            tiling = draw(st.sampled_from(choices))
            if tiling is not None:
                vdoc.add("tiling", tiling.tiling_dfmodel)
            kw["tiling"] = tiling or Dim.NO
            if draw(opt):
                vdoc.add("sharding", "NO_SHARDING")
                kw["sharding"] = Dim.NO
        for suffix, attr in (("", "communication"), ("_2", "communication2")):
            if draw(opt):
                # DFModel's collectives (expert_all_to_all is dfsearch's own: no DFModel name)
                coll = draw(st.sampled_from([c for c in Collective if c not in (
                    Collective.NONE, Collective.EXPERT_ALL_TO_ALL)]))
                text = draw(_float_text())
                vdoc.add(f"communication_type{suffix}", coll.dfmodel)
                vdoc.add(f"communication_size{suffix}", text)
                kw[attr], kw[f"{attr}_bytes"] = coll, f32(text)
        if draw(opt):
            text = draw(_float_text())
            vdoc.add("memory_size", text)
            kw["memory_bytes"] = f32(text)
        if draw(opt):
            kw["num_input"] = draw(st.integers(0, 3))
            vdoc.add("num_input", str(kw["num_input"]))
        if kind is KernelKind.GEMM_WEIGHT:
            for flag in ("skip_weight", "use_effective_stage"):
                if draw(opt):
                    # use_effective_stage needs execution.effective_stage >= 1 (validate)
                    allowed = flag == "skip_weight" or effective_stage > 0
                    kw[flag] = draw(st.booleans()) and allowed
                    vdoc.add(flag, str(kw[flag]).lower())
        for field in ("sram_extra", "dram_extra"):
            attr = f"{field}_bytes"
            if draw(st.integers(0, 4)) == 0:
                text = draw(_float_text())
                vdoc.add(field, text)
                kw[attr] = f32(text)
                v2_used.append(field)
        kdoc.add(variant, vdoc)
        graph.add("kernels", kdoc)
        unique = name if name not in used_names else f"{name}#{kid}"
        while unique in used_names:
            unique += f"#{pos}"
        used_names.add(unique)
        names.append(unique)
        kernel_kw.append(kw)
        kernel_docs.append(kdoc)
    connections: list[Connection] = []
    for i in range(n):
        for j in range(i + 1, n):
            if not draw(opt):
                continue
            cdoc = _Doc()
            cdoc.add("startIdx", str(ids[i]))
            cdoc.add("endIdx", str(ids[j]))
            cw: dict = {"src": names[i], "dst": names[j]}
            if draw(opt):
                cw["id"] = len(connections) + 1
                cdoc.add("id", str(cw["id"]))
            if draw(st.integers(0, 4)) == 0:
                cw["zero_out"] = draw(st.booleans())
                cdoc.add("zero_out", str(cw["zero_out"]).lower())
                v2_used.append("zero_out")
            graph.add("connections", cdoc)
            connections.append(Connection(**cw))
    # Pins are drawn so that some assignment honours them all (an unhonourable pin is a
    # spec error, tested in test_pins.py): each kernel's configurations are its FWD/BWD half
    # (dataflow, training graph, fewer configurations than kernels), above the pins upstream
    # of it and below the upper ends downstream of it (edges run from lower to higher
    # position, so position order is a topological order).
    count = num_config or 1
    fb = style == "DATAFLOW" and any(kw["phase"] is Phase.BWD for kw in kernel_kw)
    f_cap, b_min = (count // 2 - 1, count // 2) if count % 2 == 0 else (count // 2, count // 2)
    lo = [b_min if fb and kw["phase"] is Phase.BWD else 0 for kw in kernel_kw]
    hi = [f_cap if fb and kw["phase"] is Phase.FWD else count - 1 for kw in kernel_kw]
    for c in reversed(connections):
        hi[names.index(c.src)] = min(hi[names.index(c.src)], hi[names.index(c.dst)])
    for pos, (kw, kdoc) in enumerate(zip(kernel_kw, kernel_docs)):
        lo[pos] = max([lo[pos]] + [lo[names.index(c.src)] for c in connections
                                   if c.dst == names[pos]])
        # with pins, an absent `config` reads as 0: a pin like any other
        can_pin = pins and lo[pos] <= hi[pos]
        if draw(opt) or (pins and lo[pos] > 0):
            cfg = draw(st.integers(lo[pos] - 1, hi[pos])) if can_pin else -1
            cfg = -1 if cfg < lo[pos] else cfg
            kdoc.add("config", str(cfg))
            kw["config"] = cfg
        if kw["config"] >= 0:
            lo[pos] = hi[pos] = kw["config"]
    kernels = [Kernel(name=name, **kw) for name, kw in zip(names, kernel_kw)]

    # ---- system
    system = _Doc()
    variants = [v for v, d in TOPOLOGY_VARIANTS.items() if workload_kind != "hpl" or len(d) > 1]
    variant = draw(st.sampled_from(variants))
    topo_dims = TOPOLOGY_VARIANTS[variant]
    pars = draw(st.sampled_from(_PAR_TUPLES[len(topo_dims)])) if workload_kind == "llm" else None
    tdoc = _Doc()
    net = []
    for i, (letter, topology) in enumerate(zip("xyz", topo_dims)):
        pipeline = bool(pars) and pars[i] == "PP"
        size = draw(st.integers(1, min(3, workload.num_layer) if pipeline else 3))  # PP <= layers
        bw = draw(_float_text(positive=True, hi=1e3))
        tdoc.add(letter, str(size))
        tdoc.add(f"link_bw_{letter}", bw)
        par = Parallelism.NONE
        if pars:
            tdoc.add(f"par_{letter}", f'"{pars[i]}"')
            par = Parallelism.from_dfmodel(pars[i])
        net.append(NetworkDim(topology=topology, link_bw_GBps=f32(bw), size=size, parallelism=par))
    num_chip = math.prod(d.size for d in net) * num_copy
    system.add("num_chip", str(num_chip))
    system.add(variant, tdoc)
    adoc = _Doc()
    acc = dict(
        cores=draw(st.integers(1, 2000)),
        systolic_width=draw(st.integers(1, 32)),
        systolic_height=draw(st.integers(1, 32)),
    )
    adoc.add("core", str(acc["cores"]))
    adoc.add("systolic_width", str(acc["systolic_width"]))
    adoc.add("systolic_height", str(acc["systolic_height"]))
    freq = draw(_float_text(positive=True, hi=5.0))
    adoc.add("freq", freq)
    acc["freq_GHz"] = f32(freq)
    acc["sram_bytes"] = 0.0
    for field, attr in (("sram_cap", "sram_bytes"), ("pmu_cap", "pmu_bytes")):
        if draw(opt):
            text = draw(_float_text())
            adoc.add(field, text)
            acc[attr] = f32(text)
    if draw(st.integers(0, 4)) == 0:
        text = draw(_float_text(hi=100.0))
        adoc.add("link_latency", text)
        acc["link_latency_ns"] = f32(text)
        v2_used.append("link_latency")
    system.add("accelerator", adoc)
    mdoc = _Doc()
    dram_bw = draw(_float_text(positive=True, hi=1e4))
    mdoc.add("dram_bw", dram_bw)
    mem = {"dram_bw_GBps": f32(dram_bw)}
    if draw(opt):
        text = draw(_float_text())
        mdoc.add("dram_cap", text)
        mem["dram_bytes"] = f32(text)
    v2_eq = how != "bool" and bool({"overlap", "skip", "effective_stage"} & set(v2_used))
    if (legacy or not v2_eq) and draw(opt):
        # the v1 second tier (refused with v2 equations); it needs a bandwidth
        bw, cap = draw(_float_text(positive=True, hi=1e4)), draw(_float_text())
        mdoc.add("second_dram_bw", bw)
        mdoc.add("second_dram_cap", cap)
        mem.update(second_dram_bw_GBps=f32(bw), second_dram_bytes=f32(cap))
    system.add("memory", mdoc)

    # ---- cost
    cost_doc = _Doc()
    cost_kw: dict = {}
    for field, attr in (
        ("link_unit_price", "link_price_per_GBps"),
        ("switch_unit_price", "switch_price_per_GBps"),
        ("dram_unit_price", "dram_price_per_GBps"),
        ("accelerator_price", "chip_price"),
        ("switch_unit_power", "switch_power_J_per_GB"),
        ("dram_unit_power", "dram_power_J_per_GB"),
        ("accelerator_power", "chip_power_W"),
    ):
        if draw(opt):
            text = draw(_float_text())
            cost_doc.add(field, text)
            cost_kw[attr] = f32(text)
    powers = [0.0, 0.0, 0.0]
    for i, letter in enumerate("xyz"):
        if draw(opt):
            text = draw(_float_text(hi=1.0))
            cost_doc.add(f"link_unit_power_{letter}", text)
            powers[i] = f32(text)
    cost_kw["link_power_J_per_GB"] = tuple(powers[: len(net)])

    # ---- the document
    dse = _Doc()
    dse.add("dataflow_graph", graph)
    dse.add("system", system)
    if cost_doc.fields or draw(opt):
        dse.add("cost", cost_doc)
    dse.add("miscellany" if legacy else "execution", exe)
    if draw(opt):
        gdoc = _Doc()
        gdoc.add("gap", "0.001")
        gdoc.add("time", "180")
        dse.add("gurobi", gdoc)
    text = ("# generated\n" if draw(opt) else "") + dse.render(draw)

    # the overlap field's form decides (v1 bool / v2 enum); else any structural v2 field
    structural = {"overlap", "skip", "effective_stage"} & set(v2_used)
    if legacy:
        equations = Equations.LEGACY
    elif how == "bool":
        equations = Equations.V1
    else:
        equations = Equations.V2 if structural else Equations.V1
    if separate is None:
        separate = legacy
    expected = Spec(
        graph=Graph(kernels=tuple(kernels), connections=tuple(connections)),
        system=System(
            num_chip=num_chip, accelerator=Accelerator(**acc), memory=Memory(**mem),
            network=tuple(net),
        ),
        cost=Cost(**cost_kw),
        execution=Execution(
            style=ExecutionStyle.from_dfmodel(style), num_config=num_config or 0,
            overlap=overlap, compute_util=compute_util, word_bytes=word, equations=equations,
            separate_rs_ag_for_ar=separate, skip_inter_chip_optimization=skip,
            effective_stage=effective_stage,
        ),
        workload=workload,
        # DFModel inputs keep DFModel's DRAM check: weights + one layer's activations
        training=Training(memory_model=MemoryModel.DFMODEL),
    )
    return text, expected


# Shrinking these large composite examples can take minutes; a failure prints the full text.
@settings(HYPO, phases=(HPhase.explicit, HPhase.reuse, HPhase.generate))
@given(_dfmodel_input())
def test_random_inputs_import_to_the_expected_spec(case):
    text, expected = case
    assert looks_like_dfmodel(text)
    assert load_dfmodel(text) == expected
