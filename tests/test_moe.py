"""The mixture-of-experts layer of the ``llm`` / ``llm-fwd`` generators and expert parallelism
(docs/model.md, "Mixture of experts").

Every expected value is a closed form written from the layer's algebra (h width, a heads,
d head size, g key/value heads, f expert FFN width, s tokens, w bytes per element, E experts,
k experts per token, n_f = 3 for SwiGLU experts and 2 for GeLU ones) or from the topology
formulas of docs/model.md ("Network topologies"), never from the generator's or the
evaluator's own output.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dfsearch
from dfsearch.codes import (
    Collective,
    ComputeType,
    Dim,
    KernelKind,
    MemoryModel,
    Parallelism,
    Phase,
    Status,
    Topology,
)
from dfsearch.decision import Decision
from dfsearch.errors import SpecError
from dfsearch.kernels.generators import generate, llm_fwd, llm_fwdbwd
from dfsearch.loader import load_spec
from dfsearch.quirks import Quirks
from dfsearch.spec import (
    Accelerator,
    Cost,
    Execution,
    Graph,
    LLMWorkload,
    Memory,
    NetworkDim,
    Spec,
    System,
    Training,
)
from dfsearch.system import ratios as network
from dfsearch.validate import validate_graph, validate_spec

EXAMPLE = Path(dfsearch.__file__).parent / "examples" / "moe_layer.toml"
SMALL = dict(hidden=64, num_head=4, head_dim=16, seq=16, word=2, num_kv_head=2, ffn_dim=96)
MIXTRAL = dict(hidden=4096, num_head=32, head_dim=128, seq=4096, word=2, num_kv_head=8,
               ffn_dim=14336, gated_ffn=1, num_expert=8, top_k=2)


def _by_name(g: Graph) -> dict:
    return {k.name: k for k in g.kernels}


def _gemm(g: Graph) -> int:
    return sum(k.flop for k in g.kernels if k.type is ComputeType.SYSTOLIC)


def _simd(g: Graph) -> int:
    return sum(k.flop for k in g.kernels if k.type is ComputeType.SIMD)


def _attention_gemm(h: int, d: int, g: int, s: int) -> int:
    """Q, K, V 2sh(h + 2gd), projection 2sh^2, scores and context 2 * 2 s^2 h."""
    return 2 * s * h * (h + 2 * g * d) + 2 * s * h * h + 2 * 2 * s * s * h


# --------------------------------------------------------------------------- graph structure
@pytest.mark.parametrize("gated, counts", [(0, (53, 71, 23, 23, 7, 28)),
                                           (1, (57, 81, 24, 25, 8, 30))])
def test_counts_order_and_validity(gated, counts):
    n, c, nf, nb, nu, cf = counts
    g = llm_fwdbwd(**SMALL, gated_ffn=gated, num_expert=4, top_k=2)
    assert (len(g.kernels), len(g.connections)) == (n, c)
    updates = [k for k in g.kernels if k.name.endswith("_weight_update")]
    assert sum(k.phase is Phase.FWD for k in g.kernels) == nf
    assert sum(k.phase is Phase.BWD for k in g.kernels) - len(updates) == nb
    assert len(updates) == nu
    assert validate_graph(g) == []
    assert [k.id for k in g.kernels] == list(range(1, n + 1))
    pos = g.index()
    assert all(pos[c.src] < pos[c.dst] for c in g.connections)
    k = _by_name(g)
    for conn in g.connections:  # every tensor is one of its consumer's inputs
        assert k[conn.src].output_bytes in (k[conn.dst].input_bytes, k[conn.dst].input2_bytes)
    fwd = llm_fwd(**SMALL, gated_ffn=gated, num_expert=4, top_k=2)
    assert (len(fwd.kernels), len(fwd.connections)) == (nf, cf)
    assert fwd.kernels == g.kernels[:nf]
    # the dense FFN is gone, the MoE kernels replace it between LayerNorm_2 and DropOut_3
    assert not {"FFN0", "FFN1", "GeLU", "FFN_gate", "FFN_up", "SwiGLU", "FFN_down"} & set(k)
    succ = {(c.src, c.dst) for c in g.connections}
    assert {("LayerNorm_2", "Router"), ("LayerNorm_2", "MoE_dispatch"),
            ("MoE_weighted_sum", "DropOut_3"), ("MoE_token_sum_bwd", "LayerNorm_2_bwd")} <= succ


def test_without_num_expert_the_layer_is_dense():
    for gated, n in ((0, 41), (1, 45)):
        g = llm_fwdbwd(**SMALL, gated_ffn=gated)
        assert g == llm_fwdbwd(**SMALL, gated_ffn=gated, num_expert=None, top_k=None)
        assert len(g.kernels) == n and all(k.num_expert == 0 for k in g.kernels)
        assert all(k.communication is not Collective.EXPERT_ALL_TO_ALL for k in g.kernels)


def test_kernel_shapes_weights_and_marks():
    h, f, s, w, e, topk = 64, 96, 16, 2, 4, 2
    g = llm_fwdbwd(**SMALL, gated_ffn=1, num_expert=e, top_k=topk)
    k = _by_name(g)
    ks = topk * s
    assert (k["Router"].kind, k["Router"].m, k["Router"].k, k["Router"].n) == \
        (KernelKind.GEMM_WEIGHT, e, h, s)
    assert k["Router"].weight_bytes == e * h * w and k["Router"].num_expert == 0
    for name in ("Expert_FFN_gate", "Expert_FFN_up"):
        assert (k[name].m, k[name].k, k[name].n) == (f, h, ks)
        assert k[name].weight_bytes == e * f * h * w  # all E experts' weights
        assert k[name].num_expert == e
    assert (k["Expert_FFN_down"].m, k["Expert_FFN_down"].k, k["Expert_FFN_down"].n) == (h, f, ks)
    for name in ("MoE_dispatch", "MoE_combine", "MoE_combine_bwd", "MoE_dispatch_bwd"):
        assert k[name].communication is Collective.EXPERT_ALL_TO_ALL
        assert (k[name].m, k[name].n) == (h, ks) and k[name].num_expert == e
        assert k[name].communication_bytes == h * ks * w  # the routed token rows
    for name in ("Expert_FFN_down_bwd_weight_update", "Expert_FFN_gate_bwd_weight_update",
                 "Expert_FFN_up_bwd_weight_update"):
        assert k[name].communication is Collective.ALL_REDUCE_PERIODIC
        assert k[name].num_expert == e and k[name].k == ks and k[name].tiling is Dim.K
    router_update = k["Router_bwd_weight_update"]
    assert router_update.num_expert == 0 and (router_update.m, router_update.k,
                                              router_update.n) == (h, s, e)


def test_top_k_default_is_two_and_at_most_num_expert():
    ks = {e: _by_name(llm_fwdbwd(**SMALL, num_expert=e))["MoE_dispatch"].n for e in (1, 2, 8)}
    assert ks == {1: 16, 2: 32, 8: 32}  # k s with k = min(2, E)
    assert llm_fwdbwd(**SMALL, num_expert=8) == llm_fwdbwd(**SMALL, num_expert=8, top_k=2)


@pytest.mark.parametrize("extra, path, fragment", [
    (dict(top_k=2), "graph.top_k", "only allowed with num_expert"),
    (dict(num_expert=4, top_k=5), "graph.top_k", "must be <= num_expert (4)"),
    (dict(num_expert=0), "graph.num_expert", "must be > 0"),
    (dict(num_expert=4, top_k=0), "graph.top_k", "must be > 0"),
    (dict(num_expert=2**20 + 1), "graph.num_expert", "must be <= 2^20"),
])
def test_bad_moe_parameters(extra, path, fragment):
    with pytest.raises(SpecError) as err:
        generate("llm", {**SMALL, **extra})
    assert any(i.path == path and fragment in i.message for i in err.value.issues), err.value


def test_expert_all_to_all_needs_num_expert():
    g = llm_fwdbwd(**SMALL, num_expert=4)
    bad = tuple(replace(k, num_expert=0) if k.name == "MoE_dispatch" else k for k in g.kernels)
    issues = validate_graph(replace(g, kernels=bad))
    assert any(i.path.endswith(".num_expert") and "expert_all_to_all" in i.message
               for i in issues)


# --------------------------------------------------------------------------- FLOP
@pytest.mark.parametrize("gated", [0, 1])
@pytest.mark.parametrize("e, topk", [(1, 1), (4, 1), (4, 2), (8, 2), (6, 3)])
def test_flop_closed_forms(gated, e, topk):
    """Per kernel: router 2Ehs, each expert GEMM 2 k s h f (k times the dense FFN GEMM on s
    tokens); per layer, forward GEMM F = attention + 2Ehs + 2 k s h f n_f, training 3F;
    forward SIMD 8hs + 2as^2 + Es + 2hks + fks, training SIMD 13hs + 4as^2 + 2Es + 5hks +
    n_f fks (one FLOP per output element of an elementwise kernel)."""
    h, a, d, g_, f, s = 64, 4, 16, 2, 96, 16
    n_f = 3 if gated else 2
    ks = topk * s
    full = llm_fwdbwd(**SMALL, gated_ffn=gated, num_expert=e, top_k=topk)
    fwd = llm_fwd(**SMALL, gated_ffn=gated, num_expert=e, top_k=topk)
    dense = _by_name(llm_fwdbwd(**SMALL, gated_ffn=gated))
    k = _by_name(full)
    assert k["Router"].flop == 2 * e * h * s == k["Router_bwd"].flop
    assert k["Router_bwd_weight_update"].flop == 2 * e * h * s
    experts = [x for x in full.kernels if x.name.startswith("Expert_")
               and x.type is ComputeType.SYSTOLIC]
    assert len(experts) == 3 * n_f
    for x in experts:
        assert x.flop == 2 * ks * h * f
        assert x.flop == topk * dense[x.name.removeprefix("Expert_")].flop
    big_f = _attention_gemm(h, d, g_, s) + 2 * e * h * s + 2 * ks * h * f * n_f
    assert _gemm(fwd) == big_f
    assert _gemm(full) == 3 * big_f
    assert _simd(fwd) == 8 * h * s + 2 * a * s * s + e * s + 2 * h * ks + f * ks
    assert _simd(full) == (13 * h * s + 4 * a * s * s + 2 * e * s + 5 * h * ks
                           + n_f * f * ks)


def test_mixtral_layer_flop_and_parameters():
    """Mixtral-8x7B-like layer (h 4096, a 32, g 8, f 14336, E 8, k 2, s 4096): forward GEMM
    2·4096·4096·(4096 + 2048) + 2·4096·4096² + 4·4096²·4096 + 2·8·4096·4096
    + 2·2·4096·4096·14336·3 = 3.50496e12; the weight GEMMs of one training step are
    6 x active parameters x tokens (active: attention, router, k experts)."""
    g = llm_fwdbwd(**MIXTRAL)
    fwd = 2 * 4096 * 4096 * 6144 + 2 * 4096 * 4096**2 + 4 * 4096**3 + 2 * 8 * 4096 * 4096 \
        + 2 * 2 * 4096 * 4096 * 14336 * 3
    assert _gemm(llm_fwd(**MIXTRAL)) == fwd == 3_504_961_748_992
    assert _gemm(g) == 3 * fwd
    active = 4096 * 6144 + 4096 * 4096 + 8 * 4096 + 2 * 3 * 4096 * 14336
    weight_gemms = [k for k in g.kernels if k.type is ComputeType.SYSTOLIC
                    and not k.name.startswith("MHA_GEMM")]
    assert sum(k.flop for k in weight_gemms) == 6 * active * 4096
    # all parameters: attention, router, E experts (the weight_bytes of the forward GEMMs)
    params = 4096 * 6144 + 4096 * 4096 + 8 * 4096 + 8 * 3 * 4096 * 14336
    assert sum(k.weight_bytes for k in g.kernels
               if k.phase is Phase.FWD and k.kind is KernelKind.GEMM_WEIGHT) == 2 * params


# --------------------------------------------------------------------------- saved bytes
@pytest.mark.parametrize("gated", [0, 1])
def test_saved_bytes(gated):
    """Forward kernels keep: gating probabilities E s w (TopK_gate), the dispatched rows
    h k s w (MoE_dispatch), the expert activation's tensors n_f f k s w and the combined
    expert outputs h k s w (MoE_combine); the router and the gated sum keep nothing. The
    attention part is the dense layer's (LayerNorm_2: 2hsw)."""
    h, f, s, w, e, topk = 64, 96, 16, 2, 4, 2
    ks = topk * s
    g = llm_fwdbwd(**SMALL, gated_ffn=gated, num_expert=e, top_k=topk)
    k = _by_name(g)
    act = "Expert_SwiGLU" if gated else "Expert_GeLU"
    assert k["TopK_gate"].saved_bytes == e * s * w
    assert k["MoE_dispatch"].saved_bytes == h * ks * w
    assert k[act].saved_bytes == (3 if gated else 2) * f * ks * w
    assert k["MoE_combine"].saved_bytes == h * ks * w
    assert k["Router"].saved_bytes == 0 and k["MoE_weighted_sum"].saved_bytes == 0
    assert k["LayerNorm_2"].saved_bytes == 2 * h * s * w
    dense = _by_name(llm_fwdbwd(**SMALL, gated_ffn=gated))
    dense_ffn = dense["SwiGLU" if gated else "GeLU"].saved_bytes
    moe_total = sum(x.saved_bytes for x in g.kernels if x.phase is Phase.FWD)
    dense_total = sum(x.saved_bytes for x in dense.values() if x.phase is Phase.FWD)
    assert moe_total - dense_total == (e * s * w + 2 * h * ks * w
                                       + (3 if gated else 2) * f * ks * w - dense_ffn)
    assert all(x.saved_bytes is None for x in g.kernels if x.phase is Phase.BWD)


# --------------------------------------------------------------------------- network terms
def test_expert_parallelism_rule():
    assert [network.expert_parallelism(8, dp) for dp in (1, 2, 4, 8, 16, 6)] == [1, 2, 4, 8, 8, 2]
    assert [network.experts_per_chip(8, dp) for dp in (1, 2, 4, 8, 16, 6)] == [8, 4, 2, 1, 1, 4]
    assert network.expert_parallelism(0, 8) == 1 and network.experts_per_chip(0, 8) == 1


def _system(topology: Topology, dp: int, tp: int = 2, bw: float = 50.0) -> System:
    return System(
        num_chip=tp * dp,
        accelerator=Accelerator(cores=64, systolic_width=4, systolic_height=4, sram_bytes=1e12,
                                freq_GHz=1.0),
        memory=Memory(dram_bw_GBps=1000.0),
        network=(NetworkDim(topology=Topology.RING, link_bw_GBps=300.0, size=tp,
                            parallelism=Parallelism.TP),
                 NetworkDim(topology=topology, link_bw_GBps=bw, size=dp,
                            parallelism=Parallelism.DP)),
    )


@pytest.mark.parametrize("topology, a2a, ar", [
    # LLM all-to-all ratio p^2/(4 L(p) beta) at p = EP, per message byte (a chip's bytes /
    # EP); reduce ratio at p = DP / EP, doubled (separate_rs_ag_for_ar) except on fc
    (Topology.RING, lambda p, b: p * p / (8 * b) / p, lambda p, b: 2 * (p - 1) / (p * b)),
    (Topology.SWITCH, lambda p, b: p / (4 * b) / p, lambda p, b: 2 * (p - 1) / (p * b)),
    (Topology.FC, lambda p, b: 1 / b / p, lambda p, b: 1 / (p * b)),
])
@pytest.mark.parametrize("e, dp", [(8, 1), (8, 2), (8, 8), (4, 8), (6, 4)])
def test_expert_ratios_closed_form(topology, a2a, ar, e, dp):
    system = _system(topology, dp)
    grp = network.groups(system, (2, dp))
    r = network.expert_ratios(system, grp, e, separate_rs_ag_for_ar=True, quirks=Quirks())
    ep = math.gcd(e, dp)
    assert (r.ep, r.experts_per_chip) == (ep, e // ep)
    assert r.all_to_all == pytest.approx(a2a(ep, 50.0) if ep > 1 else 0.0, rel=1e-15)
    reps = dp // ep
    assert r.gradient_all_reduce == pytest.approx(ar(reps, 50.0) if reps > 1 else 0.0,
                                                  rel=1e-15)


def _moe_spec(topology: Topology, dp: int, *, tp: int = 2, e: int = 4, topk: int = 2,
              gated: int = 1, memory: MemoryModel = MemoryModel.DFMODEL, **ex) -> Spec:
    g = llm_fwdbwd(hidden=64, num_head=4, head_dim=16, seq=16, word=2, num_kv_head=2,
                   ffn_dim=96, gated_ffn=gated, num_expert=e, top_k=topk)
    spec = Spec(
        graph=g, system=_system(topology, dp, tp),
        cost=Cost(link_price_per_GBps=2.0, switch_price_per_GBps=24.0, dram_price_per_GBps=1.0,
                  chip_price=1000.0, link_power_J_per_GB=(0.01, 0.02),
                  switch_power_J_per_GB=0.05, dram_power_J_per_GB=0.16, chip_power_W=300.0),
        execution=Execution(**{"num_config": 0, "compute_util": 0.5, "word_bytes": 2, **ex}),
        workload=LLMWorkload(hidden_dim=64, head_dim=16, num_head=4, seq_len=16, num_layer=2,
                             global_batch_size=4 * dp),
        training=Training(memory_model=memory),
    )
    assert validate_spec(spec) == []
    return spec


def _lowered(spec: Spec, dp: int, tp: int = 2, num_tile: int = 2):
    from dfsearch.cost.lower import Outer, lower
    from dfsearch.search.sharding import solve_spec_sharding

    shape = (tp, dp)
    sharding = solve_spec_sharding(spec, shape, num_tile).sharding
    n = len(spec.graph.kernels)
    return lower(spec, Outer(shape, tuple(sharding), 1, num_tile, n))


@pytest.mark.parametrize("dp", [1, 2, 4, 8])
@pytest.mark.parametrize("topology", [Topology.RING, Topology.SWITCH, Topology.FC])
def test_lowered_expert_terms(topology, dp):
    """Per chip: an expert weight GEMM holds E / EP experts' m x k shards; an expert
    all-to-all costs its per-chip, per-tile output x the all-to-all ratio per tile; an expert
    weight gradient's all-reduce costs E / EP experts' gradient shard x the reduce ratio
    over DP / EP replicas / micro-batches, once per execution."""
    spec = _moe_spec(topology, dp)
    p = _lowered(spec, dp)
    e, bw, word, tp = 4, 50.0, 2, 2
    ep, reps = math.gcd(e, dp), dp // math.gcd(e, dp)
    a2a = {Topology.RING: ep * ep / (8 * bw), Topology.SWITCH: ep / (4 * bw),
           Topology.FC: 1 / bw}[topology] / ep if ep > 1 else 0.0
    red = 0.0  # reduce ratio, not doubled (DFModel's half-volume all-reduce, the default)
    if reps > 1:
        red = 1 / (reps * bw) if topology is Topology.FC else (reps - 1) / (reps * bw)
    nmb = spec.workload.global_batch_size // dp
    names = p.names
    kernels = spec.graph.kernels
    seen = set()
    for i, k in enumerate(kernels):
        sm, sk, sn = p.shard_m[i], p.shard_k[i], p.shard_n[i]
        if k.kind is KernelKind.GEMM_WEIGHT:
            copies = e // ep if k.num_expert else 1
            assert p.kernels.weight_sram[i] == sm * sk * word * copies, names[i]
            seen.add("weight")
        if k.communication is Collective.EXPERT_ALL_TO_ALL:
            assert p.kernels.net_tile_ns[i] == pytest.approx(a2a * sm * sn * word, rel=1e-13)
            seen.add("a2a")
        if k.communication is Collective.ALL_REDUCE_PERIODIC and k.num_expert:
            want = red * sm * sn * word * (e // ep) / nmb
            assert p.kernels.net_once_ns[i] == pytest.approx(want, rel=1e-13, abs=0.0)
            seen.add("ar")
    assert seen == {"weight", "a2a", "ar"}
    assert tp == p.tp and dp == p.dp


def test_training_memory_counts_experts_per_chip():
    """With the training memory model, the weights (and so gradients and optimizer state)
    of a chip hold E / EP experts: going from DP 1 (EP 1, all 4 experts) to DP 4 (EP 4, one
    expert) removes 3/4 of the expert weights, the dense weights unchanged."""
    word = 2
    w = {}
    for dp in (1, 4):
        spec = _moe_spec(Topology.SWITCH, dp, memory=MemoryModel.TRAINING)
        p = _lowered(spec, dp)
        kernels = spec.graph.kernels
        expert = sum(p.shard_m[i] * p.shard_k[i] * word for i, k in enumerate(kernels)
                     if k.phase is Phase.FWD and k.kind is KernelKind.GEMM_WEIGHT
                     and k.num_expert)
        dense = sum(p.shard_m[i] * p.shard_k[i] * word for i, k in enumerate(kernels)
                    if k.phase is Phase.FWD and k.kind is KernelKind.GEMM_WEIGHT
                    and not k.num_expert)
        w[dp] = (expert, dense, p.dram.weights)
    for dp, (expert, dense, total) in w.items():
        assert total == spec.workload.num_layer * (dense + expert * 4 // math.gcd(4, dp))
    assert w[1][2] - w[4][2] == spec.workload.num_layer * 3 * w[1][0]


# --------------------------------------------------------------------------- the twin
def _decision_strategy(spec: Spec, dp: int, tp: int):
    from test_reference_differential import configs

    from dfsearch.kernels.graph import sharding_choices

    @st.composite
    def decisions(draw) -> Decision:
        sharding = []
        for k in spec.graph.kernels:
            tiled = Dim.M if k.tiling is Dim.OUTER else k.tiling
            legal = [c for c in sharding_choices(k)
                     if (Dim.M if c is Dim.OUTER else c) is not tiled]
            sharding.append(draw(st.sampled_from(legal)))
        return Decision(shape=(tp, dp), sharding=tuple(sharding), micro_batch_size=1,
                        num_tile=draw(st.sampled_from([1, 2, 4])), config=draw(configs(spec)))

    return decisions()


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_twin_matches_jitted_evaluator_on_moe(data):
    from test_reference_differential import compare

    topology = data.draw(st.sampled_from([Topology.RING, Topology.SWITCH, Topology.FC,
                                          Topology.MESH]))
    dp, tp = data.draw(st.sampled_from([1, 2, 4, 8])), data.draw(st.sampled_from([1, 2]))
    e = data.draw(st.sampled_from([2, 4, 6, 8]))
    spec = _moe_spec(
        topology, dp, tp=tp, e=e, topk=data.draw(st.integers(1, 2)),
        gated=data.draw(st.integers(0, 1)),
        num_config=data.draw(st.sampled_from([0, 2, 6])),
        separate_rs_ag_for_ar=data.draw(st.booleans()),
    )
    decision = data.draw(_decision_strategy(spec, dp, tp))
    compare(spec, decision)


def test_twin_matches_on_a_feasible_moe_mapping():
    """One mapping the search picks, compared field by field with the twin (feasible)."""
    from test_reference_differential import compare

    from dfsearch.api import run

    spec = _moe_spec(Topology.SWITCH, 8, e=4)
    result = run(spec)
    ref = compare(spec, result.evaluation.decision)
    assert ref.status is Status.OK


# --------------------------------------------------------------------------- the example
def test_example_is_the_documented_mixtral_layer():
    spec = load_spec(EXAMPLE)
    params = {**MIXTRAL}
    assert spec.graph == llm_fwdbwd(**params)
    assert len(spec.graph.kernels) == 57
    dp = next(d.size for d in spec.system.network if d.parallelism is Parallelism.DP)
    assert network.expert_parallelism(8, dp) == 8  # one expert per chip
