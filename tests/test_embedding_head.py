"""The embedding and the LM head of a stacked LLM graph (issue 14, item 1): the kernels and
connections of ``[graph] embedding`` / ``lm_head``, their FLOP and weights against the closed
forms of docs/model.md ("Embedding and LM head"), the spec rules (a vocabulary; one graph
execution means one pipeline stage) and a search of a whole-model spec."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch import api
from dfsearch.cli import app
from dfsearch.codes import Collective, Dim, KernelKind, Phase
from dfsearch.errors import SpecError
from dfsearch.kernels.generators import generate
from dfsearch.loader import load_toml_spec
from dfsearch.spec import Graph, Spec

H, A, D, S, W, V = 64, 4, 16, 8, 2, 100
SMALL = {"hidden": H, "num_head": A, "head_dim": D, "seq": S, "word": W}
ENDS = {"vocab_size": V, "embedding": True, "lm_head": True}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpt3_1.5B_a100x4.toml"

#: the kernels the ends add, in graph order (training)
HEAD_FWD = ["Final_LayerNorm", "LM_Head", "LM_Loss"]
HEAD_BWD = ["LM_Loss_bwd", "LM_Head_bwd", "Final_LayerNorm_bwd", "LM_Head_bwd_weight_update"]
_SUFFIX = re.compile(r"_L\d+$")


def _by_name(g: Graph) -> dict:
    return {k.name: k for k in g.kernels}


def _links(g: Graph) -> set[tuple[str, str]]:
    return {(c.src, c.dst) for c in g.connections}


def _ends_flop(s: int, h: int, v: int, *, training: bool) -> float:
    """docs/model.md: the head 2shV forward and 4shV backward; the elementwise kernels
    s(2h + V) forward and again backward."""
    fwd = 2 * s * h * v + s * v + 2 * s * h
    return float(fwd + 4 * s * h * v + s * v + 2 * s * h) if training else float(fwd)


# --------------------------------------------------------------------------- structure
@pytest.mark.parametrize("n", [1, 2, 3])
def test_training_graph_order_and_links(n: int) -> None:
    plain = generate("llm", {**SMALL, "layers": n}) if n > 1 else None
    g = generate("llm", {**SMALL, **ENDS, "layers": n})
    assert (len(g.kernels), len(g.connections)) == (41 * n + 9, 55 * n - 2 + 11)
    assert [k.id for k in g.kernels] == list(range(1, len(g.kernels) + 1))
    one = generate("llm", SMALL)
    fwd = [k.name for k in one.kernels if k.phase is Phase.FWD]
    bwd = [k.name for k in one.kernels if k.phase is Phase.BWD]
    expected = ["Embedding", *(f"{x}_L{i}" for i in range(1, n + 1) for x in fwd),
                *HEAD_FWD, *HEAD_BWD,
                *(f"{x}_L{i}" for i in range(n, 0, -1) for x in bwd), "Embedding_bwd"]
    assert [k.name for k in g.kernels] == expected  # layers suffixed even for n = 1
    ends = [k.name for k in g.kernels if not _SUFFIX.search(k.name)]
    assert ends == ["Embedding", *HEAD_FWD, *HEAD_BWD, "Embedding_bwd"]
    assert {(c.src, c.dst) for c in g.connections[-11:]} == {
        ("Embedding", "Add_Prev_Layer_L1"), ("K_bwd_L1", "Embedding_bwd"),
        (f"Add_2_L{n}", "Final_LayerNorm"), ("Final_LayerNorm", "LM_Head"), ("LM_Head", "LM_Loss"),
        ("LM_Loss", "LM_Loss_bwd"), ("LM_Loss_bwd", "LM_Head_bwd"),
        ("LM_Head_bwd", "Final_LayerNorm_bwd"), ("Final_LayerNorm_bwd", f"Loss_bwd_L{n}"),
        ("LM_Loss_bwd", "LM_Head_bwd_weight_update"),
        ("Final_LayerNorm", "LM_Head_bwd_weight_update"),
    }
    # layer N's Loss_bwd now has exactly one producer: the head's gradient
    assert [c.src for c in g.connections if c.dst == f"Loss_bwd_L{n}"] == ["Final_LayerNorm_bwd"]
    phases = _by_name(g)
    assert all(phases[x].phase is Phase.FWD for x in ["Embedding", *HEAD_FWD])
    assert all(phases[x].phase is Phase.BWD for x in [*HEAD_BWD, "Embedding_bwd"])
    if plain is not None:  # the layers are the stack without ends, kernel for kernel
        layers = [k for k in g.kernels if _SUFFIX.search(k.name)]
        assert [(k.name, k.m, k.k, k.n) for k in layers] == [
            (k.name, k.m, k.k, k.n) for k in plain.kernels]
        assert _links(plain) <= _links(g)


def test_one_end_at_a_time_and_forward_graphs() -> None:
    emb = generate("llm", {**SMALL, "vocab_size": V, "embedding": True, "layers": 2})
    assert (len(emb.kernels), len(emb.connections)) == (82 + 2, 108 + 2)
    assert not any(c.dst == "Loss_bwd_L2" for c in emb.connections)  # no head: as before
    head = generate("llm", {**SMALL, "vocab_size": V, "lm_head": True, "layers": 2})
    assert (len(head.kernels), len(head.connections)) == (82 + 7, 108 + 9)
    fwd = generate("llm-fwd", {**SMALL, **ENDS, "layers": 2})
    assert (len(fwd.kernels), len(fwd.connections)) == (36 + 4, 2 * 21 + 1 + 4)
    assert [fwd.kernels[0].name, *(k.name for k in fwd.kernels[-3:])] == ["Embedding", *HEAD_FWD]
    assert all(k.phase is Phase.FWD for k in fwd.kernels)
    # without ends nothing changes (names unsuffixed for one layer)
    assert generate("llm", {**SMALL, "vocab_size": V}) == generate("llm", SMALL)
    assert generate("llm", {**SMALL, "embedding": False, "lm_head": 0}) == generate("llm", SMALL)


# --------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("name, training", [("llm", True), ("llm-fwd", False)])
def test_flop_against_closed_forms(name: str, training: bool) -> None:
    n = 2
    g = generate(name, {**SMALL, **ENDS, "layers": n})
    layers = generate(name, {**SMALL, "layers": n})
    assert g.flop - layers.flop == pytest.approx(_ends_flop(S, H, V, training=training),
                                                 rel=1e-12)
    k = _by_name(g)
    assert k["LM_Head"].flop == 2 * S * H * V
    if training:
        assert k["LM_Head_bwd"].flop + k["LM_Head_bwd_weight_update"].flop == 4 * S * H * V


def test_weights_and_dram_bytes_against_closed_forms() -> None:
    n = 3
    g = generate("llm", {**SMALL, **ENDS, "layers": n})
    k = _by_name(g)
    # parameters held as GEMM weights: 12 h^2 per GPT layer (Q, K, V, PROJ, 2 x 4h^2 FFN)
    # and the untied V x h head; the V x h embedding table lies in DRAM
    fwd_weights = sum(x.weight_bytes or 0.0 for x in g.kernels
                      if x.kind is KernelKind.GEMM_WEIGHT and x.phase is Phase.FWD)
    assert fwd_weights == 12 * H * H * W * n + V * H * W
    assert k["LM_Head"].weight_bytes == k["LM_Head_bwd"].weight_bytes == V * H * W
    assert (k["LM_Head"].m, k["LM_Head"].k, k["LM_Head"].n) == (V, H, S)
    assert [x.name for x in g.kernels if x.dram_extra_bytes] == ["Embedding"]
    assert k["Embedding"].dram_extra_bytes == V * H * W
    assert k["Embedding"].memory_bytes == S * H * W  # s rows read
    assert k["Embedding_bwd"].memory_bytes == 2 * S * H * W  # s rows read and written
    upd = k["LM_Head_bwd_weight_update"]
    assert (upd.kind, upd.tiling, (upd.m, upd.k, upd.n)) == (KernelKind.GEMM, Dim.K, (H, S, V))
    assert upd.communication is Collective.ALL_REDUCE_PERIODIC
    assert upd.communication_bytes == upd.output_bytes == V * H * W
    saved = {x: k[x].saved_bytes for x in ["Embedding", *HEAD_FWD]}
    assert saved == {"Embedding": 0.0, "Final_LayerNorm": 2 * H * S * W, "LM_Head": 0.0,
                     "LM_Loss": V * S * W}


# --------------------------------------------------------------------------- errors
def test_generator_needs_a_vocabulary() -> None:
    with pytest.raises(SpecError) as err:
        generate("llm", {**SMALL, "lm_head": True})
    assert [i.render() for i in err.value.issues] == [
        "graph.vocab_size is required with graph.lm_head = true (the embedding table and the "
        "LM head are vocab_size x hidden): expected an integer > 0. Got none instead."]
    with pytest.raises(SpecError) as err:
        generate("llm", {**SMALL, "vocab_size": V, "embedding": 2})
    assert [i.render() for i in err.value.issues] == [
        "graph.embedding must be true or false. Got 2 instead."]


def _text(num_layer: int = 2, in_graph: int = 2, vocab: str = "vocab_size = 50304",
          graph: str = "embedding = true\nlm_head = true", num_config: int = 4) -> str:
    """The GPT-3 1.5B example with ``num_layer`` layers, ``in_graph`` of them in the graph."""
    text = EXAMPLE.read_text()
    text = text.replace("num_layer = 24", f"num_layer = {num_layer}\nnum_layer_in_graph = "
                                          f"{in_graph}\n{vocab}")
    text = text.replace('generator = "llm"', f'generator = "llm"\n{graph}')
    return text.replace("num_config = 2", f"num_config = {num_config}")


def _spec(**kw: object) -> Spec:
    return load_toml_spec(_text(**kw), file="spec.toml", base_dir=EXAMPLE.parent)  # type: ignore[arg-type]


def _messages(**kw: object) -> list[str]:
    with pytest.raises(SpecError) as err:
        _spec(**kw)
    return [i.render() for i in err.value.issues]


def test_spec_needs_workload_vocab_size() -> None:
    assert _messages(vocab="", graph="embedding = true") == [
        "workload.vocab_size is required when graph.embedding = true (the embedding table and "
        "the LM head are vocab_size x hidden_dim): expected an integer > 0. Got none instead."]
    assert _messages(vocab="vocab_size = 0")[0] == (
        "workload.vocab_size must be >= 1. Got 0 instead.")
    assert _messages(graph="embedding = 1") == [
        "graph.embedding must be true or false. Got 1 instead."]
    # a vocabulary without ends is harmless; [graph] vocab_size stands in for the workload's
    assert len(_spec(graph="").graph.kernels) == 82
    assert len(_spec(vocab="", graph="lm_head = true\nvocab_size = 7").graph.kernels) == 89


def test_ends_with_several_graph_executions_make_a_staged_model() -> None:
    # N < num_layer: the ends run once per micro-batch, in the first and last stage
    # (tests/test_stages.py); the spec is accepted and searched in pieces
    from dfsearch.cost.stages import is_staged

    assert is_staged(_spec(num_layer=4, in_graph=2))
    assert is_staged(_spec(num_layer=4, in_graph=2, graph="lm_head = true"))
    assert not is_staged(_spec(num_layer=4, in_graph=2, graph=""))
    assert not is_staged(_spec(num_layer=2, in_graph=2))


def test_whole_model_means_one_pipeline_stage() -> None:
    text = _text().replace("size = 4", "size = 2") + (
        '\n[[system.network]]\ntopology = "ring"\nsize = 2\nlink_bw_GBps = 100.0\n'
        'parallelism = "pp"\n')
    with pytest.raises(SpecError) as err:
        load_toml_spec(text, file="spec.toml", base_dir=EXAMPLE.parent)
    assert any(i.render().startswith(
        "system.network[1].size must be <= workload.num_layer / workload.num_layer_in_graph "
        "= 2 / 2 = 1") for i in err.value.issues)


def test_cli_reports_the_file_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "whole.toml"
    path.write_text(_text(vocab=""))
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 2
    assert "whole.toml" in r.output and "workload.vocab_size is required" in r.output


# --------------------------------------------------------------------------- search
def test_whole_model_search_is_feasible_and_counts_the_closed_form() -> None:
    """2 GPT-3 1.5B layers, the embedding and the head in one graph: one execution per
    micro-batch, workload FLOP = global batch x (2 layers + ends)."""
    spec = _spec()
    wl = spec.workload
    assert wl.vocab_size == 50304 and len(spec.graph.kernels) == 91
    result = api.run(spec)
    ev = result.evaluation
    assert ev.feasible
    layer = generate("llm", {"hidden": 2048, "num_head": 16, "head_dim": 128, "seq": 1024,
                             "word": 2}).flop
    ends = _ends_flop(1024, 2048, 50304, training=True)
    assert ev.workload_flop == pytest.approx(wl.global_batch_size * (2 * layer + ends),
                                             rel=1e-12)
    assert ev.dram_use.data >= 50304 * 2048 * 2  # the embedding table
