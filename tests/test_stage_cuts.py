"""Stage boundaries inside a layer (``search.stage_cuts``; docs/model.md, "Stage cuts inside
a layer"): the exact split against brute force and a closed form, cut points, the search."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from dfsearch.cost import stage_cuts, stages

ROOT = Path(__file__).resolve().parents[1]


def _brute(executions, ends, layer, parts, caps, has_ends, slope):
    """Every split (what each boundary cuts x executions per stage): the least objective."""
    pp, n = len(ends), len(parts) + 1
    first, second, delta = (0.0, *(x[0] for x in parts)), (0.0, *(x[1] for x in parts)), (
        0.0, *(x[2] for x in parts))
    best = None
    for pat in itertools.product(range(n), repeat=pp - 1):
        bounds = [0, *pat, 0]
        c = sum(x > 0 for x in pat)
        for runs in itertools.product(range(executions + 1), repeat=pp):
            if sum(runs) + c != executions:
                continue
            ok, t_max = True, 0.0
            for s in range(pp):
                b, a = bounds[s], bounds[s + 1]
                if runs[s] == 0 and not (b or a or has_ends[s]):
                    ok = False
                if runs[s] > caps(s, b, a):
                    ok = False
                t_max = max(t_max, ends[s] + second[b] + runs[s] * layer + first[a])
            if ok:
                v = slope * t_max + sum(delta[x] for x in pat)
                best = v if best is None else min(best, v)
    return best


def test_cut_split_is_the_brute_force_optimum() -> None:
    rng = random.Random(7)
    for _ in range(150):
        pp = rng.randint(1, 3)
        e = rng.randint(pp, 5)
        ends = [rng.choice([0.0, 0.0, 1.0, 2.5]) for _ in range(pp)]
        has = [x > 0 for x in ends]
        layer = rng.choice([1.0, 2.0, 3.0])
        parts = [(rng.choice([0.4, 1.3]), rng.choice([0.7, 1.1]), rng.choice([-0.3, 0.0, 0.2, 1.5]))
                 for _ in range(rng.randint(0, 2))]  # fmt: skip
        n = len(parts) + 1
        cap = [[rng.randint(0, e) for _ in range(n * n)] for _ in range(pp)]
        caps = lambda s, b, a, cap=cap, n=n: cap[s][b * n + a]  # noqa: E731
        slope = rng.choice([1.0, 7.0])
        want = _brute(e, ends, layer, parts, caps, has, slope)
        got = stage_cuts.cut_split(e, ends, layer, parts, caps, has, slope)
        if want is None:
            assert got is None
            continue
        assert got is not None and got.objective == pytest.approx(want, rel=1e-12)
        assert sum(got.runs) + sum(x > 0 for x in got.cuts) == e


def test_never_worse_than_the_whole_layer_split() -> None:
    rng = random.Random(11)
    for _ in range(100):
        pp = rng.randint(2, 4)
        e = rng.randint(pp, 9)
        ends = [rng.uniform(0, 3) if s in (0, pp - 1) else 0.0 for s in range(pp)]
        layer = rng.uniform(0.5, 2)
        whole = stages.best_split(e, ends, layer, [e] * pp)
        assert whole is not None
        t_whole = max(x + n * layer for x, n in zip(ends, whole))
        parts = [(rng.uniform(0.1, 1.5), rng.uniform(0.1, 1.5), 0.0) for _ in range(2)]
        got = stage_cuts.cut_split(e, ends, layer, parts, lambda s, b, a, e=e: e,
                                   [True] + [False] * (pp - 2) + [True], 10.0)  # fmt: skip
        assert got is not None and got.t_max <= t_whole + 1e-12


def test_closed_form_one_cut_beats_whole_layers() -> None:
    """Two stages, E = 3 layers of 2, a head of 4 on the last stage, the layer cut into
    halves of 1 (a cut adds 0.5): whole layers give at best max(2 x 2, 2 + 4) = 6 (or a
    head-only stage: 3 x 2 = 6); the cut reaches the perfect balance (3 x 2 + 4) / 2 = 5:
    stage 1 = 2 layers + half a layer, stage 2 = the other half + the head."""
    got = stage_cuts.cut_split(3, [0.0, 4.0], 2.0, [(1.0, 1.0, 0.5)], lambda s, b, a: 3,
                               [False, True], 100.0)  # fmt: skip
    assert got is not None
    assert (got.runs, got.cuts, got.t_max) == ((2, 0), (1,), 5.0)
    assert got.objective == 100.0 * 5.0 + 0.5
    assert stages.best_split(3, [0.0, 4.0], 2.0, [3, 3]) == (2, 1)  # T_max 6


def test_closed_form_staircase_of_two_cut_points() -> None:
    """Three stages, E = 3 layers of 4, a head of 3: the average is (3 x 4 + 3) / 3 = 5.
    Cut points at a quarter (parts 1 + 3) and a half (2 + 2). One cut point alone gives 6
    at best (quarter: stage 3 = 3 + 3; half: stages of 4 and 6 before 2 + 3); whole layers
    7. Both: stage 1 = layer + quarter (5), stage 2 = 3 + 2 (5), stage 3 = 2 + 3 (5)."""
    parts = [(1.0, 3.0, 0.0), (2.0, 2.0, 0.0)]
    got = stage_cuts.cut_split(3, [0.0, 0.0, 3.0], 4.0, parts, lambda s, b, a: 3,
                               [False, False, True], 1.0)  # fmt: skip
    assert got is not None and (got.runs, got.cuts, got.t_max) == ((1, 0, 0), (1, 2), 5.0)
    for one in parts:
        alone = stage_cuts.cut_split(3, [0.0, 0.0, 3.0], 4.0, [one], lambda s, b, a: 3,
                                     [False, False, True], 1.0)  # fmt: skip
        assert alone is not None and alone.t_max == 6.0


def test_a_cut_that_costs_more_than_it_saves_is_not_taken() -> None:
    # the cut saves 1 of T_max (x slope 1) but adds 2: a whole-layer split (T_max 6) wins
    got = stage_cuts.cut_split(3, [0.0, 4.0], 2.0, [(1.0, 1.0, 2.0)], lambda s, b, a: 3,
                               [False, True], 1.0)  # fmt: skip
    assert got is not None and not any(got.cuts) and got.t_max == 6.0


def test_cut_points_of_the_training_layer_are_valid_pipeline_cuts() -> None:
    from dfsearch.loader import load_toml_spec

    spec = load_toml_spec((ROOT / "examples" / "gpt_pipeline.toml").read_text(),
                          file="x.toml", base_dir=ROOT / "examples")  # fmt: skip
    layers = stages.members_of(spec)["layers"]
    cuts = stage_cuts.cut_points(spec, layers)
    assert 1 <= len(cuts) <= stage_cuts.MAX_CUT_POINTS
    g = spec.graph
    index = g.index()
    from dfsearch.codes import Phase

    for c in cuts:
        assert sorted(c.first + c.second) == sorted(layers)
        second = set(c.second)
        for e in g.connections:
            s, d = index[e.src], index[e.dst]
            if s in second and d not in second and d in layers:
                # from the second part back to the first only in the backward pass
                assert g.kernels[d].phase is Phase.BWD
            if s not in second and s in layers and d in second:
                assert g.kernels[s].phase is not Phase.BWD  # forward tensors go forward
    # each part does some of the layer's work; kept cut points differ in FLOP share
    assert all(0.01 <= c.first_flop <= 0.99 for c in cuts)
    assert all(abs(a.first_flop - b.first_flop) >= 0.01 for a, b in itertools.combinations(cuts, 2))
    assert [c.position for c in cuts] == sorted(c.position for c in cuts)


CUTS = "\n[search]\nstage_cuts = true\n"


def _small(cuts: bool, **kw):
    """tests/test_stages.py's GPT-3 1.5B whole model, 3 layers over 2 stages (its head about
    two layers' worth), with or without ``search.stage_cuts``."""
    from test_stages import EXAMPLE, _text

    from dfsearch.loader import load_toml_spec

    kw.setdefault("num_layer", 3)
    return load_toml_spec(_text(extra=CUTS if cuts else "", **kw), file="spec.toml",
                          base_dir=EXAMPLE.parent)  # fmt: skip


@pytest.fixture(scope="module")
def cut_run():
    from dfsearch import api

    return api.run(_small(True)), api.run(_small(False))


def test_search_cuts_inside_a_layer_when_faster(cut_run) -> None:
    from dfsearch.codes import RunStatus

    r, base = cut_run
    assert r.status is RunStatus.OPTIMAL and base.status is RunStatus.OPTIMAL
    assert r.evaluation.final_ns < base.evaluation.final_ns  # never worse; here better
    plan = r.stages
    assert plan.has_cuts and [s.ends_after is not None for s in plan.stages] == [True, False]
    assert plan.stages[1].starts_after == plan.stages[0].ends_after
    # the stage times are their pieces' times; the batch is the formula with the cut's p2p
    cut = plan.stages[0].ends_after
    first, second = plan.pieces["first:" + cut], plan.pieces["second:" + cut]
    mbs = r.evaluation.decision.micro_batch_size
    t = [plan.pieces["before"].all_config_ii_ns * mbs
         + plan.stages[0].runs * plan.pieces["layers"].all_config_ii_ns * mbs
         + first.all_config_ii_ns * mbs,
         second.all_config_ii_ns * mbs + plan.stages[1].runs * plan.pieces["layers"].all_config_ii_ns * mbs
         + plan.pieces["after"].all_config_ii_ns * mbs]  # fmt: skip
    assert [s.time_ns for s in plan.stages] == pytest.approx(t, rel=1e-12)
    assert sum(s.runs for s in plan.stages) + 1 == 3  # the cut layer is split over the two
    assert plan.p2p_ns > base.stages.p2p_ns  # the cut's bytes are sent
    assert r.evaluation.ns_per_batch == pytest.approx(
        stages.batch_ns(t, plan.micro_batches, plan.bubble, plan.p2p_ns), rel=1e-12)
    # the parts hold the layer graph's configurations + 1 (the cut splits one)
    layer_c = r.spec.execution.num_config
    assert first.decision.num_config + second.decision.num_config == layer_c + 1
    # the workload FLOP is the model's: a cut moves no work
    assert r.evaluation.workload_flop == pytest.approx(base.evaluation.workload_flop, rel=1e-12)


def test_the_report_and_json_show_the_cut(cut_run) -> None:
    from dfsearch.report import stage_lines

    r, _ = cut_run
    cut = r.stages.stages[0].ends_after
    text = "\n".join(stage_lines(r.stages))
    assert f"layer to {cut}" in text and f"layer after {cut}" in text
    assert "split chosen over: whole layer-graph executions, end stages without any" in text
    n_first = len(r.stages.names["first:" + cut])
    assert f"layer to {cut} {n_first} kernels, tiles" in text  # the parts' mappings
    js = r.to_json()
    st = js["pipeline_stages"]
    assert [s["ends_inside_layer_after"] for s in st["stages"]] == [cut, None]
    assert st["cuts_inside_layers"][0]["after"] == cut and st["cuts_inside_layers"][0]["cut_bytes"] > 0
    assert js["stage_cuts"] == [cut]


def test_a_mapping_with_cuts_is_refused_with_exit_2(cut_run, tmp_path: Path) -> None:
    from test_stages import _text
    from typer.testing import CliRunner

    from dfsearch.cli import app

    spec = tmp_path / "spec.toml"
    spec.write_text(_text(num_layer=3, extra=CUTS))
    out, js = tmp_path / "m.toml", tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", str(spec), "--mapping-out", str(out), "--json", str(js)])
    assert res.exit_code == 2, res.output
    assert "cannot express" in res.output and not out.exists() and js.exists()
    res = CliRunner().invoke(app, ["eval", str(spec), "--mapping", str(js)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "stage_cuts" in res.output and "whole layer-graph executions only" in res.output


def test_the_option_is_off_unless_set_and_checked() -> None:
    from test_stages import EXAMPLE, _text

    from dfsearch.errors import SpecError
    from dfsearch.loader import load_toml_spec

    assert _small(False).search.stage_cuts is None
    # one execution of the whole model, or a graph without ends: nothing to cut
    no_ends = EXAMPLE.read_text() + CUTS
    for make in (lambda: _small(True, num_layer=1, pp=None),
                 lambda: load_toml_spec(no_ends, file="spec.toml", base_dir=EXAMPLE.parent)):
        with pytest.raises(SpecError, match=r"search\.stage_cuts must be false or omitted") as e:
            make()
        assert [i.path for i in e.value.issues] == ["search.stage_cuts"]
    with pytest.raises(SpecError, match=r"search\.stage_cuts must be true or false\. Got 3"):
        load_toml_spec(_text(extra="\n[search]\nstage_cuts = 3\n"), file="spec.toml",
                       base_dir=EXAMPLE.parent)  # fmt: skip


@pytest.mark.slow
def test_every_outer_bound_with_cuts_is_below_its_solution() -> None:
    import math

    from dfsearch.kernels.pieces import split_pieces
    from dfsearch.plan import stages as stage_search

    spec = _small(True, pp=None)
    p = split_pieces(spec.graph)
    members = {"before": p.before, "layers": p.layers, "after": p.after}
    run = stage_search._Run(spec, None, 10**9, math.inf)
    choices = stage_search._choices(spec, p.layers)
    assert len(choices) >= 2
    for bound, shape, pl, mbs in choices:
        found = stage_search._solve_choice(run, members, shape, pl, mbs, bound)
        assert found is None or found[0].final_ns >= bound


@pytest.mark.slow
def test_search_with_cuts_is_deterministic_and_never_worse_on_small_cases() -> None:
    from dfsearch import api

    for kw in ({"num_layer": 4}, {"num_layer": 2, "ends": "head"}, {"num_layer": 4, "ends": "embedding"}):
        a, b = api.run(_small(True, **kw)), api.run(_small(True, **kw))
        ja, jb = a.to_json(), b.to_json()
        ja["search"].pop("seconds"), jb["search"].pop("seconds")
        assert ja == jb
        base = api.run(_small(False, **kw))
        assert a.evaluation.final_ns <= base.evaluation.final_ns
        assert a.search.lower_bound <= a.evaluation.final_ns


def test_the_per_choice_cut_bound_is_below_the_solution(cut_run) -> None:
    """``_cuts_bound`` (pieces solved, parts' floors) never exceeds the batch time found with
    cuts on that choice, nor the whole-layer one."""
    import math

    from dfsearch.cost.stage_cuts import cut_points
    from dfsearch.plan import stages as stage_search

    r, base = cut_run
    spec, ev, plan = r.spec, r.evaluation, r.stages
    members = stages.members_of(spec)
    whole = stages.StageModel(spec, members, ev.decision.micro_batch_size,
                              {n: plan.pieces[n] for n in ("before", "layers", "after")})  # fmt: skip
    run = stage_search._Run(spec, None, 10**9, math.inf)
    d = ev.decision
    bound = stage_search._cuts_bound(run, whole, cut_points(spec, members["layers"]),
                                     d.micro_batch_size, (d.shape, d.placement))  # fmt: skip
    assert 0 < bound <= ev.ns_per_batch <= base.evaluation.ns_per_batch
