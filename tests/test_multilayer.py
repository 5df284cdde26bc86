"""Several layers in one graph (issue 14, part 1): the stacked LLM generators, the layer rules
of the LLM workload, and the N-layer graph against the single-layer optimum repeated N times
(docs/model.md, "Several layers in one graph")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dfsearch import api
from dfsearch.codes import Phase
from dfsearch.decision import Decision
from dfsearch.errors import SpecError
from dfsearch.kernels.generators import generate
from dfsearch.loader import load_toml_spec
from dfsearch.spec import Spec

SMALL = {"hidden": 64, "num_head": 4, "head_dim": 16, "seq": 8, "word": 2}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpt3_1.5B_a100x4.toml"


#: TP 2 x PP 2 in place of the example's TP 4 ring.
TP2_PP2 = """[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 600.0
parallelism = "tp"

[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 100.0
parallelism = "pp"

"""


def _spec(layers: int, num_config: int, *, graph_layers: int | None = None,
          num_layer: int = 24, sram: bool = True, pipeline: bool = False) -> Spec:
    """The GPT-3 1.5B example with ``layers`` layers in its graph (10x its SRAM when
    ``sram``, so that the buffers of the links between layers fit; TP 2 x PP 2 when
    ``pipeline``)."""
    text = EXAMPLE.read_text()
    if pipeline:
        text = text[:text.index("[[system.network]]")] + TP2_PP2 + text[text.index("[cost]"):]
    text = text.replace("num_layer = 24", f"num_layer = {num_layer}\nnum_layer_in_graph = {layers}")
    text = text.replace("num_config = 2", f"num_config = {num_config}")
    if graph_layers is not None:
        text = text.replace('generator = "llm"', f'generator = "llm"\nlayers = {graph_layers}')
    if sram:
        text = text.replace("sram_bytes = 88080384", "sram_bytes = 880803840")
    return load_toml_spec(text, file="spec.toml", base_dir=EXAMPLE.parent)


def _messages(err: pytest.ExceptionInfo[SpecError]) -> list[str]:
    return [i.render() for i in err.value.issues]


# --------------------------------------------------------------------------- generator
@pytest.mark.parametrize("n", [2, 3])
def test_training_stack_counts_order_and_links(n: int) -> None:
    one = generate("llm", SMALL)
    g = generate("llm", {**SMALL, "layers": n})
    assert len(g.kernels) == 41 * n
    assert len(g.connections) == 53 * n + 2 * (n - 1)  # own edges + Add_2 and K_bwd links
    assert [k.id for k in g.kernels] == list(range(1, 41 * n + 1))
    fwd = [k.name for k in one.kernels if k.phase is Phase.FWD]
    bwd = [k.name for k in one.kernels if k.phase is Phase.BWD]
    expected = [f"{x}_L{i}" for i in range(1, n + 1) for x in fwd]
    expected += [f"{x}_L{i}" for i in range(n, 0, -1) for x in bwd]  # backward of LN first
    assert [k.name for k in g.kernels] == expected
    links = {(c.src, c.dst) for c in g.connections}
    for i in range(1, n):
        assert (f"Add_2_L{i}", f"Add_Prev_Layer_L{i + 1}") in links
        assert (f"K_bwd_L{i + 1}", f"Loss_bwd_L{i}") in links
    assert g.flop == pytest.approx(n * one.flop, rel=1e-12)


def test_forward_stack_and_one_layer_unchanged() -> None:
    g = generate("llm-fwd", {**SMALL, "layers": 3})
    assert (len(g.kernels), len(g.connections)) == (54, 3 * 21 + 2)
    assert all(k.phase is Phase.FWD for k in g.kernels)
    assert generate("llm", {**SMALL, "layers": 1}) == generate("llm", SMALL)


def test_too_many_layers_rejected() -> None:
    with pytest.raises(SpecError) as err:
        generate("llm", {**SMALL, "layers": 2000})
    assert _messages(err) == [
        "graph.layers must be <= 1024 (layers in one graph). Got 2000 instead."]


# --------------------------------------------------------------------------- workload rules
def test_layers_default_to_the_workload_and_must_match_it() -> None:
    spec = _spec(2, 4)  # graph.layers left out: taken from num_layer_in_graph
    assert len(spec.graph.kernels) == 82
    assert len(_spec(2, 4, graph_layers=2).graph.kernels) == 82
    with pytest.raises(SpecError) as err:
        _spec(1, 4, graph_layers=2)
    assert _messages(err) == [
        "graph.layers must equal workload.num_layer_in_graph = 1 (set "
        "workload.num_layer_in_graph = 2; graph.layers then defaults to it). Got 2 instead."]


def test_num_layer_must_be_a_multiple() -> None:
    with pytest.raises(SpecError) as err:
        _spec(5, 10)
    assert _messages(err) == [
        "workload.num_layer_in_graph must divide workload.num_layer = 24: one graph execution "
        "runs num_layer_in_graph consecutive layers (docs/model.md, \"Several layers in one "
        "graph\"). Got 5 instead."]


def test_workload_flop_counts_graph_executions() -> None:
    """24 layers: 24 executions of a 1-layer graph or 12 of a 2-layer one, same FLOP."""
    r1 = api.run(_spec(1, 2))
    d = _repeat(r1.evaluation.decision, r1.spec, _spec(2, 4), 2)
    ev = api.evaluate(_spec(2, 4), d)
    assert ev.workload_flop == pytest.approx(r1.evaluation.workload_flop, rel=1e-12)


# --------------------------------------------------------------------------- repeated optimum
def _repeat(d: Decision, one: Spec, spec: Spec, n: int) -> Decision:
    """The single-layer decision ``d`` repeated for every layer of ``spec``'s n-layer graph:
    layer i's forward configurations follow layer i - 1's, the backward ones of layer n come
    first after all forward ones, each kernel keeps its sharding."""
    idx = {k.name: j for j, k in enumerate(one.graph.kernels)}
    cf = 1 + max(d.config[j] for j, k in enumerate(one.graph.kernels) if k.phase is not Phase.BWD)
    cb = d.num_config - cf
    config, sharding = [], []
    for k in spec.graph.kernels:
        base, layer = k.name.rsplit("_L", 1)
        i, j = int(layer), idx[base]
        c = d.config[j]
        config.append(c + (i - 1) * cf if c < cf else n * cf + (n - i) * cb + c - cf)
        sharding.append(d.sharding[j])
    return dataclasses.replace(d, config=tuple(config), sharding=tuple(sharding),
                               num_config=n * d.num_config)


@pytest.mark.parametrize("n, pipeline", [(2, False), (3, False), (2, True)])
def test_repeated_single_layer_optimum_is_n_times_and_search_no_worse(
        n: int, pipeline: bool) -> None:
    """The n-layer graph with the single-layer optimum repeated runs n times as long per
    execution; num_layer / n executions make the same batch time (with PP 2 too: the
    pipeline bubble counts model layers per stage). The search of the n-layer graph never
    returns worse than that."""
    r1 = api.run(_spec(1, 2, pipeline=pipeline))
    spec = _spec(n, 2 * n, pipeline=pipeline)
    ev = api.evaluate(spec, _repeat(r1.evaluation.decision, r1.spec, spec, n))
    assert ev.feasible
    assert ev.final_s == pytest.approx(r1.evaluation.final_s, rel=1e-12)
    rn = api.run(spec)
    assert rn.evaluation.final_s <= ev.final_s * (1 + 1e-12)
