"""The core-allocation bound (``search/core_bound.py``; docs/design.md, "The core-allocation
bound") and the step count that lets the chain bound give up before costing anything.

* ``core_table`` is the fewest cores that reach each cycle target, by brute force over
  every (lanes, stages) pair; the left-out kernels' fill of the cores is at least the work
  of any of them that fit (brute force over their counts), and a step's cost is the least
  over every target (brute force over all integer targets in range).
* The bound never exceeds the summed II of any feasible assignment (exhaustive enumeration
  on random cycle-model problems), with every kernel kept and with kernels left out (the
  priced variant), and it is sharper than the additive bound on some of them.
* ``chain_bound._steps_over`` says "over" only where the chain bound's shortest path runs
  out of the same budget.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_chain_bound import _cycle_problem
from test_layered import _feasible_sums, _synthetic

from dfsearch.search import chain_bound as cb
from dfsearch.search import core_bound as cob
from dfsearch.search.assign import _allowed, _regimes
from dfsearch.search.graph_bound import graph_bound_ns


def _cycles(a: int, b: int, z: int, pl: int, ps: int) -> int:
    return math.ceil(a / pl) * math.ceil(b / ps) * z


@pytest.mark.parametrize(("a", "b", "z", "cores"), [(7, 3, 5, 6), (12, 1, 2, 16), (9, 8, 1, 10),
                                                    (1, 1, 4, 3), (30, 5, 3, 40)])
def test_core_table_is_the_fewest_cores_per_target(a, b, z, cores):
    pairs = [(pl * ps, _cycles(a, b, z, pl, ps)) for pl in range(1, cores + 1)
             for ps in range(1, cores // pl + 1)]  # fmt: skip
    taus, ms = cob.core_table(a, b, z, cores)
    assert taus[0] == min(c for _, c in pairs)
    for tau in range(int(taus[0]), a * b * z + 2):
        fewest = min(p for p, c in pairs if c <= tau)
        assert ms[np.searchsorted(taus, tau, side="right") - 1] == fewest, tau


def _left_out_case(seed: int):
    """A random ``_LeftOut`` on a chip of 4..11 cores (kernels of a, b, z in 1..8, two
    kept types and one to three left-out ones) and a kept step's tables and counts."""
    import types as pytypes

    rng = np.random.default_rng(seed)
    cores = int(rng.integers(4, 12))
    kinds = [tuple(int(x) for x in rng.integers(1, 9, 3)) for _ in range(int(rng.integers(1, 4)))]
    tables = [cob.core_table(a, b, z, cores) for a, b, z in kinds]
    left = object.__new__(cob._LeftOut)
    left.cores, left.tables = cores, tables
    left.counts = rng.integers(1, 4, len(kinds)).astype(float)
    left.work = np.array([float(a * b * z) for a, b, z in kinds])
    left.total = float((left.counts * left.work).sum())
    kept = [cob.core_table(*(int(x) for x in rng.integers(1, 9, 3)), cores) for _ in range(2)]
    return pytypes.SimpleNamespace(left=left, kept=kept, counts=np.array([1, 1]), cores=cores)


def test_left_out_fill_is_at_least_the_work_of_every_subset_that_fits():
    """X(tau) >= the one-core work of any whole left-out kernels whose cores fit what the
    kept ones leave (brute force over the counts of each type)."""
    import itertools

    for seed in range(40):
        case = _left_out_case(seed)
        left = case.left
        taus = np.arange(1.0, 80.0)
        filled = left._fill(taus, case.kept, case.counts)
        for i, tau in enumerate(taus):
            room = case.cores - sum(c * _m(t, tau) for t, c in zip(case.kept, case.counts))
            for d in itertools.product(*(range(int(c) + 1) for c in left.counts)):
                need = sum(n * _m(t, tau) for t, n in zip(left.tables, d))
                if need <= room:
                    work = sum(n * w for n, w in zip(d, left.work))
                    assert work <= filled[i] * (1 + 1e-12), (seed, tau, d)


def test_left_out_fill_takes_whole_kernels_when_their_cores_share_a_divisor():
    """8 cores at a target of 4 cycles: the kept kernel (3 x 1 x 4) takes 3 cores, each of
    two left-out kernels (4 x 1 x 4, work 16) takes 4, so only one fits in the 5 left: 16,
    not the fractional 5 / 4 x 16 = 20."""
    left = object.__new__(cob._LeftOut)
    left.cores, left.tables = 8, [cob.core_table(4, 1, 4, 8)]
    left.counts, left.work = np.array([2.0]), np.array([16.0])
    left.total = 32.0
    kept = [cob.core_table(3, 1, 4, 8)]
    assert left._fill(np.array([4.0]), kept, np.array([1]))[0] == 16.0


def test_left_out_step_is_the_least_over_every_target():
    for seed in range(40):
        case = _left_out_case(seed)
        left = case.left
        tau0 = max(t[0][0] for t in case.kept) + float(seed % 5)
        dense = np.arange(tau0, tau0 + left.total / case.cores + 2)
        brute = (dense - left._fill(dense, case.kept, case.counts) / case.cores).min()
        assert left.step(tau0, case.kept, case.counts) == pytest.approx(brute, rel=1e-12)


def _m(table, tau: float) -> float:
    """Fewest cores at ``tau`` cycles from a ``core_table`` (inf below its fewest cycles)."""
    taus, ms = table
    return math.inf if tau < taus[0] else ms[np.searchsorted(taus, tau, side="right") - 1]


def _checked(choose=None, monkeypatch=None) -> tuple[int, int]:
    """(problems with a feasible assignment, those where the core bound beats the additive
    bound), asserting on each that the core bound is below the best feasible sum."""
    if choose is not None:
        original = cob._choices
        monkeypatch.setattr(cob, "_choices", lambda *a: [choose(original(*a))])
    checked = sharper = 0
    for seed in range(16):
        for training in (True, False):
            for nc in (3, 4):
                problem = _cycle_problem(seed, training, nc)
                allowed = _allowed(problem)
                bw, live_cap = _regimes(problem)[0]
                sums = list(_feasible_sums(problem, nc, bw, live_cap))
                if not sums:
                    continue
                bound = cob.core_bound_ns(problem, allowed)
                assert bound <= min(sums) * (1 + 1e-12), (seed, training, nc, bound, min(sums))
                checked += 1
                sharper += bound > graph_bound_ns(problem, bw, allowed) * (1 + 1e-9)
    return checked, sharper


def test_core_bound_is_below_every_feasible_assignment():
    checked, sharper = _checked()
    assert checked >= 40
    assert sharper >= 2  # not vacuous: the integral allocation is above work / cores


@pytest.mark.parametrize("which", [1, 2])
def test_core_bound_with_kernels_left_out_is_below_every_feasible_assignment(which, monkeypatch):
    """Which = 1: the group without its sinks; 2: the ancestors of its last kernel; the
    left-out kernels fill the cores the kept ones leave (``_LeftOut``)."""
    checked, _ = _checked(lambda choices: choices[which], monkeypatch)
    assert checked >= 40


def test_core_bound_is_zero_in_the_flop_model():
    problem = _synthetic(3, True, 3)
    assert not problem.constants.cycle_model
    assert cob.core_bound_ns(problem, _allowed(problem)) == 0.0


def test_steps_over_means_the_chain_bound_would_run_out_of_the_same_budget():
    seen_over = seen_under = 0
    for seed in range(12):
        for make in (_synthetic, _cycle_problem):
            problem = make(seed, True, 3)
            bw = _regimes(problem)[0][0]
            terms, edge_tm = cb.bound_terms(problem.kernels, problem.edges, problem.constants, bw)
            group = np.ones(problem.num_kernels, bool)
            et = problem.edges
            ideals = cb._ideals(group, et, group[et.src] & group[et.dst])
            for limit in (3, 10, 30, 300):
                path = cb._shortest_paths(problem, group, group, ideals, terms, edge_tm, [limit])
                if cb._steps_over(problem, group, ideals, limit):
                    seen_over += 1
                    assert path == (None, None)
                else:
                    seen_under += 1
    assert seen_over >= 5 and seen_under >= 5


def test_two_layer_cycle_model_stack_states_the_core_bound():
    """``benchmarks/data/hard/gpt_cycle_48.toml`` cut to 2 layers (4 configurations, 16
    tiles): the search states at least the core-allocation bound, above the additive bound
    (which sees only work / cores) and below the answer."""
    from pathlib import Path

    from dfsearch.cost.lower import Outer, lower
    from dfsearch.loader import load_toml_spec
    from dfsearch.search.assign import assign_configs
    from dfsearch.search.sharding import solve_spec_sharding

    root = Path(__file__).resolve().parents[1]
    text = (root / "benchmarks" / "data" / "hard" / "gpt_cycle_48.toml").read_text()
    text = text.replace("num_layer_in_graph = 48", "num_layer_in_graph = 2")
    text = text.replace("num_config = 96", "num_config = 4")
    spec = load_toml_spec(text, file="stack2.toml", base_dir=root / "dfsearch" / "examples")
    problem = lower(spec, Outer((4,), solve_spec_sharding(spec, (4,), 16).sharding, 1, 16, 4))
    allowed = _allowed(problem)
    bw = _regimes(problem)[0][0]
    core = cob.core_bound_ns(problem, allowed)
    result = assign_configs(problem)
    assert graph_bound_ns(problem, bw, allowed) * (1 + 1e-3) < core <= result.value_ns
    assert result.bound_ns >= core
