"""The shared contract of the search strategies: every registered strategy, checked the same way.

Registering a strategy in ``dfsearch.search.strategies`` is enough to put it under these
tests. Assignment strategies are checked on small lowered problems against the brute-force
optimum over every assignment; outer strategies at the spec level against the optimum over
every outer choice. The checks: the answer re-scored by the evaluator is the reported value;
it is never below the optimum and a proof is the optimum; a lower bound never exceeds it;
same seed, same answer; a stop or a tiny budget returns promptly without a proof; an
infeasible problem returns no mapping and a violation.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
import pytest
from test_outer_search import brute_force_final_ns, free_spec
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.codes import RunStatus
from dfsearch.cost.lower import Outer, Problem, lower
from dfsearch.cost.model import Evaluator, evaluate, evaluate_problem
from dfsearch.decision import Decision
from dfsearch.errors import SolverUnavailableError, SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import replace_field
from dfsearch.search import assign as assign_mod
from dfsearch.search.engine import search
from dfsearch.search.sharding import solve_spec_sharding
from dfsearch.search.strategies import (
    ASSIGNMENT_STRATEGIES,
    OUTER_STRATEGIES,
    assignment_strategy,
    outer_strategy,
)
from dfsearch.search.strategies.base import control_array
from dfsearch.spec import ASSIGNMENT_STRATEGY_NAMES, AUTO, OUTER_STRATEGY_NAMES, Spec

from specs import random_spec

ASSIGNMENT = list(ASSIGNMENT_STRATEGIES)
OUTER = list(OUTER_STRATEGIES)
REL = 1e-12


def test_the_registries_hold_the_names_specs_may_take():
    """Validation reads the data layer's lists of names; the registries implement them."""
    assert tuple(OUTER_STRATEGIES) == OUTER_STRATEGY_NAMES
    assert tuple(ASSIGNMENT_STRATEGIES) == ASSIGNMENT_STRATEGY_NAMES
    for registry in (OUTER_STRATEGIES, ASSIGNMENT_STRATEGIES):
        assert all(s.name == name for name, s in registry.items())


def usable_assignment(name: str):
    s = ASSIGNMENT_STRATEGIES[name]
    if not s.available():
        pytest.skip(f"{name} needs {getattr(s, 'requires', 'an optional dependency')}")
    return s


def with_strategies(spec: Spec, strategy: str = "auto", assignment: str = "auto") -> Spec:
    if assignment != "auto":
        usable_assignment(assignment)
    return replace(spec, search=replace(spec.search, strategy=strategy, assignment=assignment))


def without_seconds(result) -> dict:
    j = result.to_json()
    j["search"].pop("seconds")
    return j


# --------------------------------------------------------------------------- problems
@dataclass(frozen=True)
class Case:
    """One lowered problem and its optimum (sum of configuration IIs) by brute force."""

    spec: Spec
    problem: Problem
    sharding: tuple
    num_tile: int
    optimum_ii: float  #: inf when no assignment is feasible

    def rescore(self, config: tuple[int, ...]):
        d = Decision(shape=(4,), sharding=self.sharding, micro_batch_size=1,
                     num_tile=self.num_tile, config=config, num_config=self.problem.num_config)  # fmt: skip
        return evaluate_problem(self.spec, self.problem, d)


def make_case(spec: Spec, t: int = 4) -> Case:
    sharding = solve_spec_sharding(spec, (4,), t).sharding
    problem = lower(spec, Outer((4,), sharding, 1, t, spec.execution.num_config))
    n, nc = problem.num_kernels, problem.num_config
    rows = np.array(list(itertools.product(range(nc), repeat=n)), dtype=np.int64)
    finals, _, _ = Evaluator(problem).batch(rows)
    i = int(np.argmin(finals))
    case = Case(spec, problem, sharding, t, math.inf)
    if not math.isfinite(finals[i]):
        return case
    ev = case.rescore(tuple(int(c) for c in rows[i]))  # final_ns is monotone in the sum of IIs
    assert ev.feasible
    return replace(case, optimum_ii=ev.all_config_ii_ns)


def _random_specs(count: int) -> dict[str, Spec]:
    rng = random.Random(2024)
    out = {}
    for i in range(count):
        n, c = rng.randint(4, 7), rng.randint(2, 4)
        out[f"random{i}"] = random_spec(rng.randrange(10**6), n, num_config=c,
                                        cycle=rng.random() < 0.5, training=rng.random() < 0.5,
                                        sram=rng.choice([6e4, 2e5]))  # fmt: skip
    return out


SPECS = {
    "training": random_spec(1, 7, num_config=3),
    "cycle-model": random_spec(2, 6, num_config=3, cycle=True),
    "tight-sram": random_spec(4, 7, num_config=3, sram=6e4, training=False),
    "one-config": random_spec(5, 6, num_config=1),
    "four-configs": random_spec(7, 7, num_config=4, training=False, cycle=True),
    **_random_specs(4),
}
INFEASIBLE = random_spec(6, 6, num_config=3, sram=10.0)
#: a problem that needs about 80,000 evaluations to solve exactly (A*: 0.2 s)
HEAVY = random_spec(1, 20, num_config=8, sram=1e5, cycle=True, training=False)


@pytest.fixture(scope="module", params=list(SPECS))
def case(request) -> Case:
    return make_case(SPECS[request.param])


# --------------------------------------------------------------------------- assignment
@pytest.mark.parametrize("name", ASSIGNMENT)
def test_answer_is_the_evaluators_and_never_beats_the_optimum(name, case):
    s = usable_assignment(name)
    a = s.assign(case.problem, seed=0, control=control_array())
    assert not a.stopped
    assert math.isfinite(case.optimum_ii), "the fixed and random cases are feasible"
    assert a.config is not None, f"{name} found nothing on a feasible problem"
    ev = case.rescore(a.config)
    assert ev.feasible and ev.all_config_ii_ns == pytest.approx(a.value_ns, rel=REL)
    assert a.value_ns >= case.optimum_ii * (1 - REL)
    assert a.bound_ns <= case.optimum_ii * (1 + REL)


@pytest.mark.parametrize("name", ASSIGNMENT)
def test_a_proof_is_the_optimum_and_provers_prove_small_problems(name, case):
    s = usable_assignment(name)
    a = s.assign(case.problem, seed=0, control=control_array())
    if s.proves_optimality:
        assert a.exhaustive, f"{name} can prove optimality but did not on {case.problem.num_kernels} kernels"
    if a.exhaustive:
        assert a.value_ns <= case.optimum_ii * (1 + s.proof_rel_gap + REL)
        assert a.bound_ns >= a.value_ns * (1 - s.proof_rel_gap - REL)


@pytest.mark.parametrize("name", ASSIGNMENT)
def test_same_seed_same_answer(name):
    s = usable_assignment(name)
    problem = make_case(SPECS["tight-sram"]).problem
    for seed in (3, 2**32 - 1):  # the largest seed a spec allows
        a = s.assign(problem, seed=seed, control=control_array())
        b = s.assign(problem, seed=seed, control=control_array())
        assert a == b


@pytest.mark.parametrize("name", ASSIGNMENT)
@pytest.mark.parametrize("control", ["stop flag", "deadline passed"])
def test_a_stop_found_at_the_start_returns_at_once_without_a_claim(name, control):
    s = usable_assignment(name)
    problem = _heavy_problem()
    ctl = control_array(stop=True) if control == "stop flag" else control_array(deadline=0.0)
    t0 = time.process_time()  # CPU seconds: another process on the core does not count
    a = s.assign(problem, seed=0, control=ctl)
    assert time.process_time() - t0 < 0.5
    assert a.stopped and not a.exhaustive and a.config is None and a.evaluations == 0


@pytest.mark.parametrize("name", ASSIGNMENT)
@pytest.mark.parametrize("budget", [1, 50])
def test_a_tiny_budget_stops_promptly_without_a_claim(name, budget):
    s = usable_assignment(name)
    problem = _heavy_problem()
    t0 = time.process_time()
    a = s.assign(problem, seed=0, control=control_array(max_evaluations=budget))
    assert time.process_time() - t0 < 2.0
    assert a.stopped and not a.exhaustive
    assert a.evaluations < 1000  # at most one check interval past the budget


@pytest.mark.parametrize("name", ASSIGNMENT)
def test_an_infeasible_problem_has_no_assignment_and_a_violation(name):
    s = usable_assignment(name)
    a = s.assign(_infeasible_problem(), seed=0, control=control_array())
    assert a.config is None and a.value_ns == math.inf
    assert a.violations.get("sram", 0) > 0


def make_case_of(spec: Spec, problem: Problem, t: int = 4) -> Case:
    """A case without the brute force (for re-scoring only)."""
    return Case(spec, problem, solve_spec_sharding(spec, (4,), t).sharding, t, math.nan)


def _heavy_problem() -> Problem:
    sharding = solve_spec_sharding(HEAVY, (4,), 4).sharding
    return lower(HEAVY, Outer((4,), sharding, 1, 4, HEAVY.execution.num_config))


def _infeasible_problem() -> Problem:
    sharding = solve_spec_sharding(INFEASIBLE, (4,), 4).sharding
    return lower(INFEASIBLE, Outer((4,), sharding, 1, 4, 3))


# --------------------------------------------------------------------------- outer
def _auto_configs(spec: Spec) -> Spec:
    return replace(spec, execution=replace(spec.execution, num_config=AUTO))


OUTER_SPECS = {
    "auto-configs": _auto_configs(random_spec(11, 6)),  # 7 tile counts x 6 configuration counts
    "free-shape": free_spec(5, n=5, cycle=True),  # 5 shapes x 7 tile counts x 5 counts
}
PAIR_SPEC = random_spec(12, 6, num_config=3)


@pytest.fixture(autouse=True)
def few_sampled_trials(monkeypatch):
    """Optuna samples 20 outer choices here (300 by default) to keep the suite fast."""
    import dfsearch.search.engine as engine

    monkeypatch.setattr(engine, "OPTUNA_TRIALS", 20)


@pytest.fixture(scope="module", params=list(OUTER_SPECS))
def outer_case(request) -> tuple[Spec, float]:
    spec = OUTER_SPECS[request.param]
    return spec, brute_force_final_ns(spec)


@pytest.mark.parametrize("name", OUTER)
def test_outer_answer_is_rescored_bounded_and_claimed_only_when_optimal(name, outer_case):
    spec, optimum = outer_case
    r = search(with_strategies(spec, strategy=name))
    assert math.isfinite(optimum) and r.evaluation is not None
    assert evaluate(spec, r.evaluation.decision).final_ns == pytest.approx(r.evaluation.final_ns, rel=REL)
    assert r.evaluation.final_ns >= optimum * (1 - REL)
    if r.search.lower_bound_s is not None:
        assert r.search.lower_bound_s * 1e9 <= optimum * (1 + REL)
    if r.status is RunStatus.OPTIMAL:
        assert outer_strategy(name).proves_optimality
        assert r.evaluation.final_ns == pytest.approx(optimum, rel=REL)
    elif outer_strategy(name).proves_optimality:
        pytest.fail(f"{name} can prove optimality but left {r.status.label} on a small space")
    assert r.search.method.split("+")[0] in OUTER_STRATEGIES


@pytest.mark.parametrize("name", OUTER)
def test_outer_same_seed_same_answer(name):
    spec = with_strategies(OUTER_SPECS["free-shape"], strategy=name)
    assert without_seconds(search(spec, seed=9)) == without_seconds(search(spec, seed=9))


@pytest.mark.parametrize("name", OUTER)
def test_outer_tiny_budget_or_time_limit_stops_without_a_claim(name):
    spec = with_strategies(OUTER_SPECS["free-shape"], strategy=name)
    r = search(spec, max_evaluations=1)
    assert r.status is RunStatus.STOPPED_BY_LIMIT and "work budget" in r.search.stopped_by
    r = search(spec, time_limit_s=1e-9)
    assert r.status is RunStatus.STOPPED_BY_LIMIT and "time limit" in r.search.stopped_by


@pytest.mark.parametrize("name", OUTER)
def test_outer_ctrl_c_returns_the_best_so_far_without_a_claim(name):
    spec = with_strategies(OUTER_SPECS["free-shape"], strategy=name)

    def progress(p):
        raise KeyboardInterrupt

    r = search(spec, progress=progress)
    assert r.status is RunStatus.INTERRUPTED
    assert r.evaluation is None or r.evaluation.feasible


@pytest.mark.parametrize("name", OUTER)
def test_outer_infeasible_spec_has_no_mapping_and_a_violation(name):
    r = search(with_strategies(INFEASIBLE, strategy=name))
    assert r.evaluation is None and r.status is RunStatus.INFEASIBLE
    assert [v.constraint for v in r.violations] == ["sram"]
    unproven = [n for n in r.search.notes if n.startswith("not proven infeasible")]
    if outer_strategy(name).proves_optimality:
        assert not unproven
    else:
        assert unproven == [f"not proven infeasible: the outer choices were sampled ({name}), not all searched"]


def test_infeasible_under_a_heuristic_assignment_is_not_called_proven(monkeypatch):
    """With no count argument to prove it (``sram_excess_by_count`` proves this problem
    infeasible from its buffers' SRAM floors, and is switched off here), the order DP's
    failure to map it is not a proof."""
    monkeypatch.setattr(assign_mod, "sram_excess_by_count", lambda *a: 0.0)
    r = search(with_strategies(INFEASIBLE, assignment="order-dp"))
    assert r.evaluation is None and r.status is RunStatus.INFEASIBLE
    assert "the assignment strategy 'order-dp' searches heuristically" in " ".join(r.search.notes)


def test_cp_sat_work_limit_comes_from_the_budget():
    """The order DP fits in the budget; CP-SAT gets the rest as deterministic time, stops on
    it, is charged all of it and claims nothing."""
    s = usable_assignment("cp-sat")
    problem = _heavy_problem()
    start = ASSIGNMENT_STRATEGIES["order-dp"].assign(problem, seed=0, control=control_array())
    budget = start.evaluations + 100
    a = s.assign(problem, seed=0, control=control_array(max_evaluations=budget))
    b = s.assign(problem, seed=0, control=control_array(max_evaluations=budget))
    assert a == b and a.stopped and not a.exhaustive and a.evaluations == budget
    assert a.config is not None and a.value_ns <= start.value_ns
    assert make_case_of(HEAVY, problem).rescore(a.config).all_config_ii_ns == pytest.approx(a.value_ns, rel=REL)


@pytest.mark.parametrize("outer", OUTER)
@pytest.mark.parametrize("assignment", ASSIGNMENT)
def test_every_pair_of_strategies_keeps_the_claims(outer, assignment, pair_optimum):
    optimum = pair_optimum
    r = search(with_strategies(PAIR_SPEC, strategy=outer, assignment=assignment))
    assert r.evaluation is not None and r.evaluation.final_ns >= optimum * (1 - REL)
    if r.search.lower_bound_s is not None:
        assert r.search.lower_bound_s * 1e9 <= optimum * (1 + REL)
    if r.status is RunStatus.OPTIMAL:
        gap = ASSIGNMENT_STRATEGIES[assignment].proof_rel_gap
        assert r.evaluation.final_ns <= optimum * (1 + gap + REL)
    if not OUTER_STRATEGIES[outer].proves_optimality:
        assert r.status is not RunStatus.OPTIMAL
    elif ASSIGNMENT_STRATEGIES[assignment].proves_optimality:
        assert r.status is RunStatus.OPTIMAL  # a small space: both can prove, so they do
    # (a heuristic assignment can still be proven optimal by an outer bound that meets it)
    # one vocabulary: the report names the registered strategies that ran
    ran_outer, ran_assignment = r.search.method.split("+")
    assert ran_outer in OUTER_STRATEGIES
    assert set(ran_assignment.split("/")) <= set(ASSIGNMENT_STRATEGIES) | {"forced"}
    assert assignment == "auto" or assignment in ran_assignment.split("/")


@pytest.fixture(scope="module")
def pair_optimum() -> float:
    return brute_force_final_ns(PAIR_SPEC)


# --------------------------------------------------------------------------- selection
runner = CliRunner()


def test_registry_lookups_and_the_default_composition():
    assert OUTER[0] == ASSIGNMENT[0] == "auto"  # the defaults come first
    assert Spec.__dataclass_fields__["search"].default.strategy == "auto"
    assert assignment_strategy("ideal-dp").proves_optimality
    assert not outer_strategy("optuna").proves_optimality
    with pytest.raises(KeyError):
        outer_strategy("best-first")


def test_unknown_names_are_rejected_with_the_allowed_values():
    with pytest.raises(SpecError) as err:
        replace_field(SPECS["training"], "search.strategy", "enumerated")
    msg = str(err.value)
    assert "search.strategy must be one of 'auto', 'enumerate', 'optuna'" in msg
    assert "did you mean 'enumerate'?" in msg
    with pytest.raises(SpecError, match=r"search.assignment must be one of .*'cp-sat'. Got 'dp' instead"):
        replace_field(SPECS["training"], "search.assignment", "dp")
    with pytest.raises(SpecError, match=r"search.strategy must be one of .* Got 3 instead"):
        replace_field(SPECS["training"], "search.strategy", 3)


def test_cli_selects_strategies_and_reports_them(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(spec_to_toml(PAIR_SPEC))
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["run", str(path), "-q", "--strategy", "enumerate", "--assignment", "order-dp",
                            "--json", str(out)])  # fmt: skip
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["search"]["method"] == "enumerate+order-dp"
    r = runner.invoke(app, ["run", str(path), "--strategy", "optna"])
    assert r.exit_code == 2
    assert "--strategy must be one of 'auto', 'enumerate', 'optuna'; did you mean 'optuna'?" in r.output


def test_run_help_teaches_every_registered_strategy():
    r = runner.invoke(app, ["run", "--help"], terminal_width=400)
    text = " ".join(r.output.split())
    for name, s in [*OUTER_STRATEGIES.items(), *ASSIGNMENT_STRATEGIES.items()]:
        assert f"'{name}' = {s.summary}" in text


def test_cp_sat_without_ortools_is_a_clear_error_before_any_work(monkeypatch, tmp_path):
    for name in ("ortools", "ortools.sat", "ortools.sat.python", "ortools.sat.python.cp_model"):
        monkeypatch.setitem(sys.modules, name, None)
    assert not ASSIGNMENT_STRATEGIES["cp-sat"].available()
    spec = replace(SPECS["training"], search=replace(SPECS["training"].search, assignment="cp-sat"))
    with pytest.raises(SolverUnavailableError, match=r"'cp-sat' needs OR-Tools \(pip install \"dfsearch\[exact\]\"\)"):
        search(spec, progress=lambda p: pytest.fail("searched"))
    path = tmp_path / "s.toml"
    path.write_text(spec_to_toml(SPECS["training"]))
    r = runner.invoke(app, ["run", str(path), "-q", "--assignment", "cp-sat"])
    assert r.exit_code == 2 and "dfsearch[exact]" in r.output


def test_check_accepts_the_largest_seed():
    """CP-SAT takes seeds below 2**31; a spec's seed goes up to 2**32 - 1."""
    pytest.importorskip("ortools")
    from dfsearch.check import check

    result = check(random_spec(0, 6, num_config=3), time_limit_s=30, seed=2**32 - 1)
    assert result.exact.status == "optimal"
