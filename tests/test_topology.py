"""Network topology kinds (dfsearch/system/kinds.py) and how networks compose them.

Each kind's formulas are checked against their closed forms (docs/model.md, Network
topologies); the mesh's assumptions are checked by building the line and the ring as graphs.
The compositional a2a factors and link/switch counts are checked against DFModel's own
per-variant tables, written out below as DFModel states them. A mesh spec is loaded from
TOML, run, and compared with the pure-Python twin and with the same spec on rings.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace
from pathlib import Path

import pytest

from dfsearch import api
from dfsearch.codes import TOPOLOGY_VARIANTS, Equations, Parallelism, Topology
from dfsearch.cost.price import link_switch_counts
from dfsearch.errors import SpecError
from dfsearch.io.dfmodel import load_dfmodel
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_toml_spec, replace_field
from dfsearch.quirks import Quirks
from dfsearch.spec import NetworkDim, Spec, System
from dfsearch.system.kinds import (
    KINDS,
    FullyConnected,
    Mesh,
    Ring,
    Switch,
    allowed_network,
    dfmodel_variant,
    network_name,
)
from dfsearch.system.ratios import a2a_factors, hbd_reduce_ratio, llm_ratios
from dfsearch.validate import validate_spec

RING, SWITCH, FC, MESH = Topology.RING, Topology.SWITCH, Topology.FC, Topology.MESH
SIZES = (1, 2, 3, 4, 5, 8, 16, 127)
BWS = (1.0, 12.5, 300.0)


def _rel(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


# --------------------------------------------------------------------------- the registry
def test_every_topology_has_exactly_one_kind():
    assert set(KINDS) == set(Topology)
    for code, kind in KINDS.items():
        assert kind.code is code
        assert kind.label == code.label and code.short == kind.short
    assert len({k.short for k in KINDS.values()}) == len(KINDS)
    dfmodel = {k.dfmodel for k in KINDS.values() if k.dfmodel}
    assert dfmodel == {name for name in TOPOLOGY_VARIANTS if "_" not in name}


def test_network_names_are_dfmodels_variant_names():
    for name, dims in TOPOLOGY_VARIANTS.items():
        assert network_name(dims) == name == dfmodel_variant(dims)
        assert allowed_network(dims)


# --------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("bw", BWS)
def test_dfmodel_kinds_closed_forms(p, bw):
    r, s, f = Ring(), Switch(), FullyConnected()
    q, tb = Quirks(), Quirks.textbook()
    assert r.reduce_ratio(p, bw) == (p - 1) / (p * bw) == s.reduce_ratio(p, bw)
    assert f.reduce_ratio(p, bw) == 1 / (p * bw)
    assert r.all_to_all_ratio(p, bw) == p * p / (8 * bw)
    assert s.all_to_all_ratio(p, bw) == p / (4 * bw)
    assert f.all_to_all_ratio(p, bw) == 1 / bw
    assert r.p2p_ratio(bw) == s.p2p_ratio(bw) == f.p2p_ratio(bw) == 1 / bw
    assert (r.latency_steps(p), s.latency_steps(p), f.latency_steps(p)) == (p - 1, p - 1, 1)
    for eq in Equations:
        assert r.bisection_links(p, eq) == 2 and s.bisection_links(p, eq) == p
    assert f.bisection_links(p, Equations.V1) == f.bisection_links(p, Equations.LEGACY) == p * p / 4
    assert f.bisection_links(p, Equations.V2) == p * (p - 1) / 2
    assert (r.links(p), s.links(p), f.links(p)) == (p, p, p * (p - 1))
    assert r.switch_ports(p, dim=0, ndim=1, quirks=q) == 2
    assert r.switch_ports(p, dim=0, ndim=1, quirks=tb) == p
    assert r.switch_ports(p, dim=1, ndim=2, quirks=tb) == 2
    assert s.switch_ports(p, dim=1, ndim=3, quirks=q) == p
    assert f.switch_ports(p, dim=0, ndim=2, quirks=q) == 0
    assert f.switch_ports(p, dim=1, ndim=2, quirks=q) == p * p
    assert (r.doubles_gradient_all_reduce, s.doubles_gradient_all_reduce) == (True, True)
    assert not f.doubles_gradient_all_reduce


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("bw", BWS)
def test_mesh_closed_forms(p, bw):
    m, r = Mesh(), Ring()
    assert m.reduce_ratio(p, bw) == (p - 1) / (p * bw) == r.reduce_ratio(p, bw)
    assert m.all_to_all_ratio(p, bw) == p * p / (4 * bw) == 2 * r.all_to_all_ratio(p, bw)
    assert m.p2p_ratio(bw) == 1 / bw
    assert m.latency_steps(p) == {1: 0, 2: 1}.get(p, 2 * (p - 1))
    assert all(m.bisection_links(p, eq) == 1 for eq in Equations)
    assert m.links(p) == p - 1 < r.links(p)
    for dim, ndim in ((0, 1), (0, 2), (1, 2), (2, 3)):
        assert m.switch_ports(p, dim=dim, ndim=ndim, quirks=Quirks()) == 0
    assert m.doubles_gradient_all_reduce and m.direct and m.stands_for is RING
    assert m.dfmodel is None


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=lambda k: k.label)
@pytest.mark.parametrize("p", SIZES)
def test_all_to_all_ratio_is_the_bisection_form(kind, p):
    """Every kind's LLM all-to-all is p^2 / (4 L(p) bw) with L its v1 bisection links."""
    bw = 12.5
    want = p * p / (4 * kind.bisection_links(p, Equations.V1) * bw)
    assert _rel(kind.all_to_all_ratio(p, bw), want)


# --------------------------------------------------------------------------- the mesh as a graph
def _line(p: int) -> set[tuple[int, int]]:
    return {(i, i + 1) for i in range(p - 1)}


def _cycle(p: int) -> set[tuple[int, int]]:
    return _line(p) | ({(0, p - 1)} if p > 2 else set())


def _cut(links: set[tuple[int, int]], p: int) -> int:
    """Links between chips 0..p/2-1 and the rest."""
    return sum((a < p // 2) != (b < p // 2) for a, b in links)


def _folded_ring(p: int) -> list[int]:
    """The ring order on a line: even positions outwards, odd positions back."""
    return list(range(0, p, 2)) + list(range(p - 1 if p % 2 == 0 else p - 2, 0, -2))


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 8, 16, 33])
def test_mesh_formulas_follow_from_the_line(p):
    """A line has p-1 links and one across its middle (a cycle: p and two); the folded ring
    visits every chip, uses each link direction exactly once per ring step (so a ring pass
    runs at the full link bandwidth, the reduce ratio of a ring), and its longest hop spans
    min(p-1, 2) links (the latency steps)."""
    assert len(_line(p)) == Mesh().links(p)
    assert _cut(_line(p), p) == Mesh().bisection_links(p, Equations.V1)
    if p > 2:
        assert len(_cycle(p)) == Ring().links(p) and _cut(_cycle(p), p) == 2
    order = _folded_ring(p)
    assert sorted(order) == list(range(p))
    use: dict[tuple[int, int], int] = {}
    longest = 0
    for a, b in zip(order, order[1:] + order[:1]):
        step = 1 if b > a else -1
        longest = max(longest, abs(b - a))
        for i in range(a, b, step):
            use[(i, i + step)] = use.get((i, i + step), 0) + 1
    assert set(use.values()) == {1} and len(use) == 2 * (p - 1)
    assert (p - 1) * longest == Mesh().latency_steps(p)


# --------------------------------------------------------------------------- composition
def _dfmodel_a2a_table(variant, shape, n, eq):
    """DFModel's (message factor, bisection links) per dimension, variant by variant."""
    x = shape[0]
    y = shape[1] if len(shape) > 1 else 1
    z = shape[2] if len(shape) > 2 else 1
    if eq is Equations.DESIGN_SPACE:
        return _dfmodel_design_space_a2a_table(variant, x, y, z, n)
    whole = {Equations.LEGACY: float(n * n)}.get(eq, n * (n - 1) / 2.0)
    if eq is Equations.LEGACY and variant == "r_r":
        whole = n * n / 2.0
    fc = (lambda s: s * (s - 1) / 2.0) if eq is Equations.V2 else (lambda s: s * s / 4.0)
    ix, ixy = x * (x - 1) / 2.0, x * y * (x * y - 1) / 2.0
    return {
        "sw": [(whole, x)],
        "fc": [(whole, fc(x))],
        "r": [(whole, 2.0)],
        "r_r": [(whole, 2.0 * x), (whole, 2.0 * y)],
        "fc_fc": [(ix, fc(x)), (whole, fc(y))],
        "r_fc": [(ix, 2.0), (whole, fc(y))],
        "r_sw": [(ix, 2.0), (whole, y)],
        "sw_sw": [(ix, x), (whole, y)],
        "r_r_r": [(whole, 2.0 * x * y), (whole, 2.0 * x * z), (whole, 2.0 * y * z)],
        "r_sw_sw": [(ix, 2.0), (ixy, y), (whole, z)],
        "sw_sw_sw": [(ix, x), (ixy, y), (whole, z)],
    }[variant]


def _dfmodel_design_space_a2a_table(variant, x, y, z, n):
    """The same table for DFModel's design-space runs (docs/model.md, Equation sets):
    (G/2)^2 messages for a group of G chips, g_j links across a torus dimension."""

    def q(s):
        return s * s / 4.0

    whole = q(n)
    return {
        "sw": [(whole, x)],
        "fc": [(whole, q(x))],
        "r": [(whole, 2.0)],
        "r_r": [(whole, x), (whole, y)],
        "fc_fc": [(q(x), q(x)), (whole, q(y))],
        "r_fc": [(q(x), 2.0), (whole, q(y))],
        "r_sw": [(q(x), 2.0), (whole, y)],
        "sw_sw": [(q(x), x), (whole, y)],
        "r_r_r": [(whole, x * y), (whole, x * z), (whole, y * z)],
        "r_sw_sw": [(q(x), 2.0), (q(x * y), y), (whole, z)],
        "sw_sw_sw": [(q(x), x), (q(x * y), y), (whole, z)],
    }[variant]


def _dfmodel_counts(variant, shape, nc, num_chip, q):
    """DFModel's link counts and switch ports per dimension, variant by variant."""
    x = shape[0]
    y = shape[1] if len(shape) > 1 else 1
    z = shape[2] if len(shape) > 2 else 1
    big = num_chip if q.total_chips_for_dim0 else nc
    return {
        "r": ((x,), (2 if q.ring_two_switch_ports else x,)),
        "sw": ((x,), (x,)),
        "fc": ((x * (x - 1),), (0,)),
        "r_r": ((nc, nc), (2 * y, 2 * x)),
        "fc_fc": ((x * (x - 1) * y, y * (y - 1)), (0, y * y)),
        "r_fc": ((nc, y * (y - 1)), (2 * y, y * y)),
        "r_sw": ((big, y), (2 * y, y)),
        "sw_sw": ((big, y), (big, y)),
        "r_r_r": ((nc, nc, nc), (2 * y * z, 2 * x * z, 2 * x * y)),
        "r_sw_sw": ((nc, y * z, z), (2 * y * z, y * z, z)),
        "sw_sw_sw": ((nc, y * z, z), (nc, y * z, z)),
    }[variant]


@functools.cache
def _example() -> Spec:
    return api.load(Path(__file__).parent.parent / "dfsearch/examples/gpt3_1.5B_a100x4.toml")


def _system(topologies, bws=(10.0, 2.5, 0.5)) -> System:
    """The example's system with the given dimensions (sizes free)."""
    net = tuple(NetworkDim(topology=t, link_bw_GBps=b) for t, b in zip(topologies, bws))
    return replace(_example().system, network=net)


def _shapes(ndim):
    return itertools.product((1, 2, 3, 4, 6), repeat=ndim)


@pytest.mark.parametrize("variant", list(TOPOLOGY_VARIANTS))
def test_composition_reproduces_dfmodels_tables(variant):
    dims = TOPOLOGY_VARIANTS[variant]
    system = _system(dims)
    bws = [d.link_bw_GBps for d in system.network]
    for shape in _shapes(len(dims)):
        nc = math.prod(shape)
        for eq in Equations:
            want = [
                0.0 if m == 0 else (m / (bw * f) if f > 0 else math.inf)
                for (m, f), bw in zip(_dfmodel_a2a_table(variant, shape, nc, eq), bws)
            ]
            assert list(a2a_factors(system, shape, nc, eq)) == want, (shape, eq)
        for copies, q in itertools.product((1, 3), (Quirks(), Quirks.textbook())):
            links, ports = _dfmodel_counts(variant, shape, nc, nc * copies, q)
            got = link_switch_counts(dims, shape, nc * copies, q)
            assert got == (tuple(map(float, links)), tuple(map(float, ports))), (shape, q)


def test_mesh_networks_compose_from_the_kind():
    eq, n = Equations.V1, 24
    whole = n * (n - 1) / 2
    # a 2-D mesh is a grid like DFModel's torus, with 1 link per line across the cut
    sysm = _system((MESH, MESH))
    assert a2a_factors(sysm, (4, 6), n, eq) == (whole / (10.0 * 4), whole / (2.5 * 6))
    torus = a2a_factors(_system((RING, RING)), (4, 6), n, eq)
    assert a2a_factors(sysm, (4, 6), n, eq) == tuple(2 * t for t in torus)
    assert a2a_factors(sysm, (4, 6), n, Equations.LEGACY)[0] == n * n / 2 / (10.0 * 4)
    # lines of 4 joined by an FC group of 6: hierarchical, the lines carry their own pairs
    assert a2a_factors(_system((MESH, FC)), (4, 6), n, eq) == (6 / 10.0, whole / (2.5 * 9))
    # 3-D grid: DFModel's torus multipliers xy, xz, yz
    got = a2a_factors(_system((MESH, RING, MESH)), (2, 3, 4), n, eq)
    assert got == (whole / (10.0 * 6), whole / (2.5 * 2 * 8), whole / (0.5 * 12))
    # counts: p-1 links per line, every chip on one line of each dimension, no switch ports
    q = Quirks()
    assert link_switch_counts((MESH, MESH), (4, 6), 24, q) == ((3.0 * 6, 5.0 * 4), (0.0, 0.0))
    assert link_switch_counts((MESH, SWITCH), (4, 6), 48, q) == ((18.0, 6.0), (0.0, 6.0))
    assert link_switch_counts((MESH,), (5,), 5, q) == ((4.0,), (0.0,))


def _mesh_networks():
    for ndim in (1, 2, 3):
        for dims in itertools.product(list(Topology), repeat=ndim):
            if MESH in dims and allowed_network(dims):
                yield dims


def test_a_mesh_is_never_faster_than_a_ring_and_has_fewer_links():
    """Every allowed network with a mesh, every shape: the same network with rings in place
    of the meshes has all-to-all factors no larger and strictly more links."""
    networks = list(_mesh_networks())
    assert len(networks) == 14  # mesh; r_mesh, mesh_r, mesh_mesh, mesh_fc, mesh_sw; 8 in 3-D
    for dims in networks:
        rings = tuple(RING if t is MESH else t for t in dims)
        for shape in _shapes(len(dims)):
            n = math.prod(shape)
            for eq in Equations:
                m = a2a_factors(_system(dims), shape, n, eq)
                r = a2a_factors(_system(rings), shape, n, eq)
                assert all(a >= b for a, b in zip(m, r)), (dims, shape, eq)
            m_links, m_ports = link_switch_counts(dims, shape, n, Quirks())
            r_links, r_ports = link_switch_counts(rings, shape, n, Quirks())
            assert sum(m_links) < sum(r_links) and sum(m_ports) <= sum(r_ports)


def test_llm_ratios_take_the_kind_of_each_group():
    q = Quirks()
    for topo in (RING, MESH):
        net = (
            NetworkDim(topology=topo, link_bw_GBps=10.0, parallelism=Parallelism.TP),
            NetworkDim(topology=topo, link_bw_GBps=2.0, parallelism=Parallelism.PP),
            NetworkDim(topology=topo, link_bw_GBps=4.0, parallelism=Parallelism.DP),
        )
        sysm = replace(_system((topo,)), network=net)
        sysm = replace(sysm, accelerator=replace(sysm.accelerator, link_latency_ns=3.0))
        r = llm_ratios(sysm, (4, 2, 8), separate_rs_ag_for_ar=False, quirks=q)
        kind = KINDS[topo]
        assert r.all_reduce == kind.reduce_ratio(4, 10.0) == r.all_gather
        assert r.all_to_all == kind.all_to_all_ratio(4, 10.0)
        assert r.all_reduce_periodic == kind.reduce_ratio(8, 4.0)
        assert r.p2p == 1 / 2.0 and r.ar_latency == 3.0 * kind.latency_steps(4)
        hb = replace(sysm, hbd=2)
        r = llm_ratios(hb, (4, 2, 8), separate_rs_ag_for_ar=True, quirks=q)
        assert r.all_reduce == 2 * hbd_reduce_ratio(4, 2, 10.0, 2.0)
        assert r.all_reduce_periodic == 2 * hbd_reduce_ratio(8, 2, 10.0, 4.0)


def test_hbd_reduce_ratio_closed_form():
    assert hbd_reduce_ratio(8, 8, 10.0, 1.0) == 7 / (8 * 10.0)
    assert hbd_reduce_ratio(8, 16, 10.0, 1.0) == 7 / (8 * 10.0)
    assert hbd_reduce_ratio(8, 2, 10.0, 1.0) == 1 / (2 * 10.0) + 3 / (8 * 1.0)


# --------------------------------------------------------------------------- validation, importer
@pytest.mark.parametrize(
    "dims",
    [(MESH,), (MESH, MESH), (RING, MESH), (MESH, FC), (MESH, SWITCH), (MESH, MESH, MESH),
     (MESH, SWITCH, SWITCH), (RING, MESH, RING)],
    ids=lambda d: network_name(d),
)  # fmt: skip
def test_mesh_may_stand_wherever_a_ring_can(dims):
    assert allowed_network(dims)


@pytest.mark.parametrize("dims", [(SWITCH, MESH), (FC, MESH), (MESH, SWITCH, RING)],
                         ids=lambda d: network_name(d))  # fmt: skip
def test_other_mesh_networks_are_rejected_with_the_rule(dims):
    issues = [i.render() for i in validate_spec(replace(_example(), system=_system(dims)))]
    msg = [i for i in issues if i.startswith("system.network topologies")]
    assert msg == [
        "system.network topologies must form one of DFModel's 11 variants: r, sw, fc, r_r, "
        "r_fc, r_sw, sw_sw, fc_fc, r_r_r, r_sw_sw, sw_sw_sw (one word per dimension, in "
        "order; r = ring, sw = switch, fc = fc), where mesh may take the place of r. "
        f"Got {network_name(dims)} instead."
    ]


def test_dfmodel_has_no_mesh():
    with pytest.raises(ValueError, match=r"DFModel has no 'mesh' topology.*TOML spec only"):
        dfmodel_variant((MESH, FC))
    text = (Path(__file__).parent / "data/dfmodel").glob("*/setup.txt")
    setup = next(iter(sorted(text))).read_text()
    for name in ("r_fc", "r_r", "sw_sw", "r_sw"):
        setup = setup.replace(f"{name} {{", "mesh_fc {")
    with pytest.raises(SpecError) as info:
        load_dfmodel(setup)
    assert (
        "unknown field 'mesh_fc'" in str(info.value)
        and "DFModel has no mesh topology (mesh is a dfsearch extension): write the system "
        'as a dfsearch TOML spec, topology = "mesh" in [[system.network]]' in str(info.value)
    )


# --------------------------------------------------------------------------- end to end
_FFT = """
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
systolic_width = 1
systolic_height = 1
sram_bytes = 1e8
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 1000.0

[[system.network]]
topology = "mesh"
size = 4
link_bw_GBps = 2.0

[[system.network]]
topology = "mesh"
size = 4
link_bw_GBps = 0.5

[cost]
link_price_per_GBps = 2.0
switch_price_per_GBps = 24.0
link_power_J_per_GB = [0.01, 0.02]
switch_power_J_per_GB = 0.05

[execution]
style = "kernel_by_kernel"
compute_util = 0
word_bytes = 4
"""

_DLRM = """
[workload]
kind = "dlrm"
num_table = 8
emb_dim = 16
row = 1000
global_batch_size = 64

[graph]
generator = "dlrm"
mlp_dim = 64
bottom_num_mlp = 2
top_num_mlp = 2
pooled_row = 4
micro_batch_size = 32

[system]
num_chip = 16

[system.accelerator]
cores = 16
systolic_width = 4
systolic_height = 4
sram_bytes = 1e7
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 100.0

[[system.network]]
topology = "mesh"
size = 8
link_bw_GBps = 0.1

[[system.network]]
topology = "fc"
size = 2
link_bw_GBps = 0.5

[cost]
link_price_per_GBps = 2.0
switch_price_per_GBps = 24.0
link_power_J_per_GB = [0.01, 0.02]

[execution]
style = "dataflow"
num_config = 2
compute_util = 0
word_bytes = 2
equations = "v2"
"""


def _load(text: str):
    return load_toml_spec(text, file="mesh.toml", base_dir=Path("."))


@pytest.mark.parametrize("text", [_FFT, _DLRM], ids=["fft_mesh_mesh", "dlrm_mesh_fc"])
def test_mesh_spec_loads_runs_and_is_never_faster_than_ring(text):
    from test_reference_differential import compare

    mesh = _load(text)
    assert _load(spec_to_toml(mesh)) == mesh
    ring = replace_field(mesh, "system.network[0].topology", "ring")
    if len(mesh.system.network) > 1 and mesh.system.network[1].topology is MESH:
        ring = replace_field(ring, "system.network[1].topology", "ring")
    assert mesh.system.variant.startswith("mesh") and "mesh" not in ring.system.variant
    got = {}
    for name, spec in (("mesh", mesh), ("ring", ring)):
        ev = api.run(spec).evaluation
        assert ev is not None
        compare(spec, ev.decision)  # the jitted evaluator agrees with the pure-Python twin
        got[name] = ev
    m, r = got["mesh"], got["ring"]
    assert m.final_ns > r.final_ns  # all-to-all bound: twice the time on its dimension
    # the mesh's best mapping is no slower on the rings
    assert api.evaluate(ring, m.decision).final_ns <= m.final_ns
    # fewer links (p-1 per line, not p), no ring switch ports
    assert m.price.link_cost < r.price.link_cost and m.price.switch_cost <= r.price.switch_cost


def test_mesh_report_line():
    from dfsearch.report import describe_spec

    lines = describe_spec(_load(_FFT))
    assert "network   mesh_mesh: mesh[4] @2 GB/s x mesh[4] @0.5 GB/s" in lines
