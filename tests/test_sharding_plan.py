"""The sharding plan cache (``search.sharding_plan.ShardingPlans``): the solves of one search
share a graph's structure, and the solutions are those of a solve without it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dfsearch.kernels.generators import llm_fwdbwd
from dfsearch.loader import load_spec
from dfsearch.search.sharding import sharding_bytes, solve_sharding, solve_spec_sharding
from dfsearch.search.sharding_plan import ShardingPlans

EXAMPLES = Path(__file__).resolve().parents[1] / "dfsearch" / "examples"

CASES = [(tp, t) for tp in (1, 2, 4, 8, 16) for t in (1, 4, 64)]


def _fields(sol):
    return sol.sharding, sol.bytes, sol.edge_collectives


def test_shared_plans_give_the_solutions_of_fresh_solves():
    spec = load_spec(EXAMPLES / "gpt3_1T_sn30.toml")
    plans = ShardingPlans()
    for tp, t in CASES:
        shape = (tp, 1024 // tp)
        shared = solve_spec_sharding(spec, shape, t, None, plans)
        assert _fields(shared) == _fields(solve_spec_sharding(spec, shape, t, memo=False))
        assert shared.bytes == sharding_bytes(spec.graph, shared.sharding)
    assert len(plans.by_graph) == 1  # one graph, one plan


def test_plans_are_per_graph_object():
    """Two graphs solved in turn with one cache each get their own plan (a plan is tied to its
    graph object), and a graph with a pinned kernel keeps its pinned choice."""
    g1 = llm_fwdbwd(hidden=256, num_head=4, head_dim=64, seq=128, word=2)
    g2 = llm_fwdbwd(hidden=512, num_head=8, head_dim=64, seq=64, word=2)
    free = solve_sharding(g1)
    pinned_dim = free.sharding[0]
    other = [d for d in (type(pinned_dim)) if d is not pinned_dim]
    g3 = replace(g1, kernels=(replace(g1.kernels[0], sharding=other[0]), *g1.kernels[1:]))
    plans = ShardingPlans()
    for _ in range(2):
        for g in (g1, g2, g3):
            assert _fields(solve_sharding(g, plans=plans)) == _fields(solve_sharding(g))
    assert len(plans.by_graph) == 3
    assert solve_sharding(g3, plans=plans).sharding[0] is other[0]
