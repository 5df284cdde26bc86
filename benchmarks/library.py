"""The benchmark library: configuration-assignment instances with known optima or bounds.

``benchmarks/library/manifest.json`` lists the instances (``benchmarks/library/families.py``
generates them deterministically from six parametrised families) with their recorded best
known value, best bound and how each was obtained. This script

* runs the default strategy, order-dp, anneal and CP-SAT on every instance under a work
  budget (``--budget`` evaluations; CP-SAT gets the same budget as deterministic time, one
  deterministic second per 1,000,000 evaluations: nothing depends on the clock), prints per
  instance the time to proof and the gap to the best known value, and a performance profile
  (share of instances solved within 0.5 % of the best known value vs seconds) per strategy,
  saved as ``benchmarks/library_profile.png`` when matplotlib is installed;
* with ``--record``, re-makes the records (the only way they are written; never edit them by
  hand): every strategy with a larger budget, plus the exact solver ``solve_exact`` on the
  instances within its size limits, hinted with the order DP's assignment (not with the
  default strategy's answer). The best value and the best bound over those runs are stored;
  an instance is ``proven`` when the bound meets the value (relative 1e-6).

Usage::

    python benchmarks/library.py [--small] [--only SUBSTRING] [--budget N] [--json PATH]
                                 [--no-plot]
    python benchmarks/library.py --record [--only SUBSTRING] [--missing] [--min-kernels N]
                                 [--max-kernels N] [--record-budget N]

``--small``: the CI-size subset (the instances marked ``small`` in the manifest). Exit code 1
when a run contradicts a record (a value below the recorded bound, a bound above the best
known value, a proof of a worse value); records flagged stale are not checked.
docs/exact.md, "Benchmark library", describes the families and the records.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

MANIFEST = HERE / "library" / "manifest.json"
PROFILE_PNG = HERE / "library_profile.png"
#: (label, registered assignment strategy)
STRATEGIES = (("default", "auto"), ("order-dp", "order-dp"), ("anneal", "anneal"),
              ("cp-sat", "cp-sat"))  # fmt: skip
#: evaluations one strategy may spend on one instance (the benchmark's work budget)
BUDGET = 100_000
#: solved = within this of the best known value (relative)
SOLVED_GAP = 5e-3
#: proven = the best bound within this of the best known value (relative)
PROOF_REL = 1e-6
#: --record: the work budget of each strategy, CP-SAT's deterministic seconds and kernel limit
RECORD_BUDGET = 1_000_000
RECORD_DET_S = 5.0
RECORD_CP_KERNELS = 64
#: CI subset: instances up to this many kernels, proven by CP-SAT, at most this many a family
SMALL_KERNELS = 41
SMALL_PER_FAMILY = 5


def families():
    """``benchmarks/library/families.py`` as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("library_families", HERE / "library" / "families.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("library_families", mod)
    spec.loader.exec_module(mod)
    return mod


@dataclass(frozen=True)
class Run:
    """One strategy on one instance."""

    value_ns: float | None  #: None: no mapping found
    bound_ns: float
    proven: bool
    stopped: bool
    evaluations: int
    seconds: float


def run_strategy(problem, name: str, budget: float, *, seed: int = 0) -> Run:
    """``name`` (a registered assignment strategy) on ``problem`` with ``budget`` evaluations."""
    from dfsearch.search.strategies import assignment_strategy
    from dfsearch.search.strategies.base import control_array

    strategy = assignment_strategy(name)
    t0 = time.perf_counter()
    a = strategy.assign(problem, seed=seed, control=control_array(max_evaluations=budget))
    dt = time.perf_counter() - t0
    value = a.value_ns if a.config is not None else None
    return Run(value, float(a.bound_ns), bool(a.exhaustive), bool(a.stopped), int(a.evaluations), dt)


# --------------------------------------------------------------------------- manifest
def load_manifest(path: Path = MANIFEST) -> dict:
    return json.loads(path.read_text())


def save_manifest(data: dict, path: Path = MANIFEST) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def fresh_manifest(fam) -> dict:
    """The manifest of today's grid, with no records."""
    return {
        "about": "benchmark library (docs/exact.md); records made by "
                 "`python benchmarks/library.py --record`, never by hand",
        "record_settings": {"budget_evaluations": RECORD_BUDGET, "cp_sat_deterministic_s": RECORD_DET_S,
                            "cp_sat_max_kernels": RECORD_CP_KERNELS, "proof_rel": PROOF_REL},
        "instances": [dict(name=e.name, **e.to_json(), record=None) for e in fam.entries()],
    }  # fmt: skip


def merged_manifest(fam, path: Path = MANIFEST) -> dict:
    """Today's grid with the records of ``path`` kept for the instances it still has."""
    data = fresh_manifest(fam)
    if path.exists():
        old = {d["name"]: d for d in load_manifest(path)["instances"]}
        for d in data["instances"]:
            if d["name"] in old:
                d.update({k: v for k, v in old[d["name"]].items() if k not in d or k == "record"})
    return data


# --------------------------------------------------------------------------- recording
def _exact_run(problem, hint) -> dict:
    from dfsearch.search.exact import solve_exact

    t0 = time.perf_counter()
    r = solve_exact(problem, time_limit_s=3600.0, hint=hint, max_kernels=RECORD_CP_KERNELS,
                    max_deterministic_time=RECORD_DET_S)  # fmt: skip
    return {"status": r.status, "value_ns": r.value_ns, "bound_ns": r.bound_ns,
            "seconds": round(time.perf_counter() - t0, 3)}  # fmt: skip


def record_instance(problem, budget: float = RECORD_BUDGET) -> dict:
    """Best value and bound over every strategy (record budget) and the exact solver."""
    from dfsearch.search.assign import assign_configs
    from dfsearch.search.strategies.base import control_array

    runs: dict[str, dict] = {}
    for label, name in STRATEGIES:
        if name != "cp-sat":
            runs[label] = asdict(run_strategy(problem, name, budget))
    hint = assign_configs(problem, method="order-dp", control=control_array(
        max_evaluations=budget)).config  # fmt: skip
    if problem.num_kernels <= RECORD_CP_KERNELS:
        runs["exact"] = _exact_run(problem, hint)
    values = {k: r["value_ns"] for k, r in runs.items() if r.get("value_ns") is not None}
    bounds = {k: r["bound_ns"] for k, r in runs.items() if r.get("bound_ns") is not None}
    best = min(values.values(), default=None)
    bound = max(bounds.values(), default=0.0)
    by = _first_to_reach(values, best)
    bound_by = _first_to_reach(bounds, bound)
    if best is not None:
        bound = min(bound, best)
    infeasible = runs.get("exact", {}).get("status") == "infeasible"
    proven = infeasible or (best is not None and bound >= best * (1 - PROOF_REL))
    return {"best_value_ns": best, "value_by": by, "best_bound_ns": bound, "bound_by": bound_by,
            "proven": proven, "budget_evaluations": budget, "exact_status": runs.get("exact", {}).get("status", "not run"),
            "runs": runs}  # fmt: skip


def _first_to_reach(found: dict[str, float], target: float | None) -> str | None:
    """The first run, exact solver first, whose number equals ``target``."""
    for k in ("exact", *(label for label, _ in STRATEGIES)):
        if k in found and found[k] == target:
            return k
    return None


def record(fam, only: str | None, kernels: tuple[int, int], budget: float, missing: bool) -> int:
    """Re-make the records of the selected instances (``missing``: only those without one)."""
    done: dict[str, dict] = {}  #: name -> the fields this run wrote
    for d in merged_manifest(fam)["instances"]:
        if (only and only not in d["name"]) or (missing and d.get("record")):
            continue
        e = fam.Entry.from_json(d)
        p = fam.build_unconstrained(e)
        new = done.setdefault(d["name"], {"kernels": p.num_kernels, "edges": len(p.edges.src)})
        if not kernels[0] <= p.num_kernels <= kernels[1]:
            continue
        p = fam.build(e)
        t0 = time.perf_counter()
        new.update(fingerprint=fam.fingerprint(p), record=record_instance(p, budget))
        rec = new["record"]
        print(f"{d['name']:52s} n={p.num_kernels:5d} best {_fmt(rec['best_value_ns'])} "
              f"({rec['value_by']}) bound {_fmt(rec['best_bound_ns'])} ({rec['bound_by']}) "
              f"{'PROVEN' if rec['proven'] else 'open'} exact {rec['exact_status']} "
              f"{time.perf_counter() - t0:.1f}s", flush=True)  # fmt: skip
        _save_records(fam, done)  # after every instance: an interrupted recording keeps its work
    _save_records(fam, done)
    return 0


def _save_records(fam, done: dict[str, dict]) -> None:
    """Merge this run's fields into the manifest as it is on disk now (so that recordings
    of disjoint selections can run side by side), re-mark the CI subset, write atomically."""
    data = merged_manifest(fam)
    for d in data["instances"]:
        d.update(done.get(d["name"], {}))
    mark_small(data)
    tmp = MANIFEST.with_suffix(f".{os.getpid()}.tmp")
    save_manifest(data, tmp)
    os.replace(tmp, MANIFEST)


def mark_small(data: dict) -> None:
    """The CI subset: per family, ``SMALL_PER_FAMILY`` instances evenly spaced in manifest
    order among those up to ``SMALL_KERNELS`` kernels whose optimum the exact solver proved."""
    eligible: dict[str, list[dict]] = {}
    for d in data["instances"]:
        rec = d.get("record") or {}
        d["small"] = False
        if d.get("kernels", math.inf) <= SMALL_KERNELS and rec.get("exact_status") == "optimal":
            eligible.setdefault(d["family"], []).append(d)
    for ds in eligible.values():
        k = min(SMALL_PER_FAMILY, len(ds))
        for i in range(k):
            ds[i * len(ds) // k]["small"] = True


# --------------------------------------------------------------------------- benchmark
def _fmt(v, spec=".6g") -> str:
    return "-" if v is None else format(v, spec)


def gap_to(value: float | None, best: float | None) -> float:
    """Relative gap of ``value`` to the best known value (inf: no mapping, or none known)."""
    if value is None or best is None or best <= 0:
        return 0.0 if value is not None and best is not None and value <= best else math.inf
    return max(0.0, (value - best) / best)


def bench(fam, data: dict, *, small: bool, only: str | None, budget: float) -> list[dict]:
    rows = []
    for d in data["instances"]:
        if (small and not d.get("small")) or (only and only not in d["name"]):
            continue
        if d.get("record") is None:  # a recording may run alongside
            d = _entry_on_disk(d)
        rec = d.get("record")
        if rec is None:
            print(f"{d['name']:52s} (not recorded: skipped)")
            continue
        p = fam.build(fam.Entry.from_json(d))
        best = rec["best_value_ns"]
        row = {"name": d["name"], "kernels": p.num_kernels, "best_ns": best,
               "bound_ns": rec["best_bound_ns"], "proven": rec["proven"],
               "stale": d.get("fingerprint") != fam.fingerprint(p), "runs": {}}  # fmt: skip
        cells = []
        for label, name in STRATEGIES:
            r = run_strategy(p, name, budget)
            g = gap_to(r.value_ns, best)
            row["runs"][label] = dict(asdict(r), gap=g)
            proof = f"{r.seconds:.2f}s" if r.proven else "-"
            cells.append(f"{label} {_pct(g):>8s} {proof:>7s}")
        print(f"{d['name'][:52]:52s} {p.num_kernels:5d} {'P' if rec['proven'] else ' '}"
              f"{' STALE' if row['stale'] else ''} | " + " | ".join(cells), flush=True)
        rows.append(row)
    return rows


def _entry_on_disk(d: dict) -> dict:
    """The manifest entry of ``d`` as it is on disk now."""
    if not MANIFEST.exists():
        return d
    return next((x for x in load_manifest()["instances"] if x["name"] == d["name"]), d)


def contradictions(rows: list[dict]) -> list[str]:
    """Runs that contradict a (fresh) record: a value below the recorded bound, a bound above
    the best known value, or a claimed proof of a value worse than the best known one."""
    out = []
    for row in rows:
        if row["stale"]:
            continue
        best, bound = row["best_ns"], row["bound_ns"]
        for label, r in row["runs"].items():
            v = r["value_ns"]
            if v is not None and v < bound * (1 - PROOF_REL):
                out.append(f"{row['name']}: {label} value {v:.12g} < recorded bound {bound:.12g}")
            if best is not None and r["bound_ns"] > best * (1 + PROOF_REL):
                out.append(f"{row['name']}: {label} bound {r['bound_ns']:.12g} > best known {best:.12g}")
            if r["proven"] and best is not None and v is not None and v > best * (1 + PROOF_REL):
                out.append(f"{row['name']}: {label} claims {v:.12g} optimal, best known {best:.12g}")
    return out


def _pct(g: float) -> str:
    return "inf" if not math.isfinite(g) else f"{100 * g:.3g}%"


def profile(rows: list[dict]) -> dict[str, list[float]]:
    """Per strategy, the sorted seconds of the runs that solved their instance (gap <= 0.5 %)."""
    return {label: sorted(r["runs"][label]["seconds"] for r in rows
                          if r["runs"][label]["gap"] <= SOLVED_GAP)
            for label, _ in STRATEGIES}  # fmt: skip


def print_summary(rows: list[dict]) -> None:
    n = len(rows)
    prof = profile(rows)
    print(f"\n{n} instances; solved = within {100 * SOLVED_GAP:g} % of the best known value")
    print(f"{'strategy':10s} {'solved':>7s} {'proven':>7s} {'seconds':>8s}   share solved within "
          "0.01 / 0.1 / 1 / 10 s")  # fmt: skip
    for label, _ in STRATEGIES:
        runs = [r["runs"][label] for r in rows]
        ts = prof[label]
        shares = " / ".join(f"{sum(1 for t in ts if t <= x) / max(n, 1):.2f}" for x in (0.01, 0.1, 1, 10))
        print(f"{label:10s} {len(ts):7d} {sum(r['proven'] for r in runs):7d} "
              f"{sum(r['seconds'] for r in runs):8.1f}   {shares}")
    stale = [r["name"] for r in rows if r["stale"]]
    if stale:
        print(f"STALE records (the instance lowers differently today; re-record): {stale}")


def plot(rows: list[dict], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no figure"
    prof = profile(rows)
    lo = min((t for ts in prof.values() for t in ts), default=1e-3)
    hi = max((t for ts in prof.values() for t in ts), default=1.0)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, _ in STRATEGIES:
        ts = prof[label]
        xs = [lo * 0.8, *ts, hi * 1.25]
        ys = [0.0, *[(i + 1) / len(rows) for i in range(len(ts))], len(ts) / len(rows)]
        ax.step(xs, ys, where="post", label=f"{label} ({len(ts)}/{len(rows)})")
    ax.set_xscale("log")
    ax.set_xlabel("seconds (one run under the work budget)")
    ax.set_ylabel(f"share solved (within {100 * SOLVED_GAP:g} % of best known)")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Benchmark library: {len(rows)} instances")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"figure: {path}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="the CI-size subset")
    ap.add_argument("--record", action="store_true", help="re-make the records")
    ap.add_argument("--only", help="instances whose name contains this")
    ap.add_argument("--missing", action="store_true", help="--record: only unrecorded instances")
    ap.add_argument("--min-kernels", type=int, default=0, help="--record: skip smaller")
    ap.add_argument("--max-kernels", type=int, default=10**6, help="--record: skip larger")
    ap.add_argument("--budget", type=float, default=BUDGET, help="evaluations per run")
    ap.add_argument("--record-budget", type=float, default=RECORD_BUDGET,
                    help="--record: evaluations per strategy run")
    ap.add_argument("--json", type=Path, help="write the rows as JSON")
    ap.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    fam = families()
    if args.record:
        return record(fam, args.only, (args.min_kernels, args.max_kernels), args.record_budget,
                      args.missing)
    data = load_manifest(args.manifest)
    t0 = time.perf_counter()
    rows = bench(fam, data, small=args.small, only=args.only, budget=args.budget)
    print_summary(rows)
    print(f"total {time.perf_counter() - t0:.1f} s")
    if not (args.no_plot or args.small or args.only) and rows:
        print(plot(rows, PROFILE_PNG))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    bad = contradictions(rows)
    for line in bad:
        print(f"CONTRADICTION {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
