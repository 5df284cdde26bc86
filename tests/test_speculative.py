"""Speculative decoding (``[speculative]``; docs/model.md, "Speculative decoding").

Closed forms the tests compare against:

* **Expected tokens per verification step.** Sequence (Leviathan et al., 2023): the draft
  proposes K tokens; token i is kept only if it and every earlier one is accepted, each
  independently with probability alpha, so level i survives with alpha^i; the target adds one
  token of its own after the last kept one. E = sum_{i=0..K} alpha^i =
  (1 - alpha^(K+1)) / (1 - alpha), K + 1 at alpha = 1, 1 + alpha at K = 1.
  Tree (binary, depth K): every node has 2 children, each accepted with alpha independently;
  the accepted path goes one level deeper when EITHER child is accepted, with
  beta = 1 - (1 - alpha)^2, so E = (1 - beta^(K+1)) / (1 - beta); 2^K tokens are verified.
* **Cost.** One speculative step = K draft decode steps + one target verification step of
  K + 1 (tree 2^K) tokens per sequence on the SAME shape: K x T_draft + T_verify, and the
  time per token is that / E.
* **No acceptance.** As alpha -> 0, E -> 1 and the time per token -> K x T_draft + T_verify.
  The verification step does at least the work of a plain decode step on its shape (every
  term grows with the tokens), and the plain decode is the optimum over shapes, so
  T_verify >= TPOT_plain and the speedup TPOT_plain / (K T_draft + T_verify) < 1. In general
  time per token >= T_verify / E >= TPOT_plain / E, so speedup <= E.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

import dfsearch
from dfsearch.codes import RunStatus, SpeculativeScheme
from dfsearch.errors import SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_toml_spec, replace_field
from dfsearch.report import format_run
from dfsearch.search.engine import search
from dfsearch.workloads.speculative import (
    draft_spec,
    expected_tokens,
    verify_spec,
    verify_tokens,
)

SEQ, TREE = SpeculativeScheme.SEQUENCE, SpeculativeScheme.TREE
EXAMPLES = Path(dfsearch.__file__).parent / "examples"

SMALL = """
[workload]
kind = "llm_serving"
phase = "{phase}"
hidden_dim = 256
num_head = 8
head_dim = 32
num_kv_head = 2
ffn_dim = 512
gated_ffn = 1
num_layer = 8
prompt_len = 256
output_len = 32
batch_size = {batch}
[graph]
generator = "llm-serving"
[system]
num_chip = 4
[system.accelerator]
cores = 64
systolic_width = 8
systolic_height = 8
sram_bytes = 1e9
freq_GHz = 1.0
link_latency_ns = 100.0
[system.memory]
dram_bw_GBps = 100.0
dram_bytes = {dram}
[[system.network]]
topology = "ring"
size = 0
link_bw_GBps = 10.0
parallelism = "tp"
[[system.network]]
topology = "ring"
size = 0
link_bw_GBps = 10.0
parallelism = "pp"
[execution]
num_config = "auto"
overlap = "none"
compute_util = 0.9
word_bytes = 2
[search]
objective = "{objective}"
[speculative]
hidden_dim = 64
num_head = 2
head_dim = 32
num_layer = 2
window = {window}
acceptance_rate = {alpha}
scheme = "{scheme}"
"""


def small(*, window: int = 3, alpha: float = 0.7, scheme: str = "sequence", batch: int = 2,
          phase: str = "decode", objective: str = "tpot", dram: float = 1e12, extra: str = ""):  # fmt: skip
    text = SMALL.format(window=window, alpha=alpha, scheme=scheme, batch=batch, phase=phase,
                        objective=objective, dram=dram) + extra  # fmt: skip
    return load_toml_spec(text, file="small", base_dir=Path("."))


# --------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.8, 0.99])
def test_expected_tokens_is_the_geometric_sum(k: int, alpha: float):
    beta = 1 - (1 - alpha) ** 2
    assert expected_tokens(alpha, k, SEQ) == pytest.approx(sum(alpha**i for i in range(k + 1)))
    assert expected_tokens(alpha, k, TREE) == pytest.approx(sum(beta**i for i in range(k + 1)))
    assert expected_tokens(alpha, k, TREE) > expected_tokens(alpha, k, SEQ)


def test_expected_tokens_edge_cases():
    for k in (1, 3, 8):
        assert expected_tokens(1.0, k, SEQ) == expected_tokens(1.0, k, TREE) == k + 1
    assert expected_tokens(0.6, 1, SEQ) == pytest.approx(1.6)
    assert expected_tokens(0.6, 1, TREE) == pytest.approx(1 + 0.84)
    assert expected_tokens(1e-9, 5, SEQ) == pytest.approx(1.0)
    assert (verify_tokens(3, SEQ), verify_tokens(3, TREE), verify_tokens(1, TREE)) == (4, 8, 2)


# --------------------------------------------------------------------------- the steps
def test_the_verification_graph_processes_the_tokens_and_reads_weights_and_kv_once():
    spec = small(window=3)
    plain, ver = spec.graph, verify_spec(spec).graph
    assert verify_spec(spec).workload.tokens_per_step == 4
    by = {k.name: k for k in ver.kernels}
    for k in plain.kernels:
        v = by[k.name]
        if k.kind.name == "GEMM_WEIGHT":
            assert v.n == 4 * k.n and v.memory_bytes == k.memory_bytes  # weights read once
        assert v.flop >= k.flop
    ctx = 256 + 16  # prompt + ceil(32 / 2), +3 for the verified tokens
    assert by["K_cache"].memory_bytes == 2 * 32 * (ctx + 3) * 2
    same = dataclasses.replace(spec.speculative, hidden_dim=256, num_head=8, num_kv_head=2,
                               ffn_dim=512, gated_ffn=1, num_layer=8)  # fmt: skip
    assert draft_spec(dataclasses.replace(spec, speculative=same)).graph == plain


def test_cost_is_k_draft_steps_plus_one_verification_step_run_separately():
    spec = small(window=3, alpha=0.7)
    r = dfsearch.run(spec)
    sp = r.speculative
    assert sp is not None and sp.draft is not None and sp.optimal
    pinned = (sp.shape, sp.placement)
    d = search(draft_spec(spec), pinned=pinned).evaluation.final_ns
    v = search(verify_spec(spec), pinned=pinned).evaluation.final_ns
    assert sp.draft_ns == d and sp.verify_ns == v
    assert sp.cycle_ns == pytest.approx(3 * d + v)
    e = (1 - 0.7**4) / (1 - 0.7)
    assert sp.expected_tokens == pytest.approx(e)
    assert sp.time_per_token_ns == pytest.approx((3 * d + v) / e)
    assert sp.speedup == pytest.approx(r.evaluation.final_ns / ((3 * d + v) / e))
    assert sp.tokens_per_s_replica == pytest.approx(2 * e * 1e9 / (3 * d + v))
    assert sp.plain_tpot_ns == r.evaluation.final_ns


def test_the_best_shape_is_the_minimum_over_every_shape():
    """The composition over shapes: no (shape, placement) gives a smaller K T_d + T_v."""
    from dfsearch.search import outer as outer_mod

    spec = small(window=2, alpha=0.9)
    sp = dfsearch.run(spec).speculative
    dr, vr = draft_spec(spec), verify_spec(spec)
    cycles = []
    for shape in outer_mod.shapes(vr):
        for pl in outer_mod.placements(vr, shape):
            d, v = search(dr, pinned=(shape, pl)), search(vr, pinned=(shape, pl))
            if d.search.candidates == 0:  # PP 4 > the draft's 2 layers: not admitted
                assert shape[1] > 2
                continue
            cycles.append(2 * d.evaluation.final_ns + v.evaluation.final_ns)
    assert len(cycles) == sp.shapes > 1
    assert sp.cycle_ns == pytest.approx(min(cycles))


@pytest.mark.parametrize("scheme", ["sequence", "tree"])
def test_no_acceptance_means_a_slowdown_and_the_speedup_never_exceeds_e(scheme: str):
    low = dfsearch.run(small(alpha=1e-6, scheme=scheme)).speculative
    assert low.expected_tokens == pytest.approx(1.0, rel=1e-5)
    assert low.verify_ns >= low.plain_tpot_ns
    assert low.speedup < 1.0
    for alpha in (0.5, 1.0):
        sp = dfsearch.run(small(alpha=alpha, scheme=scheme)).speculative
        assert sp.speedup <= sp.expected_tokens * (1 + 1e-12)


def test_the_verification_step_keeps_the_bandwidth_floor():
    """T_verify >= num_layer x (W + B x KV) / (TP x bandwidth): weights and the KV cache of
    the batch are read once per layer however many tokens are verified."""
    spec = small(window=4, scheme="tree", batch=2)
    r = search(verify_spec(spec))
    ev = r.evaluation
    h, g, d, f, word = 256, 2, 32, 512, 2
    w = word * (2 * h * h + 2 * h * g * d + 3 * f * h)
    kv = 2 * (256 + 16 + 16 - 1) * g * d * word
    floor = 8 * (w + 2 * kv) / (ev.tp * 100.0)
    assert ev.final_ns >= floor * (1 - 1e-12)
    assert ev.step.tokens == 16


def test_draft_and_target_must_fit_in_dram_together():
    """A DRAM that holds each model alone but not both: no speculative shape."""
    spec = small(dram=2.6e6)
    alone_target = search(verify_spec(spec))
    alone_draft = search(draft_spec(spec))
    assert alone_target.evaluation is not None and alone_draft.evaluation is not None
    sp = dfsearch.run(spec).speculative
    assert sp.draft is None and any("DRAM" in n for n in sp.notes)
    assert sp.optimal  # their weights and KV caches alone overflow: proven infeasible
    assert "no feasible shape" in format_run(dfsearch.run(spec))


def test_report_json_and_determinism():
    spec = small(scheme="tree", window=2, alpha=0.6)
    a, b = dfsearch.run(spec), dfsearch.run(spec)
    ja, jb = a.to_json()["speculative"], b.to_json()["speculative"]
    for j in (ja, jb):
        j.pop("evaluations")
    assert json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)
    assert ja["verify_tokens"] == 4 and ja["scheme"] == "tree"
    assert ja["speedup"] == pytest.approx(ja["plain_tpot_s"] / ja["time_per_token_s"])
    text = format_run(a)
    assert "specdec" in text and "speedup" in text and "(K x T_draft + T_verify) / E" in text


# --------------------------------------------------------------------------- the spec
def test_speculative_table_round_trips():
    spec = small(scheme="tree")
    assert load_toml_spec(spec_to_toml(spec), file="x", base_dir=Path(".")) == spec
    assert replace_field(spec, "speculative.window", 5).speculative.window == 5


@pytest.mark.parametrize(("kw", "path"), [
    (dict(window=0), "speculative.window"),
    (dict(window=17), "speculative.window"),
    (dict(alpha=0.0), "speculative.acceptance_rate"),
    (dict(alpha=1.5), "speculative.acceptance_rate"),
    (dict(batch=0), "workload.batch_size"),
    (dict(objective="throughput"), "search.objective"),
    (dict(phase="prefill", objective="ttft"), "speculative"),
    (dict(extra="num_kv_head = 3\n"), "speculative.num_kv_head"),
])  # fmt: skip
def test_bad_speculative_tables_are_rejected(kw: dict, path: str):
    with pytest.raises(SpecError) as exc:
        small(**kw)
    assert any(i.path == path for i in exc.value.issues), exc.value


def test_speculative_needs_a_serving_workload():
    text = (EXAMPLES / "llm_decode.toml").read_text() + (
        "\n[speculative]\nhidden_dim = 64\nnum_head = 2\nhead_dim = 32\nnum_layer = 2\n"
        "window = 2\nacceptance_rate = 0.5\n")  # fmt: skip
    with pytest.raises(SpecError) as exc:
        load_toml_spec(text, file="x", base_dir=EXAMPLES)
    assert any(i.path == "speculative" for i in exc.value.issues)


def test_prefill_rejects_tokens_per_step():
    text = SMALL.split("[speculative]")[0].format(
        phase="prefill", batch=1, dram=1e12, objective="ttft", window=1, alpha=1, scheme="x"
    )
    text = text.replace("batch_size = 1", "batch_size = 1\ntokens_per_step = 2")
    with pytest.raises(SpecError) as exc:
        load_toml_spec(text, file="x", base_dir=Path("."))
    assert any(i.path == "workload.tokens_per_step" for i in exc.value.issues)


def test_shipped_example_runs_and_is_proven():
    r = dfsearch.run(EXAMPLES / "llama3_405b_specdec_sn40l.toml")
    sp = r.speculative
    assert r.status is RunStatus.OPTIMAL and sp.optimal
    assert sp.expected_tokens == pytest.approx((1 - 0.8**5) / 0.2)
    assert 1.0 < sp.speedup <= sp.expected_tokens
    # the draft step is the plain Llama-3-8B decode on the same 16 chips (the 8B example)
    plain8b = dfsearch.run(EXAMPLES / "llama3_8b_decode_sn40l.toml").evaluation.final_ns
    assert math.isclose(sp.draft_ns, plain8b, rel_tol=1e-12)


def test_draft_dimensions_have_finite_ranges():
    with pytest.raises(SpecError, match=r"speculative.num_layer must be between 1 and 2\^24"):
        replace_field(small(), "speculative.num_layer", 2**30)
