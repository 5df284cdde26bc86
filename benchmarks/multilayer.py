"""How the search grows with the number of GPT layers in one graph (issue 14).

Four cases, each with N layers in its graph (``workload.num_layer_in_graph = N``, generator
``llm`` with ``layers = N``: 41 N kernels) and the single-layer example's configurations per
layer times N:

* ``gpt-a100``: the GPT-3 1.5B example (``examples/gpt3_1.5B_a100x4.toml``) made a 48-layer
  GPT (``num_layer = 48``; 2 configurations per layer), N = 1 .. 48: 41 .. 1,968 kernels.
  Compute-bound: the lower bound is the total compute.
* ``gpt3-1t-sn30``: the README case (``examples/gpt3_1T_sn30.toml``, 128 layers, 1024 SN30
  chips) with its pipeline dimension reshaped to 16 x 8 (TP 8, PP 16, DP 8, so that PP <=
  128 / N; 6 configurations per layer), N = 1 .. 8. Network- and compute-bound
  configurations that SRAM keeps apart: the additive bound is 10 % low, the overlap bound
  (maximum flow over the kernels that can share a configuration) meets the answer.
* ``gpt-a100-cycle``: ``gpt-a100`` with the cycle-accurate compute model (``compute_util =
  0``): every costing allocates cores, about 30 us instead of 2 us, and the bound (work /
  cores) does not see the systolic arrays' idle lanes.
* ``gpt-a100-ddr``: ``gpt-a100`` with 100 GB/s DRAM and 30 MB of SRAM: memory-bound, and
  the links between layers need SRAM, so more layers need more tiles; the bound stays at
  the single layer's optimum.

Each point is searched once after a warm-up (JIT compile or cache load), without a time
limit (the work budget of the spec applies). Columns: kernels, wall time of the search, final
time per batch, its ratio to N = 1 (the same model up to the tensors crossing layer
boundaries: 1.0 means every layer kept the single layer's optimal mapping and the links
hide, below 1.0 means configurations merged across boundaries, above 1.0 that the links
cost time or SRAM),
the status, the lower bound the result states and the gap (final - bound) / bound. Then a
least-squares fit of log(time) on log(kernels) over the points with at least 100 kernels.

Usage: ``python benchmarks/multilayer.py [--case NAME|all] [--layers 1,2,4]``
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

CASES = {
    "gpt-a100": (1, 2, 3, 4, 6, 8, 12, 16, 24, 48),
    "gpt3-1t-sn30": (1, 2, 4, 8),
    "gpt-a100-cycle": (1, 2, 4, 8, 16, 24, 48),
    "gpt-a100-ddr": (1, 2, 4, 8, 16, 24),
}


def spec_text(case: str, layers: int) -> str:
    """The case's TOML with ``layers`` layers in its graph."""
    if case == "gpt-a100-cycle":
        return spec_text("gpt-a100", layers).replace("compute_util = 0.9", "compute_util = 0.0")
    if case == "gpt-a100-ddr":
        text = spec_text("gpt-a100", layers).replace("dram_bw_GBps = 1555.0", "dram_bw_GBps = 100.0")
        return text.replace("sram_bytes = 88080384", "sram_bytes = 30000000")
    if case == "gpt-a100":
        text = (EXAMPLES / "gpt3_1.5B_a100x4.toml").read_text()
        text = text.replace("num_layer = 24", f"num_layer = 48\nnum_layer_in_graph = {layers}")
        return text.replace("num_config = 2", f"num_config = {2 * layers}")
    text = (EXAMPLES / "gpt3_1T_sn30.toml").read_text()
    text = text.replace("num_layer = 128 ", f"num_layer = 128\nnum_layer_in_graph = {layers} ")
    text = text.replace("num_config = 6 ", f"num_config = {6 * layers} ")
    text = text.replace("size = 128", "size = 16")
    text = text.replace('parallelism = "pp"', 'parallelism = "pp"\n\n[[system.network]]\n'
                        'topology = "ring"\nsize = 8\nlink_bw_GBps = 50.0\nparallelism = "dp"')
    return text.replace("[0.052, 0.052]", "[0.052, 0.052, 0.052]")


def measure(case: str, layers: int) -> dict[str, object]:
    """Search one point: kernels, wall time, final time, status, bound and gap."""
    from dfsearch import api
    from dfsearch.errors import InfeasibleError
    from dfsearch.loader import load_toml_spec

    spec = load_toml_spec(spec_text(case, layers), file=f"{case}.toml", base_dir=EXAMPLES)
    t0 = time.perf_counter()
    try:
        result = api.run(spec)
    except InfeasibleError as e:
        result = e.result
    wall = time.perf_counter() - t0
    ev, bound = result.evaluation, result.search.lower_bound_s
    final = ev.final_s if ev is not None else math.inf
    gap = (final - bound) / bound if bound and ev is not None else math.nan
    return {"layers": layers, "kernels": len(spec.graph.kernels), "wall_s": wall,
            "final_s": final, "status": result.status.label, "bound_s": bound, "gap": gap}


def fit(rows: list[dict[str, object]]) -> str:
    """time = a * kernels^b, least squares in log space over points with >= 100 kernels."""
    pts = [(math.log(r["kernels"]), math.log(r["wall_s"])) for r in rows  # type: ignore[arg-type]
           if r["kernels"] >= 100 and r["wall_s"] > 0]  # type: ignore[operator]
    if len(pts) < 2:
        return "fit: fewer than two points with >= 100 kernels"
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    a = math.exp(my - b * mx)
    return f"fit: search s ~= {a:.3g} x kernels^{b:.2f} ({len(pts)} points, >= 100 kernels)"


def run_case(case: str, counts: tuple[int, ...]) -> None:
    print(f"\n{case}")
    print(f"{'layers':>6} {'kernels':>7} {'search s':>9} {'final s':>12} {'vs N=1':>8} "
          f"{'status':>20} {'bound s':>12} {'gap':>8}")
    rows, first = [], None
    for n in counts:
        row = measure(case, n)
        rows.append(row)
        found = row["final_s"] < math.inf  # type: ignore[operator]
        first = first or (row["final_s"] if found else None)
        final = f"{row['final_s']:>12.6g}" if found else f"{'none':>12}"
        ratio = f"{row['final_s'] / first:>8.5f}" if found and first else f"{'-':>8}"
        gap = f"{row['gap']:>8.2%}" if found else f"{'-':>8}"
        print(f"{n:>6} {row['kernels']:>7} {row['wall_s']:>9.2f} {final} {ratio} "
              f"{row['status']:>20} {row['bound_s']:>12.6g} {gap}", flush=True)
    print(fit(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="all", choices=[*CASES, "all"])
    ap.add_argument("--layers", default="", help="comma-separated layer counts (default: the "
                    "case's own list)")
    args = ap.parse_args()
    cases = list(CASES) if args.case == "all" else [args.case]
    for case in cases:
        counts = tuple(int(x) for x in args.layers.split(",")) if args.layers else CASES[case]
        measure(case, 1)  # warm-up: JIT compile or cache load
        run_case(case, counts)


if __name__ == "__main__":
    main()
