"""The four hard search targets of issue 26 (benchmarks/data/hard/README.md).

Runs each spec of ``benchmarks/data/hard/`` with its default settings (no time limit, the
spec's work budget) after compiling every jitted function (``search/warmup.py``), one spec
at a time, and prints the status, the final time per batch, the lower bound the result
states, the gap (final - bound) / final and the CPU seconds of the search (process time, so
that other jobs on a shared machine do not count).

Usage: ``python benchmarks/hard.py [NAME ...] [--json PATH]`` (NAME: a file stem, e.g.
``dlrm_900``; default all four).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

HARD = Path(__file__).resolve().parent / "data" / "hard"


def measure(path: Path) -> dict[str, object]:
    """Search one spec: kernels, status, final, bound, gap, CPU and wall seconds."""
    from dfsearch import api
    from dfsearch.errors import InfeasibleError

    spec = api.load(path)
    c0, t0 = time.process_time(), time.perf_counter()
    try:
        result = api.run(spec)
    except InfeasibleError as e:
        result = e.result
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    ev, bound = result.evaluation, result.search.lower_bound_s
    final = ev.final_s if ev is not None else math.inf
    gap = (final - bound) / final if bound and ev is not None else math.nan
    return {"name": path.stem, "kernels": len(spec.graph.kernels), "status": result.status.label,
            "final_s": final, "bound_s": bound, "gap": gap, "cpu_s": cpu, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="spec stems (default: all)")
    ap.add_argument("--json", default="", help="also write the rows as JSON to this path")
    args = ap.parse_args()
    paths = sorted(HARD.glob("*.toml"))
    if args.names:
        paths = [HARD / f"{n}.toml" for n in args.names]
    from dfsearch.search.warmup import warm_up

    warm_up()
    print(f"{'spec':<14} {'kernels':>7} {'status':>20} {'final s':>13} {'bound s':>13} "
          f"{'gap':>8} {'CPU s':>8} {'wall s':>8}")
    rows = []
    for p in paths:
        r = measure(p)
        rows.append(r)
        print(f"{r['name']:<14} {r['kernels']:>7} {r['status']:>20} {r['final_s']:>13.7g} "
              f"{r['bound_s'] or 0:>13.7g} {r['gap']:>8.3%} {r['cpu_s']:>8.1f} {r['wall_s']:>8.1f}",
              flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
