"""The throughput and start-up figures of design-space sweeps (issue 25), measured side by
side in one run, each with its target and ratio. ``python benchmarks/sweep.py`` prints:

* cheap points, one process: points/s of ``dfsearch.study.runner.sweep`` in this process on
  the 1,600-point study (the shipped 80-system GPT-3 1T grid x 5 global batch sizes x 4
  sequence lengths), and its ratio to 13.6 points/s, the figure on a 2-core machine when the
  issue was filed (target: >= 5x, >= 70 points/s there);
* cheap points, N workers (the last of ``--jobs-list``): points/s of the same sweep with a
  pool of N long-lived worker processes, on the 10,000-point grid (x 5 layer counts) when
  N >= 8 so that their start is amortised (target: >= 1,000 points/s on 16 cores);
* heavy points: points/s of a 504-point study of heavy points (the shipped chip area-split
  study, 21 compute shares x 24 DRAM bandwidths; ``--heavy-points`` takes fewer, at
  compute shares spread over the range) with 1 and with N workers, and the ratio (targets:
  >= 1.7x from 1 to 2 workers on 2 cores, >= 12x from 1 to 16); the two tables are
  compared, less the seconds column
  (target: identical);
* the resume of a finished 10,000-row table, in seconds (target: <= 1 s);
* cold start: CPU seconds of ``dfsearch run`` (the built-in example) with an empty Numba
  cache folder (the first run after an install: the shipped compiled code is made into
  machine code), less those of the same run once cached (target: <= 10 s CPU;
  ``--no-cold-start`` skips it); and the same first run with the shipped code turned off,
  everything compiled (no target: what a platform without shipped code pays).

CPU seconds are this process's and its finished children's (pool workers included).
``--jobs-list 1,16`` on a 16-core machine gives the 1-to-16 figures (one command, a few
minutes). The other modes: ``--grid`` (the 80-system grid: in process, 2 jobs, the
command, a process per point), ``--shipped`` (the command of every shipped study),
``--cheap`` (the cheap-point figures alone).

Usage: ``python benchmarks/sweep.py [--jobs-list 1,N] [--heavy-points N] [--no-cold-start]
[--no-long-resume] [--grid | --shipped | --cheap] [--study PATH] [--subprocess-points N]
[--json PATH]``
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import resource
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


#: points/s of cheap points in one process on a 2-core machine when issue 25 was filed
FILED_CHEAP_POINTS_PER_S = 13.6
AREA = ROOT / "dfsearch/examples/studies/area_split.toml"
#: 21 compute shares x 24 DRAM bandwidths = 504 heavy points (each a search of the
#: configuration count too)
HEAVY_SHARES = [round(0.2 + 0.03 * i, 2) for i in range(21)]
HEAVY_DRAM_BW = [round(100 * 1.35**i) for i in range(24)]  # 100 to 99,418 GB/s


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have finished (a pool's workers
    once it is joined)."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def measured_sweep(study_path: Path, jobs: int, folder: Path) -> dict[str, float]:
    """One fresh sweep: its points, wall and CPU seconds, points/s (wall)."""
    from dfsearch.study.runner import sweep
    from dfsearch.study.study import load_study

    study = load_study(study_path)
    c0, t0 = cpu_seconds(), time.perf_counter()
    summary = sweep(study, folder, jobs=jobs, fresh=True)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return {"points": summary.ran, "seconds": wall, "cpu_seconds": cpu, "points_per_s": summary.ran / wall,
            "jobs": jobs}  # fmt: skip


def heavy_study(folder: Path, points: int) -> Path:
    """The shipped area-split study with 504 points (``HEAVY_SHARES`` x ``HEAVY_DRAM_BW``),
    or about ``points`` of them: whole rows of DRAM bandwidths, at compute shares spread
    over the range."""
    text = AREA.read_text().replace('base = "../gpt3_1T_sn30.toml"', f'base = "{AREA.parent.parent / "gpt3_1T_sn30.toml"}"')
    head, _, _ = text.partition("[axes]")
    rows = min(len(HEAVY_SHARES), max(1, -(-points // len(HEAVY_DRAM_BW))))
    shares = [HEAVY_SHARES[i * len(HEAVY_SHARES) // rows] for i in range(rows)]  # spread out
    axes = f'[axes]\ncompute_share = {shares}\n"system.memory.dram_bw_GBps" = {HEAVY_DRAM_BW}\n'
    path = folder / "heavy.toml"
    path.write_text(head + axes)
    return path


def rows_less_seconds(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r.pop("seconds", None)
    return rows


def cold_start(tmp: Path) -> dict[str, float]:
    """CPU seconds of ``dfsearch run`` with an empty Numba cache folder (the first run after
    an install, with the shipped compiled code), again with it filled, and once more with an
    empty one and the shipped code turned off (everything compiled): first run - warm is
    what a first run costs before the search starts."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / "numba-cache"))
    off = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / "numba-cache-off"), DFSEARCH_PREBUILT="off")
    out = {}
    for name, run_env in (("cold", env), ("warm", env), ("compiled", off)):
        c0 = cpu_seconds()
        r = subprocess.run([sys.executable, "-m", "dfsearch", "run"], env=run_env, cwd=tmp,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
        out[f"{name}_cpu_seconds"] = cpu_seconds() - c0
        out[f"{name}_said_compiling"] = "compiling" in r.stderr
    out["compile_cpu_seconds"] = out["cold_cpu_seconds"] - out["warm_cpu_seconds"]
    return out


def targets(tmp: Path, jobs_list: list[int], heavy_points: int, long_resume: bool, cold: bool,
            json_path: Path | None) -> None:  # fmt: skip
    """The default mode: every figure of issue 25 with its target (module docstring)."""
    one, many = jobs_list[0], jobs_list[-1]
    cheap = grid_study(tmp, "cheap_grid", CHEAP_AXES)
    long = grid_study(tmp, "long_grid", LONG_AXES)
    heavy = heavy_study(tmp, heavy_points)
    f: dict[str, dict] = {}
    f["cheap_1_job"] = measured_sweep(cheap, one, tmp / "cheap1")
    f["cheap_many_jobs"] = measured_sweep(long if many >= 8 else cheap, many, tmp / "cheapN")
    f["heavy_1_job"] = measured_sweep(heavy, one, tmp / "heavy1")
    f["heavy_many_jobs"] = measured_sweep(heavy, many, tmp / "heavyN")
    same = rows_less_seconds(tmp / "heavy1/results.csv") == rows_less_seconds(tmp / "heavyN/results.csv")
    if many < 8:
        same = same and rows_less_seconds(tmp / "cheap1/results.csv") == rows_less_seconds(tmp / "cheapN/results.csv")
    f["identical_tables"] = {"same": same}
    if long_resume:
        long_table(long, tmp / "long")
        s, n = time_resume(long, tmp / "long")
        f["resume_long_table"] = {"seconds": s, "points": n}
    if cold:
        f["cold_start"] = cold_start(tmp)
    print_targets(f, one, many)
    if json_path:
        json_path.write_text(json.dumps(f, indent=2) + "\n")


def print_targets(f: dict[str, dict], one: int, many: int) -> None:
    def line(name: str, r: dict) -> str:
        return (f"{r['points']:>6} points in {r['seconds']:7.2f} s ({r['cpu_seconds']:7.2f} s CPU) = "
                f"{r['points_per_s']:8.1f} points/s")  # fmt: skip

    print(f"dfsearch sweep targets (issue 25); {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    c1, cn, h1, hn = f["cheap_1_job"], f["cheap_many_jobs"], f["heavy_1_job"], f["heavy_many_jobs"]
    print(f"  cheap points, {one} job:    {line('', c1)}")
    per_cpu = c1["points"] / c1["cpu_seconds"]
    print(f"    per CPU second {per_cpu:.1f} points/s; against the {FILED_CHEAP_POINTS_PER_S} points/s of the "
          f"issue (2 cores): {c1['points_per_s'] / FILED_CHEAP_POINTS_PER_S:.2f}x by the clock, "
          f"{per_cpu / FILED_CHEAP_POINTS_PER_S:.2f}x per CPU second (target >= 5x, >= 70 points/s; on a "
          f"loaded machine only the CPU figure means anything)")  # fmt: skip
    print(f"  cheap points, {many} jobs:   {line('', cn)}   (target >= 1,000 points/s on 16 cores)")
    print(f"  heavy points, {one} job:    {line('', h1)}")
    print(f"  heavy points, {many} jobs:   {line('', hn)}")
    target = {2: "target >= 1.7x on 2 cores", 16: "target >= 12x on 16 cores"}.get(many, "targets: 1.7x at 2, 12x at 16")
    print(f"    ratio {many} jobs / {one}: {hn['points_per_s'] / h1['points_per_s']:.2f}x ({target})")
    print(f"  tables identical for {one} and {many} jobs (less seconds): {f['identical_tables']['same']}")
    if "resume_long_table" in f:
        r = f["resume_long_table"]
        print(f"  resume of a finished {r['points']:,}-row table: {r['seconds']:.2f} s (target <= 1 s)")
    if "cold_start" in f:
        c = f["cold_start"]
        print(f"  cold start: 'dfsearch run' {c['cold_cpu_seconds']:.1f} s CPU with an empty Numba cache, "
              f"{c['warm_cpu_seconds']:.1f} s cached: {c['compile_cpu_seconds']:.1f} s CPU before the "
              f"search (target <= 10 s); compile line shown: {c['cold_said_compiling']}")  # fmt: skip
        print(f"    shipped compiled code off: {c['compiled_cpu_seconds']:.1f} s CPU, "
              f"{c['compiled_cpu_seconds'] - c['warm_cpu_seconds']:.1f} s compiling; compile line "
              f"shown: {c['compiled_said_compiling']}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs-list", default="1,2", help="the job counts compared, e.g. 1,16 (default 1,2)")
    ap.add_argument("--heavy-points", type=int, default=504, help="heavy points (default 504, the whole study)")
    ap.add_argument("--no-cold-start", action="store_true", help="skip the cold-start figure")
    ap.add_argument("--grid", action="store_true", help="the 80-system grid figures instead")
    ap.add_argument("--study", type=Path, default=GRID)
    ap.add_argument("--subprocess-points", type=int, default=16)
    ap.add_argument("--shipped", action="store_true", help="time the command of every shipped study instead")
    ap.add_argument("--cheap", action="store_true", help="points/s of cheap points and resume seconds instead")
    ap.add_argument("--no-long-resume", action="store_true", help="skip the 10,000-row resume")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfsearch-sweep-bench-"))
    if args.shipped:
        time_shipped_studies(tmp, args.json)
        return
    if args.cheap:
        cheap_points(tmp, not args.no_long_resume, args.json)
        return
    if not args.grid:
        jobs = [int(j) for j in args.jobs_list.split(",")]
        targets(tmp, jobs, args.heavy_points, not args.no_long_resume, not args.no_cold_start, args.json)
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
