"""Boundary moves (``search/moves.py``; docs/design.md, "Boundary moves").

* On random small problems, from every feasible assignment: the result is never worse than
  the start, keeps each edge's order and the allowed configurations, states the
  evaluator's own value, returns the start unchanged when no move lowers it (from the
  optimum found by brute force, in particular), and is the same on a second run.
* A work budget of one scoring stops it before any move.
* The 12-layer memory-bound GPT stack (100 GB/s DRAM, 30 MB SRAM, 512 tiles): the split
  and the neighbourhood search leave it 2 % above the chain bound; the boundary moves reach
  that bound, so the search proves the answer optimal (the bound is a proven lower bound of
  every assignment, docs/design.md, "The chain bound").
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_bounds_bite import _stacked
from test_layered import _synthetic

from dfsearch.cost.layout import no_control
from dfsearch.cost.model import Evaluator
from dfsearch.search import assign as assign_mod
from dfsearch.search.assign import _allowed, _regimes
from dfsearch.search.moves import move_boundaries


def _feasible(problem, nc):
    """(assignment, final time) of every assignment that keeps each edge's order and the
    allowed configurations and that the evaluator finds feasible."""
    n = problem.num_kernels
    allowed = _allowed(problem)
    src, dst = problem.edges.src, problem.edges.dst
    rows = []
    for cfg in itertools.product(range(nc), repeat=n):
        c = np.asarray(cfg, np.int64)
        if (c[src] <= c[dst]).all() and allowed[np.arange(n), c].all():
            rows.append(c)
    if not rows:
        return []
    finals, _, _ = Evaluator(problem).batch(np.stack(rows))
    return [(r, float(f)) for r, f in zip(rows, finals, strict=True) if np.isfinite(f)]


def test_moves_never_worsen_and_keep_every_rule():
    checked = improved = 0
    for seed in range(8):
        for training in (True, False):
            problem = _synthetic(seed, training, 4)
            allowed = _allowed(problem)
            src, dst = problem.edges.src, problem.edges.dst
            rows = _feasible(problem, 4)
            if not rows:
                continue
            best = min(f for _, f in rows)
            ev = Evaluator(problem)
            for start, value in rows[:: max(1, len(rows) // 12)]:
                r = move_boundaries(problem, tuple(start), allowed, *_regimes(problem)[0], no_control(),
                                    budget=1e6)
                c = np.asarray(r.config)
                assert (c[src] <= c[dst]).all() and allowed[np.arange(len(c)), c].all()
                final = float(ev.batch(c[None, :])[0][0])
                assert best * (1 - 1e-12) <= final <= value * (1 + 1e-12)
                assert r.value_ns == pytest.approx(ev.full(r.config).all_config_ii_ns, rel=1e-12)
                if r.moves == 0:
                    assert r.config == tuple(start)
                improved += final < value * (1 - 1e-9)
                assert move_boundaries(problem, tuple(start), allowed, *_regimes(problem)[0], no_control(),
                                    budget=1e6) == r
                checked += 1
            optimum = next(cfg for cfg, f in rows if f == best)
            r = move_boundaries(problem, tuple(optimum), allowed, *_regimes(problem)[0], no_control(),
                                budget=1e6)
            assert r.moves == 0 and r.config == tuple(optimum)
    assert checked >= 40
    assert improved >= 10  # not vacuous: many starts have a better neighbour


def test_a_budget_of_one_scoring_moves_nothing():
    problem = _synthetic(0, True, 4)
    start, _ = _feasible(problem, 4)[0]
    r = move_boundaries(problem, tuple(start), _allowed(problem), *_regimes(problem)[0],
                        no_control(), budget=1)
    assert r.moves == 0 and r.config == tuple(start) and r.evaluations == 1


def test_moves_prove_the_twelve_layer_memory_bound_stack_optimal(monkeypatch):
    problem = _stacked(12, 30_000_000, 100.0, 512)
    with monkeypatch.context() as m:
        m.setattr(assign_mod, "_boundary_moves", lambda p, best, *a: (best, 0, False))
        before = assign_mod.assign_configs(problem)
    assert not before.exhaustive and before.value_ns > before.bound_ns * 1.01
    after = assign_mod.assign_configs(problem)
    assert after.exhaustive and after.method.endswith("+moves")
    assert after.value_ns == pytest.approx(before.bound_ns, rel=1e-12)
    assert after.value_ns == pytest.approx(
        Evaluator(problem).full(after.config).all_config_ii_ns, rel=1e-12)
