"""DFModel's design-space runs (the paper's grid of 4 accelerators x 20 systems), read with the
design-space equations (``Equations.DESIGN_SPACE``, docs/model.md "Equation sets").

Golden numbers: DFModel's inputs and printed numbers in tests/data/dfmodel/design_space/<case>/
(README.md there gives each case's source path and commit). Every case runs kernel by kernel
on a fixed network, so no decision is left to search: final time, utilisation, cost, power and
every per-configuration time must agree to 1e-6 relative (docs/model.md, "Units and numbers").

Closed forms (docs/model.md, "DLRM and FFT all-to-all"), N chips, link bandwidth beta:

* messages: (G/2)^2 for a group of G chips, N^2/4 for the whole network;
* dragonfly fc_fc (x, y): max(1/beta_x, N^2/(y^2 beta_y)) per per-chip byte: N/beta when
  x = y, i.e. time = the per-chip shard bytes / beta;
* 2-D torus r_r (x, y): N^2/(4 x beta_x) on dimension 0 (the same as the legacy rule);
* 3-D torus r_r_r: N^2/(4 xy beta), hierarchical r_sw / sw_sw: N^2/(4 y beta);
* DLRM: each chip carries the kernel's whole communication bytes (not / N).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path

import pytest

from dfsearch.codes import Dim, Equations, Topology
from dfsearch.cost.model import evaluate
from dfsearch.decision import Decision
from dfsearch.io.dfmodel import load_dfmodel, load_dfmodel_file
from dfsearch.loader import replace_field
from dfsearch.search.engine import search
from dfsearch.spec import NetworkDim
from dfsearch.system.kinds import KINDS, allowed_network
from dfsearch.system.ratios import a2a_factors

DATA = Path(__file__).parent / "data" / "dfmodel" / "design_space"
DS = Equations.DESIGN_SPACE
N = 1024
BW = 450.0
FFT_A2A = 2**41 / N**2  # "ALL_TO_ALL_communication_size[1] 2097152.0" = length*word / N^2
DLRM_A2A = 837000.0  # "ALL_TO_ALL_communication_size[4] 837000.0": the kernel's bytes, not / N

#: case -> (network shape, all-to-all messages per per-chip byte on the slowest dimension
#: times its links, i.e. the closed-form factor F: time = bytes * F / beta)
CASES = {
    "fft_h100_2d_torus_r_r_32x32": ((32, 32), N * N / (4 * 32)),
    "fft_h100_dragonfly_fc_fc_32x32": ((32, 32), N * N / 32**2),
    "fft_h100_3d_torus_r_r_r_8x8x16": ((8, 8, 16), N * N / (4 * 8 * 8)),
    "fft_h100_dgx1_r_sw_8x128": ((8, 128), N * N / (4 * 128)),
    "fft_h100_dgx2_sw_sw_8x128": ((8, 128), N * N / (4 * 128)),
    "dlrm_h100_dragonfly_fc_fc_32x32": ((32, 32), N * N / 32**2),
    "dlrm_h100_2d_torus_r_r_32x32": ((32, 32), N * N / (4 * 32)),
    "dlrm_h100_dgx1_r_sw_8x128": ((8, 128), N * N / (4 * 128)),
}


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def load(case: str, legacy_as: Equations = DS):
    return load_dfmodel_file(DATA / case / "setup.txt", legacy_as=legacy_as)


def logged(case: str, label: str) -> float:
    """The last value DFModel printed after ``label`` (the summary block follows the dump)."""
    text = (DATA / case / "log.txt").read_text()
    found = re.findall(rf"^{re.escape(label)} (\S+)$", text, re.MULTILINE)
    assert found, f"{label!r} not in {case}/log.txt"
    return float(found[-1])


def logged_iis(case: str) -> dict[int, float]:
    text = (DATA / case / "log.txt").read_text()
    return {int(i): float(v) for i, v in re.findall(r"^Per_Config_II\[(\d+)\] (\S+)$", text, re.M)}


def kernel_by_kernel(spec, shape):
    n = len(spec.graph.kernels)
    return Decision(
        shape=shape, sharding=(Dim.NO,) * n, micro_batch_size=1, num_tile=1, config=tuple(range(n))
    )


def a2a_config(case: str) -> int:
    """The first configuration holding the all-to-all kernel: Step_2 (FFT), MLP_5 (DLRM)."""
    return 1 if case.startswith("fft") else 4


def a2a_bytes(case: str) -> float:
    return FFT_A2A if case.startswith("fft") else DLRM_A2A


# --------------------------------------------------------------------------- golden cases
def test_case_data_is_present():
    assert sorted(p.name for p in DATA.iterdir() if p.is_dir()) == sorted(CASES)
    readme = (DATA / "README.md").read_text()
    assert all(f"`{case}`" in readme for case in CASES)
    assert "04f93d5ea1179ff967e26116b09853db972a2fb0" in readme


@pytest.fixture(scope="module", params=sorted(CASES))
def case_eval(request):
    case = request.param
    spec = load(case)
    return case, spec, evaluate(spec, kernel_by_kernel(spec, CASES[case][0]))


def test_importer_reads_the_pre_v1_input_with_the_design_space_equations(case_eval):
    case, spec, _ = case_eval
    assert spec.execution.equations is DS
    assert spec.execution.separate_rs_ag_for_ar is True  # the pre-v1 default, as legacy
    assert tuple(d.size for d in spec.system.network) == CASES[case][0]
    assert load(case, Equations.LEGACY).execution.equations is Equations.LEGACY


def test_final_time_utilisation_cost_power(case_eval):
    case, _, ev = case_eval
    assert rel(ev.final_s, logged(case, "final_s")) < 1e-6
    assert rel(ev.ns_per_batch, logged(case, "ns_per_batch")) < 1e-6
    assert rel(ev.utilization, logged(case, "util")) < 1e-6
    assert rel(ev.price.system_cost, logged(case, "total_cost")) < 1e-6
    assert rel(ev.price.system_power, logged(case, "total_power")) < 1e-6
    assert rel(ev.workload_flop, logged(case, "FLOP")) < 1e-12


def test_every_configuration_time(case_eval):
    case, _, ev = case_eval
    iis = logged_iis(case)
    assert len(iis) == len(ev.configs)
    for i, ii in iis.items():
        assert rel(ev.configs[i].ii_ns, ii) < 1e-6, (i, ev.configs[i].ii_ns, ii)


def test_all_to_all_time_in_closed_form(case_eval):
    case, _, ev = case_eval
    f = CASES[case][1]
    c = a2a_config(case)
    assert rel(ev.configs[c].network_ns, a2a_bytes(case) * f / BW) < 1e-12
    if case.startswith("fft"):  # "Network_Latency[1] ..."
        assert rel(ev.configs[c].network_ns, logged(case, "Network_Latency[1]")) < 1e-9
    if case.startswith("dlrm"):  # the backward all-to-all (MLP_5_bwd) pays the same
        assert ev.configs[35].network_ns == ev.configs[c].network_ns


def test_dragonfly_time_is_the_per_chip_shard_over_the_link_bandwidth():
    """fc_fc with x = y: time = per-chip shard bytes / beta, the shard being the signal's
    length * word / N for the FFT and N times the kernel's bytes for DLRM."""
    ev = evaluate(s := load("fft_h100_dragonfly_fc_fc_32x32"), kernel_by_kernel(s, (32, 32)))
    shard = 2**40 * 2 / N  # "C85 2147483648.0": the per-chip shard of the signal
    assert ev.configs[1].network_ns == pytest.approx(shard / BW, rel=1e-12)
    assert ev.configs[1].network_ns == pytest.approx(4772185.884444444, rel=1e-12)
    ev = evaluate(s := load("dlrm_h100_dragonfly_fc_fc_32x32"), kernel_by_kernel(s, (32, 32)))
    assert ev.configs[4].network_ns == pytest.approx(N * DLRM_A2A / BW, rel=1e-12)


@pytest.mark.parametrize("case", ["fft_h100_dragonfly_fc_fc_32x32", "dlrm_h100_dgx1_r_sw_8x128"])
def test_search_reproduces_the_logged_final_time(case):
    r = search(load(case))
    assert rel(r.evaluation.final_s, logged(case, "final_s")) < 1e-6
    assert r.search.optimal is True


# --------------------------------------------------------------------------- legacy vs design space
@pytest.mark.parametrize(
    ("case", "ratio"),
    [
        # hierarchical outer dimension: legacy N^2 messages, design space N^2/4
        ("fft_h100_dragonfly_fc_fc_32x32", 4.0),
        ("fft_h100_dgx1_r_sw_8x128", 4.0),
        ("fft_h100_dgx2_sw_sw_8x128", 4.0),
        # 3-D torus: legacy N^2 over 2xy links, design space N^2/4 over xy
        ("fft_h100_3d_torus_r_r_r_8x8x16", 2.0),
        # 2-D torus: legacy N^2/2 over 2x links = design space N^2/4 over x
        ("fft_h100_2d_torus_r_r_32x32", 1.0),
        # DLRM on the 2-D torus: the same factors, legacy divides the bytes by N
        ("dlrm_h100_2d_torus_r_r_32x32", 1.0 / N),
    ],
)
def test_the_default_legacy_reading_differs_only_in_the_all_to_all(case, ratio):
    shape = CASES[case][0]
    ds = evaluate(s := load(case), kernel_by_kernel(s, shape))
    lg = evaluate(s := load(case, Equations.LEGACY), kernel_by_kernel(s, shape))
    c = a2a_config(case)
    assert lg.configs[c].network_ns == pytest.approx(ratio * ds.configs[c].network_ns, rel=1e-12)
    for a, b in zip(ds.configs, lg.configs):  # everything else is the same
        assert (a.compute_ns, a.memory_ns) == (b.compute_ns, b.memory_ns)
    assert ds.price == lg.price


# --------------------------------------------------------------------------- closed forms
def _system(spec, topologies, bws):
    net = tuple(NetworkDim(topology=t, link_bw_GBps=b) for t, b in zip(topologies, bws))
    return replace(spec.system, network=net)


@pytest.fixture(scope="module")
def base_spec():
    return load("fft_h100_2d_torus_r_r_32x32")


R, SW, FC, MESH = Topology.RING, Topology.SWITCH, Topology.FC, Topology.MESH


@pytest.mark.parametrize("shape", [(4, 8), (8, 2), (6, 6), (1, 4)])
def test_design_space_factors_two_dimensions(base_spec, shape):
    x, y = shape
    n = x * y
    b0, b1 = 10.0, 2.5
    q = n * n / 4  # messages crossing the whole network's middle cut

    def got(t0, t1):
        return a2a_factors(_system(base_spec, (t0, t1), (b0, b1)), shape, n, DS)

    assert got(FC, FC) == pytest.approx((1 / b0, q / (b1 * y * y / 4)), rel=1e-15)
    assert got(R, R) == pytest.approx((q / (b0 * x), q / (b1 * y)), rel=1e-15)
    assert got(R, SW) == pytest.approx((x * x / 4 / (2 * b0), q / (b1 * y)), rel=1e-15)
    assert got(SW, SW) == pytest.approx((x * x / 4 / (x * b0), q / (b1 * y)), rel=1e-15)
    assert got(R, FC) == pytest.approx((x * x / 4 / (2 * b0), q / (b1 * y * y / 4)), rel=1e-15)
    # a mesh line has one link across its cut, a ring two: twice the time in a grid
    assert got(MESH, MESH) == pytest.approx(tuple(2 * f for f in got(R, R)), rel=1e-15)
    # on a 2-D torus the design-space and legacy rules agree (N^2/4 over x = N^2/2 over 2x)
    legacy = a2a_factors(_system(base_spec, (R, R), (b0, b1)), shape, n, Equations.LEGACY)
    assert got(R, R) == pytest.approx(legacy, rel=1e-15)


def test_design_space_factors_three_dimensions(base_spec):
    x, y, z = 2, 3, 4
    n = x * y * z
    q = n * n / 4
    bws = (10.0, 2.5, 0.5)
    torus = a2a_factors(_system(base_spec, (R, R, R), bws), (x, y, z), n, DS)
    assert torus == pytest.approx(
        (q / (10.0 * x * y), q / (2.5 * x * z), q / (0.5 * y * z)), rel=1e-15
    )
    hier = a2a_factors(_system(base_spec, (R, SW, SW), bws), (x, y, z), n, DS)
    assert hier == pytest.approx(
        (x * x / 4 / (10.0 * 2), (x * y) ** 2 / 4 / (2.5 * y), q / (0.5 * z)), rel=1e-15
    )


@pytest.mark.parametrize("topology", list(Topology))
@pytest.mark.parametrize("p", [2, 3, 8, 32])
def test_one_dimension_equals_the_kinds_all_to_all_ratio(base_spec, topology, p):
    """On one dimension the design-space factor N^2/(4 L(p) beta) is the kind's LLM
    all-to-all ratio: the same bisection rule."""
    (f,) = a2a_factors(_system(base_spec, (topology,), (7.0,)), (p,), p, DS)
    assert f == pytest.approx(KINDS[topology].all_to_all_ratio(p, 7.0), rel=1e-15)


def test_dlrm_volume_is_the_whole_kernel_bytes_per_chip():
    """The same DLRM input on the 2-D torus (equal factors in both sets): the design-space
    all-to-all moves N times the legacy per-chip bytes."""
    case = "dlrm_h100_2d_torus_r_r_32x32"
    ds = evaluate(s := load(case), kernel_by_kernel(s, (32, 32)))
    assert ds.configs[4].network_ns == pytest.approx(DLRM_A2A * N * N / (4 * 32) / BW, rel=1e-12)
    # the gradient all-reduce stays legacy's: 2 x bytes as ns ("...PERIODIC[40] 1458.0")
    spec = load(case)
    arp = spec.graph.kernels[40]
    assert arp.name == "MLP_20_bwd_weight_update"
    nmb = 128000000 // N  # "num_micro_batch_per_pipeline 125000.0"
    assert ds.configs[40].network_ns == pytest.approx(2 * 6750 * 6750 * 2 / nmb, rel=1e-12)


def _networks():
    """Every network the kinds allow (DFModel's 11 variants and the mesh ones), one shape of
    1024 chips each, with an inner dimension of one chip where the network has room."""
    shapes = {1: [(N,)], 2: [(8, 128), (1, N)], 3: [(8, 8, 16), (1, 32, 32)]}
    for ndim in (1, 2, 3):
        for dims in itertools.product(list(Topology), repeat=ndim):
            if allowed_network(dims):
                for shape in shapes[ndim]:
                    yield dims, shape


@pytest.mark.parametrize("case", ["fft_h100_dgx1_r_sw_8x128", "dlrm_h100_dgx1_r_sw_8x128"])
def test_the_reference_twin_has_the_design_space_rules(case):
    """The test oracle (cost/reference.py: DFModel's variant tables written out, its own
    composition for meshes) agrees with the evaluator on every network."""
    from test_reference_differential import compare

    base = load(case)
    count = 0
    for dims, shape in _networks():
        net = tuple(
            NetworkDim(topology=t, link_bw_GBps=b, size=s)
            for t, b, s in zip(dims, (450.0, 100.0, 25.0), shape)
        )
        spec = replace(base, system=replace(base.system, network=net))
        compare(spec, kernel_by_kernel(spec, shape))
        count += 1
    assert count == 4 + 10 * 2 + 11 * 2  # allowed networks of 1, 2, 3 dimensions x shapes


# --------------------------------------------------------------------------- importer option
def test_legacy_as_applies_to_pre_v1_inputs_only():
    fft = "fft { length: 16 } word: 2"
    body = (
        'dataflow_graph { kernels { name: "a" id: 1 type: SIMD elementwise_input1 '
        "{ outer: 1 M: 4 N: 4 } } }\n"
        "system { num_chip: 1 accelerator { core: 1 systolic_width: 1 systolic_height: 1 "
        "freq: 1 } r { x: 1 link_bw_x: 10 } memory { dram_bw: 100 } }\n"
    )
    legacy = body + f"miscellany {{ {fft} execution_style: DATAFLOW }}"
    v1 = body + f"execution {{ {fft} execution_style: DATAFLOW perfect_overlap: true }}"
    assert load_dfmodel(legacy).execution.equations is Equations.LEGACY
    e = load_dfmodel(legacy, legacy_as=DS).execution
    assert (e.equations, e.separate_rs_ag_for_ar) == (DS, True)
    explicit = legacy.replace("DATAFLOW", "DATAFLOW separate_rs_ag_for_ar: false")
    assert load_dfmodel(explicit, legacy_as=DS).execution.separate_rs_ag_for_ar is False
    assert load_dfmodel(v1, legacy_as=DS).execution.equations is Equations.V1
    with pytest.raises(ValueError, match="pre-v1 equation set"):
        load_dfmodel(legacy, legacy_as=Equations.V2)


def test_the_set_is_a_spec_word():
    assert Equations.from_label("design_space") is DS
    assert DS.pre_v1 and Equations.LEGACY.pre_v1
    assert not (Equations.V1.pre_v1 or Equations.V2.pre_v1)
    case = "fft_h100_dgx1_r_sw_8x128"
    assert replace_field(load(case, Equations.LEGACY), "execution.equations", "design_space") == load(case)
