"""Plans (``dfsearch/plan/``): the kind of every shipped example, the engine strictly single
phase, composed proof claims, and a new kind (two pools, two phases, a transfer between
them) added as one module: the toy kind below."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from dfsearch import api, plan
from dfsearch.codes import RunStatus
from dfsearch.loader import replace_field
from dfsearch.plan.base import Max, Phase, Plan, Pool, WeightedSum, composed_status
from dfsearch.report import format_run
from dfsearch.result import PhaseResult, PlanSection, RunResult
from dfsearch.search.engine import search
from dfsearch.spec import Spec
from tests.specs import random_spec
from tests.test_architecture import _imports

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
    banned = {"dfsearch.plan", "dfsearch.cost.stages", "dfsearch.cost.partition"}
    assert not {m for m in names if m and any(m.startswith(b) for b in banned)}


def test_no_module_below_the_plans_imports_them() -> None:
    """The plan layer sits above the search (docs/design.md, "Layers"): only ``plan/`` and the
    entry points above it (api, cli, check, study) import ``dfsearch.plan``, and the
    searches of the kinds live in it (no ``search/stages.py`` and the like)."""
    above = {"api.py", "cli.py", "check.py"}
    for path in sorted((ROOT / "dfsearch").rglob("*.py")):
        rel = path.relative_to(ROOT / "dfsearch")
        if rel.parts[0] in ("plan", "study") or str(rel) in above:
            continue
        found = _imports(ast.parse(path.read_text()))  # type-only imports aside
        mods = {n.module or "" for n, _ in found if isinstance(n, ast.ImportFrom)}
        assert not {m for m in mods if m.startswith("dfsearch.plan")}, rel
    assert not {p.name for p in (ROOT / "dfsearch/search").glob("*.py")} & {
        "stages.py", "partition.py", "speculative.py"}


def test_a_single_run_has_itself_as_its_one_phase() -> None:
    r = plan.run(random_spec(1))
    assert r.plan == "single" and len(r.phases) == 1
    assert r.phases[0].result.evaluation == r.evaluation
    assert r.to_json()["plan"]["kind"] == "single"


def test_speculative_runs_through_the_plan() -> None:
    """The plain decode and the best pair's draft and verification steps are the phases, each
    a full single-phase result; the plan's rule on the two steps' times is the time per
    token, and the run is proven only when every phase is."""
    spec = api.load(EXAMPLES / "llama3_405b_specdec_sn40l.toml")
    r = api.run(spec)
    sp = r.speculative
    assert r.plan == "speculative" and sp is not None and sp.draft is not None
    assert [(p.name, p.role, p.repeats) for p in r.phases] == [
        ("decode", "main", 1.0), ("draft", "draft", float(sp.window)), ("verify", "verify", 1.0)]
    decode, draft, verify = (p.result for p in r.phases)
    assert decode.evaluation == r.evaluation
    assert draft.spec.graph != verify.spec.graph != r.spec.graph
    assert (draft.evaluation.final_ns, verify.evaluation.final_ns) == (sp.draft_ns, sp.verify_ns)
    times = (draft.evaluation.final_ns, verify.evaluation.final_ns)
    assert plan.kind_of(spec).plan(spec).rule.value(times) == pytest.approx(
        sp.time_per_token_ns, rel=1e-12)
    assert all(p.result.search.lower_bound_s is not None for p in r.phases)
    proven = all(p.result.status is RunStatus.OPTIMAL for p in r.phases)
    assert (r.status is RunStatus.OPTIMAL) == proven
    assert [p["name"] for p in r.to_json()["plan"]["phases"]] == ["decode", "draft", "verify"]


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
    """The phases one after the other, then a transfer of ``transfer_ns`` between them."""

    transfer_ns: float

    def value(self, values: tuple[float, ...]) -> float:
        return sum(values) + self.transfer_ns

    def bound(self, bounds: tuple[float, ...]) -> float:
        return sum(bounds) + self.transfer_ns


@dataclass(frozen=True, slots=True)
class _ToySection(PlanSection):
    value_ns: float
    transfer_ns: float

    def to_json(self) -> dict:
        return {"disaggregated": {"value_s": self.value_ns / 1e9, "transfer_s": self.transfer_ns / 1e9}}

    def closing_lines(self) -> list[str]:
        return [f"toy       prefill + transfer + decode = {self.value_ns:.6g} ns"]


@dataclass(frozen=True, slots=True)
class _Disaggregated:
    """Prefill on one half of the chips, decode on the other, ``kv_bytes`` sent between them
    over the link of the outermost network dimension (the one that joins the halves)."""

    name: str = "toy-disaggregated"
    summary: str = "two pools, two phases, a transfer between them"
    kv_bytes: float = 1e6

    def applies(self, spec: Spec) -> bool:
        return spec.search.seed == 4242

    def plan(self, spec: Spec) -> Plan:
        half = spec.system.num_chip // 2
        part = replace_field(replace_field(spec, "system.network[0].size", 0), "system.num_chip", half)
        link_GBps = spec.system.network[-1].link_bw_GBps  # bytes per ns
        pools = (Pool("prefill", half, part.system), Pool("decode", half, part.system))
        phases = (Phase("prefill", part, role="prefill", pool="prefill"),
                  Phase("decode", part, role="decode", pool="decode"))  # fmt: skip
        return Plan(self.name, spec.system, pools, phases, _Transfer(self.kv_bytes / link_GBps))

    def search(self, spec: Spec, *, seed: int | None = None, **_: object) -> RunResult:
        p = self.plan(spec)
        runs = [search(ph.spec, seed=seed) for ph in p.phases]
        phases = tuple(PhaseResult(ph.name, ph.role, r) for ph, r in zip(p.phases, runs))
        value = p.rule.value(tuple(r.evaluation.final_ns for r in runs))
        bound = p.rule.bound(tuple(r.search.lower_bound_s * 1e9 for r in runs))
        status = composed_status(RunStatus.OPTIMAL, value, bound, phases)
        first = runs[0]
        return replace(first, spec=spec, search=replace(first.search, status=status), phases=phases,
                       section=_ToySection(value, p.rule.transfer_ns))  # fmt: skip

    def evaluate_mapping(self, spec: Spec, mapping: object) -> tuple[object, None]:
        raise NotImplementedError("the toy kind has no mapping files")

    def mapping_result(self, *args: object) -> RunResult:
        raise NotImplementedError("the toy kind has no mapping files")


def test_a_toy_plan_kind_is_one_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The class above is the whole of a new kind: registered, it runs through ``plan.run``
    and renders through the report and the JSON; its figure is the closed form prefill +
    bytes / link bandwidth + decode."""
    monkeypatch.setitem(plan.PLAN_KINDS, "toy-disaggregated", _Disaggregated())
    spec = replace_field(random_spec(3), "search.seed", 4242)
    r = plan.run(spec)
    assert r.plan == "toy-disaggregated"
    assert [(p.name, p.role) for p in r.phases] == [("prefill", "prefill"), ("decode", "decode")]
    assert spec.system.num_chip == 4 and all(p.result.spec.system.num_chip == 2 for p in r.phases)
    transfer_ns = 1e6 / spec.system.network[-1].link_bw_GBps  # bytes / (bytes per ns)
    prefill, decode = (p.result.evaluation.final_ns for p in r.phases)
    toy = r.to_json()["disaggregated"]
    assert toy["transfer_s"] * 1e9 == pytest.approx(transfer_ns, rel=1e-12)
    assert toy["value_s"] * 1e9 == pytest.approx(prefill + transfer_ns + decode, rel=1e-12)
    assert format_run(r).endswith(f"toy       prefill + transfer + decode = {toy['value_s'] * 1e9:.6g} ns")
    proven = all(p.result.status is RunStatus.OPTIMAL for p in r.phases)
    assert (r.status is RunStatus.OPTIMAL) == proven
    assert plan.kind_of(random_spec(3)).name == "single"


def test_a_plan_holds_its_pools_within_the_system() -> None:
    spec = random_spec(3)
    system = spec.system  # 4 chips
    half = replace_field(replace_field(spec, "system.network[0].size", 0), "system.num_chip", 2).system
    phases = (Phase("a", spec, pool="left"), Phase("b", spec, pool="right"))
    ok = Plan("p", system, (Pool("left", 2, half), Pool("right", 2, half)), phases, Max())
    assert ok.pool("right").chips == 2
    with pytest.raises(ValueError, match="its pools hold 6 chips, the system 4"):
        Plan("p", system, (Pool.of("left", system), Pool("right", 2, half)), phases, Max())
    with pytest.raises(ValueError, match=r"phases \['b'\] run on no pool"):
        Plan("p", system, (Pool("left", 2, half),), phases, Max())
    with pytest.raises(ValueError, match="pool 'left': 3 chips, but its system has 2"):
        Pool("left", 3, half)


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
