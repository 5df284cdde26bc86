"""The fabric (dfsearch/system/): one object prices every collective, with the spec's quirks.

Closed forms are the per-byte formulas of docs/model.md ("Network topologies", "DLRM and FFT
all-to-all", quirks), written out by hand below; the quirks come from the spec's
``[quirks]`` table and reach lowering, pricing and the search-time helpers alike.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
from dfsearch.cli import app
from dfsearch.codes import Collective, Dim, Parallelism, Status, Topology
from dfsearch.cost.lower import Outer, effective_num_config, lower
from dfsearch.cost.price import price
from dfsearch.cost.reference import reference_evaluate
from dfsearch.cost.stages import bubble
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_toml_spec, replace_field, spec_to_data
from dfsearch.quirks import Quirks
from dfsearch.spec import NetworkDim
from dfsearch.system.fabric import Fabric
from dfsearch.system.placement import Part, Placement
from dfsearch.system.ratios import hpl_grid
from dfsearch.validate import validate_spec

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "dfsearch" / "examples"
GPT = EXAMPLES / "gpt3_1.5B_a100x4.toml"


def _rel(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def _gpt(quirks: str = ""):
    text = GPT.read_text() + (f"\n[quirks]\n{quirks}\n" if quirks else "")
    return load_toml_spec(text, file="gpt.toml", base_dir=EXAMPLES)


# --------------------------------------------------------------------------- collectives
def test_tp_all_reduce_on_a_ring_is_the_closed_form_and_its_quirk_doubles_it():
    """Ring of p = 4 chips at 600 GB/s: (p-1)/(p bw) ns per byte with DFModel's half-volume
    all-reduce, 2 (p-1)/(p bw) with ``half_volume_all_reduce = false`` in the spec."""
    nbytes = 3.0e6
    half = Fabric.of(_gpt(), (4,)).collective_time_ns(Collective.ALL_REDUCE, nbytes, Parallelism.TP)
    flipped = _gpt("half_volume_all_reduce = false")
    assert flipped.quirks == Quirks(half_volume_all_reduce=False)
    full = Fabric.of(flipped, (4,)).collective_time_ns(Collective.ALL_REDUCE, nbytes, Parallelism.TP)
    assert _rel(half, 3 / (4 * 600.0) * nbytes)
    assert _rel(full, 2 * 3 / (4 * 600.0) * nbytes)


def test_the_spec_quirk_reaches_the_lowered_all_reduce():
    """PROJ_GEMM sharded on K needs a TP all-reduce of its output (sM x sN words): lowering
    charges it per tile at the ring's ratio, twice as much with the quirk flipped."""
    spec, flipped = _gpt(), _gpt("half_volume_all_reduce = false")
    names = [k.name for k in spec.graph.kernels]
    proj = names.index("PROJ_GEMM")
    sharding = tuple(Dim.K if i == proj else Dim.NO for i in range(len(names)))
    outer = Outer((4,), sharding, 1, 1, effective_num_config(spec, 2))
    a, b = lower(spec, outer), lower(flipped, outer)
    nbytes = a.shard_m[proj] * a.shard_n[proj] * spec.execution.word_bytes
    assert _rel(a.kernels.net_tile_ns[proj], 3 / (4 * 600.0) * nbytes)
    assert _rel(b.kernels.net_tile_ns[proj], 2 * 3 / (4 * 600.0) * nbytes)
    assert a.kernels.all_reduce[proj] == 1
    # the keyword of lower() still overrides the spec's quirks
    c = lower(spec, outer, Quirks(half_volume_all_reduce=False))
    assert c.kernels.net_tile_ns[proj] == b.kernels.net_tile_ns[proj]


def test_dim_collectives_are_bytes_over_that_dimensions_links():
    """HPL's grid lines: a broadcast or point-to-point over dimension j takes bytes / bw_j."""
    spec = dfsearch.load(EXAMPLES / "hpl_576gpu.toml")
    shape = tuple(d.size for d in spec.system.network)
    fab = Fabric.of(spec, shape)
    for j, d in enumerate(spec.system.network):
        for op in (Collective.BROADCAST, Collective.POINT_TO_POINT):
            assert fab.collective_time_ns(op, 1.0e6, j) == 1.0e6 / d.link_bw_GBps
    with pytest.raises(ValueError, match="no all_to_all over network dimension 0"):
        fab.collective_time_ns(Collective.ALL_TO_ALL, 1.0, 0)


def test_dlrm_gradient_all_reduce_counts_bytes_as_ns_only_under_its_quirk():
    """The DLRM example (ring 8 x fc 16 at 25 GB/s, v2) with dimension 1 marked dp: under
    ``dlrm_arp_bytes_as_ns`` 1e6 bytes cost 1e6 ns; without it the fc all-reduce ratio
    1/(p bw) = 1/(16 x 25) ns per byte (fc's gradient all-reduce is not doubled)."""
    spec = dfsearch.load(EXAMPLES / "dlrm_a100x128.toml")
    d0, d1 = spec.system.network
    net = (d0, replace(d1, parallelism=Parallelism.DP))
    spec = replace(spec, system=replace(spec.system, network=net))
    assert not spec.execution.equations.pre_v1
    on = Fabric.of(spec, (8, 16)).collective_time_ns(Collective.ALL_REDUCE_PERIODIC, 1.0e6, None)
    assert on == 1.0e6
    off = replace(spec, quirks=Quirks(dlrm_arp_bytes_as_ns=False))
    got = Fabric.of(off, (8, 16)).collective_time_ns(Collective.ALL_REDUCE_PERIODIC, 1.0e6, None)
    assert _rel(got, 1.0e6 / (16 * 25.0))


def test_a_cost_quirk_in_the_spec_changes_the_switch_cost():
    """A 4-chip ring: DFModel zeroes switch cost and power at <= 4 chips per copy
    (``cost_thresholds``); without the quirk a 1-D ring of p chips has 2 switch ports
    (``ring_two_switch_ports``) at 600 GB/s x $24 per GB/s."""
    spec = _gpt()
    assert price(spec, (4,), 1555.0).switch_cost == 0.0
    off = _gpt("cost_thresholds = false")
    assert price(off, (4,), 1555.0).switch_cost == 2 * 600.0 * 24.0


# --------------------------------------------------------------------------- quirks in the spec
def test_unknown_quirk_is_a_one_line_exit_2_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(GPT.read_text() + "\n[quirks]\nhalf_volume_allreduce = false\n")
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2
    assert "quirks: unknown key 'half_volume_allreduce'" in r.output
    assert "half_volume_all_reduce" in r.output  # the allowed names
    assert "Traceback" not in r.output


def test_quirks_round_trip_through_toml():
    spec = _gpt("p2p_without_pipeline = true\nring_two_switch_ports = false")
    back = load_toml_spec(spec_to_toml(spec), file="b.toml", base_dir=EXAMPLES)
    assert back.quirks == spec.quirks == Quirks(p2p_without_pipeline=True,
                                                ring_two_switch_ports=False)
    # the data of a spec (study digests) names [quirks] only when a switch is flipped, so a
    # spec without the table keeps the data it had before specs held quirks
    assert "quirks" not in spec_to_data(_gpt())
    assert spec_to_data(spec)["quirks"]["p2p_without_pipeline"] is True
    assert replace_field(_gpt(), "quirks.cost_thresholds", False).quirks == Quirks(cost_thresholds=False)


def test_search_time_helpers_read_the_spec_quirks():
    """The stage search's bubble factor follows the spec's quirk as the lowering's does."""
    spec = _gpt()
    on, off = spec, replace(spec, quirks=Quirks(bubble_over_layers_per_stage=False))
    assert bubble(on, 3, 4) == 1.0 / (3 * spec.workload.num_layer_in_graph - 1)
    assert bubble(off, 3, 4) == 1.0


def test_nothing_outside_the_spec_builds_default_quirks():
    """Every caller takes ``spec.quirks``: ``Quirks()`` is written only as the spec's default
    (and in the docstring of the quirks module)."""
    offenders = []
    for path in sorted((ROOT / "dfsearch").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bQuirks\(\)", line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == [
        "dfsearch/quirks.py:4: DFModel; the default ``Quirks()`` reproduces DFModel "
        "(\"Quirks we replicate by default\")",
        "dfsearch/spec.py:" + _line_of(ROOT / "dfsearch/spec.py", "quirks: Quirks = Quirks()")
        + ": quirks: Quirks = Quirks()",
    ]


def _line_of(path: Path, text: str) -> str:
    return str(next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if text in ln))


# --------------------------------------------------------------------------- N dimensions
FFT_4D = """
[workload]
kind = "fft"
length = 1048576

[graph]
generator = "fft"
r = 2

[system]
num_chip = 16

[system.accelerator]
cores = 64
systolic_width = 4
systolic_height = 4
sram_bytes = 1e9
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 1000.0

[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 100.0

[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 50.0

[[system.network]]
topology = "switch"
size = 2
link_bw_GBps = 25.0

[[system.network]]
topology = "switch"
size = 2
link_bw_GBps = 10.0

[cost]
link_power_J_per_GB = [0.01, 0.01, 0.01, 0.01]

[execution]
style = "kernel_by_kernel"
equations = "v1"
"""

#: msg_j / (bw_j x bisection_j) of ring x ring x switch x switch, 2 x 2 x 2 x 2 chips (v1):
#: inner dimension j carries the pairs g(g-1)/2 of its group of g = 2, 4, 8 chips, the
#: outermost those of all 16 (120); a ring of 2 and a switch of 2 both have 2 links across
#: their cut
FACTORS_4D = (1 / (100 * 2), 6 / (50 * 2), 28 / (25 * 2), 120 / (10 * 2))


def test_a_four_dimension_network_validates_lowers_and_searches():
    spec = load_toml_spec(FFT_4D, file="fft4.toml", base_dir=EXAMPLES)
    assert [d.topology for d in spec.system.network] == [
        Topology.RING, Topology.RING, Topology.SWITCH, Topology.SWITCH]  # fmt: skip
    shape = (2, 2, 2, 2)
    fab = Fabric.of(spec, shape)
    assert all(_rel(a, b) for a, b in zip(fab.all_to_all_factors(), FACTORS_4D))
    a2a = [i for i, k in enumerate(spec.graph.kernels) if k.communication is Collective.ALL_TO_ALL]
    assert a2a
    k = a2a[0]
    per_chip = spec.graph.kernels[k].communication_bytes / 16**2  # FFT: bytes / chips^2
    want = [per_chip * f for f in FACTORS_4D]
    outer = Outer(shape, tuple(Dim.NO for _ in spec.graph.kernels), 1, 1,
                  effective_num_config(spec))  # fmt: skip
    problem = lower(spec, outer)
    assert problem.kernels.channel_ns.shape == (len(spec.graph.kernels), 4)
    assert all(_rel(a, b) for a, b in zip(problem.kernels.channel_ns[k], want))
    result = dfsearch.run(spec)
    ev = result.evaluation
    assert ev.status is Status.OK
    # kernel by kernel: the all-to-all's configuration waits for its slowest channel, the
    # fourth dimension's (the evaluator keeps every dimension's channel)
    net = next(c.network_ns for c in ev.configs if spec.graph.kernels[k].name in c.kernels)
    assert _rel(net, max(want)) and max(want) == want[3]
    # the pure-Python twin composes the four dimensions on its own and agrees
    ref = reference_evaluate(spec, ev.decision)
    assert _rel(ref.final_ns, ev.final_ns)


def test_a_grid_of_four_dimensions_is_refused_with_the_rule():
    text = FFT_4D.replace('topology = "switch"', 'topology = "ring"')
    with pytest.raises(dfsearch.errors.SpecError, match="of more than 3 dimensions must not"):
        load_toml_spec(text, file="grid4.toml", base_dir=EXAMPLES)


def test_hpl_on_four_dimensions_uses_the_n_dimension_process_grid():
    """X = 2 x 2 x 2 = 8 rows of the process grid, Y = 2 (the last dimension); the broadcast
    of each row goes over dimension 1, the row swaps over dimension 0."""
    assert hpl_grid((2, 2, 2, 2)) == (8, 2)
    spec = dfsearch.load(EXAMPLES / "hpl_576gpu.toml")
    bws = (100.0, 50.0, 25.0, 10.0)
    kinds = (Topology.RING, Topology.RING, Topology.SWITCH, Topology.SWITCH)
    net = tuple(NetworkDim(topology=t, size=2, link_bw_GBps=b) for t, b in zip(kinds, bws))
    spec = replace(spec, system=replace(spec.system, num_chip=16, network=net),
                   cost=replace(spec.cost, link_power_J_per_GB=(0.01,) * 4))  # fmt: skip
    assert validate_spec(spec) == []
    problem = lower(spec, Outer((2, 2, 2, 2), tuple(Dim.NO for _ in spec.graph.kernels), 1, 1,
                                effective_num_config(spec)))  # fmt: skip
    for i, k in enumerate(spec.graph.kernels):
        row = problem.kernels.channel_ns[i]
        want_bc = k.communication_bytes / 8 / bws[1] if k.communication is Collective.BROADCAST else 0.0
        want_p2p = (k.communication_bytes / 2 / bws[0]
                    if k.communication2 is Collective.POINT_TO_POINT else 0.0)  # fmt: skip
        assert (row[0], row[1], row[2], row[3]) == (want_p2p, want_bc, 0.0, 0.0)
    ev = dfsearch.run(spec).evaluation
    assert ev.status is Status.OK
    assert _rel(reference_evaluate(spec, ev.decision).final_ns, ev.final_ns)


def test_tp_and_dp_groups_on_a_four_dimension_network():
    """ring 2 x ring 2 x switch 2 x switch 2 with TP on dimension 2 (a switch of 2 at
    25 GB/s) and DP on dimension 3 (a switch of 2 at 10 GB/s): the TP all-gather is
    (2-1)/(2 x 25) ns per byte, the gradient all-reduce 2 (2-1)/(2 x 10) (a switch doubles
    it when the execution runs reduce-scatter + all-gather)."""
    spec = load_toml_spec(FFT_4D, file="fft4.toml", base_dir=EXAMPLES)
    pl = Placement(((), (), (Part(Parallelism.TP, 2),), (Part(Parallelism.DP, 2),)))
    fab = Fabric.build(spec.system, (2, 2, 2, 2), pl, Quirks(), separate_rs_ag_for_ar=True)
    g = fab.groups()
    assert (g.tp, g.pp, g.dp, g.tp_dim, g.dp_dim) == (2, 1, 2, 2, 3)
    tp = fab.collective_time_ns(Collective.ALL_GATHER, 1.0e6, Parallelism.TP)
    assert _rel(tp, 1 / (2 * 25.0) * 1.0e6)
    dp = fab.collective_time_ns(Collective.ALL_REDUCE_PERIODIC, 1.0e6, Parallelism.DP)
    assert _rel(dp, 2 * 1 / (2 * 10.0) * 1.0e6)


def test_the_fabric_package_imports_only_data_modules_and_itself():
    """dfsearch/system/ sits under the workloads, the cost model and the search: it imports
    (outside ``if TYPE_CHECKING:``) only ``codes``, ``quirks`` and its own modules, so it
    can never join an import cycle."""
    from test_architecture import import_graph

    edges, _ = import_graph()
    allowed = {"codes", "quirks", "cost"}
    for module, targets in edges.items():
        if module == "system" or module.startswith("system."):
            outside = {t for t in targets if t not in allowed and not t.startswith("system")}
            assert outside == set(), (module, outside)


def test_the_report_names_the_quirks_a_spec_flips():
    from dfsearch.report import describe_spec

    assert not any(line.startswith("quirks") for line in describe_spec(_gpt()))
    flipped = describe_spec(_gpt("p2p_without_pipeline = true\nring_two_switch_ports = false"))
    (line,) = [line for line in flipped if line.startswith("quirks")]
    assert "p2p_without_pipeline = true" in line and "ring_two_switch_ports = false" in line
    assert "half_volume_all_reduce" not in line  # left at its default
