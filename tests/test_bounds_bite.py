"""Bounds and incumbents for the hard targets (issue 26; docs/design.md, "The boundary
bound" and "The repeated-layer incumbent").

* ``min_configs`` never exceeds the fewest configurations that hold a set of weights
  (brute force over every partition of a few kernels).
* ``boundary_bound_ns`` is below the summed II of every feasible assignment (brute force on
  random SRAM-bound instances), and it is sharper than ``graph_bound_ns`` on some of them.
* ``repeated_layer``: every layer of a stacked graph gets layer 1's solution, its value is
  the summed II of that assignment, and the search never returns anything worse.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_layered import _feasible_sums, _synthetic

from dfsearch.cost import evaluate as ev
from dfsearch.cost.layout import NUM_SET, SetSlot, new_stats, no_control
from dfsearch.cost.lower import Outer, lower
from dfsearch.loader import load_toml_spec
from dfsearch.search import _dp
from dfsearch.search.assign import _allowed, _regimes, assign_configs
from dfsearch.search.graph_bound import (
    boundary_bound_ns,
    crowded_bound_ns,
    graph_bound_ns,
    min_configs,
    sram_excess_by_count,
)
from dfsearch.search.layered import _template_configs, layer_of, repeated_layer
from dfsearch.search.sharding import solve_spec_sharding

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _partitions(items: list[int]):
    """Every partition of ``items`` into non-empty blocks."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


def _fewest_configs(weights: list[float], cap: float) -> int:
    """Brute force: the fewest blocks such that every block of two or more kernels holds
    its members' weights within ``cap`` (a kernel alone fits whatever its weight)."""
    best = len(weights)
    for part in _partitions(list(range(len(weights)))):
        if all(len(b) == 1 or sum(weights[k] for k in b) <= cap for b in part):
            best = min(best, len(part))
    return best


@pytest.mark.parametrize("seed", range(30))
def test_min_configs_is_below_the_fewest_configurations(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    weights = [rng.choice([0.0, 0.2, 0.35, 0.5, 0.7, 1.3]) * 100 for _ in range(n)]
    assert min_configs(np.asarray(weights), 100.0) <= _fewest_configs(weights, 100.0)


def test_min_configs_closed_forms():
    """Ten kernels of 35 % of the SRAM: at least ceil(10 x 0.35) = 4 configurations by
    volume (the bound is a relaxation: two per configuration need 5); a kernel larger than
    the SRAM sits alone: one more; weights that all fit one configuration: 1."""
    assert min_configs(np.full(10, 35.0), 100.0) == 4
    assert min_configs(np.array([*[35.0] * 10, 150.0]), 100.0) == 5
    assert min_configs(np.full(4, 25.0), 100.0) == 1
    assert min_configs(np.zeros(5), 100.0) == 1


@pytest.mark.parametrize("nc", [3, 4])
@pytest.mark.parametrize("training", [True, False])
def test_boundary_bound_is_below_every_feasible_assignment(training, nc):
    checked = 0
    for seed in range(16):
        problem = _synthetic(seed, training, nc)
        allowed = _allowed(problem)
        bw, live_cap = _regimes(problem)[0]
        sums = list(_feasible_sums(problem, nc, bw, live_cap))
        if not sums:
            continue
        bound = boundary_bound_ns(problem, bw, allowed)
        assert 0 < bound <= min(sums) * (1 + 1e-12), (seed, bound, min(sums))
        checked += 1
    assert checked >= 10


def test_boundary_bound_is_sharper_than_the_additive_bound_on_synthetic_problems():
    """Not vacuous: where the SRAM forces several configurations, their boundaries add
    DRAM traffic that the additive bound does not see."""
    sharper = 0
    for seed in range(16):
        for training in (True, False):
            problem = _synthetic(seed, training)
            allowed = _allowed(problem)
            bw = _regimes(problem)[0][0]
            sharper += boundary_bound_ns(problem, bw, allowed) > graph_bound_ns(problem, bw, allowed) * (1 + 1e-9)
    assert sharper >= 4


def _crowded_problem(seed: int, training: bool, nc: int):
    """``_synthetic`` on a chip of two cores (so a configuration holds at most two kernels)
    with a network-heavy kernel: the case where the network cannot hide under compute."""
    problem = _synthetic(seed, training, nc)
    kt, et = problem.kernels, problem.edges
    rng = np.random.default_rng(seed)
    n = len(kt.a)

    def col(values, like):
        out = np.asarray(values, like.dtype)
        out.setflags(write=like.flags.writeable)
        return out

    net = np.zeros(n)
    net[seed % n] = 400.0
    kt = kt._replace(net_tile_ns=col(net, kt.net_tile_ns),
                     compute_ns=col(rng.uniform(20, 100, n), kt.compute_ns),
                     memory_bytes=col(np.zeros(n), kt.memory_bytes))  # fmt: skip
    et = et._replace(buffer_bytes=col(np.full(len(et.src), 1e-3), et.buffer_bytes))
    cn = problem.constants._replace(cores=2, sram_cap=1e12)
    return replace(problem, kernels=kt, edges=et, constants=cn)


@pytest.mark.parametrize("nc", [3, 4])
@pytest.mark.parametrize("training", [True, False])
def test_crowded_bound_is_below_every_feasible_assignment(training, nc):
    checked = 0
    for seed in range(16):
        problem = _crowded_problem(seed, training, nc)
        allowed = _allowed(problem)
        bw, live_cap = _regimes(problem)[0]
        sums = list(_feasible_sums(problem, nc, bw, live_cap))
        if not sums:
            continue
        bound = crowded_bound_ns(problem, bw, allowed)
        assert 0 < bound <= min(sums) * (1 + 1e-12), (seed, bound, min(sums))
        checked += 1
    assert checked >= 8


def test_crowded_bound_is_sharper_than_the_additive_bound_on_synthetic_problems():
    sharper = 0
    for seed in range(16):
        for training in (True, False):
            problem = _crowded_problem(seed, training, 4)
            allowed = _allowed(problem)
            bw = _regimes(problem)[0][0]
            sharper += crowded_bound_ns(problem, bw, allowed) > graph_bound_ns(problem, bw, allowed) * (1 + 1e-9)
    assert sharper >= 3


def test_too_few_configurations_are_proven_infeasible():
    """When ``sram_excess_by_count`` says the weights need more configurations than the
    problem opens to them, brute force finds no assignment that fits; it says so on some
    of these problems (not vacuous), and never on a problem brute force can map."""
    proven = 0
    for seed in range(24):
        for training in (True, False):
            for nc in (2, 3):
                problem = _synthetic(seed, training, nc)
                bw, live_cap = _regimes(problem)[0]
                feasible = any(True for _ in _feasible_sums(problem, nc, bw, live_cap))
                excess = sram_excess_by_count(problem, _allowed(problem))
                if excess > 0:
                    assert not feasible, (seed, training, nc, excess)
                    proven += 1
    assert proven >= 3


def test_sram_excess_closed_form():
    """Six kernels of 90 % of the SRAM each, four configurations open to all (no FWD/BWD
    rule): at least 6 configurations are needed (no two share one); the least average
    excess is with none alone: 6 x 0.9 / 4 - 1 = 0.35 SRAM. With six configurations: 0."""
    problem = _synthetic(0, False, 4)
    kt, cn = problem.kernels, problem.constants
    n = problem.num_kernels
    assert n == 6
    w, zero = np.full(n, 0.9 * cn.sram_cap), np.zeros(n)
    for col, like in ((w, kt.weight_sram), (zero, kt.sram_extra)):
        col.setflags(write=like.flags.writeable)
    problem = replace(problem, kernels=kt._replace(weight_sram=w, sram_extra=zero),
                      constants=cn._replace(fb_rule=False))  # fmt: skip
    excess = sram_excess_by_count(problem, np.ones((n, 4), np.int64))
    assert excess == pytest.approx(0.35 * cn.sram_cap, rel=1e-12)
    assert sram_excess_by_count(problem, np.ones((n, 6), np.int64)) == 0.0


# --------------------------------------------------------------------------- repeated layer
def _stacked(layers: int, sram: int, dram_bw: float, tiles: int):
    """The GPT-3 1.5B example with ``layers`` layers in its graph (2 configurations each),
    ``tiles`` tiles."""
    text = (EXAMPLES / "gpt3_1.5B_a100x4.toml").read_text()
    text = text.replace("num_layer = 24", f"num_layer = 24\nnum_layer_in_graph = {layers}")
    text = text.replace("num_config = 2", f"num_config = {2 * layers}")
    text = text.replace("sram_bytes = 88080384", f"sram_bytes = {sram}")
    text = text.replace("dram_bw_GBps = 1555.0", f"dram_bw_GBps = {dram_bw}")
    spec = load_toml_spec(text, file="stacked.toml", base_dir=EXAMPLES)
    sharding = solve_spec_sharding(spec, (4,), tiles).sharding
    return lower(spec, Outer((4,), sharding, 1, tiles, 2 * layers))


def _summed_ii(problem, cfg, bw, live_cap):
    """Summed II of ``cfg`` costed configuration by configuration (``set_cost``)."""
    n = problem.num_kernels
    out, total = np.zeros(NUM_SET), 0.0
    for c in range(int(cfg.max()) + 1):
        where = np.where(cfg < c, 2, np.where(cfg == c, 1, 0)).astype(np.int8)
        ev.set_cost(problem.kernels, problem.edges, problem.constants, where, bw, live_cap, 0,
                    np.zeros(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
                    np.zeros(n, np.int64), out)  # fmt: skip
        total += out[SetSlot.II]
    return total


#: (SRAM, DRAM GB/s, tiles): compute-bound with room to spare; memory-bound (the hard
#: target's chip), where the links between layers cost DRAM traffic
CASES = [(200_000_000, 1555.0, 8), (30_000_000, 100.0, 1024)]


@pytest.mark.parametrize(("sram", "dram_bw", "tiles"), CASES)
def test_repeated_layer_gives_every_layer_the_first_layers_solution(sram, dram_bw, tiles):
    problem = _stacked(3, sram, dram_bw, tiles)
    bw, live_cap = _regimes(problem)[0]
    topo = _dp.topological_order(problem.kernels, problem.edges)
    value, cfg = repeated_layer(problem, topo, _allowed(problem), bw, live_cap, new_stats(),
                                no_control(), assign=assign_configs)  # fmt: skip
    assert cfg is not None and math.isfinite(value)
    layer, stems = layer_of(problem.names)
    first = np.flatnonzero(layer == 1)
    template = _template_configs(problem, first, no_control(), new_stats(), assign_configs)
    want = {stems[k]: c for k, c in zip(first, template)}
    phase = problem.kernels.phase
    for i in (1, 2, 3):  # one configuration per phase and layer: the layer's phase offset
        for p in (1, 2):
            ks = np.flatnonzero((layer == i) & (phase == p))
            assert len({int(cfg[k]) - want[stems[k]] for k in ks}) == 1
    src, dst = problem.edges.src, problem.edges.dst
    assert (cfg[src] <= cfg[dst]).all()
    assert value == pytest.approx(_summed_ii(problem, cfg, bw, live_cap), rel=1e-12)


def test_stacked_search_is_never_worse_than_the_repeated_layer():
    for layers, (sram, dram_bw, tiles) in ((2, CASES[0]), (2, CASES[1]), (4, CASES[1])):
        problem = _stacked(layers, sram, dram_bw, tiles)
        bw, live_cap = _regimes(problem)[0]
        topo = _dp.topological_order(problem.kernels, problem.edges)
        value, _ = repeated_layer(problem, topo, _allowed(problem), bw, live_cap, new_stats(),
                                  no_control(), assign=assign_configs)  # fmt: skip
        assert math.isfinite(value)
        assert assign_configs(problem).value_ns <= value * (1 + 1e-12)
