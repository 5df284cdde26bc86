"""The shipped 80-system studies against DFModel's published design-space logs, cell by cell.

Each shipped grid (``dfsearch/examples/studies/{gpt3_1T,dlrm,hpl,fft}_grid.toml``) is the
paper's 4 accelerators x 5 topologies x DDR/HBM x PCIe/NVLink on 1024 chips. DFModel's own runs
of the same 320 systems are in the repository fengqian-ayce/DFModel at commit 04f93d5
(``<WORKLOAD>/DSE/system/<chip>/<topology>_<memory>_<network>/log.txt``); the numbers each log
printed last (``final_s``, ``util``, ``total_cost``, ``total_power``, ...) are in
``tests/data/dfmodel/dse_grids/<workload>.csv`` (README.md there says how they were
read). This script runs a grid (or reads a finished sweep's ``results.csv``) and counts the
cells that agree with DFModel.

A cell **matches** when our time per batch, utilisation, system cost and system power are each within
``--rtol`` (default 1e-6) of DFModel's printed values. Why 1e-6: the two models compute the
same closed forms in floating point, but DFModel keeps some inputs in single precision (its
printed peak, 993214.4707 GFLOP/s for the H100-like chip, is the float32 of 2 x 16 x 16 x
1056 x 1.837 = 993214.464; its link powers, e.g. 2662.4000549 W, are float32 too), which moves
its numbers by up to ~1e-7 relative; Gurobi's tolerances are far below that on these sizes. A
real modelling difference (a network size, a style, a problem size) moves a cell by 1e-3 or
more. A cell with no final numbers in its log (see the csv's ``note``) is counted apart.

Usage::

    python benchmarks/dfmodel_grids.py                      # run the 4 shipped grids, compare
    python benchmarks/dfmodel_grids.py --grid hpl --verbose  # one grid, list every mismatch
    python benchmarks/dfmodel_grids.py --grid hpl --results /tmp/r_hpl   # a finished sweep

``tests/test_study_dfmodel_grids.py`` runs the same comparison on every cell.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "dfsearch" / "examples" / "studies"
REFERENCE = ROOT / "tests" / "data" / "dfmodel" / "dse_grids"
#: grid name -> (shipped study file, DFModel reference table)
GRIDS = {
    "llm": (STUDIES / "gpt3_1T_grid.toml", REFERENCE / "llm.csv"),
    "dlrm": (STUDIES / "dlrm_grid.toml", REFERENCE / "dlrm.csv"),
    "hpl": (STUDIES / "hpl_grid.toml", REFERENCE / "hpl.csv"),
    "fft": (STUDIES / "fft_grid.toml", REFERENCE / "fft.csv"),
}
KEY = ("accelerator", "topology", "memory", "interconnect")
#: our column -> DFModel's column in the reference table
COMPARED = {"final_s": "final_s", "utilization": "utilization", "system_cost": "system_cost", "system_power": "system_power"}
RTOL = 1e-6


@dataclass(frozen=True, slots=True)
class Cell:
    """One system of a grid: DFModel's numbers against ours."""

    key: tuple[str, ...]
    status: str  #: one of STATUSES
    detail: str


#: match: time, utilisation, cost and power agree; ours faster / ours slower: the same system
#: (cost and power agree) with a different time per batch; system differs: cost or power
#: disagree (not the same system); ours infeasible; no DFModel result (the log has no final
#: numbers: the csv's ``note``)
STATUSES = ("match", "ours faster", "ours slower", "system differs", "ours infeasible", "no DFModel result")


def read_table(path: Path) -> dict[tuple[str, ...], dict[str, str]]:
    """A results table or a reference table, by system (accelerator, topology, memory,
    interconnect)."""
    with path.open(newline="") as f:
        return {tuple(r[k] for k in KEY): r for r in csv.DictReader(f)}


def rel(ours: float, theirs: float) -> float:
    return (ours - theirs) / abs(theirs)


def compare_cell(key: tuple[str, ...], row: dict[str, str], r: dict[str, str], rtol: float = RTOL) -> Cell:
    if not r["final_s"]:
        return Cell(key, "no DFModel result", r["note"])
    if row["status"] == "infeasible":
        return Cell(key, "ours infeasible", row["message"])
    errs = {c: rel(float(row[c]), float(r[d])) for c, d in COMPARED.items()}
    bad = {c: e for c, e in errs.items() if abs(e) > rtol}
    detail = ", ".join(f"{c} {float(row[c]):.9g} vs {float(r[COMPARED[c]]):.9g} ({e:+.2e})" for c, e in bad.items())
    if r["note"]:
        detail += f" [log: {r['note']}]"
    if not bad:
        return Cell(key, "match", detail)
    if "system_cost" in bad or "system_power" in bad:
        return Cell(key, "system differs", detail)
    return Cell(key, "ours faster" if errs["final_s"] < 0 else "ours slower", detail)


def compare(ours: dict[tuple[str, ...], dict[str, str]], ref: dict[tuple[str, ...], dict[str, str]],
            rtol: float = RTOL) -> list[Cell]:  # fmt: skip
    """Every reference cell against our row of the same system (a system missing from ours
    is a KeyError: a shipped grid must cover the same 80 systems)."""
    return [compare_cell(key, ours[key], r, rtol) for key, r in ref.items()]


def counts(cells: list[Cell]) -> dict[str, int]:
    out = dict.fromkeys(STATUSES, 0)
    for c in cells:
        out[c.status] += 1
    return out


def run_grid(name: str, folder: Path) -> Path:
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import load_study

    sweep(load_study(GRIDS[name][0]), folder, jobs=1, fresh=True)
    return folder / "results.csv"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=sorted(GRIDS), action="append", help="default: all four")
    ap.add_argument("--results", type=Path, help="a finished sweep's folder (with --grid, one grid)")
    ap.add_argument("--rtol", type=float, default=RTOL)
    ap.add_argument("--verbose", action="store_true", help="list every cell that does not match")
    args = ap.parse_args(argv)
    names = args.grid or list(GRIDS)
    if args.results and len(names) != 1:
        ap.error("--results needs exactly one --grid")
    print(f"{'grid':5} {'cells':>5} " + " ".join(f"{s:>{max(len(s), 5)}}" for s in STATUSES) + "  seconds")
    for name in names:
        t0 = time.perf_counter()
        if args.results:
            ours = read_table(args.results / "results.csv")
        else:
            with tempfile.TemporaryDirectory(prefix=f"dfmodel_{name}_") as tmp:
                ours = read_table(run_grid(name, Path(tmp)))
        cells = compare(ours, read_table(GRIDS[name][1]), args.rtol)
        n = counts(cells)
        print(f"{name:5} {len(cells):5d} " + " ".join(f"{n[s]:{max(len(s), 5)}d}" for s in STATUSES)
              + f"  {time.perf_counter() - t0:7.1f}")  # fmt: skip
        if args.verbose:
            for c in cells:
                if c.status != "match":
                    print(f"    {'/'.join(c.key)}: {c.status}: {c.detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
