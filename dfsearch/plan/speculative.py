"""The plan kind ``speculative``: a decode spec with ``[speculative]``. Its answer is the
plain decode (one phase, ``search.engine.search``); beside it, the speculative-decoding plan
(the draft's decode step K times and the target's verification step once per E tokens, on a
shared (shape, placement): ``search/speculative.py``) is searched with the rest of the work
budget and compared with it (``RunResult.speculative``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dfsearch.cost.model import Evaluation, evaluate
from dfsearch.mapping import load_mapping
from dfsearch.plan.base import Phase, Plan, Pool, WeightedSum
from dfsearch.result import PhaseResult, RunResult
from dfsearch.search.engine import search
from dfsearch.search.speculative import speculative_search
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec
from dfsearch.workloads.speculative import draft_spec, expected_tokens, verify_spec

__all__ = ["SPECULATIVE", "Speculative"]


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
        return Plan(self.name, (Pool("all", spec.system),), phases,
                    WeightedSum((float(sp.window), 1.0), divisor=e))  # fmt: skip

    def search(self, spec: Spec, *, seed: int | None = None, time_limit_s: float | None = None,
               max_evaluations: int | None = None, progress: Progress | None = None) -> RunResult:
        r = search(spec, seed=seed, time_limit_s=time_limit_s, max_evaluations=max_evaluations,
                   progress=progress)  # fmt: skip
        r = replace(r, phases=(PhaseResult("decode", "main", r),))
        if r.evaluation is None:
            return r
        budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
        found = speculative_search(spec, r.evaluation.final_ns, seed=seed,
                                   max_evaluations=max(1, budget - r.search.evaluations))
        return replace(r, speculative=found)


    def evaluate_mapping(self, spec: Spec, mapping: str | Path) -> tuple[Evaluation, None]:
        """The mapping file's one decision evaluated on ``spec`` (``dfsearch eval``)."""
        return evaluate(spec, load_mapping(mapping, spec)), None


SPECULATIVE = Speculative()
