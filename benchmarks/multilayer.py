"""How today's search grows with the number of GPT layers in one graph (issue 14, part 1).

The GPT-3 1.5B example (``examples/gpt3_1.5B_a100x4.toml``: 24 layers, 4 A100-like GPUs, TP 4)
with N = 1, 2, 3, 4, 6, 8, 12, 24 layers in its graph (``workload.num_layer_in_graph = N``,
generator ``llm`` with ``layers = N``: 41 N kernels) and ``num_config = 2 N`` (the
single-layer example's two configurations per layer). Each point is searched once after a
warm-up (JIT compile or cache load) with a time limit of ``--limit`` seconds; the table gives
the search's wall time, the final time per batch, its ratio to N = 1, the status and the gap
to the lower bound the result reports ((final - bound) / bound). It stops after the first
point that reaches the limit or finds no feasible mapping. No new search algorithm: this measures the existing one.

Usage: ``python benchmarks/multilayer.py [--limit 60] [--layers 1,2,3,4,6,8,12,24]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/gpt3_1.5B_a100x4.toml"


def spec_text(layers: int) -> str:
    """The example with ``layers`` layers in its graph and two configurations per layer."""
    text = EXAMPLE.read_text()
    text = text.replace("num_layer = 24", f"num_layer = 24\nnum_layer_in_graph = {layers}")
    return text.replace("num_config = 2", f"num_config = {2 * layers}")


def measure(layers: int, limit_s: float) -> dict[str, object]:
    """Search one point; its kernels, wall time, final time, status and gap."""
    from dfsearch import api
    from dfsearch.errors import InfeasibleError
    from dfsearch.loader import load_toml_spec

    spec = load_toml_spec(spec_text(layers), file="multilayer.toml", base_dir=EXAMPLE.parent)
    t0 = time.perf_counter()
    try:
        result = api.run(spec, time_limit_s=limit_s)
    except InfeasibleError as e:
        result = e.result
    wall = time.perf_counter() - t0
    ev, bound = result.evaluation, result.search.lower_bound_s
    final = ev.final_s if ev is not None else float("inf")
    gap = (final - bound) / bound if bound and ev is not None else float("nan")
    return {"layers": layers, "kernels": len(spec.graph.kernels), "wall_s": wall,
            "final_s": final, "status": result.status.label, "gap": gap}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=60.0, help="seconds per point")
    ap.add_argument("--layers", default="1,2,3,4,6,8,12,24",
                    help="comma-separated layer counts (each must divide 24)")
    args = ap.parse_args()
    counts = [int(x) for x in args.layers.split(",")]
    measure(1, args.limit)  # warm-up: JIT compile or cache load
    print(f"{'layers':>6} {'kernels':>7} {'search s':>9} {'final s':>12} {'vs N=1':>8} "
          f"{'status':>22} {'gap':>9}")
    first = None
    for n in counts:
        row = measure(n, args.limit)
        first = first or row["final_s"]
        found = row["final_s"] < float("inf")
        final = f"{row['final_s']:>12.6g}" if found else f"{'none':>12}"
        ratio = f"{row['final_s'] / first:>8.4f}" if found else f"{'-':>8}"
        gap = f"{row['gap']:>9.2%}" if found else f"{'-':>9}"
        print(f"{n:>6} {row['kernels']:>7} {row['wall_s']:>9.2f} {final} {ratio} "
              f"{row['status']:>22} {gap}", flush=True)
        if row["wall_s"] >= args.limit or not found:
            break


if __name__ == "__main__":
    main()
