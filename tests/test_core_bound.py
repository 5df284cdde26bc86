"""The core-allocation bound (``search/core_bound.py``; docs/design.md, "The core-allocation
bound") and the step count that lets the chain bound give up before costing anything.

* ``core_table`` is the fewest cores that reach each cycle target, by brute force over
  every (lanes, stages) pair; ``_least_core_cycles`` is the least rounded work over every
  target, by brute force over all targets up to the largest kernel's one-core cycles.
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


def test_least_core_cycles_is_the_least_rounded_work_over_every_target():
    rng = np.random.default_rng(7)
    for _ in range(30):
        cores = int(rng.integers(2, 12))
        kinds = [tuple(int(x) for x in rng.integers(1, 9, 3)) for _ in range(int(rng.integers(1, 4)))]
        counts = rng.integers(1, 3, len(kinds))
        tables = [cob.core_table(a, b, z, cores) for a, b, z in kinds]
        tau0 = max(float(t[0][0]) for t in tables) + float(rng.integers(0, 6))

        top = max(a * b * z for a, b, z in kinds) + 2
        brute = min(_rounded(float(t), tables, counts, cores) for t in range(int(tau0), top))
        assert cob._least_core_cycles(tau0, tables, counts, cores) == pytest.approx(brute, rel=1e-12)


def _rounded(tau: float, tables, counts, cores: int) -> float:
    """sum_k tau m_k(tau) / cores, m_k read off each kernel's ``core_table``."""
    return sum(c * tau * ms[np.searchsorted(taus, tau, side="right") - 1]
               for (taus, ms), c in zip(tables, counts)) / cores  # fmt: skip


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
    kept kernels' steps are priced by their rounded work, the left-out ones by w / P."""
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
