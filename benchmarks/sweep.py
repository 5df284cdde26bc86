"""Points per second of a design-space sweep, measured side by side in one run:

* ``in-process, 1 job``: ``dfsearch.study.runner.sweep`` in this process (compiles or loads
  the compiled code once, then every point reuses it);
* ``in-process, 2 jobs``: the same with a pool of 2 worker processes (each loads once);
* ``one process per point``: ``dfsearch run SPEC --quiet`` as a subprocess for each point
  (each pays Python start-up, imports and the compiled-code load), sequentially, on the first
  ``--subprocess-points`` points (default 16) so the benchmark stays short.

Default study: the shipped 80-system GPT-3 1T grid (dfsearch/examples/studies/gpt3_1T_grid.toml),
the Done-when figure of issue 13 (<= 60 s on a 2-core machine). The end-to-end ``dfsearch
sweep`` command is timed too (a subprocess, so it includes start-up).

``--shipped`` instead times the one ``dfsearch sweep`` command of every shipped study
(the 4 workloads' grids, the SRAM x DRAM and area-split studies).

Usage: ``python benchmarks/sweep.py [--study PATH] [--subprocess-points N] [--shipped] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "dfsearch/examples/studies/gpt3_1T_grid.toml"


def time_sweep(study_path: Path, jobs: int, folder: Path) -> tuple[float, int]:
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import load_study

    t0 = time.perf_counter()
    summary = sweep(load_study(study_path), folder, jobs=jobs, fresh=True)
    return time.perf_counter() - t0, summary.ran


def time_command(study_path: Path, jobs: int, folder: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dfsearch", "sweep", str(study_path), "-o", str(folder),
                    "--jobs", str(jobs), "--fresh", "-q"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - t0


def time_subprocesses(study_path: Path, n: int, folder: Path) -> tuple[float, int]:
    from dfsearch.io.toml_writer import spec_to_toml
    from dfsearch.study.study import load_study

    study = load_study(study_path)
    files = []
    for p in study.points()[:n]:
        f = folder / f"point_{p.index}.toml"
        f.write_text(spec_to_toml(study.point_spec(p)))
        files.append(f)
    t0 = time.perf_counter()
    for f in files:
        subprocess.run([sys.executable, "-m", "dfsearch", "run", str(f), "--quiet"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - t0, len(files)


def time_shipped_studies(tmp: Path, json_path: Path | None) -> None:
    """``--shipped``: the one ``dfsearch sweep STUDY -o DIR`` command of every shipped study
    (dfsearch/examples/studies/*.toml), start-up included, one after the other."""
    figures = {}
    for study in sorted((ROOT / "dfsearch/examples/studies").glob("*.toml")):
        s = time_command(study, 1, tmp / study.stem)
        with open(tmp / study.stem / "results.csv") as f:
            n = sum(1 for _ in f) - 1
        figures[study.name] = {"seconds": s, "points": n, "points_per_s": n / s}
    print(f"shipped studies, one 'dfsearch sweep' command each; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    for name, f in figures.items():
        print(f"  {name:<28} {f['points']:>4} points in {f['seconds']:7.2f} s = {f['points_per_s']:6.2f} points/s")
    if json_path:
        json_path.write_text(json.dumps(figures, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", type=Path, default=GRID)
    ap.add_argument("--subprocess-points", type=int, default=16)
    ap.add_argument("--shipped", action="store_true", help="time the command of every shipped study instead")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfsearch-sweep-bench-"))
    if args.shipped:
        time_shipped_studies(tmp, args.json)
        return
    figures: dict[str, dict[str, float]] = {}

    s, n = time_sweep(args.study, 1, tmp / "j1")
    figures["in_process_1_job"] = {"seconds": s, "points": n, "points_per_s": n / s}
    s, n = time_sweep(args.study, 2, tmp / "j2")
    figures["in_process_2_jobs"] = {"seconds": s, "points": n, "points_per_s": n / s}
    for jobs in (1, 2):
        s = time_command(args.study, jobs, tmp / f"cmd{jobs}")
        figures[f"command_{jobs}_job"] = {"seconds": s, "points": n, "points_per_s": n / s}
    s, k = time_subprocesses(args.study, args.subprocess_points, tmp)
    figures["process_per_point"] = {"seconds": s, "points": k, "points_per_s": k / s}

    print(f"dfsearch sweep benchmark: {args.study.name}, {n} points; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for name, f in figures.items():
        print(f"  {name:<22} {f['points']:>4} points in {f['seconds']:7.2f} s = {f['points_per_s']:6.2f} points/s")
    base = figures["process_per_point"]["points_per_s"]
    one = figures["in_process_1_job"]["points_per_s"]
    print(f"  ratio in-process 1 job / process per point: {one / base:.1f}x")
    print(f"  ratio 2 jobs / 1 job (in-process):          {figures['in_process_2_jobs']['points_per_s'] / one:.2f}x")
    print(f"  whole grid with one command: {figures['command_1_job']['seconds']:.1f} s (1 job), "
          f"{figures['command_2_job']['seconds']:.1f} s (--jobs 2); target <= 60 s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
