"""The request-level serving simulation against closed forms and the properties it must keep."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dfsearch.capacity.metrics import Price, Slo, per_request, summarize
from dfsearch.capacity.scheduler import ReplicaEngine, Scheduler
from dfsearch.capacity.simulate import Deployment, simulate
from dfsearch.capacity.steps import AffineSteps, TabulatedSteps
from dfsearch.capacity.traffic import Fixed, LogNormal, Poisson, Traffic, Uniform, requests
from dfsearch.capacity.traffic import Requests as Reqs
from dfsearch.codes import Router
from dfsearch.errors import SpecError


def _at(arrivals, prompts, outputs) -> Reqs:
    return Reqs(np.asarray(arrivals, dtype=np.float64), np.asarray(prompts, dtype=np.int64),
                np.asarray(outputs, dtype=np.int64))


# ---- M/D/1 ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("rho", "n", "output"), [(0.5, 50_000, 1), (0.8, 200_000, 1), (0.5, 50_000, 4)])
def test_batch_of_one_is_an_md1_queue(rho, n, output):
    """Batch cap 1, fixed prompt P and output O, Poisson arrivals: each request holds the
    replica for one prefill iteration of base + per_token P + per_context P seconds and
    O - 1 decode iterations (base + per_token + per_context (P + j)), a deterministic
    service D, first come first served. So the mean wait is the M/D/1 (Pollaczek-Khinchine)
    W = rho D / (2 (1 - rho)), the mean TTFT W + the prefill and the mean end-to-end W + D.
    Within 3 %, for three seeds."""
    a, b, c, p = 0.002, 1e-5, 1e-7, 256
    steps = AffineSteps(base_s=a, per_token_s=b, per_context_token_s=c)
    prefill = a + b * p + c * p
    d = prefill + sum(a + b + c * (p + j) for j in range(1, output))
    wait = rho * d / (2 * (1 - rho))
    for seed in (1, 2, 3):
        reqs = requests(Traffic(Poisson(rho / d), Fixed(p), Fixed(output)), n, seed=seed)
        out = simulate(reqs, Deployment(steps, kv_capacity_bytes=1024), Scheduler(max_batch=1, token_budget=p))
        ttft = np.mean(out.first_token_s - reqs.arrival_s)
        e2e = np.mean(out.finish_s - reqs.arrival_s)
        assert abs(ttft / (wait + prefill) - 1) < 0.03, (seed, ttft, wait + prefill)
        assert abs(e2e / (wait + d) - 1) < 0.03, (seed, e2e, wait + d)


# ---- batching, chunking and preemption in closed form -----------------------------------------
@pytest.mark.parametrize(("prompt", "budget"), [(1000, 64), (64, 64), (65, 64), (7, 3), (1, 1)])
def test_chunked_prefill_takes_ceil_prompt_over_budget_iterations(prompt, budget):
    """Alone, a prompt of P tokens with a budget of T per iteration is prefilled in chunks of
    T (the last one the rest): its first token comes after ceil(P / T) iterations, each
    costing base + per_token x chunk + per_context x (the prompt tokens prefilled so far)."""
    a, b, c = 1.0, 0.01, 0.0001
    k = math.ceil(prompt / budget)
    ends = [min(i * budget, prompt) for i in range(1, k + 1)]
    chunks = [e - s for s, e in zip([0, *ends], ends)]
    expected = sum(a + b * x + c * e for x, e in zip(chunks, ends))
    out = simulate(_at([0.0], [prompt], [1]), Deployment(AffineSteps(a, b, c), kv_capacity_bytes=4096),
                   Scheduler(max_batch=1, token_budget=budget))
    assert out.first_token_s[0] == pytest.approx(expected, rel=1e-12)
    assert out.iterations.tolist() == [k]


def test_continuous_batching_shares_iterations():
    """Two requests at t = 0 (P = 10, O = 5), batch cap 2, budget 20: one iteration prefills
    both (20 tokens, context 20), then 4 decode iterations of 2 sequences at context
    2 (10 + j). With cap 1 the second waits for the first."""
    a, b, c = 1.0, 0.1, 0.01
    steps = AffineSteps(a, b, c)
    t1 = a + 20 * b + 20 * c
    both = t1 + sum(a + 2 * b + c * 2 * (10 + j) for j in range(1, 5))
    out = simulate(_at([0, 0], [10, 10], [5, 5]), Deployment(steps, 4096), Scheduler(2, 20))
    assert out.first_token_s.tolist() == pytest.approx([t1, t1], rel=1e-12)
    assert out.finish_s.tolist() == pytest.approx([both, both], rel=1e-12)
    alone = (a + 10 * b + 10 * c) + sum(a + b + c * (10 + j) for j in range(1, 5))
    out = simulate(_at([0, 0], [10, 10], [5, 5]), Deployment(steps, 4096), Scheduler(1, 20))
    assert out.finish_s.tolist() == pytest.approx([alone, 2 * alone], rel=1e-12)


def test_decodes_first_then_prefill_chunks_take_the_rest_of_the_budget():
    """Budget 15, cap 2, both P = 10 at t = 0: iteration 1 prefills request 0 whole and 5
    tokens of request 1 (context 10 + 5); iteration 2 decodes request 0 (1 token, context 11)
    and prefills request 1's last 5 (context 10): request 1's first token comes then."""
    a, b, c = 1.0, 0.1, 0.01
    t1 = a + 15 * b + 15 * c
    t2 = t1 + a + 6 * b + 21 * c
    out = simulate(_at([0, 0], [10, 10], [2, 2]), Deployment(AffineSteps(a, b, c), 4096), Scheduler(2, 15))
    assert out.first_token_s.tolist() == pytest.approx([t1, t2], rel=1e-12)


def test_preemption_by_hand():
    """One-token blocks, 12 of them, two requests at t = 0 with P = 4, O = 6, 1 s per
    iteration. Both prefill in iteration 0 (8 blocks); iterations 1 and 2 take the other 4;
    iteration 3 preempts the newer request (B, 3 tokens generated, 6 blocks back). A goes on
    alone, finishing at t = 6 (iteration 5). B is admitted again at iteration 6: it
    recomputes 4 + 3 tokens in one chunk (its 4th token), decodes two more and finishes at 9."""
    out = simulate(_at([0, 0], [4, 4], [6, 6]), Deployment(AffineSteps(1.0, 0.0), kv_capacity_bytes=12),
                   Scheduler(max_batch=2, token_budget=8, block_tokens=1))
    assert out.first_token_s.tolist() == [1.0, 1.0]
    assert out.finish_s.tolist() == [6.0, 9.0]
    assert out.preemptions.tolist() == [0, 1]
    assert out.peak_kv_blocks.tolist() == [12]


def test_small_kv_preempts_yet_every_request_finishes():
    reqs = requests(Traffic(Poisson(40.0), Uniform(20, 200), Uniform(50, 300)), 400, seed=4)
    steps = AffineSteps(0.01, 1e-4, 1e-7)
    out = simulate(reqs, Deployment(steps, kv_capacity_bytes=1024), Scheduler(16, 256, block_tokens=16))
    assert out.preemptions.sum() > 0
    assert np.isfinite(out.finish_s).all()
    assert (reqs.arrival_s < out.first_token_s).all() and (out.first_token_s <= out.finish_s).all()
    assert (out.peak_kv_blocks <= out.kv_blocks).all()
    # every token after the first takes an iteration of at least base + per_token seconds
    assert (out.finish_s - out.first_token_s >= (reqs.output_tokens - 1) * (0.01 + 1e-4) * (1 - 1e-12)).all()


def test_a_request_that_cannot_fit_the_kv_cache_is_refused():
    with pytest.raises(SpecError, match=r"requests\[1\] needs 3 KV blocks .* a replica holds 2"):
        simulate(_at([0, 1], [4, 8], [1, 2]), Deployment(AffineSteps(1.0, 0.0), 8), Scheduler(1, 8, block_tokens=4))


@pytest.mark.parametrize(("reqs", "message"), [
    (_at([0, 2, 1], [1, 1, 1], [1, 1, 1]), "requests.arrival_s[2] must be non-decreasing (sorted by arrival). Got 1.0 instead."),
    (_at([0, 1], [1, 0], [1, 1]), "requests.prompt_tokens[1] must be >= 1. Got 0 instead."),
    (_at([0, 1], [1, 1], [-3, 1]), "requests.output_tokens[0] must be >= 1. Got -3 instead."),
])
def test_bad_requests_are_refused(reqs, message):
    with pytest.raises(SpecError) as e:
        simulate(reqs, Deployment(AffineSteps(1.0, 0.0), 64), Scheduler(1, 8))
    assert str(e.value) == message


# ---- runs of unchanged iterations, determinism, routing ----------------------------------------
def _config(seed: int):
    rng = np.random.Generator(np.random.PCG64(seed))
    traffic = Traffic(Poisson(float(rng.uniform(5, 60))), LogNormal(200, 0.7, 8, 1500), Uniform(1, 200))
    reqs = requests(traffic, 600, seed=seed)
    steps = AffineSteps(0.004, float(rng.uniform(1e-6, 5e-5)), float(rng.uniform(0, 1e-7)))
    kv = float(rng.choice([3e3, 6e3, 1e6]))  # the small ones preempt (a request needs <= 1700)
    deployment = Deployment(steps, kv, replicas=1 + seed % 3, router=Router(seed % 2))
    cap = int(rng.integers(1, 40))
    return reqs, deployment, Scheduler(cap, cap + int(rng.integers(0, 512)), block_tokens=int(rng.choice([1, 16])))


@pytest.mark.parametrize("seed", range(100, 106))  # 102, 104, 105 preempt; both routers
def test_runs_of_unchanged_iterations_equal_one_at_a_time(seed, monkeypatch):
    reqs, deployment, scheduler = _config(seed)
    fast = simulate(reqs, deployment, scheduler)
    monkeypatch.setattr(ReplicaEngine, "_run_unchanged", lambda self, t: False)
    slow = simulate(reqs, deployment, scheduler)
    for name in ("replica", "preemptions", "iterations", "peak_kv_blocks"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    for name in ("first_token_s", "finish_s", "kv_block_s"):
        assert np.allclose(getattr(fast, name), getattr(slow, name), rtol=1e-9, atol=0), name


def test_same_inputs_same_result_bit_for_bit():
    reqs, deployment, scheduler = _config(7)
    deployment = Deployment(deployment.steps, 3e3, replicas=3, router=Router.LEAST_LOADED)
    a, b = simulate(reqs, deployment, scheduler), simulate(reqs, deployment, scheduler)
    assert a.preemptions.sum() > 0
    for name in ("replica", "first_token_s", "finish_s", "preemptions", "kv_block_s", "iterations"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_routers():
    """Replicas of batch 1, 1 s per iteration. Request 0 (t = 0) decodes until t = 100 on
    replica 0; request 1 (t = 0.5, one token) is done on replica 1 at t = 1.5; request 2
    (t = 2) goes to replica 0 in turn (round robin), to the idle replica 1 when least
    loaded. Request 0 itself: a tie of two idle replicas goes to replica 0."""
    reqs = _at([0.0, 0.5, 2.0], [1, 1, 1], [100, 1, 1])
    base = Deployment(AffineSteps(1.0, 0.0), 1024, replicas=2)
    rr = simulate(reqs, base, Scheduler(1, 1))
    ll = simulate(reqs, Deployment(base.steps, 1024, replicas=2, router=Router.LEAST_LOADED), Scheduler(1, 1))
    assert rr.replica.tolist() == [0, 1, 0] and rr.finish_s.tolist() == [100.0, 1.5, 101.0]
    assert ll.replica.tolist() == [0, 1, 1] and ll.finish_s.tolist() == [100.0, 1.5, 3.0]


# ---- metrics -------------------------------------------------------------------------------------
def test_metrics_of_one_request_in_closed_form():
    """One request, P = 4, O = 3, 1 s per iteration, one-token blocks, 10 blocks: TTFT 1,
    TPOT 1, end-to-end 3; KV holds 4, 5, 6 blocks for 1 s each: 15 / (10 x 3) = 0.5; 1 $/s
    and 100 W over 3 s for 3 output tokens."""
    reqs = requests(Traffic(Poisson(1.0), Fixed(4), Fixed(3)), 1, seed=0)
    out = simulate(reqs, Deployment(AffineSteps(1.0, 0.0), 10), Scheduler(1, 4, block_tokens=1))
    s = summarize(out, Slo(ttft_s=1.0, tpot_s=1.0), Price(dollars_per_hour=3600.0, watts=100.0))
    assert (s.ttft_s.p50, s.tpot_s.p99, s.e2e_s.mean) == pytest.approx((1.0, 1.0, 3.0), rel=1e-9)
    assert s.window_s == pytest.approx(3.0, rel=1e-9)
    assert s.kv_utilisation == pytest.approx(0.5, rel=1e-9)
    assert (s.requests_per_s, s.output_tokens_per_s, s.total_tokens_per_s) == pytest.approx((1 / 3, 1.0, 7 / 3), rel=1e-9)
    assert s.goodput_per_s == pytest.approx(1 / 3, rel=1e-9) and s.slo_attainment == 1.0
    assert s.dollars_per_million_tokens == pytest.approx(1e6, rel=1e-9)
    assert s.joules_per_token == pytest.approx(100.0, rel=1e-9)
    assert summarize(out, Slo(ttft_s=1.0, tpot_s=0.5)).goodput_per_s == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_goodput_never_exceeds_the_arrival_rate(seed):
    """Goodput <= throughput <= the measured requests' arrival rate (their count over the
    span of their arrivals), whatever the load, routing or SLO."""
    reqs, deployment, scheduler = _config(100 + seed)
    out = simulate(reqs, deployment, scheduler)
    warmup = 50 * (seed % 2)
    s = summarize(out, Slo(ttft_s=10.0, tpot_s=1.0), warmup=warmup)
    arrived = reqs.arrival_s[warmup:]
    assert s.slo_attainment > 0
    assert s.goodput_per_s <= s.requests_per_s <= len(arrived) / (arrived[-1] - arrived[0])


def test_percentiles_are_ordered_and_above_the_unloaded_latency():
    """Fixed P <= budget and O: alone a request takes one prefill iteration and O - 1
    decodes; under load no iteration is shorter (the step time grows with every term), so
    every TTFT and end-to-end latency is at least the unloaded one."""
    a, b, c, p, o = 0.003, 2e-5, 1e-8, 300, 40
    ttft0 = a + b * p + c * p
    e2e0 = ttft0 + sum(a + b + c * (p + j) for j in range(1, o))
    reqs = requests(Traffic(Poisson(60.0), Fixed(p), Fixed(o)), 3000, seed=9)
    out = simulate(reqs, Deployment(AffineSteps(a, b, c), 3000, replicas=2), Scheduler(16, 512))
    ttft, _, e2e = per_request(out)
    s = summarize(out, Slo(1.0, 1.0))
    assert s.preemptions > 0  # the load and the preemptions both lengthen latencies
    for q, unloaded, each in ((s.ttft_s, ttft0, ttft), (s.e2e_s, e2e0, e2e)):
        assert q.p99 >= q.p90 >= q.p50 >= unloaded
        assert each.min() >= unloaded * (1 - 1e-12)
    assert s.e2e_s.p99 > s.e2e_s.p50  # not all equal: the load is felt


def test_a_table_of_an_affine_form_simulates_like_the_form():
    """Bilinear interpolation of a function affine in the tokens and the context is exact,
    so a table sampled from AffineSteps on a coarse grid gives the same simulation."""
    form = AffineSteps(0.004, 3e-5, 2e-8)
    tokens, contexts = (1, 7, 100, 600), (0, 999, 30_000, 200_000)
    table = TabulatedSteps(tokens, contexts, tuple(tuple(form.step_s(n, 0, c) for c in contexts) for n in tokens))
    reqs = requests(Traffic(Poisson(30.0), Uniform(10, 400), Uniform(1, 150)), 800, seed=3)
    a, b = (simulate(reqs, Deployment(s, 5000), Scheduler(24, 600)) for s in (form, table))
    assert a.preemptions.sum() > 0 and np.array_equal(a.preemptions, b.preemptions)
    assert np.allclose(a.finish_s, b.finish_s, rtol=1e-9, atol=0)
    assert np.allclose(a.first_token_s, b.first_token_s, rtol=1e-9, atol=0)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Scheduler(0, 8), "scheduler.max_batch must be an integer >= 1. Got 0 instead."),
    (lambda: Scheduler(8, 4), "scheduler.token_budget must be an integer >= max_batch (8). Got 4 instead."),
    (lambda: Scheduler(1, 8, block_tokens=2.5), "scheduler.block_tokens must be an integer >= 1. Got 2.5 instead."),
    (lambda: Deployment(AffineSteps(1.0, 0.0), 64, replicas=0), "deployment.replicas must be an integer >= 1. Got 0 instead."),
    (lambda: Deployment(AffineSteps(1.0, 0.0), "lots"), "deployment.kv_capacity_bytes must be > 0. Got 'lots' instead."),
    (lambda: Deployment(AffineSteps(1.0, 0.0), 64, router="fastest"),
     "deployment.router must be one of ('round_robin', 'least_loaded'). Got 'fastest' instead."),
    (lambda: AffineSteps(1.0, 0.0, kv_bytes_per_token=0), "steps.kv_bytes_per_token must be > 0. Got 0 instead."),
    (lambda: requests(Traffic(Poisson(1.0), Fixed(1), Fixed(1)), 5, seed=-1), "requests.seed must be an integer >= 0. Got -1 instead."),
])
def test_bad_settings_are_refused_with_their_field(make, message):
    with pytest.raises(SpecError) as e:
        make()
    assert str(e.value) == message and e.value.exit_code == 2
