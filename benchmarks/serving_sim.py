"""Speed of the request-level serving simulation (dfsearch.capacity), one core.

The issue's target: 10,000 requests simulated in <= 2 s on one core. The workload: Poisson
arrivals, prompt 512, output 128, batch cap 64, token budget 2048, one replica with 8 GiB
of KV cache at 128 KiB per token (Llama-3-8B's KV in BF16), step times affine in the
tokens computed and the context read (0.9 ms + 40 us per token + 5 ns per context token;
the same form as a table on a grid, to time the interpolation too). Loads: a light one
(5 requests/s: small batches, most iterations alone between arrivals) and a heavy one
(25 requests/s, about 70 % of what the replica serves). Sizes 1k, 10k, 100k requests.

Usage: ``python benchmarks/serving_sim.py [--sizes 1000,10000,100000] [--repeat R]
[--json PATH]``. Prints one row per (steps, load, size): the best wall time and the best
CPU time of R runs (the simulation is single-threaded: CPU time is its time on one core,
without what other processes took), requests simulated per second, iterations, and the
wall time per 10k requests over the 2 s target.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: before numpy loads its BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time

from dfsearch.capacity.metrics import Slo, summarize
from dfsearch.capacity.scheduler import Scheduler
from dfsearch.capacity.simulate import Deployment, simulate
from dfsearch.capacity.steps import AffineSteps, TabulatedSteps
from dfsearch.capacity.traffic import Fixed, Poisson, Traffic, requests

TARGET_S, TARGET_N = 2.0, 10_000
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads of 128, BF16
AFFINE = AffineSteps(0.9e-3, 40e-6, 5e-9, kv_bytes_per_token=KV_BYTES_PER_TOKEN)


def tabulated() -> TabulatedSteps:
    """The affine step times on a grid (exact there, so both give the same simulation)."""
    tokens = (1, 16, 64, 256, 1024, 2048)
    contexts = (0, 4096, 16384, 65536, 70000)
    seconds = tuple(tuple(float(AFFINE.step_s(n, 0, c)) for c in contexts) for n in tokens)
    return TabulatedSteps(tokens, contexts, seconds, kv_bytes_per_token=KV_BYTES_PER_TOKEN)


def one(steps, rate: float, n: int, repeat: int) -> dict:
    reqs = requests(Traffic(Poisson(rate), Fixed(512), Fixed(128)), n, seed=0)
    deployment = Deployment(steps, kv_capacity_bytes=8 * 2**30)
    scheduler = Scheduler(max_batch=64, token_budget=2048)
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = simulate(reqs, deployment, scheduler)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    s = summarize(out, Slo(ttft_s=1.0, tpot_s=0.05))
    return {"requests": n, "rate_per_s": rate, "wall_s": best, "cpu_s": cpu, "requests_per_s_simulated": n / best,
            "iterations": int(out.iterations.sum()), "ttft_p50_s": s.ttft_s.p50,
            "tpot_p50_s": s.tpot_s.p50, "kv_utilisation": s.kv_utilisation}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    print("| steps | rate/s | requests | wall s | CPU s | simulated req/s | iterations | TTFT p50 ms | TPOT p50 ms | wall vs 2 s per 10k |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, steps in (("affine", AFFINE), ("table", tabulated())):
        for rate in (5.0, 25.0):
            for n in sizes:
                r = one(steps, rate, n, args.repeat if n <= TARGET_N else 1) | {"steps": name}
                rows.append(r)
                ratio = f"{r['wall_s'] / n * TARGET_N / TARGET_S:.2f}x"
                print(f"| {name} | {rate:g} | {n:,} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | {r['requests_per_s_simulated']:,.0f} | "
                      f"{r['iterations']:,} | {r['ttft_p50_s'] * 1e3:.1f} | {r['tpot_p50_s'] * 1e3:.2f} | {ratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target_s_per_10k": TARGET_S, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
