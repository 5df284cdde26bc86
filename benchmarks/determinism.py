"""Same spec, same seed, same answer: every example, every DFModel case and the Llama-70B-like
specs run ``--runs`` times in fresh processes on an idle machine and again under ``--hogs``
busy-looping processes; the first idle run starts from an empty Numba cache (it compiles).

Every run's JSON (less the wall-clock ``search.seconds``) must be identical to the first.

Usage: ``python benchmarks/determinism.py [--runs 5] [--hogs 4] [--json PATH] [SPEC ...]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_specs() -> list[Path]:
    return (
        sorted((ROOT / "dfsearch/examples").glob("*.toml"))
        + sorted((ROOT / "tests/data/dfmodel").glob("*/setup*.txt"))
        + sorted((ROOT / "tests/data/specs").glob("*.toml"))
    )


def run_once(spec: Path, out: Path, cache: str | None) -> dict:
    env = None
    if cache is not None:
        import os

        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dfsearch", "run", str(spec), "--quiet", "--json", str(out)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - t
    data = json.loads(out.read_text()) if out.exists() else {}
    data.get("search", {}).pop("seconds", None)
    return {"exit": proc.returncode, "data": data, "wall_s": seconds, "stderr": proc.stderr[-2000:]}


def _hog(stop) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) % 2**31


def measure(spec: Path, runs: int, cold_cache: str | None) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            cache = cold_cache if (cold_cache is not None and i == 0) else None
            out.append(run_once(spec, Path(tmp) / f"r{i}.json", cache))
    return out


def summarise(spec: Path, idle: list[dict], loaded: list[dict]) -> dict:
    ref = idle[0]["data"]
    same_idle = sum(r["data"] == ref for r in idle)
    same_loaded = sum(r["data"] == ref for r in loaded)
    differences = [
        {"run": f"{kind} {i}", "exit": r["exit"], "keys": _differing_keys(ref, r["data"]),
         "stderr": r["stderr"]}
        for kind, runs in (("idle", idle), ("loaded", loaded))
        for i, r in enumerate(runs)
        if r["data"] != ref
    ]  # fmt: skip
    return {
        "spec": str(spec.relative_to(ROOT)) if spec.is_relative_to(ROOT) else str(spec),
        "status": ref.get("status"),
        "final_s": ref.get("final_s"),
        "exit": idle[0]["exit"],
        "identical_idle": f"{same_idle}/{len(idle)}",
        "identical_loaded": f"{same_loaded}/{len(loaded)}",
        "wall_s_idle": [round(r["wall_s"], 2) for r in idle],
        "wall_s_loaded": [round(r["wall_s"], 2) for r in loaded],
        "ok": same_idle == len(idle) and same_loaded == len(loaded),
        "differences": differences,
    }


def _differing_keys(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON objects differ (for the report of a mismatch)."""
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _differing_keys(x, y, f"{prefix}{k}.")
        elif x != y:
            out.append(f"{prefix}{k}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hogs", type=int, default=4)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    specs = args.specs or default_specs()
    rows = []
    with tempfile.TemporaryDirectory() as cold:
        for spec in specs:
            idle = measure(spec, args.runs, cold if not rows else None)
            stop = mp.Event()
            hogs = [mp.Process(target=_hog, args=(stop,)) for _ in range(args.hogs)]
            for h in hogs:
                h.start()
            try:
                loaded = measure(spec, args.runs, None)
            finally:
                stop.set()
                for h in hogs:
                    h.join()
            rows.append(summarise(spec, idle, loaded))
            r = rows[-1]
            print(f"{r['spec']:<70} {r['status']!s:<20} final_s {r['final_s']!s:<22} "
                  f"idle {r['identical_idle']}  {args.hogs} hogs {r['identical_loaded']}", flush=True)  # fmt: skip
            for d in r["differences"]:
                print(f"    differs: {d['run']} exit {d['exit']} keys {d['keys'][:8]} "
                      f"{d['stderr'][-300:]!r}")  # fmt: skip
    ok = all(r["ok"] for r in rows)
    print(f"\n{sum(r['ok'] for r in rows)} of {len(rows)} specs identical in every run "
          f"({args.runs} idle, the first from an empty Numba cache; {args.runs} under "
          f"{args.hogs} CPU hogs): {'PASS' if ok else 'FAIL'}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"runs": args.runs, "hogs": args.hogs, "specs": rows}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
