"""The training memory model, activation recomputation and sequence parallelism.

Closed forms: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models" (2022): a transformer layer keeps s b h (34 + 5 a s / h) bytes of activations for its
backward pass (fp16, a micro-batch of b sequences of s tokens, width h, a heads); with
tensor parallelism t and sequence parallelism s b h (34 + 5 a s / h) / t; with selective
recomputation (the attention core recomputed) as well 34 s b h / t; with full recomputation
each layer keeps its input, 2 s b h (/ t with sequence parallelism). Mixed-precision Adam holds
2 (fp16 weights) + 4 (fp32 gradients) + 12 (fp32 master weights and two moments) bytes per
parameter; a GPT layer has 12 h^2 parameters (no biases or norms in the generated graph).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dfsearch
from dfsearch.codes import Dim, MemoryModel, Phase, Recompute
from dfsearch.errors import InfeasibleError, SpecError
from dfsearch.kernels.generators import llm_fwdbwd
from dfsearch.loader import load_toml_spec
from dfsearch.report import format_run
from dfsearch.workloads import memory_model

H, A, S = 256, 4, 128  # width, heads, tokens
SH = S * H


def _spec(*, tp=4, pp=1, dp=1, layers=8, gb=8, mbs=2, training="", dram=0, graph="llm",
          style="kernel_by_kernel", extra=""):  # fmt: skip
    return load_toml_spec(
        f"""
[workload]
kind = "llm"
hidden_dim = {H}
num_head = {A}
head_dim = {H // A}
seq_len = {S}
num_layer = {layers}
global_batch_size = {gb}
micro_batch_size = {mbs}
[graph]
generator = "{graph}"
[system]
num_chip = {tp * pp * dp}
[system.accelerator]
cores = 8
systolic_width = 16
systolic_height = 16
sram_bytes = 1e12
freq_GHz = 1.0
[system.memory]
dram_bw_GBps = 1000
dram_bytes = {dram}
[[system.network]]
topology = "switch"
size = {tp}
link_bw_GBps = 100
parallelism = "tp"
[[system.network]]
topology = "switch"
size = {pp}
link_bw_GBps = 10
parallelism = "pp"
[[system.network]]
topology = "switch"
size = {dp}
link_bw_GBps = 10
parallelism = "dp"
[execution]
style = "{style}"
compute_util = 0.5
{extra}
[training]
{training}
""",
        file="t.toml",
        base_dir=Path("."),
    )


def _use(**kw):
    return dfsearch.run(_spec(**kw)).evaluation.dram_use


# --------------------------------------------------------------------------- the generator
@pytest.mark.parametrize("gated, g, f", [(0, 4, 4 * H), (1, 2, 3 * H)])
def test_generated_layer_keeps_the_published_activation_bytes(gated, g, f):
    """GeLU, g = a, f = 4h, w = 2: 34 s h + 5 a s^2 (Korthikanti eq. 1, b = 1). In general,
    w = 2: norms 2 x 2hs w, Q hs w, K and V g d s w each, softmax a s^2 w, attention dropout
    a s^2 (w + 1), projection hs w, two residual dropout masks hs, and the FFN activation
    2 f s w (GeLU: input, output) or 3 f s w (SwiGLU: gate, up, product)."""
    w, d = 2, H // A
    graph = llm_fwdbwd(hidden=H, num_head=A, head_dim=d, seq=S, word=w, num_kv_head=g,
                       ffn_dim=f, gated_ffn=gated)  # fmt: skip
    kept = sum(k.saved_bytes for k in graph.kernels if k.phase is Phase.FWD)
    ffn = (3 if gated else 2) * f * S * w
    expect = 4 * SH * w + SH * w + 2 * g * d * S * w + A * S * S * (2 * w + 1) + SH * w
    expect += 2 * SH + ffn
    assert kept == expect
    if not gated and g == A:
        assert kept == 34 * SH + 5 * A * S * S
    assert all(k.saved_bytes is None for k in graph.kernels if k.phase is not Phase.FWD)
    core = {k.name for k in graph.kernels if k.selective_recompute}
    assert core == {"MHA_GEMM_1", "SOFTMAX", "DropOut_1", "MHA_GEMM_2"}


# --------------------------------------------------------------------------- memory per chip
def test_parameters_gradients_and_adam_state():
    """12 h^2 parameters per layer over TP 4, 8 layers: 2 + 4 + 12 bytes each."""
    u = _use()
    params = 12 * H * H * 8 / 4
    assert (u.weights, u.gradients, u.optimizer) == (2 * params, 4 * params, 12 * params)


def test_optimizer_sharding_divides_the_adam_state_over_dp():
    """ZeRO-1 over DP 4: 12 bytes per parameter / 4; weights and gradients unchanged."""
    plain = _use(tp=1, dp=4, mbs=1)
    zero = _use(tp=1, dp=4, mbs=1, training="optimizer_sharding = true")
    params = 12 * H * H * 8
    assert plain.optimizer == 12 * params and zero.optimizer == 12 * params / 4
    assert (zero.weights, zero.gradients) == (plain.weights, plain.gradients)


def test_no_recompute_without_tensor_parallelism_is_the_published_formula():
    """TP 1, b = 2, 8 layers: 8 x 2 x (34 s h + 5 a s^2)."""
    assert _use(tp=1).activations == 8 * 2 * (34 * SH + 5 * A * S * S)


def test_sequence_parallelism_splits_every_kept_tensor_over_tp():
    """TP 4: 8 x 2 x (34 s h + 5 a s^2) / 4."""
    u = _use(training="sequence_parallel = true")
    assert u.activations == 8 * 2 * (34 * SH + 5 * A * S * S) / 4


def test_selective_recompute_drops_the_attention_scores():
    """Sequence parallel + selective: 8 x 2 x 34 s h / 4."""
    u = _use(training='recompute = "selective"\nsequence_parallel = true')
    assert u.activations == 8 * 2 * 34 * SH / 4


def test_full_recompute_keeps_layer_inputs_and_rebuilds_one_layer():
    """Sequence parallel + full: 8 layers x 2 x 2 s h / 4 (inputs) + one layer of one
    micro-batch rebuilt: 2 x (34 s h + 5 a s^2) / 4."""
    u = _use(training='recompute = "full"\nsequence_parallel = true')
    assert u.activations == 8 * 2 * 2 * SH / 4 + 2 * (34 * SH + 5 * A * S * S) / 4


@pytest.mark.parametrize("gb, in_flight", [(8, 4), (2, 2)])
def test_first_pipeline_stage_holds_min_pp_micro_batches(gb, in_flight):
    """1F1B, PP 4 over 8 layers (2 per stage), micro-batch 1: the first stage keeps
    min(PP, micro-batches) micro-batches of its 2 layers."""
    u = _use(tp=1, pp=4, gb=gb, mbs=1)
    assert u.activations == 2 * in_flight * (34 * SH + 5 * A * S * S)


def test_dram_total_is_the_breakdown_plus_the_working_set():
    ev = dfsearch.run(_spec(training="sequence_parallel = true")).evaluation
    u = ev.dram_use
    assert ev.memory_model is MemoryModel.TRAINING
    assert ev.dram_bytes >= u.weights + u.gradients + u.optimizer + u.activations > 0


def test_training_memory_can_make_a_mapping_infeasible():
    """The capacity holds DFModel's count (the weights of every weight kernel, forward and
    backward: twice the fp16 weights, + live activations) but not the 18 bytes per parameter
    of the training state: infeasible under the training model, feasible under "dfmodel"."""
    cap = 5 * (2 * 12 * H * H * 8 / 4)  # five times the fp16 weights
    dfsearch.run(_spec(dram=cap, training='memory_model = "dfmodel"'))
    with pytest.raises(InfeasibleError, match="DRAM"):
        dfsearch.run(_spec(dram=cap))


# --------------------------------------------------------------------------- the model in effect
def test_auto_means_training_for_llm_training_graphs_only():
    assert memory_model(_spec()) is MemoryModel.TRAINING
    assert memory_model(_spec(graph="llm-fwd")) is MemoryModel.DFMODEL
    spec = dfsearch.load(Path(dfsearch.__file__).parent / "examples" / "hpl_576gpu.toml")
    assert memory_model(spec) is MemoryModel.DFMODEL


def test_training_model_on_a_forward_graph_is_an_error():
    with pytest.raises(SpecError, match=r"training.memory_model can be 'training' only for a "
                                        r"training graph"):  # fmt: skip
        _spec(graph="llm-fwd", training='memory_model = "training"')


@pytest.mark.parametrize("value", [-1, 65])
def test_bytes_per_parameter_out_of_range(value):
    with pytest.raises(SpecError, match=rf"training.grad_bytes must be .* Got {value} instead"):
        _spec(training=f"grad_bytes = {value}")


# --------------------------------------------------------------------------- time
def _fixed(spec, decision):
    return dfsearch.evaluate(spec, decision)


def test_recomputed_kernels_run_twice():
    """Full: every forward kernel's compute and collective time doubles, backward ones stay;
    selective: only the attention core doubles."""
    base = _spec()
    dec = dfsearch.run(base).evaluation.decision
    plain = _fixed(base, dec)
    for mode, doubled in (("full", None), ("selective", {"MHA_GEMM_1", "SOFTMAX", "DropOut_1",
                                                         "MHA_GEMM_2"})):  # fmt: skip
        spec = _spec(training=f'recompute = "{mode}"')
        again = _fixed(spec, dec)
        for k, a, b in zip(spec.graph.kernels, plain.configs, again.configs):
            twice = k.phase is Phase.FWD and (doubled is None or k.name in doubled)
            factor = 2.0 if twice else 1.0
            assert b.compute_ns == pytest.approx(factor * a.compute_ns), (mode, k.name)
            assert b.network_ns == pytest.approx(factor * a.network_ns), (mode, k.name)
        assert again.workload_flop == plain.workload_flop  # model FLOP: the rerun not counted
    assert Recompute.from_label("full") is Recompute.FULL


def test_sequence_parallelism_splits_replicated_elementwise_kernels_and_rings_the_all_reduce():
    """TP 4: a replicated (sharding none) elementwise kernel does 1/4 of its work; a K-sharded
    GEMM's all-reduce is charged as reduce-scatter + all-gather, 2(p-1)/p instead of the
    half-volume (p-1)/p of DFModel's v1 all-reduce: twice the time."""
    base = _spec()
    dec = dfsearch.run(base).evaluation.decision
    plain = _fixed(base, dec)
    sp = _fixed(_spec(training="sequence_parallel = true"), dec)
    checked = 0
    for k, choice, a, b in zip(base.graph.kernels, dec.sharding, plain.configs, sp.configs):
        if not k.kind.has_k and choice is Dim.NO:
            assert b.compute_ns == pytest.approx(a.compute_ns / 4), k.name
            checked += 1
        if choice is Dim.K and k.phase is Phase.FWD:
            assert b.network_ns == pytest.approx(2 * a.network_ns), k.name
            checked += 1
    assert checked >= 4


# --------------------------------------------------------------------------- output
def test_report_and_json_show_the_breakdown(tmp_path):
    result = dfsearch.run(_spec(dram=8e9, training='recompute = "selective"'))
    text = format_run(result)
    assert "training memory model (recompute selective)" in text
    for word in ("weights", "grads", "optimizer", "activations", "workspace"):
        assert word in text
    mem = json.loads(json.dumps(result.to_json()))["memory"]
    parts = ("weights", "gradients", "optimizer", "activations", "data", "workspace")
    assert mem["model"] == "training" and mem["capacity"] == 8e9
    assert sum(mem[p] for p in parts) == pytest.approx(mem["total"])
