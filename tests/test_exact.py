"""The exact backend (OR-Tools CP-SAT): optimal = brute force, limits, statuses, ``check``."""

from __future__ import annotations

import dataclasses
import itertools
import math
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("ortools")

from dfsearch.cost.layout import ConfigCol, ResultSlot
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluator
from dfsearch.errors import SolverUnavailableError
from dfsearch.search.exact import ExactResult, solve_exact
from dfsearch.search.sharding import solve_spec_sharding

from _clock import load_factor
from specs import random_spec

#: CP-SAT work limit (deterministic seconds) of every solve here: reproducible
DET = 20.0


def lowered(spec, t=4):
    sharding = solve_spec_sharding(spec, (4,), t).sharding
    return lower(spec, Outer((4,), sharding, 1, t, spec.execution.num_config))


def with_constants(problem, **values):
    """The problem with some constants replaced (capacities, DRAM tiers)."""
    return dataclasses.replace(problem, constants=problem.constants._replace(**values))


def brute_force(problem) -> tuple[float, tuple[int, ...] | None]:
    """Minimum sum of configuration IIs over every assignment, by the float evaluator."""
    n, nc = problem.num_kernels, problem.num_config
    rows = np.array(list(itertools.product(range(nc), repeat=n)), dtype=np.int64)
    finals, _, _ = Evaluator(problem).batch(rows)
    i = int(np.argmin(finals))
    if not math.isfinite(finals[i]):
        return math.inf, None
    cfg = tuple(int(c) for c in rows[i])
    return all_ii(problem, cfg), cfg


def all_ii(problem, cfg) -> float:
    out = Evaluator(problem).full(cfg)
    return out.all_config_ii_ns if out.status == 0 else math.inf


def solve(problem, **kw) -> ExactResult:
    kw.setdefault("time_limit_s", 30.0)
    return solve_exact(problem, max_deterministic_time=DET, **kw)


def assert_matches(problem, r: ExactResult) -> None:
    best, _ = brute_force(problem)
    if not math.isfinite(best):
        assert r.status == "infeasible" and r.value_ns is None and r.bound_ns == math.inf
        return
    assert r.status == "optimal", r
    # CP-SAT's optimum of the integer model is the float optimum up to the scaling slack,
    # and its own value of the assignment is the evaluator's, rounded up by at most the slack
    assert r.value_ns == pytest.approx(best, rel=1e-12, abs=r.slack_ns)
    assert r.value_ns * (1 - 1e-12) <= r.solver_value_ns <= r.value_ns + r.slack_ns
    assert all_ii(problem, r.assignment) == pytest.approx(r.value_ns, rel=1e-12)
    assert r.bound_ns <= best * (1 + 1e-12)


# (seed, kernels, configs, cycle model, SRAM bytes, training)
CASES = [
    (0, 6, 3, False, 2e5, True), (1, 7, 3, True, 2e5, True), (2, 6, 4, False, 6e4, True),
    (3, 7, 4, False, 2e4, False), (4, 7, 4, True, 2e4, False), (5, 7, 4, True, 1.2e4, False),
    (6, 6, 2, True, 1.5e4, False), (7, 7, 3, False, 1e4, False), (8, 5, 3, True, 8e3, False),
    (9, 6, 3, False, 1.5e4, False), (10, 7, 2, False, 3e4, True), (11, 5, 4, True, 2e4, False),
]  # fmt: skip


@pytest.mark.parametrize(("seed", "n", "c", "cycle", "sram", "training"), CASES)
def test_optimum_equals_brute_force(seed, n, c, cycle, sram, training):
    spec = random_spec(seed, n, num_config=c, cycle=cycle, sram=sram, training=training)
    problem = lowered(spec)
    assert_matches(problem, solve(problem))


def sram_parts(problem, cfg) -> tuple[list[float], list[float]]:
    """Per configuration, the untiled SRAM bytes and the bytes a lone weight kernel tiles
    (its weight and its spilled outputs, in both configurations; docs/model.md)."""
    nc = problem.num_config
    rest, tiled = [0.0] * nc, [0.0] * nc
    count = Counter(cfg)

    def lone(k):
        return kt.is_weight[k] == 1 and count[cfg[k]] == 1

    kt, et = problem.kernels, problem.edges
    for k in range(problem.num_kernels):
        rest[cfg[k]] += kt.sram_extra[k]
        (tiled if lone(k) else rest)[cfg[k]] += kt.weight_sram[k]
    for s, d, b, depth in zip(et.src, et.dst, et.sram_bytes, et.sram_depth):
        if cfg[s] == cfg[d]:
            rest[cfg[s]] += b * depth
        else:
            part = tiled if lone(s) else rest
            part[cfg[s]] += 2 * b
            part[cfg[d]] += 2 * b
    return rest, tiled


# (seed, kernels, configs, cycle model, SRAM bytes): the optimum holds a weight kernel alone
# in its configuration, whose weight and spilled outputs are tiled away
LONE = [(2, 6, 3, False, 12416.0), (14, 7, 3, True, 9216.0), (29, 7, 4, False, 17408.0),
        (32, 7, 3, True, 2048.0)]  # fmt: skip


@pytest.mark.parametrize(("seed", "n", "c", "cycle", "sram"), LONE)
def test_lone_weight_kernels_tile_their_footprints(seed, n, c, cycle, sram):
    spec = random_spec(seed, n, num_config=c, cycle=cycle, sram=sram, training=False)
    problem = lowered(spec)
    best, cfg = brute_force(problem)
    assert math.isfinite(best)
    assert any(sram_parts(problem, cfg)[1][c] > 0 for c in range(problem.num_config))
    r = solve(problem)
    assert_matches(problem, r)
    assert "cut off" not in r.message


@pytest.mark.parametrize("seed", [6, 14, 43])
def test_a_tiled_footprint_needs_the_rest_strictly_below_the_capacity(seed):
    """With the capacity equal to the untiled bytes of a configuration that also holds
    tiled bytes, the unconstrained optimum no longer fits (tiling divides a footprint, it
    never removes it); the model knows it without cutting assignments off."""
    spec = random_spec(seed, 6, num_config=3, cycle=True, sram=1e9, training=False)
    problem = lowered(spec)
    loose, cfg = brute_force(problem)
    rest, tiled = sram_parts(problem, cfg)
    cap = max(rest)
    assert any(tiled[c] > 0 and rest[c] == cap for c in range(problem.num_config))
    p = with_constants(problem, sram_cap=cap)
    assert brute_force(p)[0] > loose
    r = solve(p)
    assert_matches(p, r)
    assert "cut off" not in r.message


@pytest.mark.parametrize("seed", range(4))
def test_sram_capacity_boundaries(seed):
    """Capacities exactly equal to a configuration's SRAM (<= fits, and < with a tiled
    weight footprint) give the brute-force optimum too."""
    spec = random_spec(20 + seed, 7, num_config=3, cycle=seed % 2 == 1, sram=1e9, training=False)
    problem = lowered(spec)
    _, cfg = brute_force(problem)
    table = Evaluator(problem).full(cfg).per_config
    caps = sorted({float(v) for v in table[:, ConfigCol.SRAM] if v > 0})
    for cap in caps[-2:]:
        p = with_constants(problem, sram_cap=cap)
        assert_matches(p, solve(p))


@pytest.mark.parametrize("seed", [30, 31, 48])
def test_dram_capacity_and_second_tier(seed):
    """A binding DRAM capacity (live activations) and a slower second DRAM tier that
    applies only when the total exceeds the first (v1)."""
    spec = random_spec(seed, 7, num_config=4, cycle=False, sram=1e9, training=False)
    problem = lowered(spec)
    _, cfg = brute_force(problem)
    dram = float(Evaluator(problem).full(cfg).totals[ResultSlot.DRAM])
    fixed = problem.constants.dram_fixed
    assert problem.constants.dram_act_mult > 0
    cap = fixed + 0.6 * (dram - fixed)  # the unconstrained optimum does not fit
    p = with_constants(problem, dram_cap=cap)
    assert_matches(p, solve(p))
    bw = problem.constants.dram_bw
    # a slower and a faster second tier; the first tier too small or large enough for the
    # unconstrained optimum (a faster tier must not be used below the first tier's capacity)
    for cap1, bw2 in ((cap, bw / 50), (cap, 4 * bw), (1.5 * dram, 4 * bw)):
        tiered = with_constants(problem, dram_cap=cap1, dram2_cap=10 * dram, dram2_bw=bw2)
        assert_matches(tiered, solve(tiered))


@pytest.mark.parametrize(("cycle", "cores"), [(False, 2), (True, 3)])
def test_few_cores_limit_the_kernels_of_a_configuration(cycle, cores):
    spec = random_spec(12, 6, num_config=3, cycle=cycle, sram=1e9, training=False)
    acc = dataclasses.replace(spec.system.accelerator, cores=cores)
    spec = dataclasses.replace(spec, system=dataclasses.replace(spec.system, accelerator=acc))
    problem = lowered(spec)
    _best, cfg = brute_force(problem)
    assert max(Counter(cfg).values()) <= cores
    assert_matches(problem, solve(problem))


def test_assignments_the_evaluator_rejects_at_a_float_boundary_are_cut_off():
    """The tiled footprint of this assignment equals the capacity up to float rounding: the
    evaluator rejects it, the integer model cannot tell, so it is cut off and re-solved."""
    spec = random_spec(6, 7, num_config=4, cycle=False, sram=7168.0, training=False)
    problem = lowered(spec)
    assert_matches(problem, solve(problem))


def test_solver_value_and_rescored_value_agree_up_to_the_slack():
    spec = random_spec(3, 7, num_config=4, cycle=True, sram=2e4, training=False)
    problem = lowered(spec)
    r = solve(problem)
    assert r.status == "optimal"
    n, e, c = problem.num_kernels, len(problem.edges.src), problem.num_config
    # every coefficient is rounded up: one rounding per kernel term (compute, memory,
    # network, all-to-all channel), two per spilled edge, one per configuration maximum
    assert r.slack_ns == pytest.approx((4 * n + 2 * e + c) / r.scale)
    assert r.value_ns <= r.solver_value_ns * (1 + 1e-15)
    assert r.solver_value_ns - r.value_ns <= r.slack_ns
    assert r.bound_ns <= r.value_ns and r.value_ns - r.bound_ns <= 2 * r.slack_ns


def test_hint_does_not_change_the_optimum():
    spec = random_spec(4, 7, num_config=4, cycle=True, sram=2e4, training=False)
    problem = lowered(spec)
    best, cfg = brute_force(problem)
    worst_feasible = (0,) * problem.num_kernels
    for hint in (cfg, worst_feasible):
        r = solve(problem, hint=hint)
        assert r.status == "optimal" and r.value_ns == pytest.approx(best, abs=r.slack_ns)


def test_too_large_is_refused_with_the_reason():
    spec = random_spec(1, 7, num_config=3, cycle=True, sram=2e5)
    problem = lowered(spec)
    r = solve(problem, max_kernels=6)
    assert r.status == "too_large" and r.value_ns is None and r.bound_ns is None
    assert "7 kernels" in r.message and "6 kernels" in r.message
    r = solve(problem, max_configs=2)
    assert r.status == "too_large" and "3 configurations" in r.message
    r = solve(problem, max_cycle_options=3)
    assert r.status == "too_large" and "option tables" in r.message


@pytest.mark.wallclock
def test_time_limit_is_honoured():
    spec = random_spec(5, 16, num_config=6, cycle=True, sram=2e4, training=False)
    problem = lowered(spec)
    r = solve_exact(problem, time_limit_s=0.3, max_deterministic_time=0.0)
    assert r.status in ("feasible", "unknown")
    assert r.seconds < 5.0 * load_factor()  # CP-SAT's limit is wall-clock time
    if r.status == "feasible":
        assert all_ii(problem, r.assignment) == pytest.approx(r.value_ns, rel=1e-12)
    assert r.bound_ns is not None and r.bound_ns >= 0.0


def test_infeasible_instance():
    spec = random_spec(6, 6, num_config=3, sram=10.0)
    problem = lowered(spec)
    assert brute_force(problem)[0] == math.inf
    r = solve(problem)
    assert r.status == "infeasible" and r.assignment is None and r.bound_ns == math.inf
    # the assignment-independent DRAM bytes alone exceed the capacity
    spec = random_spec(6, 6, num_config=3, sram=1e9)
    p = lowered(spec)
    p = with_constants(p, dram_cap=p.constants.dram_fixed / 2)
    assert solve(p).status == "infeasible"


def test_forced_assignments_need_no_search():
    # two configurations of a training graph: the FWD/BWD rule fixes every kernel
    spec = random_spec(7, 7, num_config=2, sram=1e9, training=True)
    problem = lowered(spec)
    r = solve(problem, max_kernels=1)
    assert r.status == "optimal" and r.value_ns == pytest.approx(brute_force(problem)[0])


def test_missing_ortools_raises_solver_unavailable(monkeypatch):
    for name in ("ortools", "ortools.sat", "ortools.sat.python", "ortools.sat.python.cp_model"):
        monkeypatch.setitem(sys.modules, name, None)
    problem = lowered(random_spec(0, 6, num_config=3))
    with pytest.raises(SolverUnavailableError, match=r'pip install "dfsearch\[exact\]"') as err:
        solve_exact(problem, time_limit_s=1.0)
    assert err.value.exit_code == 2
    from dfsearch.check import check

    with pytest.raises(SolverUnavailableError):
        check(random_spec(0, 6, num_config=3))


def test_importing_the_backend_does_not_load_ortools():
    code = (
        "import sys, dfsearch, dfsearch.check, dfsearch.search.exact; "
        "print('ortools' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- check()
def test_check_json_reports_both_sides():
    from dfsearch.check import check

    spec = random_spec(2, 7, num_config=3, cycle=False, sram=2e4, training=False)
    res = check(spec, time_limit_s=20)
    j = res.to_json()
    assert set(j) >= {"heuristic", "exact", "gap", "gap_kind"}
    assert set(j["heuristic"]) >= {"final_s", "seconds"}
    assert set(j["exact"]) >= {"status", "final_s", "bound_s", "seconds"}
    assert j["exact"]["status"] == "optimal" and j["gap_kind"] == "vs_optimum"
    # the search's assignment for these outer choices is the optimum (brute force)
    problem = lower(spec, res.outer)
    from dfsearch.search.outer import final_from_ii

    best = final_from_ii(problem, brute_force(problem)[0]) / 1e9
    assert j["exact"]["final_s"] == pytest.approx(best, rel=1e-9)
    assert j["heuristic"]["final_s"] >= best * (1 - 1e-9)
    assert j["gap"] == pytest.approx(max(0.0, j["heuristic"]["final_s"] / best - 1), abs=1e-9)


def test_check_reports_a_bound_gap_when_not_proven(monkeypatch):
    import dfsearch.search.exact as exact
    from dfsearch.check import check

    spec = random_spec(2, 7, num_config=3, sram=2e4, training=False)
    monkeypatch.setattr(exact, "solve_exact", lambda p, **kw: ExactResult(
        "feasible", None, 0.0, None, 0.1, "stub"))  # fmt: skip
    j = check(spec).to_json()
    assert j["gap_kind"] == "vs_bound" and 0.0 <= j["gap"] <= 1.0


@pytest.mark.parametrize("status", ["optimal", "feasible"])
def test_check_fails_loudly_when_the_heuristic_beats_a_proven_bound(monkeypatch, status):
    import dfsearch.search.exact as exact
    from dfsearch.check import check

    spec = random_spec(2, 7, num_config=3, sram=2e4, training=False)

    def fake(problem, **kw):  # claims an optimum twice the heuristic's value
        h = all_ii(problem, kw["hint"])
        return ExactResult(status, 2 * h, 2 * h, kw["hint"], 0.1, "stub")

    monkeypatch.setattr(exact, "solve_exact", fake)
    with pytest.raises(RuntimeError, match="BUG: the heuristic"):
        check(spec)


def test_check_fails_loudly_when_a_proven_heuristic_is_improved(monkeypatch):
    import dfsearch.search.exact as exact
    from dfsearch.check import check

    spec = random_spec(2, 7, num_config=3, sram=2e4, training=False)

    def fake(problem, **kw):
        h = all_ii(problem, kw["hint"])
        return ExactResult("feasible", h / 2, 0.0, kw["hint"], 0.1, "stub")

    monkeypatch.setattr(exact, "solve_exact", fake)
    with pytest.raises(RuntimeError, match="BUG: the search claims a proven optimum"):
        check(spec)


def test_check_never_calls_an_unproven_answer_optimal(tmp_path):
    """A search stopped by its work budget: the exact solver may prove the heuristic's outer
    choices optimal (gap 0 there), but the overall verdict stays 'not proven'."""
    from typer.testing import CliRunner

    from dfsearch.check import check
    from dfsearch.cli import app
    from dfsearch.io.toml_writer import spec_to_toml

    base = random_spec(4, 7, num_config=3, cycle=False, sram=2e4, training=False)
    full = check(base, time_limit_s=20)
    assert full.to_json()["overall_status"] == "optimal" and full.overall_gap == 0.0
    # 50 evaluations: a mapping is found, the search stops before it can prove it (54 needed)
    spec = dataclasses.replace(base, search=dataclasses.replace(base.search, max_evaluations=50))
    res = check(spec, time_limit_s=20)
    j = res.to_json()
    assert j["heuristic"]["status"] == "stopped_by_limit"
    assert j["overall_status"] == "stopped_by_limit" and j["gap_scope"] == "these_outer_choices"
    path = tmp_path / "s.toml"
    path.write_text(spec_to_toml(spec))
    out = CliRunner().invoke(app, ["check", str(path)])
    assert out.exit_code == 0, out.output
    assert "NOT proven optimal over the whole space" in out.output
    assert "within these outer choices only" in out.output
