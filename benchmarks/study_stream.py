"""A sweep of a very large study starts at once, in bounded memory, and resumes without
rebuilding what is done.

Builds a study of ``--points`` points (default 1,000,000: three field-path axes of 100
values each on the shipped GPT-3 1.5B example, every point a cheap search), then:

1. ``dfsearch sweep STUDY -o DIR -q`` as a subprocess: the seconds from its start to the
   first row in ``DIR/results.csv``; it is stopped with SIGINT after ``--rows`` rows and its
   peak resident memory read (``os.wait4``: the sweep process alone);
2. the same command again (a resume): the seconds to its first new row, its peak memory;
   with ``--prefill N`` the table is first completed to N rows (copies of the last row with
   the next points' axis values), so the resume reads a long table.

The compiled evaluator is loaded from Numba's cache: run any ``dfsearch`` command once
first (the script does, with ``dfsearch check``), or the first figure includes the ~40 s
compilation. The subprocesses run from a temporary folder, so ``PYTHONPATH=/other/checkout``
measures another version. Usage::

    python benchmarks/study_stream.py [--points N] [--rows R] [--prefill N] [--timeout S] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "dfsearch/examples/gpt3_1.5B_a100x4.toml"


def make_study(folder: Path, points: int) -> Path:
    """Three axes whose product is ``points`` (rounded to a cube)."""
    n = max(1, round(points ** (1 / 3)))
    shutil.copy(BASE, folder / "base.toml")
    bw = ", ".join(str(400 + 10 * i) for i in range(n))
    util = ", ".join(f"{0.3 + 0.6 * i / n:.6f}" for i in range(n))
    price = ", ".join(str(1000 + i) for i in range(n))
    text = (f'[study]\nbase = "base.toml"\n[axes]\n"system.memory.dram_bw_GBps" = [{bw}]\n'
            f'"execution.compute_util" = [{util}]\n"cost.chip_price" = [{price}]\n')  # fmt: skip
    path = folder / "study.toml"
    path.write_text(text)
    return path


def sigint_default() -> None:
    """In the child: SIGINT handled as usual even when this script runs in the background
    (a shell starts background jobs with SIGINT ignored, which Python then keeps)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def rows_in(table: Path) -> int:
    try:
        return max(0, table.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def run_until(study: Path, out: Path, rows: int, timeout: float = 300.0) -> dict[str, float]:
    """Start a sweep, time its first new row, stop it with SIGINT after ``rows`` new rows;
    its own peak resident memory from ``os.wait4``."""
    table = out / "results.csv"
    before = rows_in(table)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "dfsearch", "sweep", str(study), "-o", str(out), "-q"],
                                stdout=subprocess.DEVNULL, stderr=err, cwd=study.parent,
                                preexec_fn=sigint_default)  # fmt: skip
        first, usage, status = None, None, 0
        while time.perf_counter() - t0 < timeout:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:  # it ended by itself (the study is done, or an error)
                break
            usage = None
            n = rows_in(table) - before
            if first is None and n >= 1:
                first = time.perf_counter() - t0
            if n >= rows:
                break
            time.sleep(0.01)
        t_int = time.perf_counter()
        if usage is None:
            proc.send_signal(signal.SIGINT)
            _, status, usage = os.wait4(proc.pid, 0)
        stop_s = time.perf_counter() - t_int
        wall_s = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")[-300:]
    return {"first_row_s": first if first is not None else float("nan"), "rows": rows_in(table) - before,
            "exit_code": proc.returncode, "stop_s": stop_s, "wall_s": wall_s, "max_rss_MB": usage.ru_maxrss / 1024.0,
            "stderr": text}  # fmt: skip


def prefill(study_path: Path, out: Path, n: int) -> int:
    """Append rows for the next points up to ``n`` rows in all, copying the metrics and digest
    of the last real row (a resume checks every row's axis values but rebuilds only the first
    row's point, so this stands for a long sweep already done). Returns the rows added."""
    import csv

    from dfsearch.study.study import load_study
    from dfsearch.study.table import cell_text, read_table

    study = load_study(study_path)
    table = out / "results.csv"
    header, rows = read_table(table)
    last = rows[-1]
    with table.open("a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        added = 0
        for i in range(last["point"] + 1, n):
            point = study.point_at(i)
            row = dict(last, point=i, **{a.name: v for a, v in zip(study.axes, point.values)})
            w.writerow([cell_text(row[c]) for c in header])
            added += 1
    return added


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--rows", type=int, default=20, help="rows to write before SIGINT")
    ap.add_argument("--prefill", type=int, default=0, metavar="N",
                    help="before the resume, complete the table to N rows (synthetic copies)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the rows")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "dfsearch", "check", str(BASE)], capture_output=True, check=False,
                   cwd=tempfile.gettempdir())  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        study = make_study(folder, args.points)
        out = folder / "out"
        first = run_until(study, out, args.rows, args.timeout)
        added = prefill(study, out, args.prefill) if args.prefill else 0
        resumed = run_until(study, out, args.rows, args.timeout)
    report = {"points": round(args.points ** (1 / 3)) ** 3, "first_run": first, "prefilled_rows": added, "resume": resumed}
    if added:
        print(f"  {added:,} rows added before the resume")
    print(f"study of {report['points']:,} points")
    for name, r in (("first run", first), ("resume", resumed)):
        print(f"  {name}: first row after {r['first_row_s']:.2f} s, {r['rows']} rows, peak resident memory "
              f"{r['max_rss_MB']:.0f} MB; exit {r['exit_code']} {r['stop_s']:.2f} s after SIGINT "
              f"({r['wall_s']:.2f} s in all)")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
