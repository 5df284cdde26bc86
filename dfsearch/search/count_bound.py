"""A bound of one outer choice that sees its configuration count, cheap enough to check
before the choice is solved (docs/design.md, "Best-bound-first over outer choices").

The pair bound (``outer.lower_bound_ns``) does not depend on the configuration count, so
best-bound-first solves every count of a pair whose bound is below the incumbent. On a wide
graph one solve costs seconds, while the additive and crowded bounds of the lowered problem
(``graph_bound.graph_bound_ns``, ``graph_bound.crowded_bound_ns``) see what the count
changes (the FWD/BWD rule's split of the configurations, the kernels a configuration must
share) for a few milliseconds: a count whose bound is not below the incumbent is pruned
without its solve. Both bounds hold for every assignment of the choice, so the pruning
keeps the optimum.
"""

from __future__ import annotations

import math

from dfsearch.cost.lower import Problem
from dfsearch.search import _dp
from dfsearch.search.assign import MAX_IDEAL_KERNELS, _regimes
from dfsearch.search.graph_bound import crowded_bound_ns, graph_bound_ns

__all__ = ["count_bound_ns"]


def count_bound_ns(problem: Problem) -> float:
    """A lower bound of the summed IIs of every feasible assignment of ``problem``: over the
    DRAM regimes (the assignment search keeps the better), the least of the additive and the
    crowded bound, the larger of the two, leaving out a regime whose fixed DRAM bytes alone
    overflow. 0 (no bound) when both overflow (the solve words the violation), for graphs the exact search takes (at most ``MAX_IDEAL_KERNELS``
    kernels) and for counts with no choice (one configuration, or one per kernel)."""
    n, cn = problem.num_kernels, problem.constants
    if n <= MAX_IDEAL_KERNELS or cn.fixed_config or problem.num_config == 1:
        return 0.0
    allowed = _dp.allowed_configs(problem.kernels, cn)
    bound = math.inf
    for bw, live_cap in _regimes(problem):
        if live_cap < 0:
            continue  # nothing fits in this regime
        regime = max(graph_bound_ns(problem, bw, allowed), crowded_bound_ns(problem, bw, allowed))
        bound = min(bound, regime)
    return bound if math.isfinite(bound) else 0.0  # nothing fits: the solve says why
