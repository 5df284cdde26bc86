"""The lower bound that prunes the assignment search (``evaluate.set_bound``) is admissible:
it never exceeds the II ``set_cost`` computes for a configuration, nor the summed II of any
split of a set over configurations. A bound above the true cost would let the best-first
search discard the optimum, so this is what makes its "proven optimal" claim true."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dfsearch.cost import evaluate as ev
from dfsearch.cost.layout import NUM_SET, SetSlot
from dfsearch.cost.lower import Outer, lower
from dfsearch.io.dfmodel import load_dfmodel
from dfsearch.kernels import generators
from dfsearch.search.assign import _regimes
from dfsearch.search.engine import search
from dfsearch.search.sharding import solve_spec_sharding

from specs import random_spec

DATA = Path(__file__).parent / "data" / "dfmodel"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "setup.txt").exists())


def _random_problem(seed: int, cycle: bool, training: bool):
    spec = random_spec(seed, 9, num_config=4, cycle=cycle, sram=1e12, training=training)
    sharding = solve_spec_sharding(spec, (4,), 4).sharding
    return lower(spec, Outer((4,), sharding, 1, 4, 4))


def _case_problem(case: str):
    """The case at the search's outer choices; a graph too large for bitmasks (HPL's 100+
    kernels) is regenerated with fewer iterations, keeping the case's system and equations."""
    path = DATA / case / "setup.txt"
    spec = load_dfmodel(path.read_text(), file=str(path))
    if len(spec.graph.kernels) > 62:
        w = spec.workload
        g = generators.hpl(n=w.n, b=w.b, iteration=16, word=spec.execution.word_bytes)
        spec = replace(spec, graph=g)
    d = search(spec, seed=0).evaluation.decision
    nc = max(d.config) + 1
    return lower(spec, Outer(d.shape, d.sharding, d.micro_batch_size, d.num_tile, nc))


def _config_iis(problem, cfg, nc, bw):
    """Per-configuration II by ``set_cost`` (no capacity limits: the bound is about time)."""
    n = problem.num_kernels
    out = np.zeros(NUM_SET)
    iis = []
    unlimited = problem.constants._replace(sram_cap=np.inf)
    for c in range(nc):
        where = np.where(cfg < c, 2, np.where(cfg == c, 1, 0)).astype(np.int8)
        ev.set_cost(problem.kernels, problem.edges, unlimited, where, bw, np.inf, 0,
                    np.zeros(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
                    np.zeros(n, np.int64), out)  # fmt: skip
        iis.append(out[SetSlot.II])
    return iis


def _check(problem, rng: random.Random, trials: int) -> int:
    n = problem.num_kernels
    overlap = problem.constants.overlap
    src, dst = problem.edges.src, problem.edges.dst
    checked = 0
    for bw, _ in _regimes(problem):
        terms, edge_tm = ev.bound_terms(problem.kernels, problem.edges, problem.constants, bw)
        for _ in range(trials):
            nc = rng.randint(1, 5)
            cfg = np.array([rng.randrange(nc) for _ in range(n)], dtype=np.int64)
            iis = _config_iis(problem, cfg, nc, bw)
            masks = [sum(1 << k for k in range(n) if cfg[k] == c) for c in range(nc)]
            for c in range(nc):
                if not np.isfinite(iis[c]):
                    continue
                b = ev.set_bound(masks[c], terms, edge_tm, overlap, src, dst)
                assert b <= iis[c] * (1 + 1e-12), (c, b, iis[c])
                checked += 1
            # any tail of configurations, as the search bounds the kernels not yet placed
            for c in range(nc):
                tail = sum(masks[c:])
                rest = sum(iis[c:])
                if np.isfinite(rest):
                    b = ev.set_bound(tail, terms, edge_tm, overlap, src, dst)
                    assert b <= rest * (1 + 1e-12), (c, b, rest)
    return checked


@pytest.mark.parametrize("cycle", [False, True])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_bound_is_admissible_on_random_graphs(seed, cycle, training):
    problem = _random_problem(seed, cycle, training)
    assert problem.constants.cycle_model == cycle
    assert _check(problem, random.Random(seed), 40) > 0


@pytest.mark.parametrize("case", CASES)
def test_bound_is_admissible_on_dfmodel_cases(case):
    problem = _case_problem(case)
    assert _check(problem, random.Random(0), 15) > 0


def test_bound_is_tight_for_one_compute_bound_kernel():
    """A FLOP-model kernel alone in its configuration, with nothing to move and overlap
    PERFECT: its II is its compute time, and the bound equals it (the bound is not 0)."""
    problem = _random_problem(0, False, False)
    n = problem.num_kernels
    bw = _regimes(problem)[0][0]
    terms, edge_tm = ev.bound_terms(problem.kernels, problem.edges, problem.constants, bw)
    for k in range(n):
        iis = _config_iis(problem, np.array([0 if j == k else 1 for j in range(n)]), 2, bw)
        b = ev.set_bound(1 << k, terms, edge_tm, problem.constants.overlap, problem.edges.src,
                         problem.edges.dst)
        assert 0.0 < b <= iis[0] * (1 + 1e-12)
