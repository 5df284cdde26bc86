"""The outer search: lazy candidates, best-bound-first pruning that keeps the optimum,
configuration-count dominance, work budgets, honest status labels, Ctrl-C."""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import replace
from itertools import product
from pathlib import Path

import pytest

from dfsearch.codes import ObjectiveKind, Parallelism, RunStatus, Status, Topology
from dfsearch.cost.lower import Outer, effective_num_config, lower
from dfsearch.cost.model import evaluate_problem, outer_status
from dfsearch.decision import Decision
from dfsearch.search import outer as outer_mod
from dfsearch.search.assign import assign_configs
from dfsearch.search.engine import search
from dfsearch.search.objective import Objective
from dfsearch.search.sharding import solve_spec_sharding
from dfsearch.spec import AUTO, NetworkDim, SearchSettings

from specs import random_spec


# --------------------------------------------------------------------------- candidates
@pytest.mark.parametrize("n", [1, 2, 12, 97, 360, 1024, 65536, 999_983, 2**20 * 3**5])
def test_divisors_match_brute_force(n):
    brute = [d for d in range(1, n + 1) if n % d == 0] if n < 10**6 else None
    divs = outer_mod.divisors(n)
    assert divs == sorted(set(divs)) and all(n % d == 0 for d in divs)
    if brute is not None:
        assert divs == brute


def test_divisors_of_huge_numbers_are_fast():
    # a prime near 1e9 and 10^12: trial division to sqrt(n), not a scan up to n
    assert outer_mod.divisors(999_999_937) == [1, 999_999_937]
    assert len(outer_mod.divisors(10**12)) == 13 * 13


@pytest.mark.parametrize(("n", "k"), [(1, 1), (12, 2), (64, 3), (65536, 3), (30, 3)])
def test_factorizations_are_all_ordered_factorizations(n, k):
    got = outer_mod.factorizations(n, k)
    assert len(got) == len(set(got))
    assert all(math.prod(f) == n and len(f) == k for f in got)
    if n <= 64:
        divs = [d for d in range(1, n + 1) if n % d == 0]
        brute = [f for f in product(divs, repeat=k) if math.prod(f) == n]
        assert sorted(got) == sorted(brute)
    if n == 65536:  # 2^16 into 3 ordered factors: C(18, 2)
        assert len(got) == 153


# --------------------------------------------------------------------------- exactness
def free_spec(seed: int, *, n: int = 6, training: bool = True, cycle: bool = False):
    """A random spec on 16 chips with two free network sizes and num_config = auto."""
    base = random_spec(seed, n, num_config=3, training=training, cycle=cycle)
    net = (
        NetworkDim(topology=Topology.RING, link_bw_GBps=50.0, size=0, parallelism=Parallelism.TP),
        NetworkDim(topology=Topology.RING, link_bw_GBps=25.0, size=0, parallelism=Parallelism.DP),
    )
    system = replace(base.system, num_chip=16, network=net)
    return replace(base, system=system, execution=replace(base.execution, num_config=AUTO))


def brute_force_final_ns(spec, weight=lambda shape: 1.0) -> float:
    """The optimum of weight(shape) x final_ns by solving every outer choice exactly, no
    bounds, no dominance."""
    best = math.inf
    counts = {effective_num_config(spec, c) for c in outer_mod.config_counts(spec)}
    for shape in outer_mod.shapes(spec):
        for t in outer_mod.tile_counts(spec):
            sharding = solve_spec_sharding(spec, shape, t).sharding
            for c in counts:
                outer = Outer(shape, sharding, 1, t, c)
                if outer_status(spec, outer)[0] is not Status.OK:
                    continue
                problem = lower(spec, outer)
                a = assign_configs(problem)
                assert a.exhaustive
                if a.config is None:
                    continue
                d = Decision(shape=shape, sharding=sharding, micro_batch_size=1, num_tile=t,
                             config=a.config)  # fmt: skip
                ev = evaluate_problem(spec, problem, d)
                if ev.feasible:
                    best = min(best, weight(shape) * ev.final_ns)
    return best


@pytest.mark.parametrize("seed", range(8))
def test_best_first_finds_the_brute_force_optimum_and_proves_it(seed):
    spec = free_spec(seed, training=seed % 2 == 0, cycle=seed % 3 == 0)
    r = search(spec)
    expected = brute_force_final_ns(spec)
    if expected == math.inf:
        assert r.evaluation is None and r.status is RunStatus.INFEASIBLE
        return
    assert r.evaluation.final_ns == pytest.approx(expected, rel=1e-12)
    assert r.status is RunStatus.OPTIMAL
    assert r.search.lower_bound_s * 1e9 == pytest.approx(expected, rel=1e-12)
    assert r.search.pruned > 0 or r.search.solved == r.search.candidates


@pytest.mark.parametrize("seed", range(10))
def test_one_more_configuration_is_never_worse(seed):
    """C + 2 configurations (C + 1 without the FWD/BWD rule) are never worse than C: the
    dominance the search uses to skip smaller configuration counts."""
    training = seed % 2 == 0
    spec = random_spec(100 + seed, 7, num_config=3, training=training, cycle=seed % 3 == 1)
    step = 2 if training else 1
    values = {}
    for c in range(1, 7):
        problem = lower(spec, Outer((4,), solve_spec_sharding(spec, (4,), 4).sharding, 1, 4, c))
        a = assign_configs(problem)
        assert a.exhaustive
        values[c] = a.value_ns
    for c in range(1, 7 - step):
        assert values[c + step] <= values[c] * (1 + 1e-12), (c, values)


# --------------------------------------------------------------------------- budgets
def test_same_spec_and_seed_same_answer():
    spec = free_spec(3)
    a, b = search(spec, seed=7), search(spec, seed=7)
    ja, jb = a.to_json(), b.to_json()
    ja["search"].pop("seconds"), jb["search"].pop("seconds")
    assert ja == jb


def test_work_budget_stops_deterministically_and_says_so():
    spec = free_spec(2, n=9)
    full = search(spec)
    assert full.search.evaluations > 100
    budget = full.search.evaluations // 3
    a, b = search(spec, max_evaluations=budget), search(spec, max_evaluations=budget)
    assert a.status is RunStatus.STOPPED_BY_LIMIT and "work budget" in a.search.stopped_by
    assert a.to_json()["status"] == "stopped_by_limit"
    ja, jb = a.to_json(), b.to_json()
    ja["search"].pop("seconds"), jb["search"].pop("seconds")
    assert ja == jb
    if a.evaluation is not None:
        assert a.search.lower_bound_s is None or a.search.lower_bound_s <= a.evaluation.final_s


def test_time_limit_that_fires_is_labelled():
    spec = free_spec(2)
    r = search(spec, time_limit_s=1e-9)
    assert r.status is RunStatus.STOPPED_BY_LIMIT
    assert "time limit" in r.search.stopped_by


def test_no_time_limit_by_default():
    assert SearchSettings().time_limit_s == 0.0
    spec = free_spec(1)
    r = search(replace(spec, search=SearchSettings()))
    assert r.search.stopped_by == "" and r.status is RunStatus.OPTIMAL


def test_ctrl_c_returns_the_best_so_far_labelled_interrupted():
    spec = free_spec(4)
    calls = []

    def progress(p):
        calls.append(p.best_s)
        if p.best_s is not None:
            raise KeyboardInterrupt

    r = search(spec, progress=progress)
    assert r.status in (RunStatus.INTERRUPTED, RunStatus.OPTIMAL)
    assert r.evaluation is not None and r.evaluation.feasible


def test_lower_bound_never_exceeds_the_result():
    rng = random.Random(0)
    for _ in range(6):
        spec = free_spec(rng.randrange(1000), training=rng.random() < 0.5)
        r = search(spec, max_evaluations=rng.choice([5, 50, 10**9]))
        if r.evaluation is not None and r.search.lower_bound_s is not None:
            assert r.search.lower_bound_s <= r.evaluation.final_s * (1 + 1e-12)


# --------------------------------------------------------------------------- reproducers
SPECS = Path(__file__).parent / "data" / "specs"


def test_llama70b_like_spec_is_proven_optimal():
    """The spec whose answer used to change with machine load (5.13 s / 4.20 s / 4.19 s)."""
    from dfsearch.loader import load_spec

    r = search(load_spec(SPECS / "llama70b_like_1024.toml"))
    assert r.status is RunStatus.OPTIMAL
    assert r.search.lower_bound_s == pytest.approx(r.evaluation.final_s, rel=1e-12)
    assert r.search.pruned > 0


@pytest.mark.slow
def test_three_free_sizes_on_65536_chips_are_proven():
    from dfsearch.loader import load_spec

    spec = load_spec(SPECS / "llama70b_like_65536_free3.toml")
    assert [d.size for d in spec.system.network] == [0, 0, 0]
    r = search(spec)
    assert r.status is RunStatus.OPTIMAL
    # shapes (tp, pp, dp) with pp = 2^k <= num_layer = 80 (k <= 6): 17 - k each
    assert r.search.candidates == sum(17 - k for k in range(7)) * 13 * 13
    assert math.prod(r.evaluation.decision.shape) == 65536


def test_huge_seq_len_candidates_are_lazy():
    """seq_len 2^40: 41 tile counts from the divisors (a scan would never end)."""
    spec = free_spec(0)
    spec = replace(spec, workload=replace(spec.workload, seq_len=2**40))
    assert outer_mod.tile_counts(spec) == [2**i for i in range(41)]


# --------------------------------------------------------------------------- objectives
@dataclasses.dataclass(frozen=True)
class _TimePerTP(Objective):
    """A test objective: final_ns / (size of the first network dimension), monotone in
    final_ns for a fixed shape as the Objective contract asks. It prefers wide TP groups,
    so its optimum is not the time optimum."""

    kind: ObjectiveKind = ObjectiveKind.TIME
    unit: str = "ns / chip"

    def value(self, ev):
        return ev.final_ns / ev.decision.shape[0]

    def bound(self, problem, final_ns_bound):
        return final_ns_bound / problem.outer.shape[0]


@pytest.mark.parametrize("seed", range(4))
def test_the_search_minimises_a_plugged_in_objective_and_proves_it(seed, monkeypatch):
    from dfsearch.search import objective as objective_mod

    spec = free_spec(seed, training=seed % 2 == 0)
    time_optimum = search(spec).evaluation
    monkeypatch.setitem(objective_mod.OBJECTIVES, ObjectiveKind.TIME, _TimePerTP())
    r = search(spec)
    expected = brute_force_final_ns(spec, weight=lambda shape: 1 / shape[0])
    got = r.evaluation.final_ns / r.evaluation.decision.shape[0]
    assert got == pytest.approx(expected, rel=1e-12)
    assert r.evaluation.decision.shape != time_optimum.decision.shape  # not the time optimum
    assert r.status is RunStatus.OPTIMAL
    assert r.search.lower_bound == pytest.approx(expected, rel=1e-12)
