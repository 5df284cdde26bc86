"""The search: optimality proofs by exhaustive enumeration, and a contract every strategy meets."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

import dfsearch.api
from dfsearch.codes import RunStatus, Status
from dfsearch.cost.layout import Stat, new_stats, no_control
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluator, evaluate_problem
from dfsearch.decision import Decision
from dfsearch.errors import InfeasibleError
from dfsearch.search.assign import assign_configs
from dfsearch.search.engine import search
from dfsearch.search.sharding import solve_spec_sharding

from specs import random_spec


def lowered(spec, t=4):
    sharding = solve_spec_sharding(spec, (4,), t).sharding
    return lower(spec, Outer((4,), sharding, 1, t, spec.execution.num_config)), sharding


def brute_force(problem) -> tuple[float, tuple[int, ...] | None]:
    """Minimum final_ns over every assignment of kernels to configurations."""
    n, nc = problem.num_kernels, problem.num_config
    rows = np.array(list(itertools.product(range(nc), repeat=n)), dtype=np.int64)
    finals, _, _ = Evaluator(problem).batch(rows)
    i = int(np.argmin(finals))
    return float(finals[i]), (tuple(int(c) for c in rows[i]) if math.isfinite(finals[i]) else None)


def final_of(problem, config) -> float:
    finals, _, _ = Evaluator(problem).batch(np.asarray([config], dtype=np.int64))
    return float(finals[0])


# (seed, kernels, configs, cycle model, SRAM bytes, training): training graphs exercise the
# FWD/BWD rule; inference graphs with binding SRAM have non-contiguous optima.
CASES = [(seed, n, c, cyc, sram, tr) for seed in range(6) for (n, c, cyc, sram, tr) in
         [(6, 3, False, 2e5, True), (7, 3, True, 2e5, True), (6, 4, False, 6e4, True),
          (7, 4, False, 2e4, False), (7, 4, True, 2e4, False), (7, 4, True, 1.2e4, False)]]  # fmt: skip


@pytest.mark.parametrize(("seed", "n", "c", "cycle", "sram", "training"), CASES)
def test_ideal_dp_is_optimal_over_all_assignments(seed, n, c, cycle, sram, training):
    spec = random_spec(seed, n, num_config=c, cycle=cycle, sram=sram, training=training)
    problem, _ = lowered(spec)
    best, _ = brute_force(problem)
    a = assign_configs(problem, method="ideal-dp")
    if not math.isfinite(best):
        assert a.config is None
        return
    assert a.config is not None
    assert final_of(problem, a.config) == pytest.approx(best, rel=1e-12)
    assert a.bound_ns <= a.value_ns * (1 + 1e-12)
    if a.exhaustive:
        assert a.bound_ns == pytest.approx(a.value_ns, rel=1e-12)


def _ideal_search(problem, prune: int, max_states: int = 10**6):
    from dfsearch.search import _dp
    from dfsearch.search.assign import _allowed, _regimes, _topo

    n = problem.num_kernels
    allowed = _allowed(problem)
    preds, succs, am, must = _dp.ideal_masks(problem.edges, allowed)
    bw, live_cap = _regimes(problem)[0]
    stats = new_stats()
    assign = np.full(n, -1, dtype=np.int64)
    value = _dp.ideal_search(problem.kernels, problem.edges, problem.constants, preds, succs,
                             _topo(problem), am, must, allowed, bw, live_cap, max_states, prune,
                             assign, stats, no_control())  # fmt: skip
    return value, stats


@pytest.mark.parametrize("seed", range(12))
def test_sram_pruning_keeps_the_optimum_and_costs_fewer_candidates(seed):
    """Candidates whose SRAM floor exceeds the capacity are never enumerated; the floor only
    grows as kernels join, so no feasible configuration is lost (weight kernels included:
    alone, their buffers are tiled and the floor does not apply)."""
    spec = random_spec(seed, 9, num_config=4, cycle=seed % 2 == 1,
                       sram=[1.2e4, 2e4, 6e4][seed % 3], training=seed % 4 < 2)  # fmt: skip
    problem, _ = lowered(spec)
    pruned, st1 = _ideal_search(problem, 1)
    full, st0 = _ideal_search(problem, 0)
    assert pruned == full or pruned == pytest.approx(full, rel=1e-12)
    assert st1[Stat.EVALS] <= st0[Stat.EVALS]


def test_incumbent_cut_keeps_the_optimum():
    """With a small state budget the queue passes half its limit, the search takes the
    contiguous-order DP's value as an incumbent and stops queueing candidates above it; the
    optimum must not change (when the budget does not overflow)."""
    cut_used = 0
    for seed in range(8):
        spec = random_spec(seed, 12, num_config=5, cycle=seed % 2 == 1,
                           sram=[1e12, 6e4][seed % 2], training=False)  # fmt: skip
        problem, _ = lowered(spec)
        small, st = _ideal_search(problem, 1, max_states=40)
        large, st_large = _ideal_search(problem, 1)
        assert st_large[Stat.OVERFLOW] == 0
        if st[Stat.OVERFLOW] == 0:
            assert small == pytest.approx(large, rel=1e-12)
            cut_used += st[Stat.QUEUE] < st_large[Stat.QUEUE]
    assert cut_used >= 2


def test_sram_pruning_prunes():
    spec = random_spec(3, 9, num_config=4, sram=2e4, training=False)
    problem, _ = lowered(spec)
    _, st1 = _ideal_search(problem, 1)
    _, st0 = _ideal_search(problem, 0)
    assert st1[Stat.EVALS] < st0[Stat.EVALS]


@pytest.mark.parametrize(("seed", "n", "c", "cycle", "sram", "training"), CASES[::2])
def test_order_dp_is_optimal_over_contiguous_splits(seed, n, c, cycle, sram, training):
    spec = random_spec(seed, n, num_config=c, cycle=cycle, sram=sram, training=training)
    problem, _ = lowered(spec)
    from dfsearch.search.assign import _topo

    order = [int(k) for k in _topo(problem)]
    best = math.inf
    for cuts in itertools.combinations_with_replacement(range(n + 1), c - 1):
        bounds = (0, *cuts, n)
        cfg = [0] * n
        for ci in range(c):
            for p in range(bounds[ci], bounds[ci + 1]):
                cfg[order[p]] = ci
        best = min(best, final_of(problem, cfg))
    a = assign_configs(problem, method="order-dp", anneal_iterations=0)
    if not math.isfinite(best):
        assert a.config is None
        return
    assert final_of(problem, a.config) == pytest.approx(best, rel=1e-12)


def test_dp_value_is_the_evaluators_value():
    spec = random_spec(3, 8, num_config=4)
    problem, sharding = lowered(spec)
    a = assign_configs(problem)
    d = Decision(shape=(4,), sharding=sharding, micro_batch_size=1, num_tile=4, config=a.config)
    ev = evaluate_problem(spec, problem, d)
    assert ev.all_config_ii_ns == pytest.approx(a.value_ns, rel=1e-12)


# --------------------------------------------------------------------------- contract
STRATEGIES = ["ideal-dp", "order-dp", "anneal", "auto"]


@pytest.mark.parametrize("method", STRATEGIES)
class TestStrategyContract:
    def test_valid_mapping(self, method):
        spec = random_spec(1, 7, num_config=3)
        problem, _ = lowered(spec)
        a = assign_configs(problem, method=method)
        assert a.config is not None
        _, status, _ = Evaluator(problem).batch(np.asarray([a.config]))
        assert status[0] == Status.OK

    def test_deterministic_under_seed(self, method):
        spec = random_spec(2, 8, num_config=4, sram=6e4)
        problem, _ = lowered(spec)
        a = assign_configs(problem, method=method, seed=7)
        b = assign_configs(problem, method=method, seed=7)
        assert a == b

    def test_budget_respected(self, method):
        spec = random_spec(4, 8, num_config=3)
        problem, _ = lowered(spec)
        a = assign_configs(problem, method=method, anneal_iterations=5, max_states=1000)
        # one order DP evaluates at most C * (n+1)^2 configurations; annealing adds 5 of them
        bound = {"ideal-dp": 3 * 1000 * 2**8, "order-dp": 3 * 81, "anneal": 6 * 3 * 81}
        assert a.evaluations <= bound.get(method, 3 * 1000 * 2**8)

    def test_never_worse_than_start(self, method):
        spec = random_spec(5, 8, num_config=3)
        problem, _ = lowered(spec)
        start = assign_configs(problem, method="order-dp", anneal_iterations=0)
        a = assign_configs(problem, method=method, seed=1)
        assert final_of(problem, a.config) <= final_of(problem, start.config) * (1 + 1e-12)

    def test_infeasible_status(self, method):
        spec = random_spec(6, 6, num_config=3, sram=10.0)
        problem, _ = lowered(spec)
        a = assign_configs(problem, method=method)
        assert a.config is None and "sram" in a.violations and a.violations["sram"] > 0


def test_engine_infeasible_names_the_binding_constraint():
    spec = random_spec(6, 6, num_config=3, sram=10.0)
    r = search(spec)
    assert r.evaluation is None and r.status is RunStatus.INFEASIBLE
    (v,) = r.violations
    assert v.constraint == "sram" and v.capacity == 10.0 and v.needed > 10.0
    assert "SRAM" in r.infeasible_message() and "too much" in r.infeasible_message()
    with pytest.raises(InfeasibleError, match=r"SRAM of a configuration needs .* holds 10 B"):
        dfsearch.api.run(spec)


def test_engine_is_deterministic_and_certifies():
    spec = random_spec(8, 8, num_config=3)
    a, b = search(spec, seed=3), search(spec, seed=3)
    ja, jb = a.to_json(), b.to_json()
    ja["search"].pop("seconds"), jb["search"].pop("seconds")
    assert ja == jb
    assert a.search.optimal is True and a.search.lower_bound_s == pytest.approx(a.evaluation.final_s)


def test_engine_optuna_path_is_deterministic(monkeypatch):
    import dfsearch.search.engine as engine

    monkeypatch.setattr(engine, "BOUND_LIMIT", 0)
    monkeypatch.setattr(engine, "OPTUNA_TRIALS", 3)
    spec = random_spec(9, 6, num_config=3)
    a, b = search(spec, seed=5), search(spec, seed=5)
    assert a.evaluation.decision == b.evaluation.decision
    assert a.search.method.startswith("optuna")
    assert a.search.candidates > 3
    assert a.status is RunStatus.FEASIBLE_NOT_PROVEN  # a sample is never labelled optimal
    monkeypatch.setattr(engine, "BOUND_LIMIT", 5000)
    full = search(replace(spec))  # bounded search; same space, so Optuna's best is no better
    assert full.status is RunStatus.OPTIMAL
    assert a.evaluation.final_ns >= full.evaluation.final_ns * (1 - 1e-12)


def test_joint_sharding_never_worse():
    spec = random_spec(10, 8, num_config=3)
    base = search(spec)
    joint = search(replace(spec, search=replace(spec.search, joint_sharding=True)))
    assert joint.evaluation.final_ns <= base.evaluation.final_ns * (1 + 1e-12)
