"""The count bound (``search/count_bound.py``; docs/design.md, "Best-bound-first over outer
choices"): a bound of one outer choice that sees its configuration count, checked before the
choice is solved.

* It gives nothing (0) where the exact search runs or the count leaves no choice.
* On the 900-kernel DLRM it is below the summed II of feasible assignments of every count
  tried (the crowded split's), and it is what separates the counts: the even ones, whose
  forward and backward kernels never share a configuration, are bounded well above the odd
  ones' answer.
* In a search it prunes counts without their solve and changes neither the answer nor the
  stated bound (a small DLRM in the cycle model, with and without it).
"""

from __future__ import annotations

import pytest
from test_crowded_split import DLRM, _small_dlrm
from test_layered import _problem

from dfsearch import api
from dfsearch.codes import Dim
from dfsearch.cost.layout import new_stats, no_control
from dfsearch.cost.lower import Outer, lower, with_num_config
from dfsearch.search import engine
from dfsearch.search.assign import _allowed, _regimes, _topo
from dfsearch.search.count_bound import count_bound_ns
from dfsearch.search.crowded_split import crowded_split


def test_no_bound_where_the_exact_search_runs_or_the_count_is_forced():
    assert count_bound_ns(_problem(0, 9, 3, training=True)) == 0.0
    spec = api.load(DLRM)
    n = len(spec.graph.kernels)
    base = lower(spec, Outer((8, 16), (Dim.NO,) * n, 1, 1, 3))
    assert count_bound_ns(with_num_config(base, spec, 1)) == 0.0
    assert count_bound_ns(with_num_config(base, spec, n)) == 0.0
    assert count_bound_ns(base) > 0.0


def test_on_the_900_kernel_dlrm_it_is_below_feasible_assignments_and_splits_the_parities():
    spec = api.load(DLRM)
    n = len(spec.graph.kernels)
    base = lower(spec, Outer((8, 16), (Dim.NO,) * n, 1, 1, 3))
    bounds, values = {}, {}
    for c in (3, 4, 11, 12):
        problem = with_num_config(base, spec, c)
        bw, live_cap = _regimes(problem)[0]
        value, cfg = crowded_split(problem, _topo(problem), _allowed(problem), bw, live_cap,
                                   new_stats(), no_control())  # fmt: skip
        assert cfg is not None
        bounds[c], values[c] = count_bound_ns(problem), value
        assert 0 < bounds[c] <= value * (1 + 1e-12)
    assert min(bounds[4], bounds[12]) > max(values[3], values[11]) * 1.05  # evens pruned


@pytest.mark.slow
def test_in_a_search_it_prunes_counts_and_changes_no_answer(monkeypatch):
    """66 kernels on 24 cores (cycle model): the even counts' bound is above the odd
    counts' answer, so they are pruned before their solve; the answer and the stated bound
    are those of the search without the count bound."""
    spec = _small_dlrm(11, 24)
    with_it = api.run(spec)
    monkeypatch.setattr(engine, "_count_bound", lambda st, p, c: None)
    without = api.run(spec)
    assert with_it.evaluation.final_s == without.evaluation.final_s
    assert with_it.search.lower_bound_s == without.search.lower_bound_s
    assert with_it.status == without.status
    assert with_it.search.solved < without.search.solved
    assert with_it.search.solved + with_it.search.pruned == without.search.solved + without.search.pruned
