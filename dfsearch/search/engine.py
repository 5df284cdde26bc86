"""The search engine: composes the strategies, every candidate scored by the evaluator.

For each outer choice (network shape x tile count x configuration count; micro-batch size 1
or pinned) it solves the inter-chip sharding exactly (pinned choices kept), lowers the
problem, skips it when its lower bound cannot beat the incumbent, and solves the
configuration assignment (exact DP over order ideals where the ideals fit, contiguous-order
DP otherwise); the winner is re-scored by the full evaluator. Small outer spaces are
enumerated completely (the result is then certified); large ones are sampled by Optuna's
seeded TPE sampler until the time limit. ``joint_sharding`` then tries sharding choices that
are not byte-minimal on the best outer choice (DFModel cannot).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from dfsearch.codes import Dim, Status, WorkloadKind
from dfsearch.cost.lower import Outer, effective_num_config, lower
from dfsearch.cost.model import Evaluation, evaluate_problem, outer_status
from dfsearch.decision import Decision
from dfsearch.errors import InfeasibleError
from dfsearch.kernels.graph import sharding_choices
from dfsearch.result import RunResult, SearchStats
from dfsearch.search import outer as outer_mod
from dfsearch.search.assign import assign_configs
from dfsearch.spec import Spec

__all__ = ["search", "Progress"]

#: outer spaces larger than this are sampled by Optuna instead of enumerated
ENUMERATE_LIMIT = 400

#: progress callback: (candidates done, candidates total, best final_s or None)
Progress = Callable[[int, int, float | None], None]


@dataclass
class _Best:
    ev: Evaluation | None = None

    def offer(self, ev: Evaluation) -> bool:
        if not ev.feasible:
            return False
        if self.ev is None or ev.final_ns < self.ev.final_ns:
            self.ev = ev
            return True
        return False


def _sharding(spec: Spec, shape: tuple[int, ...], num_tile: int) -> tuple[Dim, ...]:
    kernels = spec.graph.kernels
    if spec.workload.kind is not WorkloadKind.LLM or spec.execution.skip_inter_chip_optimization:
        return tuple(Dim.NO for _ in kernels)
    if all(k.sharding is not None for k in kernels):
        return tuple(k.sharding for k in kernels)  # type: ignore[misc]
    from dfsearch.search.sharding import solve_spec_sharding

    return solve_spec_sharding(spec, shape, num_tile).sharding


def search(
    spec: Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Find the best mapping of ``spec`` (see module docstring).

    Raises
    ------
    InfeasibleError
        If no outer choice admits a feasible mapping; the message names the binding
        constraint and the smallest amount by which it was violated.
    """
    t0 = time.perf_counter()
    seed = spec.search.seed if seed is None else seed
    limit = spec.search.time_limit_s if time_limit_s is None else time_limit_s
    deadline = t0 + limit
    mbs = outer_mod.micro_batch_size(spec)
    cands = [
        (shape, t, c)
        for shape in outer_mod.shapes(spec)
        for c in outer_mod.config_counts(spec)
        for t in outer_mod.tile_counts(spec)
    ]
    best = _Best()
    evals = 0
    done = 0
    exhaustive = True
    bound_ns = math.inf  # min over unsolved candidates of their lower bound
    violations: dict[str, float] = {}
    methods: set[str] = set()
    notes: list[str] = []

    def run_candidate(shape: tuple[int, ...], t: int, c: int) -> float:
        nonlocal evals, exhaustive, bound_ns
        sharding = _sharding(spec, shape, t)
        outer = Outer(shape, sharding, mbs, t, effective_num_config(spec, c))
        st, viol = outer_status(spec, outer)
        if st is not Status.OK:
            violations[st.label] = min(violations.get(st.label, math.inf), abs(viol))
            return math.inf
        problem = lower(spec, outer)
        lb = outer_mod.lower_bound_ns(problem)
        if best.ev is not None and lb >= best.ev.final_ns:
            return lb  # cannot beat the incumbent: solved by its bound
        a = assign_configs(problem, seed=seed, deadline=deadline)
        evals += a.evaluations
        if a.config is not None:
            methods.add(a.method)
        for k, v in a.violations.items():
            violations[k] = min(violations.get(k, math.inf), v)
        if not a.exhaustive:
            exhaustive = False
            bound_ns = min(bound_ns, max(lb, outer_mod.final_from_ii(problem, a.bound_ns)))
        if a.config is None:
            return math.inf
        decision = Decision(
            shape=shape, sharding=sharding, micro_batch_size=mbs, num_tile=t, config=a.config
        )
        ev = evaluate_problem(spec, problem, decision)
        evals += 1
        best.offer(ev)
        return ev.final_ns if ev.feasible else math.inf

    stopped = False
    if len(cands) <= ENUMERATE_LIMIT:
        for i, (shape, t, c) in enumerate(cands):
            if time.perf_counter() > deadline and best.ev is not None:
                stopped = True
                break
            run_candidate(shape, t, c)
            done = i + 1
            if progress:
                progress(done, len(cands), best.ev.final_s if best.ev else None)
        method = "enumerate"
    else:
        done = _optuna_outer(cands, run_candidate, seed, deadline, progress, lambda: best.ev)
        stopped = done < len(cands)
        method = "optuna-tpe"
    if stopped:
        exhaustive = False
        notes.append(f"time limit reached after {done} of {len(cands)} outer choices")
    if best.ev is None:
        raise InfeasibleError(_infeasible_message(spec, violations, len(cands)))
    if spec.search.joint_sharding and spec.workload.kind is WorkloadKind.LLM:
        ev2, n2 = _joint_sharding(spec, best.ev, deadline)
        evals += n2
        if ev2 is not None and best.offer(ev2):
            notes.append("joint_sharding improved on the byte-minimal sharding")
        exhaustive = False
    final = best.ev
    assert final is not None
    if stopped:
        optimal: bool | None = False
        lower_bound_s: float | None = None
    else:
        lb_ns = min(bound_ns, final.final_ns)
        lower_bound_s = lb_ns / 1e9
        optimal = exhaustive or lb_ns >= final.final_ns
    stats = SearchStats(
        method=f"{method}+{'/'.join(sorted(methods)) or 'none'}",
        seconds=time.perf_counter() - t0,
        evaluations=evals,
        seed=seed,
        optimal=optimal,
        lower_bound_s=lower_bound_s,
        candidates=len(cands),
        candidates_done=done,
        stopped_by_time=stopped,
        notes=tuple(notes),
    )
    return RunResult(spec=spec, evaluation=final, search=stats)


def _optuna_outer(cands, run_candidate, seed, deadline, progress, best_ev) -> int:
    """Sample outer choices with Optuna's seeded TPE sampler until the deadline."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shapes = sorted({c[0] for c in cands})
    tiles = sorted({c[1] for c in cands})
    counts = sorted({c[2] for c in cands})
    valid = set(cands)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    seen: set[tuple] = set()
    while time.perf_counter() < deadline and len(seen) < len(valid):
        trial = study.ask()
        key = (
            shapes[trial.suggest_int("shape", 0, len(shapes) - 1)],
            tiles[trial.suggest_int("tile", 0, len(tiles) - 1)],
            counts[trial.suggest_int("configs", 0, len(counts) - 1)],
        )
        if key not in valid or key in seen:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            if len(study.trials) > 20 * len(valid):
                break
            continue
        seen.add(key)
        value = run_candidate(*key)
        study.tell(trial, value if math.isfinite(value) else 1e300)
        if progress:
            ev = best_ev()
            progress(len(seen), len(valid), ev.final_s if ev else None)
    return len(seen)


def _joint_sharding(spec: Spec, ev: Evaluation, deadline: float) -> tuple[Evaluation | None, int]:
    """Local search over sharding choices on the best outer choice: change one kernel's
    choice at a time (pinned kernels stay), keep any change that lowers final_ns."""
    d = ev.decision
    current = ev
    evals = 0
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for i, k in enumerate(spec.graph.kernels):
            if k.sharding is not None:
                continue
            for choice in sharding_choices(k):
                if choice is current.decision.sharding[i] or time.perf_counter() > deadline:
                    continue
                sh = list(current.decision.sharding)
                sh[i] = choice
                outer = Outer(
                    d.shape, tuple(sh), d.micro_batch_size, d.num_tile,
                    effective_num_config(spec, len(current.configs)),
                )  # fmt: skip
                problem = lower(spec, outer)
                if outer_mod.lower_bound_ns(problem) >= current.final_ns:
                    continue
                a = assign_configs(problem)
                evals += a.evaluations
                if a.config is None:
                    continue
                cand = evaluate_problem(
                    spec, problem, Decision(
                        shape=d.shape, sharding=tuple(sh), micro_batch_size=d.micro_batch_size,
                        num_tile=d.num_tile, config=a.config,
                    ),
                )  # fmt: skip
                if cand.feasible and cand.final_ns < current.final_ns * (1 - 1e-12):
                    current, improved = cand, True
    return (current if current is not ev else None), evals


_UNITS = {"sram": "bytes", "dram": "bytes", "cores": "cores", "divisibility": "", "shape": ""}


def _infeasible_message(spec: Spec, violations: dict[str, float], n: int) -> str:
    if not violations:
        return f"No feasible mapping among {n} outer choices."
    lines = [f"No feasible mapping: every one of the {n} outer choices violates a constraint."]
    explain = {
        "sram": "SRAM per configuration exceeds system.accelerator.sram_bytes "
        f"({spec.system.accelerator.sram_bytes:.6g}) by at least",
        "dram": "DRAM per chip exceeds system.memory.dram_bytes "
        f"({spec.system.memory.dram_bytes:.6g}) by at least",
        "cores": "a configuration needs more kernels than system.accelerator.cores "
        f"({spec.system.accelerator.cores}) by",
        "divisibility": "workload.global_batch_size is not divisible by micro_batch_size x DP; "
        "remainder",
        "shape": "the fixed network sizes do not multiply to the chip count; off by",
        "config": "the configuration rules (FWD/BWD split, pinned configs, num_input) "
        "cannot be met",
        "order": "an edge would run backwards between configurations",
    }
    for k in sorted(violations):
        v = violations[k]
        unit = _UNITS.get(k, "")
        lines.append(f"  - {explain.get(k, k)} {v:.6g} {unit}".rstrip())
    return "\n".join(lines)
