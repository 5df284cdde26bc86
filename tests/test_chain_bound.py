"""The chain bound (``search/chain_bound.py``; docs/design.md, "The chain bound").

* It never exceeds the summed II of any feasible assignment: brute force on random
  SRAM-bound problems (FLOP model), on random cycle-model problems (its steps use the exact
  core allocation), and with kernels left out (the group without its sinks, the ancestors
  of its last kernel), which must stay a bound.
* It bites: sharper than the additive, boundary and crowded bounds on some of those
  problems, and on the two-layer memory-bound GPT stack it meets the optimum that the exact
  solver (CP-SAT) proves, so the search proves that outer choice optimal.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_bounds_bite import _stacked
from test_layered import _feasible_sums, _synthetic

from dfsearch.search import chain_bound as cb
from dfsearch.search.assign import _allowed, _regimes, assign_configs
from dfsearch.search.graph_bound import boundary_bound_ns, crowded_bound_ns, graph_bound_ns


def _checked_below(make, choose=None, monkeypatch=None) -> tuple[int, int]:
    """(problems with a feasible assignment, those where the chain bound beats the other
    bounds), asserting on each that the chain bound is below the best feasible sum."""
    if choose is not None:
        original = cb._choices
        monkeypatch.setattr(cb, "_choices", lambda *a: [choose(original(*a))])
    checked = sharper = 0
    for seed in range(16):
        for training in (True, False):
            for nc in (3, 4):
                problem = make(seed, training, nc)
                allowed = _allowed(problem)
                bw, live_cap = _regimes(problem)[0]
                sums = list(_feasible_sums(problem, nc, bw, live_cap))
                if not sums:
                    continue
                bound = cb.chain_bound_ns(problem, bw, allowed)
                assert bound <= min(sums) * (1 + 1e-12), (seed, training, nc, bound, min(sums))
                others = max(graph_bound_ns(problem, bw, allowed),
                             boundary_bound_ns(problem, bw, allowed),
                             crowded_bound_ns(problem, bw, allowed))  # fmt: skip
                checked += 1
                sharper += bound > others * (1 + 1e-9)
    return checked, sharper


def test_chain_bound_is_below_every_feasible_assignment():
    checked, sharper = _checked_below(_synthetic)
    assert checked >= 40
    assert sharper >= 10  # not vacuous: it sees the configurations' own boundaries


@pytest.mark.parametrize("which", [1, 2])
def test_chain_bound_with_kernels_left_out_is_below_every_feasible_assignment(which, monkeypatch):
    """Which = 1: the group without its sinks; 2: the ancestors of its last kernel. The
    left-out kernels' terms are dropped (all non-negative) and only what surely crosses is
    added to the memory alone."""
    checked, _ = _checked_below(_synthetic, lambda choices: choices[which], monkeypatch)
    assert checked >= 40


def _cycle_problem(seed: int, training: bool, nc: int):
    """``_synthetic`` in the cycle model on a chip of 6 cores: random (a, b, z) per kernel,
    so that a configuration's compute is its slowest kernel after the core allocation."""
    problem = _synthetic(seed, training, nc)
    kt, cn = problem.kernels, problem.constants
    rng = np.random.default_rng(100 + seed)
    n = len(kt.a)

    def col(values, like):
        out = np.asarray(values, like.dtype)
        out.setflags(write=like.flags.writeable)
        return out

    kt = kt._replace(a=col(rng.integers(1, 9, n), kt.a), b=col(rng.integers(1, 5, n), kt.b),
                     z=col(rng.integers(1, 40, n), kt.z))  # fmt: skip
    cn = cn._replace(cycle_model=True, cores=6, freq_GHz=1.0)
    return replace(problem, kernels=kt, constants=cn)


def test_chain_bound_in_the_cycle_model_is_below_every_feasible_assignment():
    checked, sharper = _checked_below(_cycle_problem)
    assert checked >= 40
    assert sharper >= 5  # the exact core allocation of a configuration is above work / cores


def test_two_layer_memory_bound_stack_is_proven_optimal():
    """The 2-layer GPT stack on 100 GB/s DRAM and 30 MB SRAM (128 tiles): every
    configuration is memory-bound and each layer boundary costs DRAM traffic, which the
    additive and boundary bounds see only in part (at most 93.2 % of the answer). The
    chain bound meets the answer, and CP-SAT proves the same optimum on its own."""
    from dfsearch.search.exact import solve_exact

    problem = _stacked(2, 30_000_000, 100.0, 128)
    bw = _regimes(problem)[0][0]
    allowed = _allowed(problem)
    result = assign_configs(problem)
    assert boundary_bound_ns(problem, bw, allowed) < 0.94 * result.value_ns
    assert result.exhaustive and result.bound_ns == pytest.approx(result.value_ns, rel=1e-12)
    exact = solve_exact(problem, time_limit_s=120, max_kernels=100, hint=result.config,
                        max_deterministic_time=60.0)  # fmt: skip
    assert exact.status == "optimal"
    assert exact.value_ns == pytest.approx(result.value_ns, rel=1e-9)
