"""The crowded split (docs/design.md, "The crowded split"; ``search/crowded_split.py``).

* With every position a cut point (graphs of at most ``GRID`` kernels) it is the
  contiguous-order DP on the same order (``_dp.order_dp``).
* It returns feasible assignments only, never below the optimum (brute force on random
  two-core instances with a network-heavy kernel).
* On small DLRM training graphs (the 900-kernel target's shape: two all-to-all kernels, a
  chip of a few cores, cycle model) it reaches the optimum that A* proves, where the
  layered split, which never mixes the phases in one block, does not.
* ``ready_order`` is a topological order with the forward kernels first; ``cut_points``
  holds the grid and the multiples of the core count from both ends and the phase change.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_bounds_bite import _crowded_problem
from test_layered import _feasible_sums, _problem

from dfsearch.codes import Dim, Phase
from dfsearch.cost.layout import Stat, new_stats, no_control
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluator
from dfsearch.loader import load_toml_spec
from dfsearch.search import _dp
from dfsearch.search.assign import _allowed, _layered, _regimes, _topo, assign_configs
from dfsearch.search.crowded_split import (
    MAX_ANCHORS,
    _split,
    crowded_split,
    cut_points,
    ready_order,
)

DLRM = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "hard" / "dlrm_900.toml"


@pytest.mark.parametrize("seed", range(10))
def test_with_every_cut_point_it_is_the_order_dp(seed):
    nc = 3 + seed % 3
    problem = _problem(seed, 9, nc, training=bool(seed % 2))
    if problem.constants.cycle_model:  # the FLOP model: cores only bound the block sizes
        problem = replace(problem, constants=problem.constants._replace(cycle_model=False))
    problem = replace(problem, constants=problem.constants._replace(cores=64))
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    order = _dp.topological_order(kt, et)
    allowed = _allowed(problem)
    bw, live_cap = _regimes(problem)[0]
    expected = _dp.order_dp(kt, et, cn, order, allowed, bw, live_cap, 0,
                            np.full(9, -1, np.int64), new_stats(), no_control())  # fmt: skip
    value, _ = _split(problem, order, allowed, bw, live_cap, new_stats(), no_control())
    assert value == pytest.approx(expected, rel=1e-12) or (math.isinf(value) and math.isinf(expected))


@pytest.mark.parametrize("nc", [3, 4])
@pytest.mark.parametrize("training", [True, False])
def test_its_assignments_are_feasible_and_never_below_the_optimum(training, nc):
    checked = 0
    for seed in range(16):
        problem = _crowded_problem(seed, training, nc)
        bw, live_cap = _regimes(problem)[0]
        sums = list(_feasible_sums(problem, nc, bw, live_cap))
        stats = new_stats()
        value, cfg = crowded_split(problem, _topo(problem), _allowed(problem), bw, live_cap,
                                   stats, no_control())  # fmt: skip
        if cfg is None:
            continue
        assert sums and value >= min(sums) * (1 - 1e-12), (seed, value)
        src, dst = problem.edges.src, problem.edges.dst
        assert (cfg[src] <= cfg[dst]).all() and _allowed(problem)[np.arange(len(cfg)), cfg].all()
        finals, _, _ = Evaluator(problem).batch(cfg[None, :])
        assert math.isfinite(finals[0])
        assert stats[Stat.EVALS] > 0
        checked += 1
    assert checked >= 8


def _small_dlrm(layers: int, cores: int):
    """The 900-kernel target with ``layers`` bottom and top MLP layers on a chip of ``cores``
    cores."""
    text = DLRM.read_text()
    text = re.sub(r"(bottom|top)_num_mlp = \d+", rf"\1_num_mlp = {layers}", text)
    text = re.sub(r"\ncores = \d+", f"\ncores = {cores}", text)
    return load_toml_spec(text, file="dlrm_small.toml", base_dir=DLRM.parent)


@pytest.mark.parametrize(("layers", "cores", "nc"), [(3, 8, 3), (3, 8, 5), (4, 6, 5), (5, 12, 3)])
def test_on_small_dlrm_graphs_it_reaches_the_proven_optimum(layers, cores, nc):
    spec = _small_dlrm(layers, cores)
    n = len(spec.graph.kernels)
    assert n == 6 * layers
    problem = lower(spec, Outer((8, 16), (Dim.NO,) * n, 1, 1, nc))
    bw, live_cap = _regimes(problem)[0]
    exact = assign_configs(problem, method="ideal-dp")
    assert exact.exhaustive
    value, _ = crowded_split(problem, _topo(problem), _allowed(problem), bw, live_cap, new_stats(),
                             no_control())  # fmt: skip
    assert value == pytest.approx(exact.value_ns, rel=1e-12)
    layered, _ = _layered(problem, _topo(problem), _allowed(problem), bw, live_cap, new_stats(),
                          no_control())  # fmt: skip
    assert layered > exact.value_ns * (1 + 1e-6)  # what the crowded split adds


def test_ready_order_is_topological_with_the_forward_kernels_first():
    for seed in range(8):
        problem = _problem(seed, 9, 3, training=True)
        order = ready_order(problem)
        pos = np.empty(len(order), np.int64)
        pos[order] = np.arange(len(order))
        assert sorted(order.tolist()) == list(range(problem.num_kernels))
        assert (pos[problem.edges.src] < pos[problem.edges.dst]).all()
        fwd = problem.kernels.phase[order] == Phase.FWD
        assert not (np.diff(fwd.astype(int)) > 0).any()  # no forward kernel after another phase


def test_ready_order_puts_each_weight_update_next_to_its_inputs():
    """DLRM's weight update of layer i reads layer i - 1's activation and the gradient of
    layer i + 1 (the top layer's reads no gradient): in the ready order the forward layers
    come first, then each backward kernel followed by the update it has just made ready (in
    the default order every update waits until the backward chain is done)."""
    spec = _small_dlrm(3, 8)
    problem = lower(spec, Outer((8, 16), (Dim.NO,) * 18, 1, 1, 3))
    names = [problem.names[k] for k in ready_order(problem)]
    backward = [x for i in range(6, 0, -1) for x in (f"MLP_{i}_bwd", f"MLP_{i}_bwd_weight_update")]
    assert names == [f"MLP_{i}" for i in range(1, 7)] + backward
    default = [problem.names[k] for k in _topo(problem)]
    assert default[6:12] == [f"MLP_{i}_bwd" for i in range(6, 0, -1)]


def test_cut_points():
    phases = np.array([Phase.FWD] * 300 + [Phase.BWD] * 600)
    cuts = cut_points(phases, 432).tolist()
    assert cuts == sorted(set(cuts)) and cuts[0] == 0 and cuts[-1] == 900
    assert {36, 468, 300, 732, 432} <= set(cuts)  # n - 2 x 432, n - 432, the phase change, ...
    assert set(range(0, 901, 15)) <= set(cuts)  # the grid: ceil(900 / 64) = 15


def test_cut_points_stay_few_when_the_phase_changes_often():
    phases = np.array([Phase.FWD, Phase.BWD] * 2000)  # 3,999 changes of phase
    cuts = cut_points(phases, 1000)
    assert len(cuts) <= 64 + 1 + (2 + MAX_ANCHORS) * (4000 // 1000 + 1)
