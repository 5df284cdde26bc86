"""Several cores on one point (issue 26, item 2): ``search.jobs`` = 1 against 2 (or more).

Runs each spec with every ``--jobs`` value given (default 1 and 2), one after the other in
this process after compiling every jitted function (``search/warmup.py``), and prints the
status, final time per batch, outer choices solved, the CPU seconds of the search (this
process plus its worker processes, which are joined before the search returns) and the wall
seconds, then the wall-time speed-up of each value over the first and whether the JSON
results (less ``seconds``) are identical, which they must be. The wall time depends on what
else runs on the machine: the 1-, 5- and 15-minute load averages are printed with each row.

Specs: the four hard targets of ``benchmarks/data/hard/`` (``hard.py`` is their one-core
runner) and examples with several outer choices. Usage:
``python benchmarks/one_point_jobs.py [NAME ...] [--jobs 1 2] [--json PATH]`` (NAME: a hard
target's stem, ``dlrm_900``, or an example's stem, ``moe_layer``; default all below).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARD = ROOT / "benchmarks" / "data" / "hard"
EXAMPLES = ROOT / "dfsearch" / "examples"
#: the default specs: every hard target, then examples that solve several outer choices
DEFAULT = ("gpt_ddr_24", "gpt_cycle_48", "llama405_126", "dlrm_900", "gpt3_1T_sn30", "moe_layer")


def _path(name: str) -> Path:
    hard = HARD / f"{name}.toml"
    return hard if hard.exists() else EXAMPLES / f"{name}.toml"


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(path: Path, jobs: int) -> dict[str, object]:
    """One search of ``path`` with ``search.jobs = jobs``: the row and its JSON result."""
    from dfsearch import api
    from dfsearch.errors import InfeasibleError

    spec = api.load(path)
    spec = replace(spec, search=replace(spec.search, jobs=jobs))
    c0, t0 = _cpu_s(), time.perf_counter()
    try:
        result = api.run(spec)
    except InfeasibleError as e:
        result = e.result
    cpu, wall = _cpu_s() - c0, time.perf_counter() - t0
    data = result.to_json()
    data["search"].pop("seconds")
    ev = result.evaluation
    return {"name": path.stem, "jobs": jobs, "status": result.status.label,
            "final_s": ev.final_s if ev is not None else None, "solved": result.search.solved,
            "candidates": result.search.candidates, "cpu_s": cpu, "wall_s": wall,
            "load": os.getloadavg(), "json": json.dumps(data, sort_keys=True, default=str)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"spec stems (default: {' '.join(DEFAULT)})")
    ap.add_argument("--jobs", nargs="+", type=int, default=[1, 2], help="values of search.jobs")
    ap.add_argument("--json", default="", help="also write the rows as JSON to this path")
    args = ap.parse_args()
    from dfsearch.search.warmup import warm_up

    warm_up()
    print(f"{'spec':<14} {'jobs':>4} {'status':>20} {'final s':>13} {'solved':>9} {'CPU s':>8} "
          f"{'wall s':>8} {'speed-up':>8} {'same':>5}  load 1/5/15 min")  # fmt: skip
    rows = []
    for name in args.names or DEFAULT:
        first = None
        for jobs in args.jobs:
            r = measure(_path(name), jobs)
            first = first or r
            r["speedup"] = first["wall_s"] / r["wall_s"]
            r["same"] = r["json"] == first["json"]
            rows.append(r)
            load = "/".join(f"{x:.1f}" for x in r["load"])
            print(f"{name:<14} {jobs:>4} {r['status']:>20} {r['final_s'] or 0:>13.7g} "
                  f"{r['solved']:>4}/{r['candidates']:<4} {r['cpu_s']:>8.1f} {r['wall_s']:>8.1f} "
                  f"{r['speedup']:>8.2f} {'yes' if r['same'] else 'NO':>5}  {load}", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps([{k: v for k, v in r.items() if k != "json"}
                                               for r in rows], indent=2) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
