"""Plans (``dfsearch/plan/``): the kind of every shipped example, the engine strictly single
phase, composed proof claims, and a new kind (two pools, two phases, a transfer between
them) added as one module: the toy kind below."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from dfsearch import api, plan
from dfsearch.codes import RunStatus
from dfsearch.loader import replace_field
from dfsearch.plan.base import Phase, Plan, Pool, WeightedSum, composed_status
from dfsearch.result import PhaseResult, RunResult
from dfsearch.search.engine import search
from dfsearch.spec import Spec
from tests.specs import random_spec

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "dfsearch" / "examples"

KINDS = {"gpt_pipeline.toml": "stages", "llama3_405b_specdec_sn40l.toml": "speculative"}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_has_its_plan_kind(path: Path) -> None:
    assert plan.kind_of(api.load(path)).name == KINDS.get(path.name, "single")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_kind_states_its_plan(path: Path) -> None:
    spec = api.load(path)
    kind = plan.kind_of(spec)
    p = kind.plan(spec)
    assert p.kind == kind.name and p.phases and {ph.pool for ph in p.phases} <= {q.name for q in p.pools}
    values = tuple(float(i + 1) for i in range(len(p.phases)))
    assert p.rule.bound(values) <= p.rule.value(values)


def test_dfmodel_partitioning_is_the_partition_kind() -> None:
    case = ROOT / "tests/data/dfmodel/partition/example_gpt3_1T_4layer_4pp/setup.txt"
    assert plan.kind_of(api.load(case)).name == "partition"


def test_the_engine_is_single_phase() -> None:
    """search/engine.py imports no plan kind, nor the searches they run."""
    tree = ast.parse((ROOT / "dfsearch/search/engine.py").read_text())
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    banned = {"dfsearch.plan", "dfsearch.search.stages", "dfsearch.search.partition",
              "dfsearch.search.speculative", "dfsearch.cost.stages", "dfsearch.cost.partition"}
    assert not {m for m in names if m and any(m.startswith(b) for b in banned)}


def test_a_single_run_has_itself_as_its_one_phase() -> None:
    r = plan.run(random_spec(1))
    assert r.plan == "single" and len(r.phases) == 1
    assert r.phases[0].result.evaluation == r.evaluation
    assert r.to_json()["plan"]["kind"] == "single"


def test_speculative_runs_through_the_plan() -> None:
    r = api.run(EXAMPLES / "llama3_405b_specdec_sn40l.toml")
    assert r.plan == "speculative" and r.speculative is not None
    assert [p.name for p in r.phases] == ["decode"]


def test_proof_claims_compose() -> None:
    ok = RunResult(spec=random_spec(1), evaluation=None, search=search(random_spec(1)).search)
    assert ok.status is RunStatus.OPTIMAL
    proven = (PhaseResult("a", "main", ok),)
    unproven = (PhaseResult("b", "main", replace(ok, search=replace(
        ok.search, status=RunStatus.FEASIBLE_NOT_PROVEN))),)  # fmt: skip
    assert composed_status(RunStatus.OPTIMAL, 2.0, 2.0, proven) is RunStatus.OPTIMAL
    assert composed_status(RunStatus.OPTIMAL, 2.0, 1.0, proven) is RunStatus.FEASIBLE_NOT_PROVEN
    assert composed_status(RunStatus.OPTIMAL, 2.0, None, proven) is RunStatus.FEASIBLE_NOT_PROVEN
    assert composed_status(RunStatus.OPTIMAL, 2.0, 2.0, unproven) is RunStatus.FEASIBLE_NOT_PROVEN
    assert composed_status(RunStatus.STOPPED_BY_LIMIT, 2.0, 2.0, proven) is RunStatus.STOPPED_BY_LIMIT


def test_weighted_sum_bound_is_admissible() -> None:
    rule = WeightedSum((3.0, 1.0), divisor=2.0)
    assert rule.bound((1.0, 1.0)) <= rule.value((1.5, 1.0))


# ---- a toy plan kind: two pools, two phases, a transfer between them ----------------------
@dataclass(frozen=True, slots=True)
class _Transfer:
    """The phases one after the other and a transfer of ``bytes`` between them."""

    transfer_ns: float

    def value(self, values: tuple[float, ...]) -> float:
        return sum(values) + self.transfer_ns

    def bound(self, bounds: tuple[float, ...]) -> float:
        return sum(bounds) + self.transfer_ns


@dataclass(frozen=True, slots=True)
class _Disaggregated:
    """Prefill on one half of the chips, decode on the other, the KV cache sent between."""

    name: str = "toy-disaggregated"
    summary: str = "two pools, two phases, a transfer between them"
    kv_bytes: float = 1e6

    def applies(self, spec: Spec) -> bool:
        return spec.search.seed == 4242

    def plan(self, spec: Spec) -> Plan:
        half = spec.system.num_chip // 2
        pool = replace_field(replace_field(spec, "system.network[0].size", 0), "system.num_chip", half)
        link = spec.system.network[0].link_bw_GBps
        return Plan(self.name, (Pool("prefill", pool.system), Pool("decode", pool.system)),
                    (Phase("prefill", pool, pool="prefill"), Phase("decode", pool, pool="decode")),
                    _Transfer(self.kv_bytes / link))  # fmt: skip

    def search(self, spec: Spec, **kw: object) -> RunResult:
        p = self.plan(spec)
        runs = [search(ph.spec, seed=kw.get("seed")) for ph in p.phases]  # type: ignore[arg-type]
        phases = tuple(PhaseResult(ph.name, ph.pool, r) for ph, r in zip(p.phases, runs))
        value = p.rule.value(tuple(r.evaluation.final_ns for r in runs))
        bound = p.rule.bound(tuple(r.search.lower_bound_s * 1e9 for r in runs))
        status = composed_status(RunStatus.OPTIMAL, value, bound, phases)
        first = runs[0]
        return replace(first, spec=spec, search=replace(first.search, status=status), phases=phases)

    def evaluate_mapping(self, spec: Spec, mapping: object) -> tuple[object, None]:
        raise NotImplementedError("the toy kind has no mapping files")


def test_a_toy_plan_kind_is_one_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(plan.PLAN_KINDS, "toy-disaggregated", _Disaggregated())
    spec = replace_field(random_spec(3), "search.seed", 4242)
    r = plan.run(spec)
    assert r.plan == "toy-disaggregated"
    assert [(p.name, p.role) for p in r.phases] == [("prefill", "prefill"), ("decode", "decode")]
    assert all(p.result.spec.system.num_chip == 2 for p in r.phases)
    proven = all(p.result.status is RunStatus.OPTIMAL for p in r.phases)
    assert (r.status is RunStatus.OPTIMAL) == proven
    assert math.isfinite(r.evaluation.final_ns)
    assert plan.kind_of(random_spec(3)).name == "single"


# ---- every entry point sees every plan -----------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_run_api_and_a_one_point_sweep_give_the_same_numbers(path: Path) -> None:
    """``dfsearch run`` (``api.run``) and the sweep's worker on the same point (a one-point
    sweep) run the same plan and give the same cells (the search's seconds aside)."""
    from dfsearch.study.point import Task, _metrics, roofline_cells, run_point

    spec = api.load(path)
    r = api.run(spec)
    want = _metrics(r) | roofline_cells(r.evaluation, spec.system.network[0].link_bw_GBps)
    got = run_point(Task(0, spec, spec.search.seed))
    assert {k: v for k, v in got.items() if k != "seconds"} == {
        k: v for k, v in want.items() if k != "seconds"}  # fmt: skip
    assert r.plan == plan.kind_of(spec).name
