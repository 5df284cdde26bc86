"""Assignment strategies: thin adapters over ``assign_configs`` and ``solve_exact``.

* ``auto`` — today's composition: A* over order ideals, falling back to the contiguous-order
  DP + annealing when the graph is too wide or the state budget runs out;
* ``ideal-dp`` — A* over order ideals only (proven optimal when it finishes);
* ``order-dp`` — the best split of one topological order into contiguous blocks;
* ``anneal`` — the order DP inside seeded simulated annealing over topological orders;
* ``cp-sat`` — OR-Tools CP-SAT (the ``[exact]`` extra), hinted with the order DP's answer.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsearch.search.strategies.base import (
    evaluation_allowance,
    seconds_left,
    stop_requested,
    stopped_before_start,
)

if TYPE_CHECKING:
    import numpy as np

    from dfsearch.cost.lower import Problem
    from dfsearch.search.assign import Assignment
    from dfsearch.search.exact import ExactResult

__all__ = ["DPStrategy", "CpSat", "EVALS_PER_DETERMINISTIC_SECOND"]

#: CP-SAT's work limit: one deterministic second per this many evaluations of the budget
EVALS_PER_DETERMINISTIC_SECOND = 1_000_000
#: CP-SAT's wall-clock limit when the run has no deadline
_NO_DEADLINE_S = 1e9
#: CP-SAT takes seeds in [0, 2**31 - 1]; run seeds go up to 2**32 - 1
_CP_SAT_SEEDS = 2**31


@dataclass(frozen=True, slots=True)
class DPStrategy:
    """One ``method`` of ``assign_configs`` (the dynamic programmes and annealing)."""

    name: str
    method: str
    summary: str
    proves_optimality: bool
    proof_rel_gap: float = 0.0

    def available(self) -> bool:
        return True

    def assign(self, problem: Problem, *, seed: int, control: np.ndarray,
               tick: Callable[[], None] | None = None) -> Assignment:  # fmt: skip
        if stop_requested(control):
            return stopped_before_start(self.name)
        from dfsearch.search.assign import assign_configs

        return assign_configs(problem, method=self.method, seed=seed, control=control, tick=tick)


@dataclass(frozen=True, slots=True)
class CpSat:
    """CP-SAT on the whole assignment problem, hinted with the contiguous-order DP.

    The order DP runs first (its violations explain an infeasible problem, its answer is
    the hint and the fallback). CP-SAT's work limit is deterministic: the evaluations left
    in the budget / ``EVALS_PER_DETERMINISTIC_SECOND``; a solve that hits it (or the
    deadline) is charged the whole allowance and returned ``stopped``. "optimal" is proven
    up to CP-SAT's integer scaling slack (docs/exact.md), hence ``proof_rel_gap``. Problems
    outside CP-SAT's limits ("too_large") return the order DP's answer, labelled so.
    The stop flag is read before CP-SAT starts, not during its solve.
    """

    name: str = "cp-sat"
    summary: str = ("OR-Tools CP-SAT on the whole assignment, hinted with order-dp (proven "
                    "optimal when it finishes, needs dfsearch[exact])")
    proves_optimality: bool = True
    proof_rel_gap: float = 1e-6
    requires: str = 'OR-Tools (pip install "dfsearch[exact]")'

    def available(self) -> bool:
        try:
            return importlib.util.find_spec("ortools") is not None
        except (ImportError, ValueError):  # a stub module without a spec
            return False

    def assign(self, problem: Problem, *, seed: int, control: np.ndarray,
               tick: Callable[[], None] | None = None) -> Assignment:  # fmt: skip
        if stop_requested(control):
            return stopped_before_start(self.name)
        from dfsearch.search.assign import assign_configs
        from dfsearch.search.exact import solve_exact

        start = assign_configs(problem, method="order-dp", seed=seed, control=control, tick=tick)
        if start.stopped or start.method == "forced":
            return start
        allowance = evaluation_allowance(control) - start.evaluations
        if allowance <= 0:
            return dataclasses.replace(start, stopped=True)
        limit = seconds_left(control)
        if limit <= 0:
            return dataclasses.replace(start, stopped=True)
        ex = solve_exact(
            problem,
            time_limit_s=limit if math.isfinite(limit) else _NO_DEADLINE_S,
            hint=start.config,
            seed=seed % _CP_SAT_SEEDS,
            max_deterministic_time=(
                allowance / EVALS_PER_DETERMINISTIC_SECOND if math.isfinite(allowance) else None
            ),
        )  # fmt: skip
        return self._combine(start, ex, allowance)

    def _combine(self, start: Assignment, ex: ExactResult, allowance: float) -> Assignment:
        """CP-SAT's answer, or the order DP's where it is better or CP-SAT has none."""
        if ex.status == "too_large":
            return start
        if ex.status == "infeasible":
            if start.config is not None:
                raise RuntimeError(
                    f"BUG: CP-SAT proves infeasible a problem the order DP solved "
                    f"(sum of IIs {start.value_ns:.12g} ns)"
                )
            return dataclasses.replace(
                start, method=self.name, exhaustive=True, bound_ns=math.inf, stopped=False
            )
        hit_limit = ex.status != "optimal"  # "feasible" / "unknown": a work or time limit
        evaluations = start.evaluations + (int(allowance) if hit_limit and math.isfinite(allowance) else 0)
        config, value = start.config, start.value_ns
        if ex.assignment is not None and ex.value_ns is not None and ex.value_ns <= value:
            config, value = ex.assignment, ex.value_ns
        bound = max(start.bound_ns, ex.bound_ns if ex.bound_ns is not None else 0.0)
        bound = min(bound, value)
        exhaustive = not hit_limit and bound >= value * (1 - self.proof_rel_gap)
        return dataclasses.replace(
            start, config=config, value_ns=value, method=self.name, exhaustive=exhaustive,
            evaluations=evaluations, bound_ns=bound, stopped=hit_limit,
        )  # fmt: skip
