"""dfsearch serve: the step-time adapter, the serve spec, the deployments and the capacity
search (docs/serving.md, "Capacity search")."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from dfsearch.capacity.deployments import (
    Candidate,
    Slos,
    deployment_watts,
    outcome,
    pruned,
    run_colocated,
    run_decode_pool,
    run_prefill_pool,
    transfer_s,
)
from dfsearch.capacity.mapped_steps import (
    FreePrefill,
    Measured,
    ReplicaModel,
    Shape,
    StepCache,
    StepPoint,
    batch_grid,
    context_grid,
    prefill_grid,
    replica_model,
)
from dfsearch.capacity.sampled import sample
from dfsearch.capacity.search import limits, search, space_size
from dfsearch.capacity.serve_spec import WARMUP_FRACTION, serve_table
from dfsearch.capacity.steps import AffineSteps
from dfsearch.capacity.traffic import Requests, requests
from dfsearch.codes import ServeMode, ServingPhase
from dfsearch.errors import SpecError


# ---- the adapter ------------------------------------------------------------------------------
class CountingMeasure:
    """A closed-form step time: prefill of n tokens = 1 ms + 2 us x n; decode of batch b at
    c context tokens = 3 ms + 10 us x b + 1 ns x b x c; fails beyond ``max_batch``."""

    def __init__(self, max_batch: int = 10**9) -> None:
        self.calls: list[StepPoint] = []
        self.max_batch = max_batch

    def __call__(self, p: StepPoint):
        self.calls.append(p)
        if p.batch > self.max_batch:
            return f"batch {p.batch} does not fit"
        if p.phase is ServingPhase.PREFILL:
            return Measured(1e-3 + 2e-6 * p.prompt_len, 1e9, 100.0 * (p.prompt_len + 1) / p.shape.chips)
        ctx = p.prompt_len + 1
        return Measured(3e-3 + 10e-6 * p.batch + 1e-9 * p.batch * ctx, 1e9, 0.0)


GRIDS = {"prefills": (1, 64, 256), "batches": (1, 4, 16), "contexts": (65, 1000)}


def test_each_step_point_is_searched_once_and_the_cache_keys_on_the_spec():
    m = CountingMeasure()
    cache = StepCache(m, "spec-a")
    first = replica_model(cache, Shape(2, 1), usable_bytes_per_chip=2e9, **GRIDS)
    n = cache.searches
    assert n == len(m.calls) == 3 + 3 * 2  # every grid point once
    again = replica_model(cache, Shape(2, 1), usable_bytes_per_chip=2e9, **GRIDS)
    assert cache.searches == n and len(m.calls) == n and again == first
    other = StepCache(m, "spec-b")
    replica_model(other, Shape(2, 1), usable_bytes_per_chip=2e9, **GRIDS)
    assert other.searches == n  # another spec digest: searched anew


def test_tables_hold_the_searched_times_and_interpolate_linearly_never_extrapolating():
    model = replica_model(StepCache(CountingMeasure(), "s"), Shape(1, 1), usable_bytes_per_chip=2e9, **GRIDS)
    steps = model.steps
    # both closed forms are linear in what is interpolated: interpolation is exact
    assert steps.step_s(100, 0, 100) == pytest.approx(1e-3 + 2e-6 * 100)
    assert steps.step_s(0, 10, 10 * 500) == pytest.approx(3e-3 + 10e-6 * 10 + 1e-9 * 10 * 500)
    # composition: prefill(p) + decode(d, (C - p) / d)
    assert steps.step_s(100, 10, 10 * 500 + 100) == pytest.approx(1e-3 + 2e-6 * 100 + 3e-3 + 1e-4 + 5e-6)
    with pytest.raises(SpecError, match="never extrapolated"):
        steps.step_s(257, 0, 257)
    with pytest.raises(SpecError, match="never extrapolated"):
        steps.step_s(0, 17, 17 * 100)
    # the context per sequence is clipped to the grid (65 .. 1000)
    assert steps.step_s(0, 4, 4 * 5000) == steps.step_s(0, 4, 4 * 1000)
    # arrays give what scalars give
    ctx = np.array([4 * 100, 4 * 700])
    assert steps.step_s(0, 4, ctx).tolist() == [steps.step_s(0, 4, 400), steps.step_s(0, 4, 2800)]
    assert FreePrefill(steps).step_s(100, 4, 400 + 100) == steps.step_s(0, 4, 400)
    assert FreePrefill(steps).step_s(100, 0, 100) == 0.0


def test_kv_room_and_per_token_bytes_come_from_the_searched_step():
    model = replica_model(StepCache(CountingMeasure(), "s"), Shape(2, 2), usable_bytes_per_chip=3e9, **GRIDS)
    assert model.kv_capacity_bytes == 4 * (3e9 - 1e9)
    assert model.steps.kv_bytes_per_token == pytest.approx(100.0)  # kv per chip x chips / (n + 1)


def test_batches_no_mapping_fits_end_the_table_and_an_unfit_first_point_rules_the_shape_out():
    model = replica_model(StepCache(CountingMeasure(max_batch=8), "s"), Shape(1, 1), usable_bytes_per_chip=2e9,
                          **GRIDS)
    assert model.max_batch == 4 and model.steps.decode.tokens == (1, 4)
    why = replica_model(StepCache(CountingMeasure(max_batch=0), "s"), Shape(1, 1), usable_bytes_per_chip=2e9,
                        **GRIDS)
    assert why == "batch 1 does not fit"
    full = replica_model(StepCache(CountingMeasure(), "s"), Shape(1, 1), usable_bytes_per_chip=0.5e9, **GRIDS)
    assert "no room for a KV cache" in full


# ---- the [serve] table ------------------------------------------------------------------------
BASE = {"rate_per_s": 4.0, "requests": 300, "ttft_p99_s": 0.5, "tpot_p99_s": 0.02, "dollars_per_chip_hour": 2.0,
        "prompt": {"dist": "uniform", "lo": 32, "hi": 200}, "output": {"dist": "fixed", "tokens": 16}}


@pytest.mark.parametrize(("change", "message"), [
    ({"tp": [1, 0]}, "t.toml: serve.tp[1] must be an integer >= 1. Got 0 instead."),
    ({"ttft_p99_s": -1}, "t.toml: serve.ttft_p99_s must be a number > 0. Got -1 instead."),
    ({"modes": ["split"]}, "t.toml: serve.modes[0] must be one of ('colocated', 'disaggregated'). Got 'split'"),
    ({"rates": 3}, "t.toml: serve.rates is not a [serve] key"),
    ({"prompt": {"dist": "fixed"}}, "t.toml: serve.prompt.tokens is required."),
    ({"prompt": {"dist": "uniform", "lo": 9, "hi": 3}}, "t.toml: serve.prompt.hi must be an integer >= lo (9)"),
    ({"output": 5}, "t.toml: serve.output must be a table with dist"),
    ({"memory_fraction": 1.5}, "t.toml: serve.memory_fraction must be a number > 0 and <= 1. Got 1.5"),
    ({"sampler": "random"}, "t.toml: serve.sampler must be one of ('auto', 'exhaustive', 'tpe', 'nsga2'). Got "
                            "'random'"),
    ({"exhaustive_limit": 0}, "t.toml: serve.exhaustive_limit must be an integer >= 1. Got 0 instead."),
    ({"trials": 0}, "t.toml: serve.trials must be an integer >= 1. Got 0 instead."),
])
def test_a_bad_serve_key_names_the_file_the_field_the_value_and_what_was_expected(change, message):
    with pytest.raises(SpecError) as e:
        serve_table({**BASE, **change}, "t.toml", 50.0)
    assert str(e.value).startswith(message)


def _priced(chips: dict) -> dict:
    return {**{k: v for k, v in BASE.items() if k != "dollars_per_chip_hour"}, "chips": chips}


def test_a_chip_option_may_name_a_chip_preset_or_an_alias():
    s = serve_table(_priced({"a": {"preset": "h200-sxm-141gb", "dollars_per_chip_hour": 3.8},
                             "b": {"preset": "H100", "dollars_per_chip_hour": 3.0},
                             "c": {"dollars_per_chip_hour": 1.0}}), "t.toml", 50.0)
    assert [(c.name, c.preset, c.dollars_per_chip_hour) for c in s.chips] == [
        ("a", "h200-sxm-141gb", 3.8), ("b", "H100", 3.0), ("c", "", 1.0)]


@pytest.mark.parametrize("bad", ["h100-sxm-80", 3])
def test_a_chip_option_naming_no_preset_is_one_error_with_the_accepted_names(bad):
    with pytest.raises(SpecError) as e:
        serve_table(_priced({"a": {"preset": bad, "dollars_per_chip_hour": 3.0}}), "t.toml", 50.0)
    assert str(e.value).startswith("t.toml: serve.chips.a.preset must name a chip preset: one of "
                                   "'a100-sxm-80gb', 'h100-sxm-80gb', 'h200-sxm-141gb'")
    assert str(e.value).endswith(f"Got {bad!r} instead.")


# ---- deployments in closed form ---------------------------------------------------------------
def _model(shape: Shape, steps, kv: float = 1e9) -> ReplicaModel:
    return ReplicaModel(shape, steps, FreePrefill(steps), kv, 0.0)


def test_disaggregated_request_alone_ttft_is_its_prefill_and_tpot_its_decode_plus_transfer():
    steps = AffineSteps(base_s=0.002, per_token_s=1e-5, kv_bytes_per_token=1000.0)
    pm, dm = _model(Shape(2, 1), steps), _model(Shape(1, 1), steps)
    reqs = Requests(np.array([1.0, 10.0, 20.0]), np.array([100, 300, 50]), np.array([5, 2, 1]))
    first, _ = run_prefill_pool(reqs, pm, 1, 512, 16)
    assert (first - reqs.arrival_s).tolist() == pytest.approx([0.002 + 1e-5 * p for p in (100, 300, 50)])
    moved = transfer_s(pm, dm, reqs.prompt_tokens, 10.0, 1e-4)  # 1 chip (the smaller) x 10 GB/s
    assert moved.tolist() == pytest.approx([1000 * p / 10e9 + 1e-4 for p in (100, 300, 50)])
    finish, _, _ = run_decode_pool(reqs, first, moved, dm, 1, 1, 16)
    # joins at once (an idle replica: a free iteration), then output - 1 decode steps of 2.01 ms
    expect = [first[i] + moved[i] + (o - 1) * 0.00201 for i, o in enumerate((5, 2))] + [first[2]]
    assert finish.tolist() == pytest.approx(expect)


def test_disaggregated_prefill_pool_of_one_prompt_per_iteration_is_m_d_1():
    # chunk = prompt: one prompt per iteration, service D = 2 ms + 10 us x 256; Poisson at rho 0.5
    d = 0.002 + 1e-5 * 256
    rho = 0.5
    reqs = requests(serve_table({**BASE, "rate_per_s": rho / d, "prompt": {"dist": "fixed", "tokens": 256}},
                                "t.toml", 50.0).traffic, 20000, seed=3)
    first, _ = run_prefill_pool(reqs, _model(Shape(1, 1), AffineSteps(0.002, 1e-5)), 1, 256, 16)
    mean_ttft = float(np.mean(first - reqs.arrival_s))
    assert mean_ttft == pytest.approx(rho * d / (2 * (1 - rho)) + d, rel=0.03)  # Pollaczek-Khinchine + D


def test_kv_utilisation_of_one_request_at_a_time_is_its_blocks_times_its_time_over_the_run():
    # batch cap 1, constant 0.1 s iterations, prompt 8 + output 3 - 1 = 10 tokens: one block of 16
    # from admission to finish; an arrival every second, each served alone in 3 iterations
    # (prefill, then 2 decodes), so each holds 1 of the 4 blocks for 0.3 s; the run is from the
    # first arrival to the last finish, (n - 1) s + 0.3 s
    n = 10
    steps = AffineSteps(base_s=0.1, per_token_s=0.0, kv_bytes_per_token=1.0)
    reqs = Requests(np.arange(n, dtype=float), np.full(n, 8), np.full(n, 3))
    c = Candidate(ServeMode.COLOCATED, Shape(1, 1), 1, 1, 16)
    first, finish, pre, kv = run_colocated(reqs, _model(Shape(1, 1), steps, kv=4 * 16), c, 16)
    assert (finish - reqs.arrival_s).tolist() == pytest.approx(n * [0.3])
    assert kv == pytest.approx(n * 0.3 * 1 / (4 * (n - 1 + 0.3)))
    slos = Slos(1.0, 1.0, 1.0)
    assert outcome(c, reqs, first, finish, pre, slos, kv).kv_utilisation == kv
    assert math.isnan(outcome(c, reqs, first, finish, pre, slos).joules_per_token)  # no power figure


def test_kv_utilisation_of_a_split_deployment_is_its_decode_pools():
    # the decode pool of the test above: each request joins at its first token + transfer and
    # holds its one block (prompt 8 + 2 tokens) for its 2 decode iterations of 0.1 s
    n = 10
    steps = AffineSteps(base_s=0.1, per_token_s=0.0, kv_bytes_per_token=1.0)
    m = _model(Shape(1, 1), steps, kv=4 * 16)
    reqs = Requests(np.arange(n, dtype=float), np.full(n, 8), np.full(n, 3))
    first, _ = run_prefill_pool(reqs, m, 1, 16, 16)
    finish, _, kv = run_decode_pool(reqs, first, np.zeros(n), m, 1, 1, 16)
    run = float(finish.max() - first.min())
    assert (finish - first).tolist() == pytest.approx(n * [0.2])
    assert kv == pytest.approx(n * 0.2 / (4 * run))
    one = Requests(reqs.arrival_s, reqs.prompt_tokens, np.ones(n, dtype=np.int64))
    assert math.isnan(run_decode_pool(one, first, np.zeros(n), m, 1, 1, 16)[2])  # nobody reaches it


def test_energy_per_token_is_chips_times_watts_times_the_window_over_the_output_tokens():
    _, reqs, _ = _tiny(["colocated"], **LOADS[0])
    steps = AffineSteps(0.004, 2e-4 / 2, 1e-8 / 2, kv_bytes_per_token=1000.0)
    m = replace(_model(Shape(2, 1), steps, kv=2 * 4e6), watts_per_chip=700.0)
    c = Candidate(ServeMode.COLOCATED, Shape(2, 1), 3, 8, 256)
    first, finish, pre, kv = run_colocated(reqs, m, c, 16)
    o = outcome(c, reqs, first, finish, pre, Slos(1.0, 1.0, 1.0), kv, deployment_watts(c, {c.shape: m}))
    w = int(WARMUP_FRACTION * len(reqs))  # the measured requests: all but the first tenth
    window = float(finish[w:].max() - reqs.arrival_s[w])
    assert o.joules_per_token == pytest.approx(3 * 2 * 700.0 * window / float(reqs.output_tokens[w:].sum()))


def test_a_split_deployment_draws_each_pools_chips_at_their_chips_watts():
    fast = Shape(2, 1, "fast")
    slow = Shape(1, 1, "slow")
    steps = AffineSteps(0.1, 0.0)
    models = {fast: replace(_model(fast, steps), watts_per_chip=1000.0),
              slow: replace(_model(slow, steps), watts_per_chip=400.0)}
    c = Candidate(ServeMode.DISAGGREGATED, slow, 3, 8, 256, fast, 2)
    assert deployment_watts(c, models) == 3 * 1 * 400.0 + 2 * 2 * 1000.0


# ---- the search against brute force -----------------------------------------------------------
class TinyMeasure:
    """The tiny space's steps as searched points: prefill of n tokens 4 ms + 0.2 ms x n / TP;
    decode of b at context c 4 ms + (0.2 ms x b + 10 ns x b x c) / TP; weights 1 MB a chip,
    KV 1000 bytes a token."""

    def __call__(self, p: StepPoint):
        tp = p.shape.tp
        if p.phase is ServingPhase.PREFILL:
            return Measured(0.004 + 2e-4 * p.prompt_len / tp, 1e6, 1000.0 * (p.prompt_len + 1) / p.shape.chips)
        return Measured(0.004 + (2e-4 * p.batch + 1e-8 * p.batch * (p.prompt_len + 1)) / tp, 1e6, 0.0)


def _tiny_mapped(modes: list[str], **extra):
    """The tiny space with MappedSteps tables filled from TinyMeasure (additive steps)."""
    serve, reqs, _ = _tiny(modes, **extra)
    cache = StepCache(TinyMeasure(), "tiny")
    lo, hi = int(reqs.prompt_tokens.min()) + 1, int((reqs.prompt_tokens + reqs.output_tokens).max())

    def model_of(shape: Shape):
        return replica_model(cache, shape, prefills=prefill_grid([256, 8]), batches=batch_grid([2, 8]),
                             contexts=context_grid(lo, hi), usable_bytes_per_chip=1e6 + 4e6)

    return serve, reqs, model_of


def _tiny(modes: list[str], **extra):
    table = {**BASE, "tp": [1, 2], "pp": [1], "max_chips": 6, "batch_caps": [2, 8],
             "chunk_tokens": [64, 256], "modes": modes, "scale_out_bw_GBps": 1.0, **extra}
    if "chips" in extra:  # each chip has its own price
        del table["dollars_per_chip_hour"]
    serve = serve_table(table, "t.toml", 1.0)
    reqs = requests(serve.traffic, serve.requests, serve.seed)

    def model_of(shape: Shape):
        speed = 2.0 if shape.chip == "fast" else 1.0  # the "fast" chip: every time halved
        steps = AffineSteps(0.004 / speed, 2e-4 / shape.tp / speed, 1e-8 / shape.tp / speed,
                            kv_bytes_per_token=1000.0)
        return _model(shape, steps, kv=shape.chips * 4e6)

    return serve, reqs, model_of


def _brute(serve, reqs, model_of) -> list:
    slos = Slos(serve.ttft_p99_s, serve.tpot_p99_s, serve.rate_per_s)
    shapes = [Shape(t, 1, c.name, c.dollars_per_chip_hour) for c in serve.chips for t in serve.tp]
    out = []
    for shape, cap, chunk in itertools.product(shapes, serve.batch_caps, serve.chunk_tokens):
        m = model_of(shape)
        if ServeMode.COLOCATED in serve.modes:
            for r in range(1, serve.max_chips // shape.chips + 1):
                c = Candidate(ServeMode.COLOCATED, shape, r, cap, chunk)
                first, fin, pre, kv = run_colocated(reqs, m, c, 16)
                out.append(outcome(c, reqs, first, fin, pre, slos, kv))
        if ServeMode.DISAGGREGATED not in serve.modes:
            continue
        for p in range(1, serve.max_chips // shape.chips + 1):
            first, pre = run_prefill_pool(reqs, m, p, chunk, 16)
            for dshape in shapes:
                dm = model_of(dshape)
                for d in range(1, (serve.max_chips - p * shape.chips) // dshape.chips + 1):
                    c = Candidate(ServeMode.DISAGGREGATED, dshape, d, cap, chunk, shape, p)
                    moved = transfer_s(m, dm, reqs.prompt_tokens, serve.scale_out_bw_GBps, 0.0)
                    fin, pre_d, kv = run_decode_pool(reqs, first, moved, dm, d, cap, 16)
                    out.append(outcome(c, reqs, first, fin, pre + pre_d, slos, kv))
    return out


LOADS = [{"rate_per_s": 40.0, "ttft_p99_s": 0.1, "tpot_p99_s": 0.012},
         {"rate_per_s": 60.0, "ttft_p99_s": 0.08, "tpot_p99_s": 0.010},
         {"rate_per_s": 30.0, "ttft_p99_s": 0.06, "tpot_p99_s": 0.008}]


@pytest.mark.parametrize("load", LOADS)
@pytest.mark.parametrize("modes", [["colocated"], ["disaggregated"], ["colocated", "disaggregated"]])
def test_the_search_finds_the_cheapest_deployment_brute_force_finds(modes, load):
    serve, reqs, model_of = _tiny(modes, **load)
    got = search(serve, reqs, model_of)
    every = _brute(serve, reqs, model_of)
    feasible = [o for o in every if o.feasible]
    assert feasible and len(feasible) < len(every), "the SLOs must bind in the tiny space for this test to mean anything"
    cheapest = min((o.dollars_per_hour, o.candidate.chips) for o in feasible)
    assert got.best is not None and (got.best.dollars_per_hour, got.best.candidate.chips) == cheapest
    top = max(o.goodput_per_s for o in feasible if (o.dollars_per_hour, o.candidate.chips) == cheapest)
    assert got.best.goodput_per_s == top
    assert got.simulations < len(every)  # the bounds pruned something


@pytest.mark.parametrize(("modes", "load"), [
    *((["colocated", "disaggregated"], load) for load in LOADS),
    (["colocated"], LOADS[0]), (["colocated"], LOADS[2]),  # at LOADS[1] no co-located deployment fits
])
def test_with_tables_the_search_finds_the_cheapest_deployment_brute_force_finds(modes, load):
    serve, reqs, model_of = _tiny_mapped(modes, **load)
    got = search(serve, reqs, model_of)
    every = _brute(serve, reqs, model_of)
    feasible = [o for o in every if o.feasible]
    assert feasible and len(feasible) < len(every)
    cheapest = min((o.dollars_per_hour, o.candidate.chips) for o in feasible)
    assert got.best is not None and (got.best.dollars_per_hour, got.best.candidate.chips) == cheapest


TWO_CHIPS = {"slow": {"dollars_per_chip_hour": 1.0}, "fast": {"dollars_per_chip_hour": 2.6}}


@pytest.mark.parametrize("load", LOADS[:2])
def test_with_two_chips_the_search_finds_the_cheapest_mix_brute_force_finds(load):
    serve, reqs, model_of = _tiny(["colocated", "disaggregated"], **{**load, "chips": TWO_CHIPS, "max_chips": 4})
    got = search(serve, reqs, model_of)
    every = _brute(serve, reqs, model_of)
    feasible = [o for o in every if o.feasible]
    assert feasible and len(feasible) < len(every)
    cheapest = min((o.dollars_per_hour, o.candidate.chips) for o in feasible)
    assert got.best is not None and (got.best.dollars_per_hour, got.best.candidate.chips) == cheapest
    assert {o.candidate.shape.chip for o in feasible} == {"slow", "fast"}  # both chips can serve


def test_no_deployment_meeting_the_slos_gives_no_answer_and_the_closest_breaks_the_binding_slo():
    serve, reqs, model_of = _tiny(["colocated", "disaggregated"], **{**LOADS[0], "tpot_p99_s": 0.001})
    got = search(serve, reqs, model_of)
    assert got.best is None
    assert got.closest is not None and got.closest.tpot_excess > 0


def test_the_search_is_deterministic():
    a = search(*_tiny(["colocated", "disaggregated"], **LOADS[1]))
    b = search(*_tiny(["colocated", "disaggregated"], **LOADS[1]))
    assert a.best == b.best and a.best is not None
    assert [repr(o) for o in a.outcomes] == [repr(o) for o in b.outcomes]  # float repr round-trips: bit for bit


def test_front_is_cost_up_goodput_up():
    got = search(*_tiny(["colocated"], **LOADS[0]))
    costs = [o.dollars_per_hour for o in got.front]
    goods = [o.goodput_per_s for o in got.front]
    assert costs == sorted(costs) and goods == sorted(goods) and len(set(goods)) == len(goods)
    assert all(math.isfinite(g) and g > 0 for g in goods)


# ---- sampling (sampled.py) --------------------------------------------------------------------
@pytest.mark.parametrize(("sampler", "modes", "load", "trials"), [
    *(("tpe", ["colocated"], load, 100) for load in LOADS),
    ("tpe", ["colocated", "disaggregated"], LOADS[0], 300),
    ("tpe", ["colocated", "disaggregated"], LOADS[2], 300),
    *(("nsga2", ["colocated"], load, 100) for load in LOADS[:2]),
])
def test_with_enough_trials_the_sampler_finds_the_answer_the_exhaustive_search_finds(sampler, modes, load, trials):
    exact = search(*_tiny(modes, **load))  # itself checked against brute force above
    serve, reqs, model_of = _tiny(modes, **load, sampler=sampler, trials=trials)
    got = sample(serve, reqs, model_of)
    assert got.best is not None and exact.best is not None
    assert (got.best.dollars_per_hour, got.best.candidate.chips) == (exact.best.dollars_per_hour,
                                                                     exact.best.candidate.chips)
    assert got.sampled.endswith(f"seed 0, {trials} trials") and not exact.sampled
    assert got.simulations <= trials  # a deployment proposed again is not simulated again


def test_with_few_trials_the_sampler_may_miss_and_says_it_sampled():
    serve, reqs, model_of = _tiny(["colocated", "disaggregated"], **LOADS[1], sampler="tpe", trials=3)
    got = sample(serve, reqs, model_of)
    assert got.sampled == "TPE, seed 0, 3 trials" and got.simulations <= 3


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_the_same_seed_gives_the_same_sampled_answer(sampler):
    a = sample(*_tiny(["colocated", "disaggregated"], **LOADS[0], sampler=sampler, trials=60))
    b = sample(*_tiny(["colocated", "disaggregated"], **LOADS[0], sampler=sampler, trials=60))
    assert a.best == b.best and a.best is not None
    assert [repr(o) for o in a.outcomes] == [repr(o) for o in b.outcomes]


def test_above_an_answer_missing_some_requests_the_front_reaches_full_goodput_at_brute_forces_cost():
    load = {**LOADS[1], "max_chips": 8}  # the answer ($12/h) serves 99.3 %, not all, within the SLOs
    serve, reqs, model_of = _tiny(["colocated"], **load)
    got = search(serve, reqs, model_of)
    assert got.best is not None and got.best.goodput_per_s < serve.rate_per_s
    full = min(o.dollars_per_hour for o in _brute(serve, reqs, model_of) if o.goodput_per_s == serve.rate_per_s)
    assert full > got.best.dollars_per_hour
    assert (got.front[-1].dollars_per_hour, got.front[-1].goodput_per_s) == (full, serve.rate_per_s)
    assert got.best.dollars_per_hour in [o.dollars_per_hour for o in got.front]  # the answer stays on it


@pytest.mark.parametrize("modes", [["colocated"], ["disaggregated"], ["colocated", "disaggregated"]])
def test_the_space_size_counts_every_deployment_an_enumeration_lists(modes):
    serve, _, _ = _tiny(modes, tp=[1, 2, 4], pp=[1, 2], max_chips=9)
    shapes = [Shape(t, p) for t in serve.tp for p in serve.pp if t * p <= serve.max_chips]
    limits_ = list(itertools.product(serve.batch_caps, serve.chunk_tokens))
    listed = 0
    for a in shapes:
        if "colocated" in modes:
            listed += sum(1 for r in range(1, 100) if r * a.chips <= serve.max_chips) * len(limits_)
        if "disaggregated" in modes:
            for b in shapes:
                pairs = [(p, d) for p in range(1, 100) for d in range(1, 100)
                         if p * a.chips + d * b.chips <= serve.max_chips]
                listed += len(pairs) * len(limits_)
    assert space_size(serve) == listed > 0


def test_the_limits_say_whether_the_kv_cache_or_the_batch_cap_limits_the_batch():
    """_tiny's replicas: 4e6 KV bytes per chip at 1000 bytes per token; mean context =
    mean prompt + half the output (16 tokens)."""
    serve, reqs, model_of = _tiny(["colocated"])
    context = float(reqs.prompt_tokens.mean()) + 8.0
    one, two = Shape(1, 1), Shape(2, 1)
    models = {s: model_of(s) for s in (one, two)}
    held = {s: int(s.chips * 4e6 / (1000.0 * context)) for s in (one, two)}
    assert held[one] < 50 < held[two]  # about 32 and 64 sequences: TP 1 below a cap of 50, TP 2 above
    slos = Slos(1.0, 1.0, 1.0)

    def best(shape, cap, preemptions=0):
        o = pruned(Candidate(ServeMode.COLOCATED, shape, 1, cap, 64), slos, "")
        return replace(o, preemptions=preemptions)

    (kv,) = limits(best(one, 50), models, reqs, serve)
    assert kv.startswith(f"KV cache: a TP 1 x PP 1 replica holds about {held[one]} sequences") and "below the batch cap 50" in kv
    cap, largest, pre = limits(best(two, 8, preemptions=3), models, reqs, serve)
    assert cap.startswith("batch cap 8: ") and f"would hold about {held[two]} sequences" in cap
    assert largest == "batch cap 8 is the largest searched (serve.batch_caps): larger caps were not tried"
    assert pre == "3 preemptions: the KV cache ran out under load"
    assert len(limits(best(two, 2), models, reqs, serve)) == 1  # 2 is not the largest cap


def test_a_tie_at_the_answers_cost_says_what_decided_it():
    from dfsearch.capacity.command import _tie_lines, dollars_per_mtok

    slos = Slos(1.0, 1.0, 4.0)

    def met(mode, tp, replicas, worst, goodput=4.0, prefill=None):
        c = Candidate(mode, Shape(tp, 1, "", 2.0), replicas, 8, 64, *(prefill or ()))
        return replace(pruned(c, slos, ""), ttft_excess=worst, tpot_excess=worst - 0.1, goodput_per_s=goodput,
                       output_tokens_per_s=1000.0)

    split = met(ServeMode.DISAGGREGATED, 1, 2, -0.5, prefill=(Shape(2, 1, "", 2.0), 1))  # 4 chips, $8/h
    colo = met(ServeMode.COLOCATED, 2, 2, -0.2)  # 4 chips, $8/h, less headroom
    dear = met(ServeMode.COLOCATED, 1, 5, -0.9)  # 5 chips: not a tie
    (line,) = _tie_lines([colo, split, dear], split)
    assert line.startswith("  why this one: 2 deployments meet the SLOs at $8.00/h and 4 chips; it wins on headroom "
                           "(worst P99 at 50.0% of its SLO against 80.0% for co-located: 2 x (TP 2 x PP 1)")
    assert _tie_lines([split, dear], split) == []
    assert dollars_per_mtok(split) == pytest.approx(8.0 * 1e6 / (1000.0 * 3600))
