"""Regression battery, nightly mode (issue 9, item 8).

    python benchmarks/battery.py --mutants 2000 --seed 0 [--jobs 2] [--json out.json]

Mutant i is ``tests/_mutants.py``'s ``mutant_from_seed(sources, seed * 1_000_003 + i)``: a
source (every example, every DFModel input, a converted setup) with 1-3 mutations. Each mutant
runs in subprocesses (``python -m dfsearch``) with a timeout, so hangs are seen:

    run MUTANT --time-limit 20 --json J --mapping-out M    (a run over 60 s is a hang)
    eval MUTANT --mapping M --json J2                     (exit 0 runs: same final_s, rel 1e-12)
    run MUTANT --json J3 in a second process               (exit 0 runs: identical JSON but timings)

and the report counts attempts, exits 0 / 1 / 2, clear errors, tracebacks, hangs, round-trip
mismatches, bound violations and determinism failures, with a few minimal examples (the
mutation and the first lines of the output) for each failure class. Examples are "minimal" in
that the fewest-mutation example of each distinct message is shown first.

``--determinism-every N`` repeats only every N-th exit-0 mutant (default 1 = all);
``--in-process`` runs ``run``/``eval`` through ``typer.testing.CliRunner`` in one process
(much faster, but a hang then stops the battery; determinism still uses subprocesses).
Exit status: 0 when no failure was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import _mutants as M  # noqa: E402 - needs tests/ on sys.path (above)


def one(i: int, seed: int, sources: list[M.Source], root: Path, args: argparse.Namespace) -> dict:
    mseed = seed * 1_000_003 + i
    mutant = M.mutant_from_seed(sources, mseed)
    wd = root / f"m{i:05d}"
    runner = M.run_inprocess if args.in_process else M.run_subprocess
    rep = M.check_mutant(mutant, wd, runner, roundtrip=True, determinism=False, time_limit=args.time_limit)
    det = False
    if rep.code == 0 and not rep.failures and args.determinism_every > 0:
        det = True
    row = {
        "i": i, "mutant_seed": mseed, "source": mutant.source.name, "ops": mutant.ops,
        "exit": rep.code, "seconds": round(rep.seconds, 3),
        "failures": [{"kind": f.kind, "detail": f.detail} for f in rep.failures],
        "output_head": rep.output_head, "determinism_candidate": det,
    }
    if not args.keep:
        _cleanup(wd)
    return row


def determinism(row: dict, sources: list[M.Source], root: Path, args: argparse.Namespace) -> list[dict]:
    mutant = M.mutant_from_seed(sources, row["mutant_seed"])
    wd = root / f"d{row['i']:05d}"
    rep = M.check_mutant(mutant, wd, M.run_inprocess if args.in_process else M.run_subprocess,
                         roundtrip=False, determinism=True, time_limit=args.time_limit)
    if not args.keep:
        _cleanup(wd)
    return [{"kind": f.kind, "detail": f.detail} for f in rep.failures if f.kind in ("nondeterminism", "traceback", "hang", "bad_exit")]


def _cleanup(wd: Path) -> None:
    shutil.rmtree(wd, ignore_errors=True)


def _signature(detail: str) -> str:
    """A failure's message without numbers, paths and values: groups failures by cause."""
    s = re.sub(r"/\S+", "<path>", detail)
    s = re.sub(r"'[^']*'|\"[^\"]*\"", "<v>", s)
    s = re.sub(r"[-+]?\d[\d.e+-]*", "<n>", s)
    return s[:160]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--time-limit", type=float, default=M.TIME_LIMIT_S)
    ap.add_argument("--determinism-every", type=int, default=1, metavar="N")
    ap.add_argument("--examples", type=int, default=3, help="examples shown per failure class")
    ap.add_argument("--in-process", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the mutants' folders")
    args = ap.parse_args(argv)
    if args.in_process:
        args.jobs = 1

    t0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="dfsearch-battery-"))
    sources = M.all_sources(root)
    print(f"battery: {args.mutants} mutants, seed {args.seed}, {args.jobs} jobs, {len(sources)} sources, in {root}",
          flush=True)
    rows: list[dict] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = [ex.submit(one, i, args.seed, sources, root, args) for i in range(args.mutants)]
        for n, fut in enumerate(as_completed(futs), 1):
            rows.append(fut.result())
            if n % 100 == 0 or n == args.mutants:
                print(f"  {n}/{args.mutants} mutants, {time.perf_counter() - t0:.0f} s", flush=True)
        rows.sort(key=lambda r: r["i"])
        cands = [r for r in rows if r["determinism_candidate"]][:: max(1, args.determinism_every)]
        det_futs = {ex.submit(determinism, r, sources, root, args): r for r in cands}
        for fut in as_completed(det_futs):
            r = det_futs[fut]
            r["determinism_checked"] = True
            r["failures"] += fut.result()

    # a hang on a shared machine may be the machine (swapping, a recompiling numba cache):
    # run each hung mutant once more, alone; if it then finishes in time it is reported as
    # "transient_hang" (listed, not counted as a hang)
    for r in rows:
        if any(f["kind"] == "hang" for f in r["failures"]):
            mutant = M.mutant_from_seed(sources, r["mutant_seed"])
            wd = root / f"h{r['i']:05d}"
            again = M.check_mutant(mutant, wd, M.run_subprocess, roundtrip=False, time_limit=args.time_limit)
            if not any(f.kind == "hang" for f in again.failures):
                for f in r["failures"]:
                    if f["kind"] == "hang":
                        f["kind"] = "transient_hang"
                        f["detail"] += f"; alone: exit {again.code} in {again.seconds:.1f} s"
            if not args.keep:
                _cleanup(wd)

    exits = Counter(str(r["exit"]) for r in rows)
    kinds = Counter(f["kind"] for r in rows for f in r["failures"])
    clear = sum(1 for r in rows if r["exit"] == 2 and not any(f["kind"] in ("unclear_error", "traceback") for f in r["failures"]))
    counts = {
        "attempts": len(rows),
        "exit_0": exits.get("0", 0), "exit_1": exits.get("1", 0), "exit_2": exits.get("2", 0),
        "other_exit": sum(v for k, v in exits.items() if k not in ("0", "1", "2")),
        "clear_errors": clear,
        "unclear_errors": kinds.get("unclear_error", 0),
        "tracebacks": sum(1 for r in rows if any(f["kind"] == "traceback" for f in r["failures"])),
        "hangs": kinds.get("hang", 0),
        "transient_hangs": kinds.get("transient_hang", 0),
        "roundtrip_mismatches": kinds.get("roundtrip_mismatch", 0),
        "bound_violations": kinds.get("bound_violation", 0),
        "determinism_checked": sum(1 for r in rows if r.get("determinism_checked")),
        "determinism_failures": kinds.get("nondeterminism", 0),
        "bad_json": kinds.get("bad_json", 0),
        "bad_exit": kinds.get("bad_exit", 0),
    }
    seconds = time.perf_counter() - t0

    # failure classes -> distinct causes -> fewest-mutation examples
    classes: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for f in r["failures"]:
            classes[f["kind"]][_signature(f["detail"])].append({**r, "detail": f["detail"]})

    command = "python benchmarks/battery.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"\ndfsearch battery: {len(rows)} mutants in {seconds:.0f} s ({command})")
    for k, v in counts.items():
        print(f"  {k:<22} {v}")
    summary: dict[str, list[dict]] = {}
    for kind in M.FAILURE_KINDS + ["transient_hang"]:
        if kind not in classes:
            continue
        causes = sorted(classes[kind].items(), key=lambda kv: -len(kv[1]))
        print(f"\n== {kind}: {sum(len(v) for _, v in causes)} in {len(causes)} distinct messages")
        summary[kind] = []
        for sig, ex_rows in causes[: max(args.examples * 3, 10)]:
            ex_rows.sort(key=lambda r: (len(r["ops"]), r["i"]))
            print(f"  -- {len(ex_rows)} x {sig}")
            shown = []
            for r in ex_rows[: args.examples]:
                print(f"     [{r['i']}] {r['source']}: {'; '.join(r['ops'])[:300]}")
                print(f"         exit {r['exit']}: {r['detail'][:300]}")
                for ln in r["output_head"].splitlines()[:3]:
                    print(f"         | {ln[:200]}")
                shown.append({k: r[k] for k in ("i", "mutant_seed", "source", "ops", "exit", "detail", "output_head")})
            summary[kind].append({"count": len(ex_rows), "signature": sig, "examples": shown})
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": command,
            "counts": counts, "seconds": round(seconds, 1), "failures": summary,
            "sources": [s.name for s in sources],
            "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "python": platform.python_version()},
            "rows": rows,
        }, indent=1) + "\n")
    if not args.keep:
        _cleanup(root)
    failed = sum(counts[k] for k in ("other_exit", "unclear_errors", "tracebacks", "hangs", "roundtrip_mismatches",
                                      "bound_violations", "determinism_failures", "bad_json"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
