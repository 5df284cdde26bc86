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

Usage: ``python benchmarks/validate_calculon_cases.py [--profile calculon|nominal]
[--compute-util U | --fit] [--style kernel_by_kernel|dataflow] [--json PATH]``

Error = predicted / measured - 1 (negative: dfsearch predicts a faster run). The summary gives
the mean and the maximum of |error| over the cases, and the same for DRAM per GPU against the
paper's published memory.

Inputs (all in ``case_toml``)
-----------------------------
Chip (A100 80 GB SXM): 432 cores (108 SMs x 4 tensor cores) of 16 x 16 systolic arrays at
1.41 GHz, peak 2 x 16 x 16 x 432 x 1.41 = 311.9 TFLOP/s (the A100's 312 TFLOP/s dense
FP16/BF16, written the way DFModel writes an A100); SRAM 84 MiB (DFModel's A100 figure); HBM
2,000 GB/s and 80 GiB (``dram_bytes``: a mapping that needs more is infeasible; such a case is
evaluated again with unlimited DRAM so that its time is still reported, and flagged).
Network (Selene), three ``switch`` dimensions, innermost first, as Megatron places ranks: TP
inside the node on NVSwitch (300 GB/s per GPU and direction), PP and DP between nodes on
InfiniBand (25 GB/s per GPU). Word 2 bytes (FP16), ``separate_rs_ag_for_ar = true`` (NCCL's ring
all-reduce moves 2(p-1)/p of the tensor), seed 0, no time limit.

Training (``[training]``, docs/model.md "Training memory"): the training memory model (fp16
weights, fp32 gradients (4 B) and Adam state with fp32 master weights (12 B) per parameter: 18
B, as Megatron's mixed precision holds them); the case's recomputation (``full`` -> "full",
``attn_only`` -> "selective") and sequence parallelism (the ``seqsel`` cases).

Profiles (``--profile``):
  * ``calculon`` (default): the efficiencies of Calculon's own A100 system file
    (``systems/a100_80g.json``, recorded in the data file): links at 0.6 (NVLink) and 0.9
    (InfiniBand) of their bandwidth, HBM at 0.9, and no overlap of compute, memory and network
    time (its ``processing_mode: no_overlap``). Compute is dfsearch's cycle model at the
    nominal peak (or ``--compute-util``).
  * ``nominal``: nominal bandwidths, HBM traffic overlapped with compute inside a kernel,
    collectives not overlapped (``overlap = "compute_memory"``).

``--fit``: the FLOP model (time = FLOP / (u x peak)) with one sustained fraction of peak u,
chosen on a grid 0.50, 0.51, ..., 1.00 to minimise the mean |error|; also reported
leave-one-model-out: u chosen on the other three models' cases, error measured on the held-out
model's two cases. This is a calibration, and the printout says so.

What dfsearch does not model, and so stays in the error: pipeline interleaving (175B and 530B
use 3 virtual stages; dfsearch uses DFModel's bubble rule, docs/model.md "Quirks"), the
embedding and logit layers (vocabulary 51,200), the optimizer step, kernel launch gaps.
Published memory (``pub GiB``) is Figure 1 of the paper: parameters + optimizer state plus the
activations with sequence parallelism + selective recomputation (``seqsel``); for ``full``
the activations are Figure 1's no-recompute activations x Figure 7's full-recompute
percentage (marked ``*``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
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

#: Calculon's activation_recompute -> dfsearch's training.recompute
_RECOMPUTE = {"none": "none", "attn_only": "selective", "full": "full"}


@dataclass(frozen=True)
class Profile:
    """How compute, memory and network time combine and which fraction of each nominal
    bandwidth is sustained."""

    overlap: str
    hbm_eff: float = 1.0
    nvlink_eff: float = 1.0
    ib_eff: float = 1.0


#: ``calculon``: the efficiencies of Calculon's A100 system file (see the data file)
PROFILES = {
    "calculon": Profile(overlap="none", hbm_eff=0.9, nvlink_eff=0.6, ib_eff=0.9),
    "nominal": Profile(overlap="compute_memory"),
}


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
    profile: Profile = PROFILES["calculon"],
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
    nvlink, ib = NVSWITCH_GBPS * profile.nvlink_eff, IB_GBPS * profile.ib_eff
    dims = "".join(
        f'''
[[system.network]]
topology = "switch"
size = {size}
link_bw_GBps = {bw:g}
parallelism = "{par}"
'''
        for size, bw, par in ((tp, nvlink, "tp"), (pp, ib, "pp"), (dp, ib, "dp"))
    )
    flag = {True: "true", False: "false"}
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
dram_bw_GBps = {HBM_GBPS * profile.hbm_eff:g}
dram_bytes = {dram_bytes}
{dims}
[execution]
style = "{style}"
num_config = {'"auto"' if style == "dataflow" else 0}
overlap = "{profile.overlap}"
compute_util = {compute_util}
separate_rs_ag_for_ar = true
word_bytes = 2

[search]
seed = 0

[training]
memory_model = "training"
recompute = "{_RECOMPUTE[case["activation_recompute"]]}"
sequence_parallel = {flag[bool(case["sequence_parallel"])]}
optimizer_sharding = {flag[bool(case["optimizer_sharding"])]}
grad_bytes = 4
optimizer_bytes = 12
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
        result = dfsearch.run(dfsearch.replace(spec, "system.memory.dram_bytes", 0))
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


def evaluate_cases(
    data: dict, *, compute_util: float, style: str, profile: Profile
) -> list[dict[str, Any]]:
    """One row per case."""
    rows = []
    for case in data["cases"]:
        model = data["models"][case["model"]]
        text = case_toml(case, model, compute_util=compute_util, style=style, profile=profile)
        pred = predict(text, case["id"])
        measured = case["measured_batch_time_s"]
        pub, derived = published_memory_gib(data, case)
        dram_gib = pred["dram_bytes"] / GiB
        rows.append({
            "case": case["id"], "model": case["model"],
            "tp": case["tensor_par"], "pp": case["pipeline_par"], "dp": case["data_par"],
            "micro_batch_size": case["micro_batch_size"],
            "global_batch_size": case["global_batch_size"],
            "measured_s": measured,
            **pred,
            "error": pred["predicted_s"] / measured - 1.0,
            "dram_GiB": dram_gib,
            "measured_utilization": pred["workload_flop"]
            / (measured * case["num_gpus"] * pred["peak_gflops"] * 1e9),
            "published_memory_GiB": pub,
            "published_memory_derived": derived,
            "memory_error": None if pub is None else dram_gib / pub - 1.0,
        })  # fmt: skip
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [abs(r["error"]) for r in rows]
    mem = [abs(r["memory_error"]) for r in rows if r["memory_error"] is not None]
    return {
        "mean_abs_error": sum(errs) / len(errs),
        "max_abs_error": max(errs),
        "memory_mean_abs_error": sum(mem) / len(mem) if mem else None,
        "memory_max_abs_error": max(mem) if mem else None,
        "all_fit_80GiB": all(r["fits_in_dram"] for r in rows),
    }


#: the sustained fractions of peak ``--fit`` tries
FIT_GRID = tuple(round(0.5 + 0.01 * i, 2) for i in range(51))


def fit_compute_util(data: dict, *, style: str, profile: Profile) -> dict[str, Any]:
    """The u of FIT_GRID with the least mean |error|, and the leave-one-model-out figures:
    for each model, u chosen on the other models' cases, errors on the model's own."""
    by_u = {u: evaluate_cases(data, compute_util=u, style=style, profile=profile)
            for u in FIT_GRID}  # fmt: skip

    def mean_err(rows: list[dict[str, Any]]) -> float:
        return sum(abs(r["error"]) for r in rows) / len(rows)

    best = min(FIT_GRID, key=lambda u: mean_err(by_u[u]))
    held_out: list[dict[str, Any]] = []
    chosen = {}
    for m in data["models"]:
        u = min(FIT_GRID, key=lambda u: mean_err([r for r in by_u[u] if r["model"] != m]))
        chosen[m] = u
        held_out += [r for r in by_u[u] if r["model"] == m]
    errs = [abs(r["error"]) for r in held_out]
    return {
        "u": best, "rows": by_u[best],
        "loo_u": chosen, "loo_rows": held_out,
        "loo_mean_abs_error": sum(errs) / len(errs), "loo_max_abs_error": max(errs),
    }  # fmt: skip


def format_table(rows: list[dict[str, Any]], summ: dict[str, Any]) -> str:
    head = (f"{'case':<20} {'TPxPPxDP':>10} {'mbs':>3} {'meas s':>8} {'pred s':>8} {'error':>8} "
            f"{'util pred/meas':>14} {'DRAM GiB':>8} {'pub GiB':>8} {'mem err':>8} {'fits 80':>7}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        pub = r["published_memory_GiB"]
        pub_s = (
            "-" if pub is None else f"{pub:.1f}" + ("*" if r["published_memory_derived"] else "")
        )
        mem_s = "-" if r["memory_error"] is None else f"{r['memory_error']:+.1%}"
        shape = f"{r['tp']}x{r['pp']}x{r['dp']}"
        util = f"{r['utilization']:.1%}/{r['measured_utilization']:.1%}"
        lines.append(
            f"{r['case']:<20} {shape:>10} {r['micro_batch_size']:>3} {r['measured_s']:>8.2f} "
            f"{r['predicted_s']:>8.2f} {r['error']:>+8.1%} {util:>14} {r['dram_GiB']:>8.2f} "
            f"{pub_s:>8} {mem_s:>8} {'yes' if r['fits_in_dram'] else 'NO':>7}"
        )
    lines.append("-" * len(head))
    lines.append(f"batch time: mean |error| {summ['mean_abs_error']:.1%}, max |error| "
                 f"{summ['max_abs_error']:.1%}")  # fmt: skip
    if summ["memory_mean_abs_error"] is not None:
        lines.append(f"DRAM per GPU vs published: mean |error| {summ['memory_mean_abs_error']:.1%}, "
                     f"max |error| {summ['memory_max_abs_error']:.1%}; every mapping fits in 80 GiB: "
                     f"{'yes' if summ['all_fit_80GiB'] else 'NO'}")  # fmt: skip
    lines.append("error = predicted / measured - 1; util = model FLOP / (time x GPUs x peak); "
                 "pub GiB = paper Fig. 1 (* = activations via Fig. 7)")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="calculon")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--compute-util", type=float, default=0.0,
                     help="0 = cycle model (default); u in (0, 1] = FLOP model at u x peak")  # fmt: skip
    how.add_argument("--fit", action="store_true",
                     help="calibrate u (FLOP model) on the cases; also leave-one-model-out")  # fmt: skip
    ap.add_argument("--style", choices=STYLES, default="kernel_by_kernel")
    args = ap.parse_args(argv)
    data = load_cases()
    profile = PROFILES[args.profile]
    t = time.perf_counter()
    fit = None
    if args.fit:
        fit = fit_compute_util(data, style=args.style, profile=profile)
        rows, util = fit["rows"], fit["u"]
    else:
        util = args.compute_util
        rows = evaluate_cases(data, compute_util=util, style=args.style, profile=profile)
    wall = time.perf_counter() - t
    summ = summary(rows)
    what = "cycle model" if util == 0 else f"FLOP model at u = {util:g}"
    print(f"dfsearch vs Megatron-LM on Selene ({len(rows)} cases of Calculon's validation; "
          f"profile {args.profile}, {what}, style {args.style})\n")  # fmt: skip
    if fit is not None:
        print(f"CALIBRATED: u = {util:g} minimises the mean |error| over these cases (grid "
              f"{FIT_GRID[0]}..{FIT_GRID[-1]}).\n")  # fmt: skip
    print(format_table(rows, summ))
    if fit is not None:
        print(f"leave-one-model-out (u chosen without the model's cases: "
              f"{', '.join(f'{m} {u:g}' for m, u in fit['loo_u'].items())}): mean |error| "
              f"{fit['loo_mean_abs_error']:.1%}, max |error| {fit['loo_max_abs_error']:.1%}")  # fmt: skip
    print(f"\nwall time {wall:.1f} s (JIT compilation included)")
    if args.json:
        out = {
            "settings": {"profile": args.profile, **vars(profile), "compute_util": util,
                         "fitted": fit is not None, "style": args.style,
                         "separate_rs_ag_for_ar": True, "equations": "v1",
                         "dram_capacity_bytes": HBM_BYTES, "seed": 0},
            "data": str(DATA.relative_to(ROOT)),
            "cases": rows,
            **summ,
            "wall_seconds": wall,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        }  # fmt: skip
        if fit is not None:
            out["leave_one_model_out"] = {k: fit[k] for k in ("loo_u", "loo_mean_abs_error",
                                                               "loo_max_abs_error")}  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
