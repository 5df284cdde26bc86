"""CPU seconds of the first run after an install against a warm run, with and without the
compiled code that dfsearch ships.

Runs ``dfsearch run --quiet [SPEC]`` (default: the built-in example, the README case) in a
fresh process with an empty ``NUMBA_CACHE_DIR`` (a temporary folder): the first run after an
install, which takes the jitted functions from the shipped archive (``cost/prebuilt.py``)
and makes their machine code; then ``--warm`` times more with the same, now filled, cache
folder; then once more cold with the archive turned off (``DFSEARCH_PREBUILT=off``), so that
every jitted function is compiled: what a first run costs where no archive fits (another
platform, Numba version or source). It reports CPU seconds (user + system of the child
process, from ``os.wait4``), not wall time: the development machine is shared and CPU time
is what compilation costs. The target (first run - warm <= 10 s) is on the first figure.

``--by-function`` runs a cold process once more, archive off, with a listener on Numba's
``numba:compile`` events and prints the compiled functions with their CPU seconds: ``self``
excludes the callees compiled while the function was being compiled (typing a call compiles
the callee first), ``total`` includes them.

Usage: ``python benchmarks/cold_start.py [--spec PATH] [--warm N] [--by-function] [--top N]
[--json PATH]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 10.0  #: issue 25: cold - warm <= 10 s CPU on a 2-core machine


def child_cpu_s(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """CPU seconds (user + system) of one child process running ``argv``, and its exit code."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode not in (0, 1):  # 1: no feasible mapping is still a full run
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{err}")
    return usage.ru_utime + usage.ru_stime, proc.returncode


def run_argv(spec: str | None) -> list[str]:
    """The command line of the measured run."""
    return [sys.executable, "-m", "dfsearch", "run", "--quiet", *([spec] if spec else [])]


def profile_child(out: str, cli_args: list[str]) -> None:
    """In this (child) process: run the CLI with a listener on Numba's compile events and
    write one record per compilation (function, signature, CPU seconds self and total)."""
    from numba.core import event

    records: list[dict] = []
    stack: list[list[float]] = []  # per open compilation: [start, seconds of nested ones]

    class Recorder(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            stack.append([time.process_time(), 0.0])

        def on_end(self, ev: event.Event) -> None:
            start, nested = stack.pop()
            total = time.process_time() - start
            if stack:
                stack[-1][1] += total
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
            records.append({"function": name, "args": str(ev.data.get("args")),
                            "self_s": total - nested, "total_s": total})  # fmt: skip

    from dfsearch.cli import main

    sys.argv = ["dfsearch", *cli_args]
    listen = event.install_listener("numba:compile", Recorder())
    with listen, contextlib.suppress(SystemExit):  # the CLI exits with its status
        main()
    Path(out).write_text(json.dumps(records))


def by_function(spec: str | None, env: dict[str, str]) -> list[dict]:
    """Compile records of one cold run (in a child process with an empty cache folder)."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "records.json")
        argv = [sys.executable, __file__, "--profile-child", out, "--",
                *run_argv(spec)[3:]]  # fmt: skip
        child_cpu_s(argv, {**env, "NUMBA_CACHE_DIR": cache})
        return json.loads(Path(out).read_text())


def print_table(records: list[dict], top: int) -> None:
    """The functions with the largest self compile time, summed over their signatures."""
    merged: dict[str, list[float]] = {}
    for r in records:
        m = merged.setdefault(r["function"], [0.0, 0.0, 0])
        m[0] += r["self_s"]
        m[1] += r["total_s"]
        m[2] += 1
    rows = sorted(merged.items(), key=lambda kv: -kv[1][0])
    print(f"\ncompiled functions: {len(records)} compilations of {len(merged)} functions, "
          f"{sum(r['self_s'] for r in records):.1f} s CPU in all")  # fmt: skip
    print(f"{'self s':>7} {'total s':>8} {'sigs':>4}  function")
    for name, (self_s, total_s, n) in rows[:top]:
        print(f"{self_s:7.2f} {total_s:8.2f} {n:4d}  {name.removeprefix('dfsearch.')}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--profile-child":
        profile_child(sys.argv[2], sys.argv[4:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", help="spec file (default: the built-in example)")
    ap.add_argument("--warm", type=int, default=3, help="warm runs, median reported")
    ap.add_argument("--by-function", action="store_true", help="compile time per function")
    ap.add_argument("--top", type=int, default=25, help="rows of the --by-function table")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    argv = run_argv(args.spec)
    off = {**env, "DFSEARCH_PREBUILT": "off"}
    with tempfile.TemporaryDirectory() as cache:
        env_cache = {**env, "NUMBA_CACHE_DIR": cache}
        cold, _ = child_cpu_s(argv, env_cache)
        warm_runs = [child_cpu_s(argv, env_cache)[0] for _ in range(max(1, args.warm))]
    with tempfile.TemporaryDirectory() as cache:
        compiled, _ = child_cpu_s(argv, {**off, "NUMBA_CACHE_DIR": cache})
    warm = statistics.median(warm_runs)
    extra = cold - warm
    print(f"command: {' '.join(argv[2:])}")
    print(f"first run after install (empty Numba cache):   {cold:6.1f} s CPU")
    print(f"warm (median of {len(warm_runs)}):                          {warm:6.1f} s CPU  "
          f"({', '.join(f'{w:.1f}' for w in warm_runs)})")  # fmt: skip
    print(f"first run - warm:                              {extra:6.1f} s CPU  "
          f"(target <= {TARGET_S:g} s: {'PASS' if extra <= TARGET_S else 'FAIL'})")  # fmt: skip
    print(f"first run, shipped code off (all compiled):    {compiled:6.1f} s CPU  "
          f"(- warm: {compiled - warm:.1f} s)")  # fmt: skip
    figures = {"command": argv[2:], "cold_cpu_s": cold, "warm_cpu_s": warm,
               "warm_runs_cpu_s": warm_runs, "compile_cpu_s": extra,
               "compiled_cold_cpu_s": compiled, "compiled_compile_cpu_s": compiled - warm,
               "target_s": TARGET_S, "target_met": extra <= TARGET_S,
               "cpu_count": os.cpu_count(), "load_average": os.getloadavg()}  # fmt: skip
    if args.by_function:
        records = by_function(args.spec, off)
        print_table(records, args.top)
        figures["compilations"] = records
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
