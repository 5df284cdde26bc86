"""The plan kind ``speculative`` and its search (docs/model.md, "Speculative decoding").

A decode spec with ``[speculative]`` runs as this kind. Its answer is the plain decode (the
phase ``decode``: ``search.engine.search``); beside it, the speculative-decoding plan (the
draft's decode step K times and the target's verification step once per E tokens, the
phases ``draft`` and ``verify``) is searched with the rest of the work budget and compared
with it (``RunResult.speculative``, the report's ``specdec`` lines).

Draft and target share the chips and the mapping's network shape and placement (TP, PP,
DP). For every (shape, placement) that both models admit, the draft's decode step and the
target's verification step are each searched with that shape pinned (``engine.search(...,
pinned=...)``, the ordinary search on a fixed-size spec); the pair's time per generated
token is

    (K x T_draft + T_verify) / E

with E = ``workloads.speculative.expected_tokens``. At a fixed batch E does not depend on
the mapping, and the two steps share nothing but the shape and the DRAM (their fixed bytes,
weights and KV caches, must fit together: checked here), so the best pair of a shape is the
two sub-searches' optima and the best shape is the minimum over shapes: proven optimal when
every sub-search is. Every sub-search counts evaluations against one work budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dfsearch.codes import RunStatus
from dfsearch.cost.model import Evaluation, evaluate
from dfsearch.mapping import load_mapping
from dfsearch.plan.base import Phase, Plan, Pool, WeightedSum
from dfsearch.report import format_seconds
from dfsearch.result import PhaseResult, PlanSection, RunResult, SearchStats
from dfsearch.search import outer as outer_mod
from dfsearch.search.engine import search
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec
from dfsearch.system.placement import Placement
from dfsearch.workloads.speculative import (
    draft_spec,
    expected_tokens,
    verify_spec,
    verify_tokens,
)

__all__ = ["SPECULATIVE", "Speculative", "SpeculativeResult", "SpeculativeSection",
           "speculative_search"]


@dataclass(frozen=True, slots=True)
class SpeculativeResult:
    """The best speculative mapping and how it compares with plain decode."""

    scheme: str
    window: int
    acceptance_rate: float
    expected_tokens: float  #: E per verification step
    verify_tokens: int  #: tokens per sequence in one verification step (K + 1 or 2^K)
    batch: int
    plain_tpot_ns: float  #: the plain target decode's optimum (the spec's own search)
    shapes: int  #: (shape, placement) pairs searched
    evaluations: int
    optimal: bool  #: every sub-search proven optimal (or infeasible) and none stopped
    shape: tuple[int, ...] | None = None  #: the best pair's shape (None: none feasible)
    placement: Placement | None = None
    draft: RunResult | None = None
    verify: RunResult | None = None
    notes: tuple[str, ...] = ()

    @property
    def draft_ns(self) -> float:
        return self.draft.evaluation.final_ns if self.draft else math.inf  # type: ignore[union-attr]

    @property
    def verify_ns(self) -> float:
        return self.verify.evaluation.final_ns if self.verify else math.inf  # type: ignore[union-attr]

    @property
    def cycle_ns(self) -> float:
        """One speculative step: K x T_draft + T_verify."""
        return self.window * self.draft_ns + self.verify_ns

    @property
    def time_per_token_ns(self) -> float:
        """(K x T_draft + T_verify) / E."""
        return self.cycle_ns / self.expected_tokens

    @property
    def dp(self) -> int:
        ev = self.verify.evaluation if self.verify else None
        return ev.step.dp if ev is not None and ev.step is not None else 1

    @property
    def tokens_per_s_replica(self) -> float:
        """B x E / (K x T_draft + T_verify) (steps of one batch run back to back)."""
        return self.batch * 1e9 / self.time_per_token_ns

    @property
    def tokens_per_s(self) -> float:
        """Of the system: per replica x DP."""
        return self.tokens_per_s_replica * self.dp

    @property
    def speedup(self) -> float:
        """TPOT of plain decode / time per token of speculative decoding."""
        return self.plain_tpot_ns / self.time_per_token_ns

    def to_json(self) -> dict[str, Any]:
        found = self.draft is not None
        return {
            "scheme": self.scheme,
            "window": self.window,
            "acceptance_rate": self.acceptance_rate,
            "expected_tokens": self.expected_tokens,
            "expected_tokens_formula": "E = (1 - p^(K+1)) / (1 - p), p = alpha (sequence) "
            "or 1 - (1 - alpha)^2 (tree)",
            "verify_tokens": self.verify_tokens,
            "batch": self.batch,
            "shape": list(self.shape) if self.shape else None,
            "placement": str(self.placement) if self.placement else None,
            "draft_step_s": self.draft_ns / 1e9 if found else None,
            "verify_step_s": self.verify_ns / 1e9 if found else None,
            "step_s": self.cycle_ns / 1e9 if found else None,
            "time_per_token_s": self.time_per_token_ns / 1e9 if found else None,
            "time_per_token_formula": "(K x T_draft + T_verify) / E",
            "tokens_per_s_replica": self.tokens_per_s_replica if found else None,
            "tokens_per_s": self.tokens_per_s if found else None,
            "plain_tpot_s": self.plain_tpot_ns / 1e9,
            "speedup": self.speedup if found else None,
            "draft_optimal": self.draft.search.optimal if found else None,  # type: ignore[union-attr]
            "verify_optimal": self.verify.search.optimal if found else None,  # type: ignore[union-attr]
            "optimal": self.optimal,
            "shapes": self.shapes,
            "evaluations": self.evaluations,
            "notes": list(self.notes),
        }


def speculative_search(
    spec: Spec,
    plain_tpot_ns: float,
    *,
    seed: int | None = None,
    max_evaluations: int | None = None,
) -> SpeculativeResult:
    """The best (shape, placement) for speculative decoding of ``spec`` (module docstring).

    ``plain_tpot_ns`` is the plain decode's TPOT the speedup is measured against (the
    optimum of the spec's own search). ``max_evaluations`` (default: the spec's) bounds the
    evaluations of every sub-search together.
    """
    sp = spec.speculative
    assert sp is not None
    draft, verify = draft_spec(spec), verify_spec(spec)
    budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
    e = expected_tokens(sp.acceptance_rate, sp.window, sp.scheme)
    base = SpeculativeResult(
        scheme=sp.scheme.label, window=sp.window, acceptance_rate=sp.acceptance_rate,
        expected_tokens=e, verify_tokens=verify_tokens(sp.window, sp.scheme),
        batch=spec.workload.batch_size, plain_tpot_ns=plain_tpot_ns, shapes=0, evaluations=0,
        optimal=True,
    )  # fmt: skip
    best, used, optimal, notes, n = None, 0, True, [], 0
    draft_shapes = set(outer_mod.shapes(draft))
    for shape in outer_mod.shapes(verify):
        if shape not in draft_shapes:
            continue
        draft_pls = outer_mod.placements(draft, shape)
        for pl in outer_mod.placements(verify, shape):
            if pl not in draft_pls:
                continue
            if used >= budget:
                optimal = False
                notes.append(f"work budget of {budget:,} evaluations used up")
                break
            n += 1
            pair, used_here, proven, note = _solve_pair(spec, draft, verify, (shape, pl), seed,
                                                        budget - used)  # fmt: skip
            used += used_here
            optimal &= proven
            notes += [note] if note else []
            if pair is not None and (
                best is None or _cycle(sp.window, pair) < _cycle(sp.window, best[2:])
            ):
                best = (shape, pl, *pair)
    out = replace(base, shapes=n, evaluations=used, optimal=optimal, notes=tuple(notes))
    if best is None:
        return out
    return replace(out, shape=best[0], placement=best[1], draft=best[2], verify=best[3])


def _cycle(window: int, pair: tuple[RunResult, RunResult]) -> float:
    return window * pair[0].evaluation.final_ns + pair[1].evaluation.final_ns  # type: ignore[union-attr]


def _solve_pair(
    spec: Spec,
    draft: Spec,
    verify: Spec,
    pinned: tuple[tuple[int, ...], Placement | None],
    seed: int | None,
    budget: int,
) -> tuple[tuple[RunResult, RunResult] | None, int, bool, str]:
    """Both steps on one (shape, placement): (the pair or None when either is infeasible or
    both do not fit in DRAM together, evaluations, both proven, a note)."""
    d = search(draft, seed=seed, max_evaluations=budget, pinned=pinned)
    v = search(verify, seed=seed, max_evaluations=max(1, budget - d.search.evaluations),
               pinned=pinned)  # fmt: skip
    used = d.search.evaluations + v.search.evaluations
    proven = all(r.status in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE) and not r.search.stopped_by
                 for r in (d, v))  # fmt: skip
    if d.evaluation is None or v.evaluation is None:
        return None, used, proven, ""
    need = _joint_dram(d, v)
    cap = spec.dram_capacity
    if cap > 0 and need > cap:
        fixed = d.evaluation.dram_use.fixed + v.evaluation.dram_use.fixed
        note = (f"shape {pinned[0]}: draft and target need {need:.4g} B of DRAM per chip "
                f"together, more than {cap:.4g} B")  # fmt: skip
        if fixed <= cap:  # only the working sets overflow: another assignment might fit
            note += " (their weights and KV caches fit: not proven infeasible)"
        return None, used, proven and fixed > cap, note
    return (d, v), used, proven, ""


def _joint_dram(d: RunResult, v: RunResult) -> float:
    """DRAM per chip when both models are resident: both steps' fixed bytes (weights, KV
    caches; the same for every configuration assignment) plus the larger of their working
    sets (the steps run one after the other)."""
    ed, ev = d.evaluation, v.evaluation
    assert ed is not None and ev is not None
    work = max(ed.dram_bytes - ed.dram_use.fixed, ev.dram_bytes - ev.dram_use.fixed, 0.0)
    return ed.dram_use.fixed + ev.dram_use.fixed + work


def speculative_lines(sp: SpeculativeResult) -> list[str]:
    """The speculative-decoding search: E, the two steps, tokens/s and the speedup over the
    plain decode above (docs/model.md, "Speculative decoding")."""
    head = (f"specdec   {sp.scheme}, window K = {sp.window}, acceptance rate {sp.acceptance_rate:g}: "
            f"E = (1 - p^(K+1)) / (1 - p) = {sp.expected_tokens:.4g} tokens per step "
            f"({sp.verify_tokens} verified per sequence)")  # fmt: skip
    proof = "proven optimal over shapes (every sub-search proven)" if sp.optimal else "not proven"
    if sp.draft is None:
        return [head, f"          no feasible shape ({sp.shapes} searched; {proof})",
                *(f"          {n}" for n in sp.notes)]  # fmt: skip
    return [
        head,
        f"          shape {'x'.join(map(str, sp.shape))}"
        + (f" ({sp.placement})" if sp.placement else "")
        + f": draft step {format_seconds(sp.draft_ns)}, verify step "
        f"{format_seconds(sp.verify_ns)}, K x draft + verify = {format_seconds(sp.cycle_ns)}",
        f"          time per token (K x T_draft + T_verify) / E = "
        f"{format_seconds(sp.time_per_token_ns)}: {sp.tokens_per_s:,.6g} tokens/s"
        f" ({sp.tokens_per_s_replica:,.6g} per replica), speedup {sp.speedup:.3g}x over plain "
        f"TPOT {format_seconds(sp.plain_tpot_ns)}",
        f"          {sp.shapes} shape(s) searched, {sp.evaluations:,} evaluations; {proof}",
        *(f"          {n}" for n in sp.notes),
    ]


@dataclass(frozen=True, slots=True)
class SpeculativeSection(PlanSection):
    """The speculative-decoding part of the report and the JSON: its headline figures when a
    pair was found, ``speculative`` in the JSON, the ``specdec`` lines of the report."""

    result: SpeculativeResult

    def headline(self) -> dict[str, Any]:
        sp = self.result
        if sp.draft is None:
            return {}
        return {"speculative_tokens_per_s": sp.tokens_per_s,
                "speculative_time_per_token_s": sp.time_per_token_ns / 1e9,
                "speculative_speedup": sp.speedup}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"speculative": self.result.to_json()}

    def closing_lines(self) -> list[str]:
        return speculative_lines(self.result)


def _pair_phases(sp: SpeculativeResult) -> tuple[PhaseResult, ...]:
    """The best pair's draft and verification steps as plan phases: each its pinned search,
    claimed optimal only when the search over shapes was (``SpeculativeResult.optimal``)."""
    if sp.draft is None or sp.verify is None:
        return ()

    def claimed(r: RunResult) -> RunResult:
        if sp.optimal or r.status is not RunStatus.OPTIMAL:
            return r
        return replace(r, search=replace(r.search, status=RunStatus.FEASIBLE_NOT_PROVEN))

    return (PhaseResult("draft", "draft", claimed(sp.draft), repeats=float(sp.window)),
            PhaseResult("verify", "verify", claimed(sp.verify)))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Speculative:
    name: str = "speculative"
    summary: str = ("plain decode, and speculative decoding (draft K steps, verify once) on a "
                    "shared shape compared with it")  # fmt: skip

    def applies(self, spec: Spec) -> bool:
        return spec.speculative is not None

    def plan(self, spec: Spec) -> Plan:
        """The speculative-decoding plan: (K x T_draft + T_verify) / E per token; its two
        phases share the (shape, placement) each pair is searched on."""
        sp = spec.speculative
        assert sp is not None
        e = expected_tokens(sp.acceptance_rate, sp.window, sp.scheme)
        phases = (Phase("draft", draft_spec(spec), role="draft", repeats=sp.window),
                  Phase("verify", verify_spec(spec), role="verify"))  # fmt: skip
        return Plan(self.name, spec.system, (Pool.of("all", spec.system),), phases,
                    WeightedSum((float(sp.window), 1.0), divisor=e))  # fmt: skip

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        """The plain decode, then the speculative pair with the rest of the work budget; the
        phases: ``decode``, and the best pair's ``draft`` and ``verify`` when one was found."""
        r = search(spec, seed=seed, time_limit_s=time_limit_s, max_evaluations=max_evaluations,
                   progress=progress)  # fmt: skip
        r = replace(r, phases=(PhaseResult("decode", "main", r),))
        if r.evaluation is None:
            return r
        budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
        found = speculative_search(spec, r.evaluation.final_ns, seed=seed,
                                   max_evaluations=max(1, budget - r.search.evaluations))
        return replace(r, speculative=found, phases=r.phases + _pair_phases(found),
                       section=SpeculativeSection(found))  # fmt: skip

    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, None]:
        """The mapping file's one decision evaluated on ``spec`` (``dfsearch eval``): the plain
        decode's (a mapping file holds no draft and verification mappings)."""
        return evaluate(spec, load_mapping(mapping, spec)), None

    def mapping_result(self, spec: Spec, evaluation: Evaluation, record: None,
                       stats: SearchStats) -> RunResult:
        return RunResult(spec, evaluation, stats, plan=self.name)


SPECULATIVE = Speculative()
