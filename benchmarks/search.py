"""Wall time and quality of ``dfsearch.plan.run`` on the DFModel cases and examples.

Every DFModel case (``tests/data/dfmodel/*/setup*.txt``) and every example spec
(``dfsearch/examples/*.toml``) is searched once to warm up (JIT compile or cache load), then
``--repeat`` times; the median wall time is reported with the result. The README case is
compared with DFModel's published run, the DLRM A case with DFModel's logged (solver-limited)
final time.

Usage: ``python benchmarks/search.py [--repeat N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests/data/dfmodel"
EXAMPLES = ROOT / "dfsearch/examples"

# DFModel's figures (tests/data/dfmodel/*/log.txt and DFModel's README)
README_CASE = "readme_gpt3_1T_sn30_1024chips_r_r_8x128/setup.txt"
README_UTILIZATION = 0.7748055154407518
README_FINAL_S = 78.99477102558197
README_OPTIMIZER_S = 262.7  #: DFModel + Gurobi on 144 threads
DLRM_CASE = "dlrm_A_128gpu_r_fc_8x16/setup.txt"
DLRM_LOGGED_FINAL_S = 50646.17236575397  #: solver-limited (3.75 % gap)

# targets
README_REL_TOL = 1e-6
README_MAX_S = 2.0
EXAMPLE_MAX_S = 5.0


def spec_files() -> tuple[list[Path], list[str]]:
    """Inputs to benchmark, and notes about inputs that cannot be loaded here."""
    files = sorted(CASES.glob("*/setup*.txt"))
    notes = []
    try:
        import dfsearch.loader  # noqa: F401
    except ImportError:
        notes.append("dfsearch.loader is missing: example TOML specs skipped")
    else:
        files += sorted(EXAMPLES.glob("*.toml"))
    return files, notes


def load(path: Path):
    try:
        from dfsearch.loader import load_spec
    except ImportError:
        from dfsearch.io.dfmodel import load_dfmodel_file as load_spec
    return load_spec(path)


def run_case(path: Path, repeat: int) -> dict:
    """Warm-up search, then ``repeat`` timed searches of one spec."""
    from dfsearch.plan import run as search

    name = str(path.relative_to(CASES if path.is_relative_to(CASES) else ROOT))
    spec = load(path)
    t = time.perf_counter()
    search(spec)
    first = time.perf_counter() - t
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = search(spec)
        times.append(time.perf_counter() - t)
    ev, st = result.evaluation, result.search
    lb = st.lower_bound_s
    return {
        "name": name,
        "kind": "example" if path.suffix == ".toml" else "dfmodel",
        "kernels": len(spec.graph.kernels),
        "first_s": first,
        "median_s": statistics.median(times),
        "times_s": times,
        "evaluations": st.evaluations,
        "final_s": ev.final_s,
        "utilization": ev.utilization,
        "lower_bound_s": lb,
        "gap": (ev.final_s / lb - 1.0) if lb else None,
        "optimal": st.optimal,
        "status": st.status.label,
        "method": st.method,
        "candidates": st.candidates,
        "solved": st.solved,
        "pruned": st.pruned,
        "stopped_by": st.stopped_by,
    }


def readme_comparison(case: dict) -> dict:
    rel = abs(case["utilization"] - README_UTILIZATION) / README_UTILIZATION
    return {
        "utilization": case["utilization"],
        "dfmodel_utilization": README_UTILIZATION,
        "utilization_rel_diff": rel,
        "final_s": case["final_s"],
        "dfmodel_final_s": README_FINAL_S,
        "median_s": case["median_s"],
        "dfmodel_optimizer_s": README_OPTIMIZER_S,
        "speedup": README_OPTIMIZER_S / case["median_s"],
        "note": f"ours: 1 process on this {os.cpu_count()}-CPU machine; DFModel: 144 threads",
    }


def targets(cases: list[dict], readme: dict | None) -> dict:
    out: dict[str, dict] = {}
    if readme is not None:
        close = readme["utilization_rel_diff"] <= README_REL_TOL
        ok = close and readme["median_s"] <= README_MAX_S
        out["readme"] = {
            "pass": ok,
            "rule": f"utilization within {README_REL_TOL:g} relative, median <= {README_MAX_S} s",
        }
    examples = [c for c in cases if c["kind"] == "example" and "error" not in c]
    if examples:
        slow = [c["name"] for c in examples if c["median_s"] > EXAMPLE_MAX_S]
        out["examples"] = {"pass": not slow, "rule": f"median <= {EXAMPLE_MAX_S} s", "slow": slow}
    dlrm = next((c for c in cases if c["name"] == DLRM_CASE and "error" not in c), None)
    if dlrm is not None:
        out["dlrm_a"] = {
            "pass": dlrm["final_s"] <= DLRM_LOGGED_FINAL_S,
            "rule": "final_s <= DFModel's logged final_s",
            "final_s": dlrm["final_s"],
            "dfmodel_final_s": DLRM_LOGGED_FINAL_S,
            "improvement": 1.0 - dlrm["final_s"] / DLRM_LOGGED_FINAL_S,
        }
    return out


def print_table(cases: list[dict]) -> None:
    head = (f"{'case':58} {'n':>3} {'first s':>8} {'median s':>9} {'evals':>7} "
            f"{'final_s':>14} {'util':>8} {'gap':>8} {'opt':>5}  method")
    print(head)
    for c in cases:
        if "error" in c:
            print(f"{c['name']:58} ERROR {c['error']}")
            continue
        gap = "-" if c["gap"] is None else f"{c['gap']:.1e}"
        print(f"{c['name']:58} {c['kernels']:3d} {c['first_s']:8.2f} {c['median_s']:9.3f} "
              f"{c['evaluations']:7d} {c['final_s']:14.8g} {c['utilization']:8.5f} "
              f"{gap:>8} {c['optimal']!s:>5}  {c['method']}")


def print_summary(readme: dict | None, tg: dict) -> None:
    if readme is not None:
        print(f"\nREADME GPT-3 1T case vs DFModel: utilization {readme['utilization']!r} vs "
              f"{readme['dfmodel_utilization']!r} "
              f"(rel. diff {readme['utilization_rel_diff']:.2e}); "
              f"final_s {readme['final_s']!r} vs {readme['dfmodel_final_s']!r}")
        print(f"  wall time {readme['median_s']:.3f} s vs DFModel's optimizer "
              f"{readme['dfmodel_optimizer_s']} s -> {readme['speedup']:,.0f}x ({readme['note']})")
    if "dlrm_a" in tg:
        d = tg["dlrm_a"]
        print(f"DLRM A: final_s {d['final_s']!r} vs DFModel's logged {d['dfmodel_final_s']!r} "
              f"({100 * d['improvement']:.3f} % lower)")
    print()
    for key, t in tg.items():
        print(f"target {key:9} {'PASS' if t['pass'] else 'FAIL'}  ({t['rule']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed searches per case (default 3)")
    ap.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")

    files, notes = spec_files()
    cases = []
    for path in files:
        try:
            cases.append(run_case(path, args.repeat))
        except Exception as exc:  # report and go on: one broken input must not hide the rest
            cases.append({"name": path.name, "kind": "?", "error": f"{type(exc).__name__}: {exc}"})
    for note in notes:
        print(f"note: {note}")
    print_table(cases)
    ok_readme = next((c for c in cases if c["name"] == README_CASE and "error" not in c), None)
    readme = readme_comparison(ok_readme) if ok_readme else None
    tg = targets(cases, readme)
    print_summary(readme, tg)
    if args.json:
        import numba

        out = {
            "cases": cases,
            "readme": readme,
            "targets": tg,
            "notes": notes,
            "repeat": args.repeat,
            "machine": {
                "cpu_count": os.cpu_count(),
                "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                "python": platform.python_version(),
                "numba": numba.__version__,
            },
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
