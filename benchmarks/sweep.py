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

``--cheap`` instead measures the throughput of cheap points (issue 25): a 1,600-point study,
the 80-system grid x 5 global batch sizes x 4 sequence lengths, written to a temporary
folder, swept in this process with 1 and 2 jobs (points/s), then the same sweep again with
nothing left to do (the seconds of a resume of 1,600 finished rows), and the resume of a
finished 10,000-row table (the grid x 5 batch sizes x 5 sequence lengths x 5 layer counts,
its first row searched and the others copies of it with their own axis values, so only the
resume is timed; ``--no-long-resume`` skips it).

Usage: ``python benchmarks/sweep.py [--study PATH] [--subprocess-points N] [--shipped] [--cheap]
[--no-long-resume] [--json PATH]``
"""

from __future__ import annotations

import argparse
import contextlib
import csv
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


CHEAP_AXES = """
"workload.global_batch_size" = [1024, 2048, 3072, 4096, 6144]
"workload.seq_len" = [1024, 2048, 4096, 8192]
"""
#: 80 x 5 x 5 x 5 = 10,000 points (the resume figure)
LONG_AXES = """
"workload.global_batch_size" = [1024, 2048, 3072, 4096, 6144]
"workload.seq_len" = [512, 1024, 2048, 4096, 8192]
"workload.num_layer" = [128, 160, 192, 224, 256]
"""


def grid_study(folder: Path, name: str, axes: str) -> Path:
    """The shipped GPT-3 1T grid with more field-path axes, its base spec path made absolute."""
    text = GRID.read_text().replace('base = "../gpt3_1T_sn30.toml"', f'base = "{GRID.parent.parent / "gpt3_1T_sn30.toml"}"')
    text = text.replace('interconnect = ["pcie", "nvlink"]\n', 'interconnect = ["pcie", "nvlink"]\n' + axes.lstrip())
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def time_resume(study_path: Path, folder: Path) -> tuple[float, int]:
    """The seconds of a sweep with every point already in the table, and its rows."""
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import load_study

    study = load_study(study_path)
    t0 = time.perf_counter()
    summary = sweep(study, folder)
    return time.perf_counter() - t0, summary.done_before


def long_table(study_path: Path, folder: Path) -> None:
    """A finished table of every point of the study: the first point searched, the other
    rows copies of its row with their own point and axis values (so that their axis values
    check; their digests are the first row's, which a resume does not rebuild)."""
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import load_study
    from dfsearch.study.table import cell_text, read_table

    study = load_study(study_path)

    def stop(done: int, total: int, elapsed: float, ran: int) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(KeyboardInterrupt):
        sweep(study, folder, progress=stop, fresh=True)
    header, rows = read_table(folder / "results.csv")
    with (folder / "results.csv").open("a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        for i in range(1, study.size()):
            point = study.point_at(i)
            row = dict(rows[0], point=i, **{a.name: v for a, v in zip(study.axes, point.values)})
            w.writerow([cell_text(row[c]) for c in header])


def cheap_points(tmp: Path, long_resume: bool, json_path: Path | None) -> None:
    """``--cheap``: points/s on the 1,600-point study with 1 and 2 jobs, and resume seconds."""
    study = grid_study(tmp, "cheap_grid", CHEAP_AXES)
    figures: dict[str, dict[str, float]] = {}
    for jobs in (1, 2):
        s, n = time_sweep(study, jobs, tmp / f"cheap{jobs}")
        figures[f"in_process_{jobs}_job"] = {"seconds": s, "points": n, "points_per_s": n / s}
    s, n = time_resume(study, tmp / "cheap1")
    figures["resume_finished"] = {"seconds": s, "points": n, "points_per_s": n / s}
    if long_resume:
        long = grid_study(tmp, "long_grid", LONG_AXES)
        long_table(long, tmp / "long")
        s, n = time_resume(long, tmp / "long")
        figures["resume_long_table"] = {"seconds": s, "points": n, "points_per_s": n / s}
    print(f"cheap points: {study.name}, 1,600 points; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    for name, f in figures.items():
        print(f"  {name:<22} {f['points']:>6} points in {f['seconds']:7.2f} s = {f['points_per_s']:9.2f} points/s")
    one = figures["in_process_1_job"]["points_per_s"]
    print(f"  ratio 2 jobs / 1 job (in-process): {figures['in_process_2_job']['points_per_s'] / one:.2f}x")
    if json_path:
        json_path.write_text(json.dumps(figures, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", type=Path, default=GRID)
    ap.add_argument("--subprocess-points", type=int, default=16)
    ap.add_argument("--shipped", action="store_true", help="time the command of every shipped study instead")
    ap.add_argument("--cheap", action="store_true", help="points/s of cheap points and resume seconds instead")
    ap.add_argument("--no-long-resume", action="store_true", help="with --cheap: skip the 10,000-row resume")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfsearch-sweep-bench-"))
    if args.shipped:
        time_shipped_studies(tmp, args.json)
        return
    if args.cheap:
        cheap_points(tmp, not args.no_long_resume, args.json)
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
