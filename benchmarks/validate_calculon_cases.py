"""dfsearch's LLM training predictions against Megatron-LM on Selene (Calculon's validation set).

The cases (``benchmarks/data/calculon_megatron_selene.json``) are the four GPT models of
Calculon's Table 5 validation (22B, 175B, 530B, 1T), each run by Megatron-LM in two modes:
``full`` (full activation recomputation, TP all-reduce) and ``seqsel`` (sequence parallelism +
selective recomputation), with the time per global batch measured on Selene (DGX A100 80 GB).
For every case this script writes a dfsearch TOML spec with Megatron's TP, PP, DP, global
batch and micro-batch fixed, lets dfsearch solve what is left (tile count, inter-chip sharding
of the kernels), and prints the predicted batch time next to the measured one, the relative
error, and dfsearch's DRAM per chip next to the 80 GiB of the GPU and the paper's per-GPU
memory figures.

Usage: ``python benchmarks/validate_calculon_cases.py [--json PATH] [--compute-util U]
[--style kernel_by_kernel|dataflow]``

Assumptions (all in ``case_toml``; the defaults are the "before" figure of the memory-model work)
------------------------------------------------------------------------------------------------
Chip (A100 80 GB SXM):
  * 432 cores (108 SMs x 4 tensor cores) of 16 x 16 systolic arrays at 1.41 GHz: peak
    2 x 16 x 16 x 432 x 1.41 = 311.9 TFLOP/s, the A100's 312 TFLOP/s dense FP16/BF16, written
    the way DFModel (and ``examples/gpt3_1.5B_a100x4.toml``) writes an A100.
  * SRAM 84 MiB (88,080,384 bytes), DFModel's A100 figure (the same example).
  * HBM 2,000 GB/s (2.0 TB/s) and 80 GiB (85,899,345,920 bytes: the 81,920 MiB the 80 GB A100
    reports) as ``dram_bytes``; a mapping that needs more is infeasible in dfsearch. When a
    case does not fit, it is evaluated again with unlimited DRAM so that its time is still
    reported, and the row is flagged.
Network (Selene): three ``switch`` dimensions, innermost first, as Megatron places ranks:
  * TP inside the node on NVSwitch: size TP (8 in every case), 300 GB/s per direction per GPU
    (NVLink 3: 12 links x 25 GB/s);
  * PP between nodes on InfiniBand: size PP, 25 GB/s per GPU (8 x 200 Gb/s HDR per node);
  * DP between nodes on InfiniBand: size DP (1 in every case), 25 GB/s per GPU.
  (The dimension order must be (tp, pp, dp) in dfsearch; with DP = 1 the order of PP and DP
  between nodes changes nothing.)
Execution:
  * ``style = "kernel_by_kernel"``: a GPU runs one kernel at a time and every tensor between
    kernels goes through HBM; dfsearch's dataflow fusion (several kernels sharing on-chip
    memory) is not what Megatron's kernels do. ``--style dataflow`` lets dfsearch fuse
    (``num_config = "auto"``).
  * ``compute_util = 0``: dfsearch's cycle model (systolic-array padding and per-kernel core
    allocation) rather than a fitted constant efficiency; ``--compute-util U`` switches to the
    FLOP model, time = FLOP / (U x peak).
  * ``overlap = "compute_memory"``: inside a kernel the GPU overlaps HBM traffic with math
    (roofline, max of the two), while Megatron's tensor-parallel collectives run between
    kernels and are not overlapped (Calculon's configurations say ``tensor_par_overlap =
    none``), so network time is added.
  * ``separate_rs_ag_for_ar = true``: the TP all-reduce moves 2(p-1)/p of the tensor per GPU,
    a ring (NCCL) reduce-scatter + all-gather, instead of DFModel's half-volume quirk.
  * ``equations = "v1"`` (the default), word 2 bytes (FP16), seed 0, no time limit: the result
    depends on the inputs only.
  * Quirks are dfsearch's defaults (``dfsearch.run`` always lowers with ``Quirks()``):
    notably the pipeline bubble (PP-1)/(nmb x max(layers per stage - 1, 1)) and the pipeline
    p2p charged once per batch (docs/model.md, "Quirks we replicate by default").
  * Evaluation is ``dfsearch.run`` on a spec whose network sizes and micro-batch are fixed
    (Megatron's), so the search only picks the tile count and the kernels' inter-chip
    sharding (the Megatron split); with one configuration per kernel nothing else is free.
What dfsearch does not model today, and so the two modes of one model get the same spec:
  * activation recomputation (full: one more forward pass per layer; selective: the attention
    core again), sequence parallelism (the elementwise kernels and the norms split over TP),
    pipeline interleaving (175B and 530B use 3 virtual stages), embeddings and the logit
    layer (vocabulary 51,200);
  * in DRAM: optimizer state, gradients and the stash of in-flight micro-batches (dfsearch
    holds the weights of the stage's layers plus one layer's activations x micro-batch).
Published memory (``pub GiB``) is Figure 1 of the paper: parameters + optimizer state plus
the activations with sequence parallelism + selective recomputation (``seqsel``); for
``full`` the activations are derived as Figure 1's no-recompute activations x Figure 7's
full-recompute percentage (marked ``*``).

Error = predicted / measured - 1 (negative: dfsearch predicts a faster run). The summary gives
the mean and the maximum of |error| over the cases.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks/data/calculon_megatron_selene.json"

# A100 80 GB SXM as dfsearch's accelerator model (docs/spec.md, [system.accelerator])
A100_CORES = 432  #: 108 SMs x 4 tensor cores
A100_SYSTOLIC = 16  #: 16 x 16 arrays
A100_FREQ_GHZ = 1.41  #: 2 x 16 x 16 x 432 x 1.41 GHz = 311.9 TFLOP/s
A100_SRAM_BYTES = 88_080_384  #: 84 MiB, DFModel's A100 figure
HBM_GBPS = 2000.0  #: 2.0 TB/s
HBM_BYTES = 80 * 2**30  #: 80 GiB
GiB = 2**30

# Selene network, per GPU and direction
GPUS_PER_NODE = 8
NVSWITCH_GBPS = 300.0  #: NVLink 3 through NVSwitch inside a DGX A100
IB_GBPS = 25.0  #: one 200 Gb/s HDR InfiniBand port per GPU

STYLES = ("kernel_by_kernel", "dataflow")


def load_cases(path: Path = DATA) -> dict[str, Any]:
    """The validation data set (cases, models, published memory)."""
    return json.loads(path.read_text())


def case_toml(
    case: dict,
    model: dict,
    *,
    compute_util: float = 0.0,
    style: str = "kernel_by_kernel",
    dram_bytes: int = HBM_BYTES,
) -> str:
    """A dfsearch TOML spec of one Megatron run: every network size and the micro-batch fixed."""
    tp, pp, dp = case["tensor_par"], case["pipeline_par"], case["data_par"]
    if tp > GPUS_PER_NODE:
        raise ValueError(f"{case['id']}: TP {tp} does not fit in one {GPUS_PER_NODE}-GPU node")
    if tp * pp * dp != case["num_gpus"]:
        raise ValueError(f"{case['id']}: TP x PP x DP != {case['num_gpus']} GPUs")
    heads, head_dim = model["attn_heads"], model["attn_size"]
    if heads * head_dim != model["hidden"] or model["feedforward"] != 4 * model["hidden"]:
        raise ValueError(f"{case['model']}: not a standard GPT layer")
    return f"""\
[workload]
kind = "llm"
hidden_dim = {model["hidden"]}
num_head = {heads}
head_dim = {head_dim}
seq_len = {model["seq_size"]}
num_layer = {model["num_blocks"]}
global_batch_size = {case["global_batch_size"]}
micro_batch_size = {case["micro_batch_size"]}

[graph]
generator = "llm"

[system]
num_chip = {case["num_gpus"]}

[system.accelerator]
cores = {A100_CORES}
systolic_width = {A100_SYSTOLIC}
systolic_height = {A100_SYSTOLIC}
sram_bytes = {A100_SRAM_BYTES}
freq_GHz = {A100_FREQ_GHZ}

[system.memory]
dram_bw_GBps = {HBM_GBPS}
dram_bytes = {dram_bytes}

[[system.network]]
topology = "switch"
size = {tp}
link_bw_GBps = {NVSWITCH_GBPS}
parallelism = "tp"

[[system.network]]
topology = "switch"
size = {pp}
link_bw_GBps = {IB_GBPS}
parallelism = "pp"

[[system.network]]
topology = "switch"
size = {dp}
link_bw_GBps = {IB_GBPS}
parallelism = "dp"

[execution]
style = "{style}"
num_config = {'"auto"' if style == "dataflow" else 0}
overlap = "compute_memory"
compute_util = {compute_util}
separate_rs_ag_for_ar = true
word_bytes = 2

[search]
seed = 0
"""


def predict(toml_text: str, name: str) -> dict[str, Any]:
    """Search one spec (sizes fixed); on no feasible mapping, search again with unlimited DRAM."""
    import dfsearch
    from dfsearch.errors import InfeasibleError
    from dfsearch.loader import load_toml_spec

    spec = load_toml_spec(toml_text, file=f"{name}.toml", base_dir=ROOT)
    t = time.perf_counter()
    fits, why = True, ""
    try:
        result = dfsearch.run(spec)
    except InfeasibleError as exc:
        fits, why = False, str(exc).splitlines()[0]
        result = dfsearch.run(spec.replace("system.memory.dram_bytes", 0))
    seconds = time.perf_counter() - t
    ev = result.evaluation
    return {
        "predicted_s": ev.final_s,
        "dram_bytes": ev.dram_bytes,
        "fits_in_dram": fits and ev.dram_bytes <= HBM_BYTES,
        "infeasible_reason": why,
        "utilization": ev.utilization,
        "workload_flop": ev.workload_flop,
        "peak_gflops": ev.peak_gflops,
        "num_tile": ev.decision.num_tile,
        "pipeline_factor": ev.pipeline_factor,
        "status": result.status.label,
        "search_seconds": seconds,
    }


def published_memory_gib(data: dict, case: dict) -> tuple[float | None, bool]:
    """(per-GPU GiB from the paper's Figure 1, derived?) for one case; None when not given."""
    mem = data["published_memory_per_gpu_GiB"]
    fig1 = mem["fig1"].get(case["model"])
    if fig1 is None:
        return None, False
    if case["mode"] == "seqsel":
        return fig1["params_and_optimizer"] + fig1["activations_seqsel"], False
    pct = mem["fig7_activation_percent_of_none"].get(case["model"], {}).get(case["mode"])
    if pct is None:
        return None, False
    return fig1["params_and_optimizer"] + fig1["activations_none"] * pct / 100.0, True


def evaluate_cases(data: dict, *, compute_util: float, style: str) -> list[dict[str, Any]]:
    """One row per case; identical specs (the two modes of a model) are searched once."""
    done: dict[str, dict[str, Any]] = {}
    rows = []
    for case in data["cases"]:
        model = data["models"][case["model"]]
        text = case_toml(case, model, compute_util=compute_util, style=style)
        if text not in done:
            done[text] = predict(text, case["id"])
        pred = done[text]
        measured = case["measured_batch_time_s"]
        pub, derived = published_memory_gib(data, case)
        rows.append({
            "case": case["id"],
            "tp": case["tensor_par"], "pp": case["pipeline_par"], "dp": case["data_par"],
            "micro_batch_size": case["micro_batch_size"],
            "global_batch_size": case["global_batch_size"],
            "measured_s": measured,
            **pred,
            "error": pred["predicted_s"] / measured - 1.0,
            "dram_GiB": pred["dram_bytes"] / GiB,
            "measured_utilization": pred["workload_flop"]
            / (measured * case["num_gpus"] * pred["peak_gflops"] * 1e9),
            "published_memory_GiB": pub,
            "published_memory_derived": derived,
        })  # fmt: skip
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [abs(r["error"]) for r in rows]
    return {
        "mean_abs_error": sum(errs) / len(errs),
        "max_abs_error": max(errs),
        "all_fit_80GiB": all(r["fits_in_dram"] for r in rows),
    }


def format_table(rows: list[dict[str, Any]], summ: dict[str, Any]) -> str:
    head = (f"{'case':<20} {'TPxPPxDP':>10} {'mbs':>3} {'meas s':>8} {'pred s':>8} {'error':>8} "
            f"{'util pred/meas':>14} {'DRAM GiB':>8} {'fits 80':>7} {'pub GiB':>8} {'tiles':>5}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        pub = r["published_memory_GiB"]
        pub_s = (
            "-" if pub is None else f"{pub:.1f}" + ("*" if r["published_memory_derived"] else "")
        )
        shape = f"{r['tp']}x{r['pp']}x{r['dp']}"
        util = f"{r['utilization']:.1%}/{r['measured_utilization']:.1%}"
        lines.append(
            f"{r['case']:<20} {shape:>10} {r['micro_batch_size']:>3} {r['measured_s']:>8.2f} "
            f"{r['predicted_s']:>8.2f} {r['error']:>+8.1%} {util:>14} {r['dram_GiB']:>8.2f} "
            f"{'yes' if r['fits_in_dram'] else 'NO':>7} {pub_s:>8} {r['num_tile']:>5}"
        )
    lines.append("-" * len(head))
    lines.append(f"mean |error| {summ['mean_abs_error']:.1%}, max |error| {summ['max_abs_error']:.1%}; "
                 f"all fit in 80 GiB (dfsearch's DRAM model): {'yes' if summ['all_fit_80GiB'] else 'NO'}")  # fmt: skip
    lines.append("error = predicted / measured - 1; util = FLOP of dfsearch's graph / (time x GPUs x "
                 "peak); pub GiB = paper Fig. 1 (* = activations via Fig. 7)")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--compute-util", type=float, default=0.0,
                    help="0 = cycle model (default); u in (0, 1] = FLOP model at u x peak")  # fmt: skip
    ap.add_argument("--style", choices=STYLES, default="kernel_by_kernel")
    args = ap.parse_args(argv)
    data = load_cases()
    t = time.perf_counter()
    rows = evaluate_cases(data, compute_util=args.compute_util, style=args.style)
    wall = time.perf_counter() - t
    summ = summary(rows)
    print(f"dfsearch vs Megatron-LM on Selene ({len(rows)} cases of Calculon's validation; "
          f"compute_util {args.compute_util}, style {args.style})\n")  # fmt: skip
    print(format_table(rows, summ))
    print(f"\nwall time {wall:.1f} s (JIT compilation included)")
    if args.json:
        out = {
            "settings": {"compute_util": args.compute_util, "style": args.style,
                         "overlap": "compute_memory", "separate_rs_ag_for_ar": True,
                         "equations": "v1", "dram_capacity_bytes": HBM_BYTES, "seed": 0},
            "data": str(DATA.relative_to(ROOT)),
            "cases": rows,
            **summ,
            "wall_seconds": wall,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        }  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
