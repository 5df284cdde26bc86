"""A whole model in pipeline pieces (issue 14, decomposition by pipeline stage): the pieces of
a stacked graph with ends, the exact split of executions over stages against brute force,
the batch-time formula against its closed form, and searches of whole models whose stages
run different graphs (docs/model.md, "Pipeline stages of a whole model")."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch import api
from dfsearch.cli import app
from dfsearch.codes import RunStatus
from dfsearch.cost import stages
from dfsearch.errors import SpecError
from dfsearch.kernels.generators import generate
from dfsearch.kernels.pieces import PiecesError, split_pieces, subgraph
from dfsearch.loader import load_toml_spec
from dfsearch.plan import stages as stage_search
from dfsearch.spec import Connection, Graph

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpt3_1.5B_a100x4.toml"
SMALL = {"hidden": 64, "num_head": 4, "head_dim": 16, "seq": 8, "word": 2}
V = 50304


def _text(
    num_layer: int = 8,
    in_graph: int = 1,
    pp: int | None = 2,
    ends: str = "both",
    dram: str | None = None,
    extra: str = "",
    configs: int = 4,
) -> str:
    """The GPT-3 1.5B example (4 GPUs) as a whole model of ``num_layer`` layers, ``in_graph``
    per graph execution; 2-way TP and a second ring of 2 with pipeline parallelism ``pp`` (2),
    or left to the search (None)."""
    graph = {
        "both": "embedding = true\nlm_head = true",
        "embedding": "embedding = true",
        "head": "lm_head = true",
    }[ends]
    text = EXAMPLE.read_text()
    text = text.replace(
        "num_layer = 24",
        f"num_layer = {num_layer}\nnum_layer_in_graph = {in_graph}\nvocab_size = {V}",
    )
    text = text.replace('generator = "llm"', f'generator = "llm"\n{graph}')
    text = text.replace("num_config = 2", f"num_config = {configs}")
    text = text.replace("size = 4", "size = 2")
    role = f'parallelism = "{"pp" if pp == 2 else "dp"}"\n' if pp is not None else ""
    text += f'\n[[system.network]]\ntopology = "ring"\nsize = 2\nlink_bw_GBps = 100.0\n{role}'
    text = text.replace("link_power_J_per_GB = [", "link_power_J_per_GB = [0.0104, ")
    if dram is not None:
        text = text.replace("dram_bytes = 42949672960", f"dram_bytes = {dram}")
    return text + extra


def _spec(**kw: object):
    return load_toml_spec(_text(**kw), file="spec.toml", base_dir=EXAMPLE.parent)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- pieces
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("kind", ["llm", "llm-fwd"])
def test_pieces_of_a_whole_model(kind: str, n: int) -> None:
    g = generate(kind, {**SMALL, "layers": n, "vocab_size": 100, "embedding": True,
                        "lm_head": True})  # fmt: skip
    p = split_pieces(g)
    names = [k.name for k in g.kernels]
    training = kind == "llm"
    assert [names[k] for k in p.before] == (
        ["Embedding", "Embedding_bwd"] if training else ["Embedding"]
    )
    head = ["Final_LayerNorm", "LM_Head", "LM_Loss"]
    if training:
        head += ["LM_Loss_bwd", "LM_Head_bwd", "Final_LayerNorm_bwd", "LM_Head_bwd_weight_update"]
    assert [names[k] for k in p.after] == head
    assert len(p.layers) == n * (41 if training else 18)
    assert all(names[k].endswith(tuple(f"_L{i}" for i in range(1, n + 1))) for k in p.layers)
    # a piece keeps the connections inside it only
    ends = subgraph(g, p.after)
    assert {(c.src, c.dst) for c in ends.connections} <= {(c.src, c.dst) for c in g.connections}
    assert all(c.src in head and c.dst in head for c in ends.connections)


def test_a_graph_without_layer_names_is_all_layers() -> None:
    g = generate("llm", SMALL)
    p = split_pieces(g)
    assert p.layers == tuple(range(len(g.kernels))) and not p.has_ends


def test_an_end_that_touches_no_layer_is_an_error() -> None:
    g = generate("llm", {**SMALL, "layers": 2})
    stray = dataclasses.replace(g.kernels[0], name="Stray", id=999)
    bad = Graph(kernels=(*g.kernels, stray), connections=g.connections)
    with pytest.raises(
        PiecesError, match=r"'Stray' is outside the stacked layers .* touches no layer"
    ):
        split_pieces(bad)
    # fed by the last layer's forward output and feeding the first layer: both sides
    both = Graph(
        kernels=(*g.kernels, stray),
        connections=(
            *g.connections,
            Connection(src="Add_2_L2", dst="Stray"),
            Connection(src="Stray", dst="Add_Prev_Layer_L1"),
        ),
    )
    with pytest.raises(PiecesError, match="touches the layers before and after"):
        split_pieces(both)


# --------------------------------------------------------------------------- the split
def _brute_split(executions: int, extra: list[float], layer: float, caps: list[int]) -> float:
    best = math.inf
    pp = len(extra)
    for runs in itertools.product(*(range(1, c + 1) for c in caps)):
        if sum(runs) == executions:
            best = min(best, max(e + r * layer for e, r in zip(extra, runs)))
    assert pp == len(caps)
    return best


def test_best_split_is_the_brute_force_optimum() -> None:
    rng = random.Random(7)
    for _ in range(400):
        pp = rng.randint(1, 4)
        executions = rng.randint(pp, 9)
        extra = [0.0] * pp
        extra[0] += rng.choice([0.0, rng.uniform(0, 5)])
        extra[-1] += rng.choice([0.0, rng.uniform(0, 12)])
        layer = rng.choice([1.0, rng.uniform(0.1, 3)])
        caps = [rng.randint(1, executions) for _ in range(pp)]
        want = _brute_split(executions, extra, layer, caps)
        got = stages.best_split(executions, extra, layer, caps)
        if math.isinf(want):
            assert got is None
            continue
        assert got is not None and sum(got) == executions
        assert all(1 <= r <= c for r, c in zip(got, caps))
        assert max(e + r * layer for e, r in zip(extra, got)) == want


def test_best_split_gives_a_heavy_head_fewer_layers() -> None:
    # 12 executions of 1.0 over 4 stages, the head costs 2.5: the last stage takes 1 layer
    # (3.5); 3.5 leaves room for 3 + 3 + 3 only, so the slowest stage is 4 (4 + 4 + 3 + 1),
    # the earlier stage lowered first
    assert stages.best_split(12, [0.0, 0.0, 0.0, 2.5], 1.0, [12] * 4) == (3, 4, 4, 1)
    assert stages.best_split(12, [0.0, 0.0, 0.0, 0.0], 1.0, [12] * 4) == (3, 3, 3, 3)
    assert stages.best_split(3, [0.0, 0.0, 0.0, 0.0], 1.0, [12] * 4) is None  # PP > E
    assert stages.best_split(8, [0.0, 0.0], 1.0, [3, 12]) == (3, 5)  # DRAM caps stage 1


def test_batch_time_of_equal_stages_is_the_uniform_pipeline() -> None:
    # (nmb + beta (PP - 1)) x T + p2p: the uniform pipeline's batch time (docs/model.md)
    for nmb, pp, beta, t, p2p in [
        (8, 4, 1.0, 3.0, 0.5),
        (16, 2, 0.5, 1.25, 0.0),
        (1, 3, 1.0, 2.0, 7.0),
    ]:
        assert stages.batch_ns([t] * pp, nmb, beta, p2p) == pytest.approx(
            (nmb + beta * (pp - 1)) * t + p2p
        )
    # one slow stage: nmb x slowest + beta x the others
    assert stages.batch_ns([1.0, 4.0, 2.0], 10, 1.0, 0.0) == 10 * 4.0 + 3.0


# --------------------------------------------------------------------------- whole searches
@pytest.fixture(scope="module")
def pp2():
    return api.run(_spec())


def test_whole_model_over_two_stages(pp2) -> None:
    r = pp2
    ev, plan = r.evaluation, r.stages
    assert r.status is RunStatus.OPTIMAL and ev is not None and plan is not None
    assert (ev.tp, ev.pp, ev.dp) == (2, 2, 1)
    st = plan.stages
    assert [s.before for s in st] == [True, False] and [s.after for s in st] == [False, True]
    assert sum(s.runs for s in st) == 8 and all(s.runs >= 1 for s in st)
    # the stage times from the pieces' own IIs: T_s = sum of II x runs x micro-batch
    m = ev.decision.micro_batch_size
    ii = {n: p.all_config_ii_ns for n, p in plan.pieces.items()}
    want = [
        ii["before"] * m + st[0].runs * ii["layers"] * m,
        st[1].runs * ii["layers"] * m + ii["after"] * m,
    ]
    assert [s.time_ns for s in st] == pytest.approx(want, rel=1e-12)
    # the head (2shV + 4shV FLOP on V = 50304) outweighs a layer: stage 2 holds fewer layers
    assert st[1].runs < st[0].runs
    # batch = nmb x T_max + beta x (the other stage) + p2p, beta of the bubble quirk
    beta = 1 / max(4 * 1 - 1, 1)  # ceil(8 / 2) = 4 model layers per stage
    assert plan.bubble == beta
    nmb = ev.num_micro_batch
    assert ev.ns_per_batch == pytest.approx(
        nmb * max(want) + beta * min(want) + plan.p2p_ns, rel=1e-12
    )
    assert ev.final_ns == ev.ns_per_batch


def test_whole_model_flop_and_physics_floors(pp2) -> None:
    ev, plan, spec = pp2.evaluation, pp2.stages, pp2.spec
    wl = spec.workload
    s, h = wl.seq_len, wl.hidden_dim
    layer = spec.graph.flop_of(stages.members_of(spec)["layers"])
    # docs/model.md: the ends add 6shV + 2sV + 4sh FLOP to a training graph
    ends = 6 * s * h * V + 2 * s * V + 4 * s * h
    assert ev.workload_flop == pytest.approx((8 * layer + ends) * wl.global_batch_size, rel=1e-12)
    peak = spec.system.num_chip * spec.system.accelerator.peak_gflops * 1e9
    assert ev.final_s >= ev.workload_flop / peak  # compute floor
    assert ev.utilization <= spec.execution.compute_util + 1e-12
    cap = spec.system.memory.dram_bytes
    assert all(0 < s.dram_bytes <= cap for s in plan.stages)
    assert ev.dram_bytes == max(s.dram_bytes for s in plan.stages)


def test_the_report_and_json_show_the_stages(pp2, tmp_path: Path) -> None:
    from dfsearch.report import format_run

    text = format_run(pp2)
    assert "2 pipeline stage(s)" in text and "embedding + " in text and "+ LM head" in text
    assert "a whole model in pipeline pieces: 2 kernels before the layers" in text
    data = json.loads(json.dumps(pp2.to_json()))
    st = data["pipeline_stages"]
    assert [s["embedding"] for s in st["stages"]] == [True, False]
    assert st["batch_s"] == pytest.approx(data["final_s"], rel=1e-12)
    assert st["pieces"]["lm_head"]["kernels"] == 7


def test_search_chooses_the_shape_and_is_deterministic() -> None:
    spec = _spec(pp=None)  # dimension 1 may carry PP or DP
    a, b = api.run(spec), api.run(spec)
    assert a.status is RunStatus.OPTIMAL and a.search.candidates >= 2
    ja, jb = a.to_json(), b.to_json()
    ja["search"].pop("seconds"), jb["search"].pop("seconds")
    assert ja == jb
    # the best over the shapes is no worse than the pipeline of two stages alone
    assert a.evaluation.final_ns <= api.run(_spec()).evaluation.final_ns


def test_every_outer_bound_is_below_its_solution() -> None:
    spec = _spec(pp=None)
    p = split_pieces(spec.graph)
    members = {"before": p.before, "layers": p.layers, "after": p.after}
    run = stage_search._Run(spec, None, 10**9, math.inf)
    choices = stage_search._choices(spec, p.layers)
    assert len(choices) >= 2
    for bound, shape, pl, mbs in choices:
        found = stage_search._solve_choice(run, members, shape, pl, mbs, bound)
        assert found is not None and found[0].final_ns >= bound


def test_stage_dram_binds_the_split() -> None:
    free = api.run(_spec(num_layer=12))
    need = [s.dram_bytes for s in free.stages.stages]
    # a byte less than the fuller stage needs moves one of its layers to the other stage
    cap = max(need) - 1
    tight = api.run(_spec(num_layer=12, dram=f"{cap:.0f}"))
    assert tight.evaluation is not None
    assert all(s.dram_bytes <= cap for s in tight.stages.stages)
    assert [s.runs for s in tight.stages.stages] != [s.runs for s in free.stages.stages]
    assert tight.evaluation.final_ns >= free.evaluation.final_ns


def test_no_room_for_the_ends_exits_1_naming_dram(tmp_path: Path) -> None:
    path = tmp_path / "small.toml"
    path.write_text(_text(dram="1000000"))
    r = CliRunner().invoke(app, ["run", str(path), "--quiet"])
    assert r.exit_code == 1, r.output
    assert "DRAM" in r.output and "Traceback" not in r.output


def test_budget_stop_is_reported() -> None:
    from dfsearch.plan import run as search

    r = search(_spec(pp=None), max_evaluations=5)
    assert r.status is RunStatus.STOPPED_BY_LIMIT and "budget" in r.search.stopped_by
    assert "not proven infeasible" in r.infeasible_message()


def test_one_graph_execution_is_still_one_graph() -> None:
    spec = _spec(num_layer=2, in_graph=2, pp=None, configs=12)
    assert not stages.is_staged(spec)
    r = api.run(spec)
    assert r.stages is None and r.evaluation.pp == 1


def test_stray_end_kernel_is_a_spec_error() -> None:
    spec = _spec()
    k = spec.graph.kernels[-1]
    stray = dataclasses.replace(k, name="Stray", id=10_000)
    bad = dataclasses.replace(
        spec, graph=Graph(kernels=(*spec.graph.kernels, stray), connections=spec.graph.connections)
    )
    with pytest.raises(SpecError) as err:
        api.load(bad)
    assert [i.path for i in err.value.issues] == ["graph.kernels"]
    assert "'Stray' is outside the stacked layers" in err.value.issues[0].message


# --------------------------------------------------------------------------- mapping files
def test_mapping_file_round_trip(pp2, tmp_path: Path) -> None:
    """run --mapping-out, then eval of that file: the same batch time, bit for bit; the run's
    JSON is a mapping file too."""
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(_text())
    out, js = tmp_path / "map.toml", tmp_path / "run.json"
    r = CliRunner().invoke(app, ["run", str(spec_path), "--quiet", "--mapping-out", str(out),
                                 "--json", str(js)])  # fmt: skip
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "stage_layers = [" in text and "[embedding.config]" in text and "[lm_head.sharding]" in text
    for mapping in (out, js):
        ev, plan = api.evaluate_mapping(spec_path, mapping)
        assert ev.final_ns == pp2.evaluation.final_ns
        assert [s.runs for s in plan.stages] == [s.runs for s in pp2.stages.stages]


def test_mapping_with_another_split(pp2, tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(_text())
    out = tmp_path / "map.toml"
    CliRunner().invoke(app, ["run", str(spec_path), "--quiet", "--mapping-out", str(out)])
    best = [s.runs for s in pp2.stages.stages]
    other = [best[0] - 1, best[1] + 1]
    text = out.read_text().replace(f"stage_layers = {json.dumps(best)}",
                                   f"stage_layers = {json.dumps(other)}")
    out.write_text(text)
    ev, plan = api.evaluate_mapping(spec_path, out)
    assert [s.runs for s in plan.stages] == other
    assert ev.final_ns > pp2.evaluation.final_ns  # the search's split is the best one
    t = [s.time_ns for s in plan.stages]
    assert ev.ns_per_batch == stages.batch_ns(t, ev.num_micro_batch, plan.bubble, plan.p2p_ns)
    # a split that does not cover the layers, and a missing end: clear errors, exit 2
    out.write_text(text.replace(f"stage_layers = {json.dumps(other)}", "stage_layers = [1, 1]"))
    r = CliRunner().invoke(app, ["eval", str(spec_path), "--mapping", str(out)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert ("stage_layers must list PP = 2 integers >= 1, the layer-graph executions of each "
            "stage, summing to num_layer / num_layer_in_graph = 8. Got [1, 1] instead.") in r.output
    cut = text[: text.index("[lm_head]")]
    out.write_text(cut)
    r = CliRunner().invoke(app, ["eval", str(spec_path), "--mapping", str(out)])
    assert r.exit_code == 2 and "lm_head is required: a table with this end's num_tile" in r.output


def test_single_decision_api_refuses_a_staged_model(pp2) -> None:
    with pytest.raises(SpecError, match="one decision per piece"):
        api.evaluate(pp2.spec, pp2.evaluation.decision)


def test_check_refuses_a_staged_model(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(_text())
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2 and "whole model in pipeline pieces" in r.output


@pytest.mark.slow
def test_stage_times_agree_with_the_reference_twin(pp2) -> None:
    """The naive twin (cost/reference.py) evaluates every piece's decision in its stage role
    (runs, the other pieces' bytes beside it); composed by the batch formula, its times give
    the search's batch time."""
    from dfsearch.cost.reference import reference_evaluate

    spec, plan, ev = pp2.spec, pp2.stages, pp2.evaluation
    members = stages.members_of(spec)
    m = ev.decision.micro_batch_size
    times = []
    for i, st in enumerate(plan.stages):
        held = ["layers", *(["before"] if st.before else []), *(["after"] if st.after else [])]
        t = 0.0
        for name in held:
            runs = st.runs if name == "layers" else 1
            piece = stages.piece_spec(spec, members[name], m, runs, end=name != "layers")
            ref = reference_evaluate(piece, plan.pieces[name].decision)
            assert ref.status.label == "ok"
            assert ref.all_config_ii_ns == pytest.approx(plan.pieces[name].all_config_ii_ns, rel=1e-9)
            if name == "layers":  # the stage holds at least its layers' bytes
                assert plan.stages[i].dram_bytes >= ref.dram_bytes * (1 - 1e-12)
            t += ref.all_config_ii_ns * runs * m
        times.append(t)
    want = stages.batch_ns(times, ev.num_micro_batch, plan.bubble, plan.p2p_ns)
    assert ev.final_ns == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("runs,beside", [(1, 0.0), (3, 0.0), (2, 1.5e9)])
def test_piece_role_in_evaluator_and_twin(pp2, runs: int, beside: float) -> None:
    """A piece's stage role (runs, bytes beside it) gives the same DRAM in the evaluator and
    the twin; runs scale the fixed bytes, the bytes beside it add once."""
    from dfsearch.cost.model import evaluate
    from dfsearch.cost.reference import reference_evaluate

    spec, plan = pp2.spec, pp2.stages
    d = plan.pieces["layers"].decision
    members = stages.members_of(spec)["layers"]
    piece = stages.piece_spec(spec, members, d.micro_batch_size, runs, beside)
    ev, ref = evaluate(piece, d), reference_evaluate(piece, d)
    assert ev.dram_bytes == pytest.approx(ref.dram_bytes, rel=1e-12)
    one = evaluate(stages.piece_spec(spec, members, d.micro_batch_size), d)
    fixed_one = one.dram_use.fixed
    assert ev.dram_use.fixed == pytest.approx(runs * fixed_one + beside, rel=1e-12)
    assert ev.all_config_ii_ns == one.all_config_ii_ns  # one DRAM tier: time unchanged


TIERS = "500000000\nsecond_dram_bytes = 100000000000\nsecond_dram_bw_GBps = 50.0"


def test_two_dram_tiers_are_not_claimed_optimal() -> None:
    """With two DRAM tiers (v1 equations) a stage's total sets the bandwidth: the layer graph
    runs slower in its stage than alone, is searched again there, and the split is not
    claimed optimal."""
    text = _text(dram=TIERS).replace('equations = "v2"', 'equations = "v1"')
    r = api.run(load_toml_spec(text, file="spec.toml", base_dir=EXAMPLE.parent))
    assert r.status is RunStatus.FEASIBLE_NOT_PROVEN and not r.stages.split_exact
    assert any("two DRAM tiers" in n for n in r.search.notes)
    alone = r.stages.pieces["layers"].all_config_ii_ns * r.evaluation.decision.micro_batch_size
    assert r.stages.stages[0].time_ns > r.stages.stages[0].runs * alone


def test_v2_ignores_the_second_tier_in_the_split_and_the_message() -> None:
    """The v2 equations ignore a second DRAM tier: 500 MB per chip hold no split of 8
    layers and the ends, and the message names 500 MB, not both tiers."""
    spec = load_toml_spec(_text(dram=TIERS), file="spec.toml", base_dir=EXAMPLE.parent)
    from dfsearch.errors import InfeasibleError

    with pytest.raises(InfeasibleError) as err:
        api.run(spec)
    (v,) = err.value.result.violations
    assert v.constraint == "dram" and v.capacity == 500e6 and v.needed > 500e6
    assert "system.memory.dram_bytes holds 500 MB" in str(err.value)


def test_dram_capacity_counts_the_tiers_the_equations_use() -> None:
    v2 = load_toml_spec(_text(dram=TIERS), file="spec.toml", base_dir=EXAMPLE.parent)
    v1 = load_toml_spec(_text(dram=TIERS).replace('equations = "v2"', 'equations = "v1"'),
                        file="spec.toml", base_dir=EXAMPLE.parent)  # fmt: skip
    assert (v2.dram_capacity, v1.dram_capacity) == (500e6, 500e6 + 100e9)
    assert _spec(dram="0").dram_capacity == 0.0  # 0 = unlimited


def test_bounding_stops_at_the_deadline() -> None:
    """Past the deadline the outer choices are listed unbounded (bound 0): a time limit stops
    the stage search while it bounds, not only between solves."""
    spec = _spec(pp=None)
    layers = stages.members_of(spec)["layers"]
    bounded = stage_search._choices(spec, layers)
    late = stage_search._choices(spec, layers, deadline=0.0)
    assert len(late) == len(bounded) >= 2
    assert all(b == 0.0 for b, *_ in late) and all(b > 0 for b, *_ in bounded)


def test_ctrl_c_between_sub_searches_returns_the_best_so_far() -> None:
    """A Ctrl-C that lands between two sub-searches (here raised by the progress callback
    after the first outer choice) ends the stage search with the best mapping so far,
    labelled interrupted, not with a traceback."""
    from dfsearch.plan import run as search

    def stop(p: object) -> None:
        raise KeyboardInterrupt

    r = search(_spec(pp=None), progress=stop)
    assert r.status is RunStatus.INTERRUPTED and r.search.solved == 1
    assert r.evaluation is not None and r.stages is not None
