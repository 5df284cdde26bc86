"""What ``dfsearch codesign`` writes: the table of trials (``trials.csv``), the Pareto front
(``pareto.csv``, ``pareto.json``), the best chip as a runnable spec (``best_chip.toml``; one
more per extra workload, ``best_chip_1.toml``, ...), a summary (``summary.json``) and the text
printed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dfsearch.codesign.resume import DIGEST, csv_text, study_digest
from dfsearch.codesign.runner import OK, CodesignResult, Trial, best_trial, trial_specs
from dfsearch.codesign.study import CodesignStudy
from dfsearch.errors import Issue, SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.study.pareto import pareto_front

__all__ = ["columns", "front", "write_outputs", "summary_lines"]

_CHIP = ("cores", "sram_MB", "die_area_mm2", "die_yield", "chip_price", "chip_power_W", "peak_tflops", "dram_bw_GBps")
_RESULT = ("final_s", "throughput_per_s", "system_cost", "system_power", "seconds")


def columns(s: CodesignStudy) -> list[str]:
    """The columns of ``trials.csv`` (and ``pareto.csv``)."""
    per = [f"final_s_{i}" for i in range(len(s.workloads))]
    return ["trial", *(v.name for v in s.variables), "status", "binding", "violation", "repeat_of", *_CHIP, *per, *_RESULT, DIGEST]


def front(result: CodesignResult) -> list[dict[str, Any]]:
    """The exact Pareto front of the feasible, distinct trials over the study's objectives."""
    rows = [t.row for t in result.trials if t.row["status"] == OK and t.row["repeat_of"] is None]
    names = result.study.objectives
    if len(names) > 1:
        return list(pareto_front(rows, names))
    best = best_trial(result)
    return [best.row] if best else []


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise SpecError(Issue("", f"{path}: cannot write: {e.strerror or e}.")) from None


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def write_outputs(result: CodesignResult, folder: Path) -> dict[str, Any]:
    """Write every output into ``folder`` (created) and return the summary (as JSON data)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError(Issue("", f"{folder}: cannot create the output folder: {e.strerror or e}.")) from None
    header = columns(result.study)
    digest = study_digest(result.study)
    rows = [{**t.row, DIGEST: digest} for t in result.trials]
    _write(folder / "trials.csv", csv_text(header, rows))
    pareto = front(result)
    _write(folder / "pareto.csv", csv_text(header, pareto))
    _write(folder / "pareto.json", json.dumps(_finite(pareto), indent=2) + "\n")
    best = best_trial(result)
    written = _write_best(result, best, folder) if best else []
    summary = {
        "study": result.study.file, "trials": len(rows), "distinct": sum(r["repeat_of"] is None for r in rows),
        "feasible": sum(r["status"] == OK and r["repeat_of"] is None for r in rows),
        "objectives": list(result.study.objectives), "sampler": result.study.sampler, "seed": result.study.seed,
        "best": best.row if best else None, "best_chip": written, "pareto": pareto,
    }  # fmt: skip
    _write(folder / "summary.json", json.dumps(_finite(summary), indent=2) + "\n")
    if _plot(result, pareto, folder / "pareto.png"):
        summary["plot"] = str(folder / "pareto.png")
    return summary


def _plot(result: CodesignResult, pareto: list[dict[str, Any]], path: Path) -> bool:
    """Throughput against the study's second objective (else power): every feasible design,
    the front drawn over it; only when matplotlib is installed (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [n for n in result.study.objectives if n != "throughput"] or ["power"]
    column = {"cost": "system_cost", "power": "system_power"}[names[0]]
    rows = [t.row for t in result.trials if t.row["status"] == OK and t.row["repeat_of"] is None]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r[column] for r in rows], [r["throughput_per_s"] for r in rows], s=14, color="0.6", label="feasible designs")
    front = sorted(pareto, key=lambda r: r[column])
    ax.scatter([r[column] for r in front], [r["throughput_per_s"] for r in front], s=30, color="C3", label="Pareto front")
    xs = [r[column] for r in rows if r[column] > 0]
    if xs and max(xs) > 20 * min(xs):
        ax.set_xscale("log")
    ax.set_xlabel({"cost": "system cost ($)", "power": "system power (W)"}[names[0]])
    ax.set_ylabel("throughput (batches / s)")
    ax.set_title(f"codesign {result.study.name}: {len(rows)} feasible designs")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as e:
        raise SpecError(Issue("", f"{path}: cannot write: {e.strerror or e}.")) from None
    finally:
        plt.close(fig)
    return True


def _write_best(result: CodesignResult, best: Trial, folder: Path) -> list[str]:
    out = []
    values = ", ".join(f"{k} = {v}" for k, v in best.values.items())
    for i, spec in enumerate(best.specs or trial_specs(result.study, best.values)):
        path = folder / ("best_chip.toml" if i == 0 else f"best_chip_{i}.toml")
        r = best.row
        header = (f"The best chip of the co-design study {result.study.file} (trial {best.number}: {values}),\n"
                  f"with workload {result.study.workloads[i].spec.name}. Run it with: dfsearch run {path.name}\n"
                  f"Chip model (docs/codesign.md): die {r['die_area_mm2']:.4g} mm^2, yield {r['die_yield']:.4g}, "
                  f"die cost {r['chip_price']:.4g} $ (cost.chip_price), compute + DRAM power {r['chip_power_W']:.4g} W, "
                  f"{r['cores']} cores, {r['sram_MB']:.4g} MB SRAM, DRAM {r['dram_bw_GBps']:.4g} GB/s")  # fmt: skip
        _write(path, spec_to_toml(spec, header=header))
        out.append(str(path))
    return out


def summary_lines(result: CodesignResult, summary: dict[str, Any]) -> list[str]:
    """The text printed after the trials: counts, the best design and the front."""
    s = result.study
    lines = [f"codesign {s.name}: {summary['trials']} trials ({summary['distinct']} distinct designs, "
             f"{summary['feasible']} feasible) in {result.seconds:.3g} s, {s.sampler} seed {s.seed}"]  # fmt: skip
    names = [v.name for v in s.variables]
    best = summary["best"]
    if best is None:
        lines.append("no design is feasible within the budgets; trials.csv says what binds for each")
        return lines
    design = ", ".join(f"{n}={best[n]}" for n in names)
    lines.append(f"best: trial {best['trial']}: {design}: final_s {best['final_s']:.6g} s, "
                 f"cost {best['system_cost']:.6g} $, power {best['system_power']:.6g} W, "
                 f"die {best['die_area_mm2']:.4g} mm^2, {best['cores']} cores, {best['sram_MB']:.4g} MB SRAM")  # fmt: skip
    lines.append(f"Pareto front ({', '.join(s.objectives)}): {len(summary['pareto'])} design(s)")
    for r in sorted(summary["pareto"], key=lambda r: (r["final_s"], r["trial"])):
        lines.append(f"  trial {r['trial']:>4}: {', '.join(f'{n}={r[n]}' for n in names)}: final_s {r['final_s']:.6g}, "
                     f"cost {r['system_cost']:.6g}, power {r['system_power']:.6g}")  # fmt: skip
    if summary["best_chip"]:
        plot = ", pareto.png" if summary.get("plot") else ""
        lines.append(f"wrote {summary['best_chip'][0]} (dfsearch run it) and trials.csv, pareto.csv, pareto.json, summary.json{plot}")
    return lines
