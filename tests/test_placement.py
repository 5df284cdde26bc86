"""Parallelism placement searched (issue 11 item 4): placements, sub-group collective rules,
validation, search, mapping files and output.

Conventions of the closed forms below (docs/model.md, "Parallelism placement"): a network
dimension of n chips on links of ``bw`` GB/s (bytes/ns) is split into an inner part of
degree a (groups of a contiguous chips) and an outer part of degree b = n / a (groups of b
chips a apart). Every group of one kind runs its collective at the same time as the other
groups of that kind. The per-byte times of one group of p chips are DFModel's:
reduce (p-1)/(p bw) on a ring, line or switch, 1/(p bw) on all-pairs links; all-to-all
p^2/(4 L bw) with L the links across the group's middle cut; p2p 1/bw.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from dfsearch.codes import Parallelism, RunStatus, Topology
from dfsearch.cost.model import evaluate
from dfsearch.errors import SpecError
from dfsearch.mapping import decision_to_mapping, load_mapping, mapping_to_toml
from dfsearch.quirks import Quirks
from dfsearch.search import outer as outer_mod
from dfsearch.search.engine import search
from dfsearch.spec import NetworkDim
from dfsearch.system.kinds import KINDS
from dfsearch.system.placement import (
    Part,
    Placement,
    fixed_placement,
    parse_dim,
    placements,
)
from dfsearch.system.ratios import groups, llm_ratios
from dfsearch.validate import validate_spec

from specs import random_spec

TP, PP, DP, NONE, AUTO = (Parallelism.TP, Parallelism.PP, Parallelism.DP, Parallelism.NONE,
                          Parallelism.AUTO)  # fmt: skip
BW = 4.0
LAT = 10.0


def one_dim_system(topo: Topology, n: int = 8, par: Parallelism = AUTO):
    """A 1-D network of n chips on ``topo`` links of BW GB/s, link latency LAT ns."""
    base = random_spec(0).system
    acc = replace(base.accelerator, link_latency_ns=LAT)
    dim = NetworkDim(topology=topo, link_bw_GBps=BW, size=n, parallelism=par)
    return replace(base, num_chip=n, accelerator=acc, network=(dim,))


def split(inner: Parallelism, a: int, outer: Parallelism, b: int) -> Placement:
    return Placement(((Part(inner, a), Part(outer, b)),))


def ratios(system, placement, *, rs_ag: bool = False):
    shape = tuple(d.size for d in system.network)
    return llm_ratios(system, shape, separate_rs_ag_for_ar=rs_ag, quirks=Quirks(),
                      placement=placement)  # fmt: skip


# --------------------------------------------------------------------------- whole dimensions
@pytest.mark.parametrize("topo", list(Topology))
@pytest.mark.parametrize("rs_ag", [False, True])
def test_whole_dimension_placements_give_exactly_todays_ratios(topo, rs_ag):
    """A placement whose parts span their dimensions is the spec's fixed roles: the ratios are
    bit for bit those of ``placement=None`` and of the kind's own formulas at the
    dimension's size."""
    kinds = {Topology.RING: (Topology.RING,), Topology.MESH: (Topology.MESH,)}
    second = kinds.get(topo, (Topology.SWITCH,))[0]
    base = random_spec(0).system
    net = (NetworkDim(topology=topo, link_bw_GBps=3.0, size=4, parallelism=TP),
           NetworkDim(topology=second, link_bw_GBps=5.0, size=8, parallelism=DP))  # fmt: skip
    sysm = replace(base, num_chip=32, network=net)
    shape = (4, 8)
    explicit = Placement(((Part(TP, 4),), (Part(DP, 8),)))
    assert fixed_placement(sysm, shape) == explicit
    a = llm_ratios(sysm, shape, separate_rs_ag_for_ar=rs_ag, quirks=Quirks())
    b = llm_ratios(sysm, shape, separate_rs_ag_for_ar=rs_ag, quirks=Quirks(), placement=explicit)
    assert a == b
    k, k2 = KINDS[topo], KINDS[second]
    dbl = 2.0 if rs_ag else 1.0  # DFModel's half-volume all-reduce unless rs + ag
    assert a.all_reduce == dbl * k.reduce_ratio(4, 3.0)
    assert a.all_to_all == k.all_to_all_ratio(4, 3.0)
    assert a.all_gather == k.reduce_ratio(4, 3.0)
    doubles = (rs_ag or not Quirks().half_volume_all_reduce) and k2.doubles_gradient_all_reduce
    assert a.all_reduce_periodic == k2.reduce_ratio(8, 5.0) * (2.0 if doubles else 1.0)
    g = groups(sysm, shape)
    assert (g.tp, g.pp, g.dp, g.tp_dim, g.pp_dim, g.dp_dim) == (4, 1, 8, 0, -1, 1)


# --------------------------------------------------------------------------- sub-group rules
def test_ring_contiguous_sub_group_is_a_line():
    """Ring of n = 8 split tp 4 (inner) x dp 2. The TP groups {0..3} and {4..7} are segments
    of the ring: a line without its wraparound link, each segment on its own links. A ring
    pass folded onto a line (0, 2, ... out, ..., 3, 1 back) uses every directed link once:
    reduce (p-1)/(p bw) = 3/(4 BW), all-gather and (DFModel's half volume) all-reduce the
    same. One link crosses a segment's middle cut: all-to-all
    p^2/(4 bw) = 16/(4 BW) = 4/BW. Each folded-ring hop spans up to 2 links: latency
    2 (p - 1) = 6 steps of LAT."""
    r = ratios(one_dim_system(Topology.RING), split(TP, 4, DP, 2))
    assert r.all_gather == pytest.approx(3 / (4 * BW), rel=1e-15)
    assert r.all_reduce == pytest.approx(3 / (4 * BW), rel=1e-15)
    assert r.all_to_all == pytest.approx(4 / BW, rel=1e-15)
    assert r.ar_latency == pytest.approx(6 * LAT, rel=1e-15)


def test_ring_strided_sub_group_shares_its_links():
    """Ring of n = 8 split tp 2 x dp 4: the DP groups {0, 2, 4, 6} and {1, 3, 5, 7} are rings
    of b = 4 chips whose hops span s = n / b = 2 links. In each of the b - 1 steps every chip
    sends bytes/b to the next member; each physical link lies on one hop of each of the s
    groups, so it carries s messages: reduce s (b-1)/(b bw) = 2 x 3/(4 BW) = 1.5/BW (the
    gradient all-reduce, half volume). PP on the same strided part (tp 2 x pp 4):
    a stage's activations cross s links, each shared by the s pipelines: p2p s / bw = 2/BW.
    TP strided (dp 2 x tp 4): the physical cut has 2 links crossed by both groups, so
    L = 2 / s = 1 per group: all-to-all b^2/(4 bw) = 16/(4 BW) = 4/BW; latency s (b - 1) =
    6 hops."""
    sysm = one_dim_system(Topology.RING)
    r = ratios(sysm, split(TP, 2, DP, 4))
    assert r.all_reduce_periodic == pytest.approx(2 * 3 / (4 * BW), rel=1e-15)
    r = ratios(sysm, split(TP, 2, PP, 4))
    assert r.p2p == pytest.approx(2 / BW, rel=1e-15)
    r = ratios(sysm, split(DP, 2, TP, 4))
    assert r.all_to_all == pytest.approx(16 / (4 * BW), rel=1e-15)
    assert r.all_gather == pytest.approx(2 * 3 / (4 * BW), rel=1e-15)
    assert r.ar_latency == pytest.approx(6 * LAT, rel=1e-15)


def test_mesh_sub_groups():
    """Line of n = 8. Contiguous tp 4: disjoint shorter lines, the mesh's own formulas at
    p = 4: reduce 3/(4 BW), all-to-all 16/(4 BW) (one link across the cut), latency
    2 (p - 1) = 6. Strided dp 4 (tp 2 x dp 4, s = 2): a line of 4 whose hops span 2 links;
    the middle links lie on a hop of both groups: reduce s (b-1)/(b bw) = 1.5/BW. Strided tp 4 (dp 2 x tp 4): the middle cut's single link carries both groups:
    L = 1/2, all-to-all 16/(4 x 0.5 BW) = 8/BW; latency s x 2 (b - 1) = 12 steps; strided
    pp 4: p2p 2/BW."""
    sysm = one_dim_system(Topology.MESH)
    r = ratios(sysm, split(TP, 4, DP, 2))
    assert r.all_gather == pytest.approx(3 / (4 * BW), rel=1e-15)
    assert r.all_to_all == pytest.approx(4 / BW, rel=1e-15)
    assert r.ar_latency == pytest.approx(6 * LAT, rel=1e-15)
    r = ratios(sysm, split(TP, 2, DP, 4))
    assert r.all_reduce_periodic == pytest.approx(1.5 / BW, rel=1e-15)
    r = ratios(sysm, split(DP, 2, TP, 4))
    assert r.all_to_all == pytest.approx(8 / BW, rel=1e-15)
    assert r.ar_latency == pytest.approx(12 * LAT, rel=1e-15)
    assert ratios(sysm, split(TP, 2, PP, 4)).p2p == pytest.approx(2 / BW, rel=1e-15)


@pytest.mark.parametrize("order", ["tp_inner", "tp_outer"])
def test_switch_sub_groups_do_not_share(order):
    """Switch of n = 8: every chip has its own port and link, a group of p uses only its
    members' links, contiguous or strided alike: reduce (p-1)/(p bw), all-to-all
    p/(4 bw) (p links across the cut: p^2/(4 p bw)), latency p - 1, p2p 1/bw. TP 4 with
    DP 2 (or PP 2) beside it: all-gather 3/(4 BW), all-to-all 1/BW, latency 3; the DP
    gradient all-reduce at 2: 1/(2 BW); p2p 1/BW."""
    sysm = one_dim_system(Topology.SWITCH)
    pl = split(TP, 4, DP, 2) if order == "tp_inner" else split(DP, 2, TP, 4)
    r = ratios(sysm, pl)
    assert r.all_gather == pytest.approx(3 / (4 * BW), rel=1e-15)
    assert r.all_to_all == pytest.approx(1 / BW, rel=1e-15)
    assert r.ar_latency == pytest.approx(3 * LAT, rel=1e-15)
    assert r.all_reduce_periodic == pytest.approx(1 / (2 * BW), rel=1e-15)
    pl = split(TP, 4, PP, 2) if order == "tp_inner" else split(PP, 2, TP, 4)
    assert ratios(sysm, pl).p2p == pytest.approx(1 / BW, rel=1e-15)


@pytest.mark.parametrize("order", ["tp_inner", "tp_outer"])
def test_fully_connected_sub_groups_use_their_own_links(order):
    """All-pairs links on n = 8: a group of p has a link between each pair of its members,
    links no other group uses; it is an all-pairs group of p (the links to other groups are
    not borrowed): reduce 1/(p bw), all-to-all 1/bw, latency 1. TP 4: all-gather
    1/(4 BW), all-to-all 1/BW, latency 1; DP 2: 1/(2 BW)."""
    sysm = one_dim_system(Topology.FC)
    pl = split(TP, 4, DP, 2) if order == "tp_inner" else split(DP, 2, TP, 4)
    r = ratios(sysm, pl)
    assert r.all_gather == pytest.approx(1 / (4 * BW), rel=1e-15)
    assert r.all_to_all == pytest.approx(1 / BW, rel=1e-15)
    assert r.ar_latency == pytest.approx(LAT, rel=1e-15)
    assert r.all_reduce_periodic == pytest.approx(1 / (2 * BW), rel=1e-15)


# --------------------------------------------------------------------------- enumeration
def test_placements_keep_fixed_roles_and_use_each_kind_once():
    """(tp, auto) on a 4 x 4 ring network: dimension 0 keeps tp 4; dimension 1 carries pp,
    dp, or both split 2 x 2 in either order: 4 placements, none repeating a kind."""
    spec = auto_spec((TP, AUTO), sizes=(4, 4))
    got = placements(spec.system, (4, 4))
    assert [p.dim_text(1) for p in got] == ["pp 4", "dp 4", "pp 2 x dp 2", "dp 2 x pp 2"]
    assert all(p.dims[0] == (Part(TP, 4),) for p in got)


def test_search_space_drops_placements_with_the_same_groups_and_links():
    """On a switch the inner and outer parts are alike (no sharing): pp 2 x dp 2 and
    dp 2 x pp 2 give the same groups and links, and only the first is searched; PP above
    num_layer = 2 is never searched."""
    spec = auto_spec((TP, AUTO), sizes=(4, 4), topo=Topology.SWITCH)
    got = outer_mod.placements(spec, (4, 4))
    assert [p.dim_text(1) for p in got] == ["dp 4", "pp 2 x dp 2"]


def test_a_size_one_dimension_carries_nothing():
    spec = auto_spec((AUTO, AUTO))
    got = placements(spec.system, (1, 16))
    assert all(p.dims[0] == () for p in got)
    assert {p.dim_text(1) for p in got} >= {"tp 16", "pp 2 x dp 8", "dp 8 x tp 2"}


# --------------------------------------------------------------------------- search
def auto_spec(pars, sizes=(0, 0), topo=Topology.RING, chips=16, seed=1):
    """A small LLM spec on a 2-D ``topo`` network (50 and 25 GB/s) with parallelism
    ``pars`` (AUTO / NONE: searched), 2 layers, global batch 16."""
    base = random_spec(seed, 6, num_config=3)
    net = tuple(NetworkDim(topology=topo, link_bw_GBps=bw, size=s, parallelism=p)
                for p, s, bw in zip(pars, sizes, (50.0, 25.0, 10.0)))  # fmt: skip
    return replace(base, system=replace(base.system, num_chip=chips, network=net),
                   workload=replace(base.workload, global_batch_size=16))  # fmt: skip


TUPLES_2D = [(TP, PP), (TP, DP), (PP, DP)]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("topo", [Topology.RING, Topology.SWITCH])
def test_searched_placement_is_at_least_as_good_as_every_fixed_tuple(seed, topo):
    """The exhaustive search over placements is proven optimal and never slower than the
    best of DFModel's fixed tuples (each searched and proven on its own): every fixed tuple's
    placements are among the searched ones."""
    auto = search(auto_spec((AUTO, NONE), topo=topo, seed=seed))
    fixed = [search(auto_spec(t, topo=topo, seed=seed)) for t in TUPLES_2D]
    best_fixed = min(r.evaluation.final_ns for r in fixed if r.evaluation is not None)
    assert auto.status is RunStatus.OPTIMAL
    assert all(r.status in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE) for r in fixed)
    assert auto.evaluation.final_ns <= best_fixed * (1 + 1e-12)
    assert auto.evaluation.decision.placement is not None


def test_fixed_specs_search_exactly_as_before():
    """A spec that fixes every role searches no placement: the decision carries None."""
    r = search(auto_spec((TP, DP)))
    assert r.evaluation.decision.placement is None
    assert outer_mod.placements(auto_spec((TP, DP)), (4, 4)) == [None]


def test_search_is_deterministic_with_placements():
    a, b = (search(auto_spec((AUTO, AUTO), seed=2)) for _ in range(2))
    assert a.evaluation.decision == b.evaluation.decision
    assert a.evaluation.final_ns == b.evaluation.final_ns


@pytest.mark.slow
def test_sampled_search_takes_the_placement_as_a_categorical():
    """The optuna outer strategy samples placements (deterministically for a seed)."""
    spec = auto_spec((AUTO, AUTO), seed=2)
    spec = replace(spec, search=replace(spec.search, strategy="optuna"))
    a, b = search(spec), search(spec)
    assert a.evaluation.decision == b.evaluation.decision
    assert a.evaluation.decision.placement is not None
    assert a.status is not RunStatus.OPTIMAL


# --------------------------------------------------------------------------- TP, PP and DP on 2-D
def test_a_2d_network_carries_tp_pp_and_dp():
    """dim 0 = tp 4, dim 1 = pp 2 x dp 2 on a 4 x 4 ring: TP 4, PP 2, DP 2; global batch 16
    in micro-batches of 1 gives 16 / (1 x 2) = 8 micro-batches per pipeline; the p2p ratio is
    the contiguous pp part's 1/bw and the DP all-reduce the strided part's s (b-1)/(b bw)
    with s = 2, b = 2 on 25 GB/s: 2 x 1/(2 x 25)."""
    spec = auto_spec((TP, AUTO), sizes=(4, 4))
    pl = Placement(((Part(TP, 4),), (Part(PP, 2), Part(DP, 2))))
    r = llm_ratios(spec.system, (4, 4), separate_rs_ag_for_ar=False, quirks=Quirks(),
                   placement=pl)  # fmt: skip
    assert r.p2p == pytest.approx(1 / 25.0, rel=1e-15)
    assert r.all_reduce_periodic == pytest.approx(2 * 1 / (2 * 25.0), rel=1e-15)
    res = search(replace(spec, search=replace(spec.search, joint_sharding=False)))
    assert res.evaluation is not None
    ev = evaluate(spec, replace(res.evaluation.decision, placement=pl))
    assert (ev.tp, ev.pp, ev.dp, ev.num_micro_batch) == (4, 2, 2, 8)


def test_auto_search_can_choose_three_kinds_on_two_dimensions():
    """The search space of an all-auto 2-D network holds placements with TP, PP and DP."""
    spec = auto_spec((AUTO, AUTO))
    three = [p for s in outer_mod.shapes(spec) for p in outer_mod.placements(spec, s)
             if all(p.degree(k) > 1 for k in (TP, PP, DP))]  # fmt: skip
    assert three
    assert "dim 0: tp 2; dim 1: pp 2 x dp 4" in {str(p) for p in three}


# --------------------------------------------------------------------------- validation
def test_auto_parallelism_is_valid_for_an_llm_and_hbd_needs_fixed_roles():
    assert validate_spec(auto_spec((AUTO, NONE))) == []
    spec = auto_spec((TP, PP, AUTO), sizes=(0, 0, 0))
    spec = replace(spec, system=replace(spec.system, hbd=2))
    msgs = [i.render() for i in validate_spec(spec)]
    assert ("system.hbd must be 0 unless the network has 3 dimensions with parallelism "
            "(tp, pp, dp). Got 2 instead.") in msgs  # fmt: skip


def test_a_fixed_kind_twice_beside_a_searched_dimension_is_an_error():
    net = tuple(NetworkDim(topology=Topology.RING, link_bw_GBps=10.0, parallelism=p)
                for p in (DP, AUTO, DP))  # fmt: skip
    spec = auto_spec((AUTO, AUTO))
    spec = replace(spec, system=replace(spec.system, network=net))
    assert [i.render() for i in validate_spec(spec)] == [
        "system.network[2].parallelism must differ from system.network[0].parallelism: each "
        "of tp, pp, dp is carried by one dimension at most (omit the field or write 'auto' to "
        "let the search choose). Got 'dp' instead."
    ]


def test_auto_on_a_fixed_network_workload_is_rejected(tmp_path):
    from dfsearch.loader import load_spec

    text = Path("dfsearch/examples/dlrm_a100x128.toml").read_text()
    text = text.replace('topology = "fc"', 'topology = "fc"\nparallelism = "auto"', 1)
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(p)
    assert ("parallelism must be omitted for a dlrm workload (tp/pp/dp apply to LLM workloads "
            "only). Got 'auto' instead.") in str(e.value)  # fmt: skip


def test_the_dfmodel_importer_knows_only_tp_pp_dp():
    from dfsearch.io.dfmodel import load_dfmodel_file

    src = Path("tests/data/dfmodel/gpt3_1.5B_seq1024_a100x4_ring_tp4/setup.txt").read_text()
    assert 'par_x: "TP"' in src
    with pytest.raises(SpecError) as e:
        load_dfmodel_file_text(load_dfmodel_file, src.replace('par_x: "TP"', 'par_x: "AUTO"'))
    assert 'must be "TP", "PP" or "DP". Got \'AUTO\' instead' in str(e.value)


def load_dfmodel_file_text(loader, text):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "setup.txt"
        p.write_text(text)
        return loader(p)


@pytest.mark.parametrize(("text", "size", "message"), [
    ("tp 3", 4, "degrees must multiply to the dimension's size 4. Got 'tp 3' instead."),
    ("tp x tp", 4, "must not repeat a kind. Got 'tp x tp' instead."),
    ("tp 2 x pp 2 x dp 1", 4, "may carry at most 2 kinds. Got 'tp 2 x pp 2 x dp 1' instead."),
    ("none", 4, "can be 'none' only on a dimension of size 1; this one has 4 chips. "
                "Got 'none' instead."),
    ("ep 4", 4, "each part must be a kind (tp, pp, dp) with an optional degree, parts joined "
                "by ' x '. Got 'ep 4' instead."),
])  # fmt: skip
def test_placement_text_errors(text, size, message):
    with pytest.raises(ValueError) as e:
        parse_dim(text, size)
    assert str(e.value) == message


def test_placement_text_reads_back():
    pl = Placement(((Part(TP, 4),), (Part(PP, 2), Part(DP, 2))))
    assert tuple(parse_dim(t, s) for t, s in zip(pl.texts(), (4, 4))) == pl.dims
    assert parse_dim("dp", 8) == (Part(DP, 8),)
    assert parse_dim("tp x pp 2", 8) == (Part(TP, 4), Part(PP, 2))


# --------------------------------------------------------------------------- mapping and output
def test_mapping_file_round_trips_a_placement_and_eval_scores_it(tmp_path):
    spec = auto_spec((TP, AUTO), sizes=(4, 4))
    r = search(spec)
    d = r.evaluation.decision
    m = decision_to_mapping(spec, d)
    assert m["placement"] == list(d.placement.texts())
    p = tmp_path / "m.toml"
    p.write_text(mapping_to_toml(m))
    back = load_mapping(p, spec)
    assert back.placement == d.placement
    assert evaluate(spec, back).final_ns == r.evaluation.final_ns
    assert r.to_json()["placement"] == list(d.placement.texts())


def _mapping_issues(tmp_path, spec, body: str) -> str:
    p = tmp_path / "m.toml"
    p.write_text("shape = [4, 4]\nnum_tile = 1\n" + body)
    with pytest.raises(SpecError) as e:
        load_mapping(p, spec)
    return str(e.value)


def test_mapping_placement_is_checked_against_the_spec(tmp_path):
    spec = auto_spec((TP, AUTO), sizes=(4, 4))
    cfg = "[config]\n" + "".join(f"{k.name} = 0\n" for k in spec.graph.kernels)
    msg = _mapping_issues(tmp_path, spec, cfg)
    assert ("placement is required: the spec leaves the parallelism of system.network[1] to "
            "the search and 3 placements fit this shape") in msg  # fmt: skip
    msg = _mapping_issues(tmp_path, spec, 'placement = ["pp 4", "tp 4"]\n' + cfg)
    assert ("placement[0] must be 'tp 4': system.network[0].parallelism fixes the whole "
            "dimension to tp. Got 'pp 4' instead.") in msg  # fmt: skip
    msg = _mapping_issues(tmp_path, spec, 'placement = ["tp 4", "tp 2 x dp 2"]\n' + cfg)
    assert "placement[1] must not carry 'tp': placement[0] carries it" in msg
    msg = _mapping_issues(tmp_path, spec, 'placement = ["tp 4", "pp 4"]\n' + cfg)
    assert "PP = 4 must be <= the number of layers" in msg
    msg = _mapping_issues(tmp_path, spec, 'placement = ["tp 4"]\n' + cfg)
    assert "placement must be a list of 2 strings" in msg


def test_a_fixed_spec_accepts_only_its_own_placement(tmp_path):
    spec = auto_spec((TP, DP), sizes=(4, 4))
    cfg = "[config]\n" + "".join(f"{k.name} = 0\n" for k in spec.graph.kernels)
    p = tmp_path / "m.toml"
    p.write_text('shape = [4, 4]\nnum_tile = 1\nplacement = ["tp 4", "dp 4"]\n' + cfg)
    assert load_mapping(p, spec).placement is None
    msg = _mapping_issues(tmp_path, spec, 'placement = ["tp 4", "pp 2 x dp 2"]\n' + cfg)
    assert "placement[1] must be 'dp 4'" in msg


def test_report_and_json_show_the_placement():
    from dfsearch.report import format_evaluation
    from dfsearch.result import _evaluation_json

    spec = auto_spec((TP, AUTO), sizes=(4, 4))
    ev = search(spec).evaluation
    assert f"placement {ev.decision.placement}" in format_evaluation(ev)
    assert _evaluation_json(spec, ev)["placement"] == list(ev.decision.placement.texts())
    fixed = auto_spec((TP, DP), sizes=(4, 4))
    assert _evaluation_json(fixed, search(fixed).evaluation)["placement"] == ["tp 4", "dp 4"]
    assert math.isfinite(ev.final_ns)
