"""Throughput of the jitted evaluator, one core, against the pure-Python reference twin.

Instances (all on the README GPT-3 1T system: 1024 SN30 chips, shape 8 x 128, T = 512):

* ``gpt3-1T-layer``: the README layer, 41 kernels, 6 configurations, FLOP compute model;
* ``gpt3-1T-layer-cycles``: the same with ``compute_util = 0`` (cycle model, core allocation);
* ``gpt3-1T-13-layers``: 13 copies of the layer chained (533 kernels), 130 configurations.

Rows are random *valid* configuration assignments: within each phase, non-decreasing labels
along a topological order (FWD kernels in configurations <= f, BWD in >= b), so no edge runs
backwards; many are SRAM-infeasible, and the feasible fraction is reported. A second pool,
feasible rows (one-kernel moves around a known feasible assignment), times the full path.

Usage: ``python benchmarks/evaluator.py [--seconds S] [--json PATH]``
"""

from __future__ import annotations

import os

# numba reads this when it is first imported (dfsearch imports numba lazily, later).
os.environ["NUMBA_NUM_THREADS"] = "1"

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README_SETUP = ROOT / "tests/data/dfmodel/readme_gpt3_1T_sn30_1024chips_r_r_8x128/setup.txt"
SHAPE = (8, 128)
NUM_TILE = 512
MICRO_BATCH = 1
NUM_CONFIG = 6  #: the README layer's configurations
CHAIN_COPIES = 13
CHAIN_CONFIGS_PER_LAYER = 10  #: 6 leave no feasible chained assignment (deeper buffers)
TARGET_EVALS_PER_S = 1_000_000
MAX_POOL_CELLS = 5_000_000  #: rows x kernels of a random pool (40 MB of int64)
CALL_SECONDS = 0.3  #: aim for batch calls of about this long
MAX_BATCH_ROWS = 200_000
SEED = 0


@dataclasses.dataclass(frozen=True)
class Instance:
    name: str
    spec: object  # dfsearch.spec.Spec
    num_config: int
    feasible_seed: tuple[int, ...] | None  #: a feasible assignment (centre of a pool)
    reference_rows: int  #: how many random rows the reference twin evaluates (at most)
    reference_feasible_rows: int


# --------------------------------------------------------------------------- instances
def load_readme_spec():
    """The README spec; through ``dfsearch.loader`` when present, else the DFModel importer."""
    try:
        from dfsearch.loader import load_spec
    except ImportError:
        from dfsearch.io.dfmodel import load_dfmodel_file as load_spec
    return load_spec(README_SETUP)


def chained_spec(spec, copies: int, configs_per_layer: int):
    """``copies`` renamed copies of the spec's layer: Add_2 feeds the next copy's
    Add_Prev_Layer (forward), Q_bwd feeds the previous copy's Loss_bwd (backward).

    The boundary edges are ``zero_out`` (0 bytes): the one-layer graph does not count its
    input buffer either. Buffer depths (level differences) do grow along the chain."""
    from dfsearch.spec import Connection, Graph

    g = spec.graph
    n = len(g.kernels)
    kernels, conns = [], []
    for j in range(copies):
        kernels += [
            dataclasses.replace(k, name=f"L{j}.{k.name}", id=j * n + i + 1)
            for i, k in enumerate(g.kernels)
        ]
        conns += [
            dataclasses.replace(c, src=f"L{j}.{c.src}", dst=f"L{j}.{c.dst}", id=None)
            for c in g.connections
        ]
        if j > 0:
            for src, dst in ((f"L{j - 1}.Add_2", f"L{j}.Add_Prev_Layer"),
                             (f"L{j}.Q_bwd", f"L{j - 1}.Loss_bwd")):
                conns.append(Connection(src=src, dst=dst, zero_out=True))
    return dataclasses.replace(
        spec,
        graph=Graph(kernels=tuple(kernels), connections=tuple(conns)),
        workload=dataclasses.replace(
            spec.workload, num_layer=max(1, spec.workload.num_layer // copies)
        ),
        execution=dataclasses.replace(spec.execution, num_config=configs_per_layer * copies),
    )


def chained_assignment(layer: tuple[int, ...], copies: int, per_layer: int) -> tuple[int, ...]:
    """A layer's FWD/BWD assignment repeated per copy: forward blocks in layer order,
    backward blocks in reverse layer order (the direction gradients flow)."""
    half = per_layer // 2
    out: list[int] = []
    for j in range(copies):
        for c in layer:
            fwd = c < half
            out.append(half * j + c if fwd else half * (2 * copies - 1 - j) + c - half)
    return tuple(out)


def sharding(spec):
    from dfsearch.search.sharding import solve_spec_sharding

    return solve_spec_sharding(spec, SHAPE, NUM_TILE).sharding


def lowered(spec, num_config: int):
    from dfsearch.cost.lower import Outer, lower

    return lower(spec, Outer(SHAPE, sharding(spec), MICRO_BATCH, NUM_TILE, num_config))


def instances() -> list[Instance]:
    from dfsearch.search.assign import assign_configs

    spec = load_readme_spec()
    best = assign_configs(lowered(spec, NUM_CONFIG)).config
    cycles = dataclasses.replace(
        spec, execution=dataclasses.replace(spec.execution, compute_util=0.0)
    )
    per = CHAIN_CONFIGS_PER_LAYER
    chain = chained_spec(spec, CHAIN_COPIES, per)
    layer_best = assign_configs(lowered(spec, per)).config
    return [
        Instance("gpt3-1T-layer", spec, NUM_CONFIG, best, 300, 100),
        Instance("gpt3-1T-layer-cycles", cycles, NUM_CONFIG, best, 300, 2),
        Instance(
            f"gpt3-1T-{CHAIN_COPIES}-layers", chain, per * CHAIN_COPIES,
            chained_assignment(layer_best, CHAIN_COPIES, per), 10, 3,
        ),
    ]


# --------------------------------------------------------------------------- rows
def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> list[int]:
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for s, d in zip(src.tolist(), dst.tolist()):
        succ[s].append(d)
        indeg[d] += 1
    ready = [k for k in range(n) if indeg[k] == 0]
    order = []
    while ready:
        k = ready.pop()
        order.append(k)
        for d in succ[k]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    return order


def label_ranges(problem) -> dict[int, tuple[int, int]]:
    """Phase code -> allowed configurations (lo, hi), inclusive."""
    from dfsearch.codes import Phase

    c, k = problem.num_config, problem.constants
    ranges = {int(p): (0, c - 1) for p in Phase}
    if k.fb_rule:
        ranges[int(Phase.FWD)] = (0, k.fb_last_fwd)
        ranges[int(Phase.BWD)] = (k.fb_first_bwd, c - 1)
    return ranges


def random_rows(problem, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Random valid assignments: sorted random labels along a topological order per phase.

    The last kernel of the phase that may use the last configuration is put there, so
    ``Decision`` (whose configuration count is max(config) + 1) means the same problem."""
    if (problem.kernels.pin >= 0).any():
        raise ValueError("pinned kernels are not supported by this generator")
    n = problem.num_kernels
    order = topological_order(n, problem.edges.src, problem.edges.dst)
    out = np.empty((rows, n), dtype=np.int64)
    for phase, (lo, hi) in label_ranges(problem).items():
        ks = [k for k in order if problem.kernels.phase[k] == phase]
        if ks:
            out[:, ks] = np.sort(rng.integers(lo, hi + 1, size=(rows, len(ks))), axis=1)
            if hi == problem.num_config - 1:
                out[:, ks[-1]] = hi
    return out


def feasible_rows(evaluator, centre: tuple[int, ...], rows: int, rng) -> np.ndarray:
    """Feasible assignments one move away from ``centre`` (a kernel shifted by +-1), and
    ``centre`` itself."""
    base = np.asarray(centre, dtype=np.int64)
    cand = np.tile(base, (rows, 1))
    k = rng.integers(0, base.size, size=rows)
    cand[np.arange(rows), k] += rng.choice([-1, 1], size=rows)
    cand = np.vstack([base, cand])
    _, status, _ = evaluator.batch(cand)
    return cand[status == 0]


# --------------------------------------------------------------------------- timing
def rate(evaluator, pool: np.ndarray, seconds: float) -> tuple[float, float, int]:
    """Median and best evaluations/s of batch calls over ``pool`` (tiled or cut to a batch
    of about CALL_SECONDS), repeated for ``seconds`` (at least 3 calls); and the batch size."""
    probe = np.resize(pool, (100, pool.shape[1]))
    t = time.perf_counter()
    evaluator.batch(probe)
    per_row = max(time.perf_counter() - t, 1e-9) / len(probe)
    size = int(min(max(CALL_SECONDS / per_row, 100), MAX_BATCH_ROWS))
    batch = np.ascontiguousarray(np.resize(pool, (size, pool.shape[1])))
    evaluator.batch(batch)  # untimed: first touch of the batch's memory
    rates: list[float] = []
    end = time.perf_counter() + seconds
    while len(rates) < 3 or time.perf_counter() < end:
        t = time.perf_counter()
        evaluator.batch(batch)
        rates.append(size / (time.perf_counter() - t))
    return statistics.median(rates), max(rates), size


def reference_rate(inst: Instance, problem, rows: np.ndarray, seconds: float):
    """evals/s of the reference twin on ``rows`` (stops early after ``seconds``), and how
    many rows disagree with the jitted evaluator (status, or final_ns beyond 1e-9 rel.)."""
    from dfsearch.cost.model import Evaluator
    from dfsearch.cost.reference import reference_evaluate
    from dfsearch.decision import Decision

    if len(rows) == 0:
        return None, 0, 0
    finals, status, _ = Evaluator(problem).batch(rows)
    o = problem.outer
    d0 = Decision(shape=o.shape, sharding=o.sharding, micro_batch_size=o.micro_batch_size,
                  num_tile=o.num_tile, config=tuple(int(c) for c in rows[0]))
    done = mismatches = 0
    start = time.perf_counter()
    for i, row in enumerate(rows):
        r = reference_evaluate(inst.spec, d0.with_config(tuple(row.tolist())))
        done += 1
        same = int(r.status) == int(status[i]) and (
            int(status[i]) != 0 or abs(r.final_ns - finals[i]) <= 1e-9 * abs(finals[i])
        )
        mismatches += 0 if same else 1
        if time.perf_counter() - start > seconds:
            break
    return done / (time.perf_counter() - start), done, mismatches


# --------------------------------------------------------------------------- run
def measure(inst: Instance, seconds: float, rng) -> dict:
    from dfsearch.codes import Status
    from dfsearch.cost.model import Evaluator

    problem = lowered(inst.spec, inst.num_config)
    ev = Evaluator(problem)
    n = problem.num_kernels
    pool = random_rows(problem, max(1000, min(100_000, MAX_POOL_CELLS // n)), rng)
    _, status, _ = ev.batch(pool)
    counts = {Status(int(s)).label: int(c) for s, c in zip(*np.unique(status, return_counts=True))}
    bad = set(counts) & {Status.CONFIG.label, Status.ORDER.label}
    if bad:
        raise RuntimeError(f"{inst.name}: the row generator produced invalid rows {bad}")
    med, best, size = rate(ev, pool, seconds)
    feas = pool[:0]
    if inst.feasible_seed is not None:
        feas = np.unique(feasible_rows(ev, inst.feasible_seed, 2000, rng), axis=0)
    f_med = rate(ev, feas, seconds)[0] if len(feas) else None
    ref, ref_n, ref_bad = reference_rate(inst, problem, pool[: inst.reference_rows], seconds)
    fref, fref_n, fref_bad = reference_rate(
        inst, problem, feas[: inst.reference_feasible_rows], seconds
    )
    return {
        "name": inst.name,
        "kernels": n,
        "edges": int(problem.edges.src.size),
        "configs": problem.num_config,
        "compute_model": "cycles" if inst.spec.execution.compute_util == 0 else "flop",
        "evals_per_s": med,
        "evals_per_s_best": best,
        "batch_rows": size,
        "feasible_fraction": counts.get(Status.OK.label, 0) / len(pool),
        "statuses": counts,
        "feasible_rows_evals_per_s": f_med,
        "feasible_rows_distinct": int(len(feas)),
        "reference_evals_per_s": ref,
        "reference_rows": ref_n,
        "reference_mismatches": ref_bad,
        "speedup": med / ref,
        "reference_feasible_evals_per_s": fref,
        "reference_feasible_rows": fref_n,
        "reference_feasible_mismatches": fref_bad,
        "feasible_speedup": f_med / fref if (f_med and fref) else None,
    }


def first_call(spec) -> dict:
    """Seconds of the first batch call in this process (importing numba, then compiling or
    loading the on-disk cache), before any other jitted code ran."""
    problem = lowered(spec, NUM_CONFIG)
    rows = random_rows(problem, 10, np.random.default_rng(SEED))
    t = time.perf_counter()
    from dfsearch.cost import evaluate as ev_mod
    from dfsearch.cost.model import Evaluator

    Evaluator(problem).batch(rows)
    seconds = time.perf_counter() - t
    stats = ev_mod.evaluate_batch.stats
    return {
        "seconds": seconds,
        "from_cache": sum(stats.cache_hits.values()) > 0,
        "cache_misses": sum(stats.cache_misses.values()),
    }


def machine() -> dict:
    import numba

    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numba": numba.__version__,
        "numpy": np.__version__,
        "numba_num_threads": numba.config.NUMBA_NUM_THREADS,
    }


def report(results: list[dict]) -> None:
    for r in results:
        print(f"\n{r['name']}: {r['kernels']} kernels, {r['edges']} edges, "
              f"{r['configs']} configurations, {r['compute_model']} model")
        print(f"  random valid rows   {r['evals_per_s']:12,.0f} evals/s "
              f"(best {r['evals_per_s_best']:,.0f}; batch {r['batch_rows']:,} rows)")
        print(f"    feasible fraction {r['feasible_fraction']:.5f}  statuses {r['statuses']}")
        print(f"    reference twin    {r['reference_evals_per_s']:12,.1f} evals/s on "
              f"{r['reference_rows']} rows -> speedup {r['speedup']:,.0f}x; "
              f"mismatches {r['reference_mismatches']}")
        if r["feasible_rows_evals_per_s"] is None:
            print("  feasible rows: none found near the seed assignment")
            continue
        print(f"  feasible rows       {r['feasible_rows_evals_per_s']:12,.0f} evals/s "
              f"({r['feasible_rows_distinct']} distinct rows)")
        if r["reference_feasible_rows"]:
            print(f"    reference twin    {r['reference_feasible_evals_per_s']:12,.1f} evals/s "
                  f"on {r['reference_feasible_rows']} rows -> speedup "
                  f"{r['feasible_speedup']:,.0f}x; mismatches "
                  f"{r['reference_feasible_mismatches']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="per measurement (default 3)")
    ap.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(SEED)
    first = first_call(load_readme_spec())
    results = [measure(inst, args.seconds, rng) for inst in instances()]
    info = machine()
    print(f"machine: {info}")
    how = "loaded from the numba cache" if first["from_cache"] else "compiled"
    print(f"first batch call: {first['seconds']:.2f} s (import numba + {how}; excluded below)")
    report(results)
    head = results[0]
    met = head["evals_per_s"] >= TARGET_EVALS_PER_S
    print(f"\ntarget >= {TARGET_EVALS_PER_S:,} evals/s per core on the GPT layer: "
          f"{'MET' if met else 'NOT MET'} ({head['evals_per_s']:,.0f})")
    if any(r["reference_mismatches"] or r["reference_feasible_mismatches"] for r in results):
        print("WARNING: the jitted evaluator and the reference twin disagree on some rows")
    if args.json:
        out = {
            "evals_per_s": head["evals_per_s"],
            "speedup_vs_reference": head["speedup"],
            "target_evals_per_s": TARGET_EVALS_PER_S,
            "target_met": met,
            "seconds_per_measurement": args.seconds,
            "first_call": first,
            "instances": results,
            "machine": info,
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
