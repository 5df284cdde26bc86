"""LLM serving (``workload.kind = "llm_serving"``; docs/model.md, "LLM serving").

Physics that must hold, with the closed forms the tests compare against:

* **Bandwidth floor.** A decode step reads every weight of the model and the KV cache of the
  batch once per layer. Per chip and layer that is at least W / TP + B x KV / TP bytes, with
  W = word x (2 h^2 + 2 h g d + n_f f h) the layer's weights (Q and PROJ h x h, K and V
  h x g d, n_f = 3 gated or 2 FFN matrices f x h) and KV = 2 x L x g x d x kv_word the K and V
  of one sequence at the mean context L = prompt_len + ceil(output_len / 2). So
  TPOT >= num_layer x (W + B x KV) / (TP x DRAM bandwidth), whatever the objective.
* **Batching.** The weights are read once per step for the whole batch, so tokens/s grows
  with B until another term (compute, network) binds or the KV cache no longer fits.
* **Parallelism.** More TP splits each layer's reads over more chips (lower TPOT); more PP
  splits the layers over stages that work on different batches at once (higher tokens/s).
* **Capacity.** Weights of the stage's layers + the KV cache of the batch for the full
  context (prompt_len + output_len) must fit in DRAM.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dfsearch
from dfsearch.codes import ObjectiveKind, RunStatus, ServingPhase
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import evaluate_problem
from dfsearch.errors import SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_spec, load_toml_spec, replace_field
from dfsearch.report import format_run
from dfsearch.search import outer as outer_mod
from dfsearch.search.objective import Throughput
from dfsearch.workloads.serving import kv_heads_per_chip, serving_metrics

EXAMPLE = Path(dfsearch.__file__).parent / "examples" / "llama3_8b_decode_sn40l.toml"
TEXT = EXAMPLE.read_text()
# Llama-3-8B (the example): h 4096, a 32, g 8, d 128, f 14336 gated, 32 layers, BF16
H, A, G, D, F, LAYERS, WORD = 4096, 32, 8, 128, 14336, 32, 2
PROMPT, OUTPUT = 4096, 128
BW = 1638.4  # GB/s = bytes per ns
#: DFModel's modelled decode throughput for this setting (its paper; log: 826 us per token)
DFMODEL_TOKENS_PER_S = 1188.0

_TWO_DIMS = '''[[system.network]]
topology = "ring"
size = {tp}
link_bw_GBps = 25.0
parallelism = "tp"

[[system.network]]
topology = "ring"
size = {pp}
link_bw_GBps = 25.0
parallelism = "pp"
{latency}'''


def example(*, tp: int = 16, pp: int = 1, phase: str = "decode", batch: int = 1,
            objective: str | None = None, search: str = "", workload: str = "",
            system: str = "", pp_latency: float | None = None):  # fmt: skip
    """The shipped example with its network replaced by TP x PP rings (when PP > 1 or a PP
    latency is given) and the phase, batch and objective changed."""
    text = TEXT
    if pp > 1 or pp_latency is not None:
        lat = "" if pp_latency is None else f"link_latency_ns = {pp_latency}\n"
        net = _TWO_DIMS.format(tp=tp, pp=pp, latency=lat)
        text = re.sub(r'\[\[system.network\]\].*?parallelism = "tp"\n', net, text, flags=re.S)
    text = text.replace('phase = "decode"', f'phase = "{phase}"')
    text = text.replace("batch_size = 1 ", f"batch_size = {batch} ")
    obj = objective or ("ttft" if phase == "prefill" else "tpot")
    text = text.replace('objective = "tpot"', f'objective = "{obj}"\n{search}')
    text = text.replace("batch_size =", f"{workload}\nbatch_size =", 1)
    text = text.replace("[system.memory]\n", f"[system.memory]\n{system}\n", 1)
    return load_toml_spec(text, file="example", base_dir=EXAMPLE.parent)


def _run(spec):
    from dfsearch.search.engine import search

    return search(spec)


def layer_weight_bytes(h: int, g: int, d: int, f: int, gated: bool, word: int) -> int:
    return word * (2 * h * h + 2 * h * g * d + (3 if gated else 2) * f * h)


# --------------------------------------------------------------------------- the paper's case
def test_llama3_8b_decode_on_16_sn40l_is_close_to_dfmodel_and_memory_bound():
    """Per layer and chip at TP 16 the step reads the weight shards (Q, PROJ h^2/16, K, V
    g d h / 16, the FFN 3 f h / 16: 27,262,976 B) and one of the 8 KV heads (the 8 heads are
    split over 16 chips: ceil(8/16) = 1) at L = 4096 + 64: 2 x 4160 x 128 x 2 = 2,129,920 B;
    the memory time is their sum over 1638.4 GB/s. DFModel modelled 1188 tokens/s (SN40L
    measured 1100): we are within 10 % of it."""
    r = _run(load_spec(EXAMPLE))
    assert r.status is RunStatus.OPTIMAL
    ev = r.evaluation
    m = serving_metrics(ev)
    weights = (2 * H * H + 2 * H * G * D + 3 * F * H) * WORD / 16
    kv = 2 * (PROMPT + OUTPUT // 2) * D * WORD * kv_heads_per_chip(G, 1, 16)
    assert weights == 27_262_976 and kv == 2_129_920
    assert sum(c.memory_ns for c in ev.configs) == pytest.approx((weights + kv) / BW, rel=1e-12)
    assert m.step_ns == ev.final_ns == pytest.approx(LAYERS * ev.all_config_ii_ns, rel=1e-12)
    assert m.tokens_per_s == pytest.approx(1e9 / m.step_ns, rel=1e-12)
    assert abs(m.tokens_per_s / DFMODEL_TOKENS_PER_S - 1) < 0.10
    assert set(m.bounds) == {"memory"}
    assert m.e2e_ns == pytest.approx(OUTPUT * m.step_ns)
    assert m.kv_bytes == LAYERS * 2 * (PROMPT + OUTPUT) * D * WORD  # 1 head pair per chip


def test_report_and_json_carry_the_serving_metrics():
    r = _run(load_spec(EXAMPLE))
    text = format_run(r)
    assert "TPOT" in text and "tokens/s" in text and "end-to-end" in text
    js = r.to_json()["serving"]
    assert js["phase"] == "decode" and js["batch"] == 1
    assert js["tpot_s"] == js["step_latency_s"] == r.evaluation.final_s
    assert js["tokens_per_s"] == pytest.approx(1 / js["tpot_s"])
    assert js["bounds"] == ["memory"] * len(js["bounds"])


# --------------------------------------------------------------------------- the floor
@st.composite
def serving_texts(draw) -> str:
    """Random small serving specs (decode) on 1 to 8 chips, TP and PP searched or given."""
    heads = draw(st.sampled_from([2, 4, 8]))
    g = draw(st.sampled_from([h for h in (1, 2, heads) if heads % h == 0]))
    d = draw(st.sampled_from([8, 16, 32]))
    chips = draw(st.sampled_from([1, 2, 4, 8]))
    two = draw(st.booleans())
    net = [f'[[system.network]]\ntopology = "ring"\nsize = {"0" if two else chips}\n'
           'link_bw_GBps = 50.0\nparallelism = "tp"\n']  # fmt: skip
    if two:
        net.append('[[system.network]]\ntopology = "ring"\nsize = 0\nlink_bw_GBps = 50.0\n'
                   'parallelism = "pp"\n')  # fmt: skip
    objective = draw(st.sampled_from(["time", "tpot", "throughput"]))
    return f"""
[workload]
kind = "llm_serving"
phase = "decode"
hidden_dim = {heads * d}
num_head = {heads}
head_dim = {d}
num_kv_head = {g}
ffn_dim = {draw(st.sampled_from([64, 96, 256]))}
gated_ffn = {draw(st.integers(0, 1))}
num_layer = {draw(st.integers(8, 16))}
prompt_len = {draw(st.integers(1, 512))}
output_len = {draw(st.integers(1, 64))}
batch_size = {draw(st.sampled_from([0, 1, 3, 8]))}
max_batch_size = 16
kv_word_bytes = {draw(st.sampled_from([1, 2]))}
[graph]
generator = "llm-serving"
[system]
num_chip = {chips}
[system.accelerator]
cores = 64
systolic_width = 8
systolic_height = 8
sram_bytes = 1e12
freq_GHz = 1.0
link_latency_ns = {draw(st.sampled_from([0.0, 100.0]))}
[system.memory]
dram_bw_GBps = {draw(st.sampled_from([100.0, 1000.0]))}
{chr(10).join(net)}
[execution]
num_config = {draw(st.sampled_from(["1", "2", '"auto"']))}
overlap = "{draw(st.sampled_from(["perfect", "none", "compute_memory"]))}"
compute_util = {draw(st.sampled_from([0.0, 0.5]))}
word_bytes = 2
[search]
objective = "{objective}"
"""


@settings(deadline=None, derandomize=True, max_examples=20,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(serving_texts())
def test_decode_tpot_is_never_below_the_bandwidth_floor(text: str):
    """TPOT >= num_layer x (W + B x KV) / (TP x bandwidth) (module docstring), for every
    objective, searched or given batch, shape and placement."""
    spec = load_toml_spec(text, file="random", base_dir=Path("."))
    r = _run(spec)
    assert r.status is RunStatus.OPTIMAL, r.status
    ev = r.evaluation
    wl = spec.workload
    w = layer_weight_bytes(wl.hidden_dim, wl.num_kv_head, wl.head_dim, wl.ffn_dim,
                           bool(wl.gated_ffn), 2)  # fmt: skip
    b = ev.decision.micro_batch_size
    kv = 2 * (wl.prompt_len + -(-wl.output_len // 2)) * wl.num_kv_head * wl.head_dim
    kv *= wl.kv_word_bytes
    floor = wl.num_layer * (w + b * kv) / (ev.tp * spec.system.memory.dram_bw_GBps)
    assert ev.final_ns >= floor * (1 - 1e-12)
    if spec.search.objective is not ObjectiveKind.THROUGHPUT and wl.batch_size == 0:
        assert b == 1  # the smallest batch wins a latency objective


# --------------------------------------------------------------------------- batching
def test_tokens_per_second_grow_with_the_batch_until_the_network_binds():
    """B = 1..256 on the example: weights are read once per step, so tokens/s rises with
    every doubling; the KV reads and the TP all-reduces grow with B, and once the
    all-reduces of B x h x word bytes over 25 GB/s links bind, a doubling gains < 10 %."""
    rows = []
    for b in [2**i for i in range(9)]:
        ev = _run(example(batch=b, objective="throughput")).evaluation
        rows.append(serving_metrics(ev))
    rates = [m.tokens_per_s for m in rows]
    assert all(x < y for x, y in itertools.pairwise(rates))
    assert rates[1] / rates[0] > 1.8  # nearly free at first: the weights dominate
    assert rows[0].bounds[0] == "memory" and rows[-1].bounds[0] == "network"
    assert rates[-1] / rates[-2] < 1.10
    searched = _run(example(batch=0, objective="throughput")).evaluation
    assert searched.decision.micro_batch_size == 256


def test_compute_binds_a_large_batch_on_a_slow_chip():
    """With 1 % of the peak and overlapped terms the FLOP, which grow as B, bind at large B:
    then the step time is proportional to B and tokens/s stop growing."""
    slow = TEXT.replace("compute_util = 0.9", "compute_util = 0.01")
    slow = slow.replace('overlap = "none"', 'overlap = "perfect"')
    rates, bounds = [], []
    for b in (1, 128, 256):
        t = slow.replace("batch_size = 1 ", f"batch_size = {b} ")
        ev = _run(load_toml_spec(t, file="slow", base_dir=EXAMPLE.parent)).evaluation
        m = serving_metrics(ev)
        rates.append(m.tokens_per_s)
        bounds.append(m.bounds[0])
    assert bounds[0] == "memory" and bounds[-1] == "compute"
    assert rates[0] < rates[1] <= rates[2] < 1.05 * rates[1]


def test_capacity_caps_the_searched_batch_and_then_nothing_fits():
    """DRAM per chip: weights 32 x 27,262,976 B + KV 32 x 2 x ceil(8B/16) x 128 x (4096 +
    128) x 2 B (+ one layer's live activations). With 4.5 GB, B = 64 fits (KV 2.2 GB) and
    B = 128 does not (KV 4.43 GB); with 0.5 GB not even the weights fit."""
    weights = LAYERS * 27_262_976

    def kv(b: int) -> int:
        return LAYERS * 2 * kv_heads_per_chip(G, b, 16) * D * (PROMPT + OUTPUT) * WORD

    assert weights + kv(64) < 4.5e9 < weights + kv(128)
    ev = _run(replace_field(example(batch=0, objective="throughput"),
                            "system.memory.dram_bytes", 4.5e9)).evaluation  # fmt: skip
    assert ev.decision.micro_batch_size == 64
    assert ev.dram_use.data == kv(64) and ev.dram_use.weights == weights
    r = _run(replace_field(example(batch=128), "system.memory.dram_bytes", 4.5e9))
    assert r.status is RunStatus.INFEASIBLE
    dram = [v for v in r.violations if v.constraint.startswith("dram")]
    assert dram and all(v.needed >= weights + kv(128) for v in dram)
    tiny = _run(replace_field(example(), "system.memory.dram_bytes", 0.5e9))
    assert tiny.status is RunStatus.INFEASIBLE


# --------------------------------------------------------------------------- TP x PP
def test_more_tp_lowers_tpot_and_more_pp_raises_throughput_on_16_chips():
    """The paper's trends on the SN40L-like system (TP x PP = 16, batch 1): each halving of
    TP doubles every chip's weight reads per layer (TPOT up); each doubling of PP halves a
    stage's layers while the layer time less than doubles (tokens/s up)."""
    tpot, rate = [], []
    for tp in (16, 8, 4, 2, 1):
        ev = _run(example(tp=tp, pp=16 // tp)).evaluation
        m = serving_metrics(ev)
        tpot.append(m.step_ns)
        rate.append(m.tokens_per_s)
    assert all(x < y for x, y in itertools.pairwise(tpot))
    assert all(x < y for x, y in itertools.pairwise(rate))


def test_pipeline_hop_closed_form_and_per_dimension_latency():
    """TP 8 x PP 2, batch 4: p2p = (PP - 1) x (B x 1 token x h x word / TP / 25 GB/s +
    latency), with the PP dimension's own link_latency_ns (40 ns) instead of the chip's
    150 ns; prefill sends B x prompt_len tokens."""
    ev = _run(example(tp=8, pp=2, batch=4, pp_latency=40.0)).evaluation
    assert ev.p2p_ns == pytest.approx(4 * H * WORD / 8 / 25.0 + 40.0, rel=1e-12)
    assert ev.final_ns == pytest.approx(LAYERS * ev.all_config_ii_ns + ev.p2p_ns, rel=1e-12)
    m = serving_metrics(ev)
    assert m.stage_ns == pytest.approx(16 * ev.all_config_ii_ns + ev.p2p_ns, rel=1e-12)
    assert m.tokens_per_s == pytest.approx(4 * 1e9 / m.stage_ns, rel=1e-12)
    default = _run(example(tp=8, pp=2, batch=4)).evaluation
    assert default.p2p_ns == pytest.approx(4 * H * WORD / 8 / 25.0 + 150.0, rel=1e-12)
    spec = example(tp=8, pp=2, pp_latency=40.0)
    assert load_toml_spec(spec_to_toml(spec), file="x", base_dir=EXAMPLE.parent) == spec


def test_prefill_lowering_closed_forms():
    """Prefill at TP 16, batch 2, one tile: a weight GEMM's N is B x prompt_len tokens (its
    weight read once), LayerNorm's rows are B x h; the reads are the weight shards only."""
    spec = example(phase="prefill", batch=2)
    names = [k.name for k in spec.graph.kernels]
    sharding = dfsearch.search.engine._sharding(spec, (16,), 1, {})
    p = lower(spec, Outer((16,), sharding, 2, 1, 1))
    q, ln = names.index("Q"), names.index("LayerNorm_1")
    assert p.shard_n[q] == 2 * PROMPT and p.shard_m[q] * p.shard_k[q] == H * H // 16
    assert p.shard_m[ln] * p.shard_n[ln] >= 2 * H * PROMPT // 16
    reads = sum(p.kernels.memory_bytes)
    assert reads == layer_weight_bytes(H, G, D, F, True, WORD) / 16
    assert p.constants.batch_mult == LAYERS and p.constants.p2p_ns == 0
    assert p.step.phase is ServingPhase.PREFILL and p.step.tokens_per_step == 2 * PROMPT


# --------------------------------------------------------------------------- objectives
def test_throughput_bound_is_exact_at_the_mapping_and_below_it_elsewhere():
    r = _run(example(tp=8, pp=2, batch=4, objective="throughput"))
    ev = r.evaluation
    problem = lower(r.spec, Outer(ev.decision.shape, ev.decision.sharding, 4, 1,
                                  len(ev.configs), ev.decision.placement))  # fmt: skip
    assert evaluate_problem(r.spec, problem, ev.decision).final_ns == ev.final_ns
    t = Throughput()
    assert t.bound(problem, ev.final_ns) == pytest.approx(t.value(ev), rel=1e-12)
    assert t.bound(problem, 0.9 * ev.final_ns) < t.value(ev)


def test_latency_objectives_solve_only_batch_one_and_throughput_every_batch():
    spec = example(batch=0)
    assert outer_mod.micro_batch_sizes(spec, (16,)) == [1]
    thr = example(batch=0, objective="throughput", workload="max_batch_size = 8")
    assert outer_mod.micro_batch_sizes(thr, (16,)) == [1, 2, 4, 8]


def test_a_latency_bound_keeps_the_largest_batch_that_meets_it():
    """Throughput under latency_bound_ms = 2: the chosen batch meets it and the next power
    of two does not (TPOT grows with B)."""
    r = _run(example(batch=0, objective="throughput", search="latency_bound_ms = 2.0"))
    b = r.evaluation.decision.micro_batch_size
    assert r.evaluation.final_ns <= 2e6 and r.status is RunStatus.OPTIMAL
    assert _run(example(batch=2 * b)).evaluation.final_ns > 2e6


def test_an_unreachable_latency_bound_is_infeasible_with_its_excess():
    best = _run(example()).evaluation.final_ns
    r = _run(example(objective="throughput", search="latency_bound_ms = 0.5"))
    assert r.status is RunStatus.INFEASIBLE
    (v,) = [v for v in r.violations if v.constraint == "latency"]
    assert v.capacity == 0.5e6 and v.needed >= best
    assert "search.latency_bound_ms" in v.message()


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (dict(objective="ttft"), "search.objective", "must fit workload.phase = 'decode'"),
        (dict(phase="prefill", objective="tpot"), "search.objective", "'ttft'"),
        (dict(workload="num_kv_head = 5\n"), "workload.num_kv_head", "must divide"),
        (dict(batch=512), "workload.batch_size", "must be <= workload.max_batch_size = 256"),
    ],
)
def test_serving_rules_name_the_field(change, path, words):
    text_change = dict(change)
    if "workload" in text_change:  # a second num_kv_head line would be a TOML error
        text = TEXT.replace("num_kv_head = 8 ", "num_kv_head = 5 ")
        with pytest.raises(SpecError) as e:
            load_toml_spec(text, file="x", base_dir=EXAMPLE.parent)
    else:
        with pytest.raises(SpecError) as e:
            example(**text_change)
    assert any(i.path == path and words in i.message for i in e.value.issues), e.value


def test_serving_objectives_are_refused_for_other_workloads():
    llm = Path(dfsearch.__file__).parent / "examples" / "llm_decode.toml"
    text = llm.read_text() + '\n[search]\nobjective = "throughput"\nlatency_bound_ms = 3\n'
    with pytest.raises(SpecError) as e:
        load_toml_spec(text, file="x", base_dir=llm.parent)
    paths = {i.path for i in e.value.issues}
    assert paths == {"search.objective", "search.latency_bound_ms"}


def test_mean_context_is_linear_in_the_step():
    """The mean of the per-step KV reads over output_len steps (context P + i + 1) equals the
    read at the mean context P + (O + 1) / 2; the graph rounds it up to P + ceil(O / 2)."""
    from dfsearch.kernels.generators import serving_context

    p, o = 4096, 128
    mean = sum(p + i + 1 for i in range(o)) / o
    assert mean == p + (o + 1) / 2
    assert serving_context(p, o) == math.ceil(p + o / 2) == 4160


def test_a_searched_batch_at_its_ceiling_says_the_ceiling_binds():
    """Throughput grows with the batch here (the decode batch sweep of docs/serving.md), so
    the search takes the largest power of two <= max_batch_size and says the ceiling binds;
    a latency objective takes batch 1, below the ceiling: no note."""
    r = _run(example(batch=0, objective="throughput", workload="max_batch_size = 12"))
    assert r.evaluation.decision.micro_batch_size == 8
    assert ("batch 8 is the largest searched (workload.max_batch_size = 12): the ceiling binds, a larger "
            "batch was not tried; raise workload.max_batch_size to search past it") in r.search.notes
    low = _run(example(batch=0, workload="max_batch_size = 12"))
    assert low.evaluation.decision.micro_batch_size == 1
    assert not any("largest searched" in n for n in low.search.notes)


def test_a_serving_rows_throughput_is_steps_per_second_of_the_system_not_one_over_latency():
    """TP 8 x PP 2: two batches in flight, so the system's steps per second (tokens/s over
    batch x tokens per step) exceed 1 / TPOT."""
    from dfsearch.study.point import Task, run_point

    row = run_point(Task(0, example(tp=8, pp=2, batch=4), 0))
    assert row["throughput_per_s"] == pytest.approx(row["tokens_per_s"] / (row["batch"] * 1), rel=1e-12)
    assert row["throughput_per_s"] > 1.5 / row["final_s"]
