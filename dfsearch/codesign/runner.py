"""The co-design search: Optuna's NSGA-II or TPE over the chip and system variables, the
exact mapping search inside each trial (``dfsearch codesign STUDY -o DIR``).

Each trial picks one choice per variable; the chip model turns the chip parameters into the
spec's accelerator, memory and cost fields; a design over the area or chip power budget is
recorded with the binding budget and not searched; otherwise every workload of the mix is
searched (``dfsearch.run``) and the trial's objectives are the mix's throughput (one over
the weighted mean of the workloads' times per batch), its system cost and its system power
(the largest over the workloads). The same design proposed again takes its first row.
Deterministic: the sampler is seeded and trials are asked and told one after another, so a
study, seed and trial count give the same table (the ``seconds`` column aside).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dfsearch
from dfsearch.codesign.chip import ChipFigures, chip_figures, spec_edits
from dfsearch.codesign.study import CodesignStudy
from dfsearch.errors import InfeasibleError
from dfsearch.spec import Spec
from dfsearch.study.study import cell

__all__ = ["Trial", "CodesignResult", "run_codesign", "best_trial", "trial_specs"]

#: status words of a trial row
OK, OVER_BUDGET, NO_MAPPING, INVALID = "ok", "over_budget", "no_mapping", "invalid"


@dataclass(frozen=True)
class Trial:
    """One trial: its number, the variable values, the row and the workloads' specs (None
    when the design was not searched)."""

    number: int
    values: dict[str, Any]
    row: dict[str, Any]
    specs: tuple[Spec, ...] | None


@dataclass(frozen=True)
class CodesignResult:
    study: CodesignStudy
    trials: tuple[Trial, ...]
    seconds: float


Progress = Callable[[int, int, float, int], None]


def _violation(trial: Any) -> tuple[float]:
    """Optuna's constraint of a trial: > 0 when over a budget or without a mapping."""
    return (trial.user_attrs["violation"],)


def _sampler(study: CodesignStudy) -> Any:
    """A seeded multi-objective sampler that ranks designs over a budget by how far over they
    are (constrained domination), so the search learns where the budgets bind. Optuna 5 reads
    a trial's constraint set on the trial; Optuna 4 asks a ``constraints_func``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    legacy = {} if hasattr(optuna.trial.Trial, "set_constraint") else {"constraints_func": _violation}
    if study.sampler == "tpe":
        sampler = optuna.samplers.TPESampler(seed=study.seed, **legacy)
    else:
        kwargs = {"population_size": study.population} if study.population else {}
        sampler = optuna.samplers.NSGAIISampler(seed=study.seed, **legacy, **kwargs)
    directions = ["maximize" if n == "throughput" else "minimize" for n in study.objectives]
    return optuna.create_study(directions=directions, sampler=sampler)


def run_codesign(
    study: CodesignStudy,
    progress: Progress | None = None,
    previous: dict[int, dict[str, Any]] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> CodesignResult:
    """Run the study's trials (its ``trials`` budget) and return every trial in order.
    ``previous``: rows of an earlier run (trial number -> row); a trial that asks for the same
    variable values takes its row instead of being searched. ``on_row`` gets each row."""
    t0 = time.perf_counter()
    sampler = _sampler(study)
    seen: dict[tuple[int, ...], Trial] = {}
    out: list[Trial] = []
    ran = 0
    for n in range(study.trials):
        ask = sampler.ask()
        choice = tuple(ask.suggest_categorical(v.name, list(range(len(v.choices)))) for v in study.variables)
        values = {v.name: v.choices[c] for v, c in zip(study.variables, choice)}
        old, before = seen.get(choice), (previous or {}).get(n)
        if before is not None and all(before.get(v.name) == cell(values[v.name]) for v in study.variables):
            trial = Trial(n, values, before, None)
        elif old is not None:
            trial = Trial(n, values, {**old.row, "trial": n, "repeat_of": old.number}, old.specs)
        else:
            trial, ran = _evaluate(study, n, values), ran + 1
        if trial.row["repeat_of"] is None:
            seen.setdefault(choice, trial)
        out.append(trial)
        if on_row is not None:
            on_row(trial.row)
        ask.set_user_attr("violation", float(trial.row["violation"]))
        if hasattr(ask, "set_constraint"):
            ask.set_constraint("budget", float(trial.row["violation"]))
        sampler.tell(ask, _objectives(trial.row, study.objectives))
        if progress is not None:
            progress(n + 1, study.trials, time.perf_counter() - t0, max(ran, 1))
    return CodesignResult(study, tuple(out), time.perf_counter() - t0)


#: what an unsearched or infeasible design tells the sampler (its constraint ranks it first)
_WORST = 1e30


def _objectives(row: dict[str, Any], names: tuple[str, ...]) -> list[float]:
    column = {"throughput": "throughput_per_s", "cost": "system_cost", "power": "system_power"}
    if row["status"] != OK and row.get("final_s") is None:
        return [0.0 if n == "throughput" else _WORST for n in names]
    return [float(row[column[n]]) for n in names]


def _chip_cells(f: ChipFigures) -> dict[str, Any]:
    return {
        "cores": f.cores, "sram_MB": f.sram_bytes / 1e6, "die_area_mm2": f.die_area_mm2, "die_yield": f.die_yield,
        "chip_price": f.die_cost_usd, "chip_power_W": f.chip_power_W, "peak_tflops": f.peak_gflops / 1e3,
        "dram_bw_GBps": f.dram_bw_GBps,
    }  # fmt: skip


def _over(name: str, value: float, limit: float | None) -> tuple[str, float] | None:
    """(binding text, relative excess) when ``value`` is over ``limit``."""
    if limit is None or value <= limit:
        return None
    return f"{name} ({value:.4g} > {limit:.4g})", value / limit - 1.0


def _binding(study: CodesignStudy, f: ChipFigures) -> tuple[str, float] | None:
    """The first budget or technology limit the chip breaks before any search."""
    b = study.budget
    found = _over("area_mm2", f.die_area_mm2, b.area_mm2) or _over("chip_power_W", f.chip_power_W, b.chip_power_W)
    if found is None and not math.isfinite(f.die_cost_usd):
        return "die larger than the wafer", 1.0
    return found


def _evaluate(study: CodesignStudy, n: int, values: dict[str, Any]) -> Trial:
    """Build the trial's chip, check the budgets, search every workload."""
    design = study.design(values)
    row: dict[str, Any] = {"trial": n, **{k: cell(v) for k, v in values.items()}, "repeat_of": None, "violation": 0.0}
    units = study.tech.memory[design.memory].max_units.value
    if design.memory_units > units:
        binding = f"memory_units ({design.memory_units} > {units:g} for {design.memory})"
        return Trial(n, values, {**row, "status": INVALID, "binding": binding, "violation": design.memory_units / units - 1.0}, None)
    first = study.workload_spec(0, values, {})
    figures = chip_figures(design, study.core(first), study.tech)
    row |= _chip_cells(figures)
    if (over := _binding(study, figures)) is not None:
        return Trial(n, values, {**row, "status": OVER_BUDGET, "binding": over[0], "violation": over[1]}, None)
    edits = spec_edits(figures)
    specs = tuple(study.workload_spec(i, values, edits) for i in range(len(study.workloads)))
    times, costs, powers, seconds = [], [], [], 0.0
    for i, spec in enumerate(specs):
        result = _search(spec)
        seconds += result.search.seconds
        ev = result.evaluation
        row[f"final_s_{i}"] = ev.final_s if ev is not None else None
        if ev is None:
            why = result.violations[0].message() if result.violations else result.infeasible_message().splitlines()[0]
            return Trial(n, values, {**row, "status": NO_MAPPING, "binding": f"workload {i}: {why}", "violation": 1.0, "seconds": seconds}, specs)
        times.append(ev.final_s)
        costs.append(ev.price.system_cost)
        powers.append(ev.price.system_power)
    weights = [w.weight for w in study.workloads]
    final_s = sum(w * t for w, t in zip(weights, times)) / sum(weights)
    row |= {"final_s": final_s, "throughput_per_s": 1.0 / final_s, "system_cost": max(costs),
            "system_power": max(powers), "seconds": seconds}  # fmt: skip
    b = study.budget
    over = _over("system_cost_usd", row["system_cost"], b.system_cost_usd) or _over("system_power_W", row["system_power"], b.system_power_W)
    if over is not None:
        return Trial(n, values, {**row, "status": OVER_BUDGET, "binding": over[0], "violation": over[1]}, specs)
    return Trial(n, values, {**row, "status": OK, "binding": None}, specs)


def _search(spec: Spec) -> Any:
    """The exact mapping search of ``dfsearch run`` (the package's lazy entry point, which
    loads the search and Numba on first use); an infeasible spec gives its full result too.
    Ctrl-C during the search stops the whole study (KeyboardInterrupt)."""
    try:
        result = dfsearch.run(spec, seed=spec.search.seed)
    except InfeasibleError as exc:
        result = exc.result
    if result.search.stopped_by == "interrupted":  # Ctrl-C: stop the study, not just this search
        raise KeyboardInterrupt
    return result


def trial_specs(study: CodesignStudy, values: dict[str, Any]) -> tuple[Spec, ...]:
    """The workloads' specs of a design (for a trial read back from an earlier run)."""
    design = study.design(values)
    figures = chip_figures(design, study.core(study.workload_spec(0, values, {})), study.tech)
    edits = spec_edits(figures)
    return tuple(study.workload_spec(i, values, edits) for i in range(len(study.workloads)))


def best_trial(result: CodesignResult) -> Trial | None:
    """The feasible trial of highest throughput (then lowest cost, then power, then first)."""
    ok = [t for t in result.trials if t.row["status"] == OK and t.row["repeat_of"] is None]
    if not ok:
        return None
    return min(ok, key=lambda t: (-t.row["throughput_per_s"], t.row["system_cost"], t.row["system_power"], t.number))
