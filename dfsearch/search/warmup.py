"""Compile (or load from Numba's cache) every jitted function the search uses, before a
wall-clock limit starts counting: compilation never counts against ``time_limit_s``."""

from __future__ import annotations

from pathlib import Path

from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import evaluate_problem
from dfsearch.decision import Decision
from dfsearch.loader import load_spec
from dfsearch.search.assign import assign_configs
from dfsearch.search.sharding import solve_spec_sharding

__all__ = ["warm_up"]


def warm_up() -> None:
    """Run each jitted entry point once on a small lowered problem of the built-in example."""
    spec = load_spec(Path(__file__).parent.parent / "examples" / "gpt3_1T_sn30.toml")
    n = len(spec.graph.kernels)
    shape = tuple(d.size for d in spec.system.network)
    sharding = solve_spec_sharding(spec, shape, 2048).sharding
    for num_config, method in ((6, "ideal-dp"), (6, "anneal"), (n, "auto")):
        problem = lower(spec, Outer(shape, sharding, 1, 2048, num_config))
        a = assign_configs(problem, method=method, max_states=64, anneal_iterations=2)
        config = a.config or tuple(min(i, num_config - 1) for i in range(n))
        decision = Decision(shape=shape, sharding=sharding, micro_batch_size=1, num_tile=2048,
                            config=config)  # fmt: skip
        evaluate_problem(spec, problem, decision)
