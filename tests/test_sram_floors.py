"""The count argument with each kernel's share of its buffers (``graph_bound.sram_floors``,
docs/design.md "Too few configurations"):

* in every feasible assignment of small random problems with large buffers, each
  configuration of two or more kernels holds at least the summed floors of its members
  (the evaluator's SRAM column), which is what the count argument needs;
* ``sram_excess_by_count`` never calls a problem infeasible that brute force can map, and it
  proves some infeasible where the weights alone prove nothing;
* a closed form, and the 48-layer cycle-model stack: 1 and 2 tiles proven infeasible at
  once, 64 tiles (where its answer lies) not.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_layered import _feasible_sums, _synthetic

from dfsearch import api
from dfsearch.cost.layout import ConfigCol
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluator
from dfsearch.search.assign import _allowed, _regimes
from dfsearch.search.graph_bound import min_configs, sram_excess_by_count, sram_floors
from dfsearch.search.sharding import solve_spec_sharding

HARD = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "hard"


def _col(values, like):
    out = np.asarray(values, like.dtype)
    out.setflags(write=like.flags.writeable)
    return out


def _buffered(seed: int, training: bool, nc: int):
    """``_synthetic`` with on-chip buffers of 1-12 % of the SRAM and depths 1-3, so that
    the buffers, not the weights, decide what shares a configuration."""
    problem = _synthetic(seed, training, nc)
    et, cn = problem.edges, problem.constants
    rng = np.random.default_rng(1000 + seed)
    ne = len(et.src)
    et = et._replace(sram_bytes=_col(rng.uniform(0.01, 0.12, ne) * cn.sram_cap, et.sram_bytes),
                     sram_depth=_col(rng.integers(1, 4, ne), et.sram_depth))  # fmt: skip
    return replace(problem, edges=et)


def _feasible_rows(problem, nc):
    """Every assignment that keeps each edge's order and the allowed configurations and
    that the evaluator finds feasible."""
    n = problem.num_kernels
    allowed = _allowed(problem)
    src, dst = problem.edges.src, problem.edges.dst
    ev = Evaluator(problem)
    for cfg in itertools.product(range(nc), repeat=n):
        c = np.asarray(cfg, np.int64)
        if (c[src] > c[dst]).any() or not allowed[np.arange(n), c].all():
            continue
        out = ev.full(cfg)
        if out.status.value == 0:
            yield c, out


@pytest.mark.parametrize("training", [True, False])
def test_floors_are_below_the_sram_of_every_shared_configuration(training):
    """Every configuration of two or more kernels of a feasible assignment holds in SRAM at
    least the summed floors of its members (on 12 random problems with large buffers)."""
    checked = 0
    for seed in range(12):
        problem = _buffered(seed, training, 4)
        floor = sram_floors(problem)
        for c, out in _feasible_rows(problem, 4):
            for j in range(4):
                members = np.flatnonzero(c == j)
                if len(members) >= 2:
                    sram = out.per_config[j, ConfigCol.SRAM]
                    assert floor[members].sum() <= sram * (1 + 1e-12), (seed, c, j)
                    checked += 1
    assert checked >= 50


def test_floor_count_never_rejects_a_feasible_problem_and_bites():
    """``sram_excess_by_count`` > 0 only where brute force finds no assignment that fits;
    with the buffers counted it proves some problems infeasible that the weights alone
    (``min_configs`` of the weights, the test before) do not."""
    proven_by_buffers = 0
    for seed in range(24):
        for training in (True, False):
            for nc in (2, 3):
                problem = _buffered(seed, training, nc)
                bw, live_cap = _regimes(problem)[0]
                feasible = any(True for _ in _feasible_sums(problem, nc, bw, live_cap))
                excess = sram_excess_by_count(problem, _allowed(problem))
                if excess > 0:
                    assert not feasible, (seed, training, nc, excess)
                    kt = problem.kernels
                    weights = kt.weight_sram + kt.sram_extra
                    if min_configs(weights, problem.constants.sram_cap) <= nc:
                        proven_by_buffers += 1
    assert proven_by_buffers >= 3


def test_floors_closed_form():
    """A chain k0 -> k1 -> k2 of non-weight kernels with buffers of 0.3 SRAM and depth 2:
    inside a configuration an edge holds 0.6 SRAM (0.3 to each end), spilled 0.6 on each
    side, so the floors are 0.3, 0.6, 0.3 SRAM plus the weights (none here)."""
    problem = _synthetic(0, False, 3)
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    kt = kt._replace(weight_sram=_col(np.zeros(n), kt.weight_sram),
                     sram_extra=_col(np.zeros(n), kt.sram_extra),
                     is_weight=_col(np.zeros(n), kt.is_weight))  # fmt: skip
    et = et._replace(src=_col([0, 1], et.src), dst=_col([1, 2], et.dst),
                     sram_bytes=_col([0.3 * cn.sram_cap] * 2, et.sram_bytes),
                     sram_depth=_col([2, 2], et.sram_depth))  # fmt: skip
    floor = sram_floors(replace(problem, kernels=kt, edges=et))
    expected = np.array([0.3, 0.6, 0.3, 0.0, 0.0, 0.0]) * cn.sram_cap
    assert floor == pytest.approx(expected, rel=1e-12)


def test_cycle_stack_few_tiles_proven_infeasible():
    """The 48-layer cycle-model stack (benchmarks/data/hard/gpt_cycle_48.toml): with 1 and
    2 tiles a tile's buffers need more of the 48 forward (or backward) configurations than
    there are, though the weights alone fit in 28; with 64 tiles (the tile count of its
    answer) nothing is proven."""
    spec = api.load(HARD / "gpt_cycle_48.toml")
    excess = {}
    for tiles in (1, 2, 64):
        sharding = solve_spec_sharding(spec, (4,), tiles).sharding
        problem = lower(spec, Outer((4,), sharding, 1, tiles, 96))
        kt = problem.kernels
        assert min_configs(kt.weight_sram + kt.sram_extra, problem.constants.sram_cap) <= 48
        excess[tiles] = sram_excess_by_count(problem, _allowed(problem))
    assert excess[1] > 0 and excess[2] > 0 and excess[64] == 0.0
