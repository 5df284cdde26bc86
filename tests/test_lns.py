"""Incumbents under a work budget and the large-neighbourhood search (``search/lns.py``).

The instances come from the benchmark library (benchmarks/library/); golden optima are the
records the exact solver (CP-SAT) proved, never this search's own output.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from dfsearch.cost.model import Evaluator
from dfsearch.search import assign as assign_mod
from dfsearch.search import lns
from dfsearch.search.assign import assign_configs
from dfsearch.search.strategies import assignment_strategy
from dfsearch.search.strategies.base import control_array

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


LIB = _load("library_bench", ROOT / "benchmarks" / "library.py")
FAM = LIB.families()
RECORDS = {d["name"]: d for d in LIB.load_manifest()["instances"]}


def _instance(name: str):
    d = RECORDS[name]
    p = FAM.build(FAM.Entry.from_json(d))
    assert FAM.fingerprint(p) == d["fingerprint"], "the instance lowers differently: re-record"
    return p, d["record"]


def _sum_ii(problem, config) -> float:
    return float(Evaluator(problem).full(tuple(config)).all_config_ii_ns)


def test_default_maps_when_the_exact_search_spends_the_budget() -> None:
    """dlrm-mlp8-cycle-memory-c8: A* alone spends a 100,000-evaluation budget without a
    mapping; the half it leaves maps the graph (order DP) and the neighbourhood search
    brings it within 0.5 % of the optimum the records prove (A* needs 225,042 evaluations
    to prove it)."""
    p, rec = _instance("dlrm-mlp8-cycle-memory-c8")
    assert rec["proven"]
    a = assignment_strategy("auto").assign(p, seed=0, control=control_array(max_evaluations=100_000))
    assert a.config is not None
    assert a.value_ns == pytest.approx(_sum_ii(p, a.config), rel=1e-9)
    assert rec["best_bound_ns"] * (1 - 1e-9) <= a.value_ns <= rec["best_value_ns"] * 1.005
    assert not a.exhaustive and a.evaluations <= 100_000 * 1.01


@pytest.mark.parametrize("name", ["order-dp", "anneal", "cp-sat"])
def test_strategies_map_wide_graphs_under_the_budget(name: str) -> None:
    """220 kernels, 24 configurations: the contiguous-order DP would need ~24 x 220^2 / 2
    evaluations; the window DP maps it within 100,000 (the record proves the optimum)."""
    p, rec = _instance("whole-kindfwd-layers12-flop-compute-c24")
    strategy = assignment_strategy(name)
    a = strategy.assign(p, seed=0, control=control_array(max_evaluations=100_000))
    assert a.config is not None
    assert a.value_ns == pytest.approx(_sum_ii(p, a.config), rel=1e-9)
    assert a.value_ns >= rec["best_bound_ns"] * (1 - 1e-9)


def _order_dp(problem):
    a = assign_configs(problem, method="order-dp")
    assert a.config is not None
    return a


@pytest.mark.parametrize("name", ["dlrm-mlp4-cycle-memory-c6", "dlrm-mlp2-cycle-memory-c4"])
def test_one_window_over_the_whole_graph_reaches_the_proven_optimum(name: str) -> None:
    """When one window holds every kernel and configuration there is no border to fold:
    the re-solve is the exact search on the whole problem, so from the order DP's (worse)
    answer it reaches the optimum CP-SAT proved."""
    p, rec = _instance(name)
    assert p.num_kernels <= lns.WINDOW_KERNELS and p.num_config <= lns.WINDOW_CONFIGS
    start = _order_dp(p)
    optimum = rec["runs"]["exact"]["value_ns"]
    assert start.value_ns > optimum * (1 + 1e-6)  # the start is not optimal already
    bw, cap = assign_mod._regimes(p)[0]
    r = lns.improve(p, start.config, assign_mod._allowed(p), bw, cap, control_array(), seed=0,
                    budget=1e6)  # fmt: skip
    assert r.accepted >= 1 and not r.stopped
    assert r.value_ns == pytest.approx(optimum, rel=1e-6)
    assert r.value_ns == pytest.approx(_sum_ii(p, r.config), rel=1e-12)


def test_windows_never_worsen_and_keep_the_rules() -> None:
    """A 192-kernel DLRM (many windows with borders): the result is never worse than the
    start, every kernel sits in a configuration it may use, every edge runs forward, the
    value is the evaluator's, and the same seed gives the same answer."""
    p, rec = _instance("dlrm-mlp32-cycle-memory-c16")
    start = _order_dp(p)
    bw, cap = assign_mod._regimes(p)[0]
    allowed = assign_mod._allowed(p)
    runs = [lns.improve(p, start.config, allowed, bw, cap, control_array(), seed=3, budget=200_000)
            for _ in range(2)]  # fmt: skip
    r = runs[0]
    assert runs[1] == r
    assert r.windows > 1
    assert r.value_ns <= _sum_ii(p, start.config)
    assert r.value_ns >= rec["best_bound_ns"] * (1 - 1e-9)
    cfg = np.asarray(r.config)
    assert allowed[np.arange(p.num_kernels), cfg].all()
    assert (cfg[p.edges.src] <= cfg[p.edges.dst]).all()
    assert r.value_ns == pytest.approx(_sum_ii(p, r.config), rel=1e-12)


def test_the_budget_bounds_the_work() -> None:
    p, _ = _instance("dlrm-mlp32-cycle-memory-c16")
    start = _order_dp(p)
    bw, cap = assign_mod._regimes(p)[0]
    allowed = assign_mod._allowed(p)
    none = lns.improve(p, start.config, allowed, bw, cap, control_array(), seed=0, budget=1)
    assert none.config == tuple(start.config) and none.windows == 0 and none.evaluations == 1
    some = lns.improve(p, start.config, allowed, bw, cap, control_array(), seed=0, budget=5_000)
    assert some.evaluations <= 5_000 + lns.WINDOW_CONFIGS + 2
    assert not some.stopped  # a spent budget is not a stop by the clock or the flag


def test_default_strategy_runs_lns_on_large_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 192-kernel graph the default strategy's answer with the neighbourhood search is
    no worse than without it (LNS_KERNELS raised past the graph) and is the evaluator's."""
    p, rec = _instance("dlrm-mlp32-cycle-memory-c16")
    auto = assignment_strategy("auto")
    with_lns = auto.assign(p, seed=0, control=control_array(max_evaluations=300_000))
    monkeypatch.setattr(assign_mod, "LNS_KERNELS", 10**9)
    without = auto.assign(p, seed=0, control=control_array(max_evaluations=300_000))
    assert with_lns.config is not None and without.config is not None
    assert with_lns.value_ns <= without.value_ns
    assert with_lns.value_ns >= rec["best_bound_ns"] * (1 - 1e-9)
    assert with_lns.value_ns == pytest.approx(_sum_ii(p, with_lns.config), rel=1e-9)
