"""Certify a search result with the exact solver (``dfsearch check``; needs ``dfsearch[exact]``).

``check(spec)`` runs the heuristic search, takes its best outer choices (shape, sharding,
micro-batch size, tile count, number of configurations), and solves the configuration
assignment for those choices exactly with CP-SAT (``dfsearch.search.exact``), seeded with
the heuristic's assignment. It reports both final times, the exact solver's proven lower
bound and the gap. A heuristic that beats a proven bound, or a heuristic that claims a
proven optimum which the exact solver improves on, is a bug: ``check`` raises
``RuntimeError`` rather than report it.

The certificate covers the configuration assignment for the heuristic's outer choices
only: other shapes, tile counts or configuration counts are not re-solved exactly. The
result therefore carries two verdicts: ``gap`` (within those outer choices) and
``overall_status`` / ``overall_gap`` (the whole space: proven only when the search itself
proved every other outer choice worse by a bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dfsearch.api import run as run_search
from dfsearch.codes import RunStatus
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.partition import is_partitioned
from dfsearch.cost.stages import is_staged
from dfsearch.errors import SpecError
from dfsearch.search import exact
from dfsearch.search.exact import ExactResult
from dfsearch.search.outer import final_from_ii
from dfsearch.search.strategies import assignment_strategy
from dfsearch.spec import Spec

__all__ = ["CheckResult", "check", "REL_TOL"]

#: relative tolerance of the consistency checks between the heuristic and the exact solver
REL_TOL = 1e-9


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The heuristic's result next to the exact solver's, for the same outer choices.

    ``gap``: (heuristic - optimum) / optimum when the exact solver proved the optimum
    (``gap_kind`` "vs_optimum"); otherwise (heuristic - bound) / heuristic, an upper bound
    on the true gap ("vs_bound"); None without a bound. Both on final_s.
    """

    heuristic_final_s: float
    heuristic_seconds: float
    heuristic_proven: bool | None  #: the search's own optimality claim
    heuristic_status: RunStatus  #: the search's status over the whole space
    heuristic_lower_bound_s: float | None  #: the search's lower bound over the whole space
    heuristic_config: tuple[int, ...]
    outer: Outer
    exact: ExactResult
    exact_final_s: float | None
    exact_bound_s: float | None
    gap: float | None
    gap_kind: str | None

    @property
    def overall_status(self) -> RunStatus:
        """The search's own status over the whole space: OPTIMAL only when its bounds rule out
        every other outer choice. The exact solve covers one outer choice and cannot raise it
        (other outer choices may also have been searched heuristically)."""
        return self.heuristic_status

    @property
    def overall_gap(self) -> float | None:
        """Largest possible gap of the heuristic to the optimum over the whole space."""
        lb = self.heuristic_lower_bound_s
        if self.overall_status is RunStatus.OPTIMAL:
            return 0.0
        if lb is None or lb <= 0:
            return None
        return max(0.0, self.heuristic_final_s / lb - 1.0)

    def to_json(self) -> dict[str, Any]:
        """``{"heuristic": {...}, "exact": {...}, "gap", "gap_kind"}`` (JSON-ready)."""
        ex = self.exact
        bound = self.exact_bound_s
        return {
            "status": self.overall_status.label,
            "lower_bound_s": self.heuristic_lower_bound_s,
            "heuristic": {
                "final_s": self.heuristic_final_s,
                "seconds": self.heuristic_seconds,
                "proven_optimal": self.heuristic_proven,
                "status": self.heuristic_status.label,
                "lower_bound_s": self.heuristic_lower_bound_s,
            },
            "exact": {
                "status": ex.status,
                "final_s": self.exact_final_s,
                "bound_s": bound if bound is None or math.isfinite(bound) else None,
                "seconds": ex.seconds,
                "message": ex.message,
            },
            "gap": self.gap,
            "gap_kind": self.gap_kind,
            "gap_scope": "these_outer_choices",
            "overall_status": self.overall_status.label,
            "overall_gap": self.overall_gap,
        }


def check(spec: Spec, *, time_limit_s: float = 60, seed: int = 0) -> CheckResult:
    """Run the search on ``spec``, then solve its configuration assignment exactly.

    The exact solver (OR-Tools CP-SAT) works on the heuristic's best outer choices (shape,
    sharding, micro-batch size, tile count, number of configurations) and is seeded with
    the heuristic's assignment. It reports "optimal" (proven), "feasible" (time limit),
    "infeasible", "too_large" (outside its limits: more than 24 kernels or 8
    configurations; reported, not an error) or "unknown". The gap is measured against the
    proven optimum when there is one, otherwise against the proven lower bound (an upper
    bound on the true gap).

    Exit codes of ``dfsearch check``: 0 when the check ran (whatever the exact status),
    1 when the spec is infeasible, 2 when OR-Tools is missing
    (``pip install "dfsearch[exact]"``).

    Parameters
    ----------
    spec : Spec
        A validated spec.
    time_limit_s : float, default 60
        Wall-clock limit of the exact solve (the search uses the spec's own limit).
    seed : int, default 0
        Seed of the search and of CP-SAT.

    Returns
    -------
    CheckResult

    Raises
    ------
    SolverUnavailableError
        If OR-Tools is not installed (exit code 2); raised before the search runs.
    SpecError
        For a whole model in pipeline pieces (exit code 2): not one graph.
    InfeasibleError
        If the search finds no feasible mapping (exit code 1).
    RuntimeError
        If the heuristic beats the exact solver's proven bound, the exact solver proves
        infeasible what the heuristic mapped, or the search claims a proven optimum that
        the exact solver improves on: a bug in one of them.
    """
    _one_graph(spec)
    assignment_strategy("cp-sat")  # SolverUnavailableError before any work without OR-Tools
    run = run_search(spec, seed=seed)
    ev = run.evaluation
    assert ev is not None  # run_search raises InfeasibleError otherwise
    d = ev.decision
    outer = Outer(d.shape, d.sharding, d.micro_batch_size, d.num_tile, len(ev.configs),
                  d.placement)  # fmt: skip
    problem = lower(spec, outer)
    h_ii = ev.all_config_ii_ns
    # CP-SAT takes seeds below 2**31; run seeds go up to 2**32 - 1
    ex = exact.solve_exact(problem, time_limit_s=time_limit_s, hint=d.config, seed=seed % 2**31)
    _consistency(ex, h_ii, run.search.optimal)
    h_final = ev.final_s
    exact_final = _final_s(problem, ex.value_ns)
    bound_final = _final_s(problem, ex.bound_ns)
    gap, kind = _gap(ex.status, h_final, exact_final, bound_final)
    return CheckResult(
        heuristic_final_s=h_final,
        heuristic_seconds=run.search.seconds,
        heuristic_proven=run.search.optimal,
        heuristic_status=run.status,
        heuristic_lower_bound_s=run.search.lower_bound_s,
        heuristic_config=tuple(d.config),
        outer=outer,
        exact=ex,
        exact_final_s=exact_final,
        exact_bound_s=bound_final,
        gap=gap,
        gap_kind=kind,
    )


def _one_graph(spec: Spec) -> None:
    """SpecError for a whole model in pipeline pieces: the exact solver takes one graph."""
    if is_partitioned(spec):
        raise SpecError("cannot check this spec: its graph is cut into pipeline partitions "
                        "(workload.partition_graph) before the intra-chip model runs the "
                        "slowest; 'dfsearch run' reports the partitions and whether the cut and "
                        "the search on it are proven optimal", file="dfsearch check")  # fmt: skip
    if is_staged(spec):
        raise SpecError("cannot check this spec: the exact solver takes one graph, and this is a "
                        "whole model in pipeline pieces (an embedding or LM head with "
                        "num_layer_in_graph < num_layer); 'dfsearch run' solves its pieces one by "
                        "one and its status says whether every piece is proven optimal",
                        file="dfsearch check")  # fmt: skip


def _final_s(problem, ii: float | None) -> float | None:
    """final_s of the outer choices of ``problem`` for a sum of IIs ``ii`` (None and inf
    pass through)."""
    if ii is None:
        return None
    if not math.isfinite(ii):
        return ii
    return final_from_ii(problem, ii) / 1e9


def _gap(
    exact_status: str, h_final: float, exact_final: float | None, bound_final: float | None
) -> tuple[float | None, str | None]:
    """(gap, kind) of the heuristic's final_s: against the proven optimum ("vs_optimum"),
    else against the proven lower bound ("vs_bound", an upper bound on the true gap), else
    (None, None)."""
    if exact_status == "optimal" and exact_final is not None and exact_final > 0:
        # the heuristic may beat the re-scored optimum by at most the scaling slack
        return max(0.0, (h_final - exact_final) / exact_final), "vs_optimum"
    if bound_final is not None and math.isfinite(bound_final) and h_final > 0:
        return max(0.0, (h_final - bound_final) / h_final), "vs_bound"
    return None, None


def _consistency(ex: ExactResult, h_ii: float, h_proven: bool | None) -> None:
    """Raise RuntimeError when the heuristic's and the exact solver's answers contradict."""
    if ex.status == "infeasible":
        raise RuntimeError(
            f"BUG: the exact solver proves infeasible an assignment problem the heuristic "
            f"solved (sum of IIs {h_ii:.9g} ns)"
        )
    bound = ex.bound_ns
    if bound is not None and math.isfinite(bound) and h_ii < bound * (1 - REL_TOL):
        what = "the proven optimum" if ex.status == "optimal" else "the proven lower bound"
        raise RuntimeError(
            f"BUG: the heuristic's sum of IIs {h_ii:.12g} ns beats {what} {bound:.12g} ns "
            f"(exact status {ex.status}): the heuristic or the exact model is wrong"
        )
    if h_proven and ex.value_ns is not None and ex.value_ns < h_ii * (1 - REL_TOL):
        raise RuntimeError(
            f"BUG: the search claims a proven optimum ({h_ii:.12g} ns) but the exact solver "
            f"found {ex.value_ns:.12g} ns for the same outer choices"
        )
