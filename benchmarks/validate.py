"""dfsearch's predictions against published runs (training, prefill, decode).

Reads ``benchmarks/data/published_runs.json`` (each run with its source, quote, configuration
and measured figure), builds one spec per selected run from the presets (chip, fabric) and
the run's own model dimensions, fixes the run's TP, PP, DP, batch and sequence length, runs
it with the realistic execution model and with DFModel's equations, and prints the measured
figure next to both predictions in the source's unit.

Usage: ``python benchmarks/validate.py [--only ID[,ID...]] [--json PATH] [--markdown] [--fit]``

Error = predicted / measured - 1 for a rate (TFLOP/s, tokens/s: negative = dfsearch predicts
a slower run), and predicted / measured - 1 for a time (TTFT, ITL, seconds per iteration:
negative = faster). The summary gives mean |error| and max |error| per kind, for the
realistic model, separately for the anchors the constants were fitted on (``FIT_IDS``,
``FP8_FIT_IDS``, ``SERVING_FIT_IDS``) and the other runs.

How each kind becomes a spec
----------------------------
* training: ``[graph] generator = "llm"``, three switch dimensions, innermost first, as
  Megatron places ranks: TP on the chip's NVLink (``fabric = "nvlink"``), PP and DP on its
  InfiniBand; the training memory model, the run's recomputation; micro-batch 1 where the
  source gives none; the embedding and the LM head with the run's vocabulary (Megatron's
  FLOP formula counts the head, so the fitted GEMM ceiling must not absorb it). Predicted figure: the source's (Megatron's TFLOP/s per GPU by its
  formula 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) over the predicted time; MT-NLG's seconds
  per iteration; NeMo's tokens per second per GPU).
* prefill: ``kind = "llm_serving"``, ``phase = "prefill"``, batch 1, the input length as
  the prompt, TP on NVLink, the engine's fused causal attention (``fused_attention``:
  TensorRT-LLM's build commands set ``--enable_context_fmha``); TTFT = the predicted step
  latency.
* decode: ``phase = "decode"`` with the run's batch (1 when the source gives none); the
  step attends over the mean context (input + half the output, docs/model.md "LLM
  serving") in the engine's one generation attention kernel (``fused_attention`` again),
  reading the KV cache once per query head on engines without a grouped-query decode kernel
  (``kv_per_query_head``, ``NO_GQA_DECODE_KERNEL``); ITL = one step's latency; throughput =
  batch x output tokens / (prefill of the batch + output x step), per GPU.

FP8 runs use ``word_bytes = 1`` (the chip's FP8 peak and the preset's FP8 ceiling,
``GEMM_CEILING_FP8``, fitted on ``FP8_FIT_IDS``), FP16/BF16 runs ``word_bytes = 2`` (serving
runs: the preset's serving ceiling, ``GEMM_CEILING_SERVING``, fitted on ``SERVING_FIT_IDS``).
Serving specs take the preset's ``overlap = "compute_memory"`` (launches and TP collectives
after each kernel), except the engines of ``NO_OVERLAP_ENGINES`` (TensorRT-LLM v0.5:
``overlap = "none"``, a kernel's HBM traffic and math added; chosen on its FP8 anchor). A
mapping that does not fit in the GPU's HBM is evaluated again with unlimited DRAM (flagged
``*``): the comparison is of time.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "published_runs.json"

#: the runs compared, by kind; the rest of the file is skipped (``SKIPPED`` says why)
TRAINING = (
    "megatron21-t1-gpt-1p7b", "megatron21-t1-gpt-3p6b", "megatron21-t1-gpt-7p5b",
    "megatron21-t1-gpt-18p4b", "megatron21-t1-gpt-39p1b", "megatron21-t1-gpt-76p1b",
    "megatron21-t1-gpt-145p6b", "megatron21-t1-gpt-310p1b", "megatron21-t1-gpt-529p6b",
    "megatron21-t1-gpt-1008b", "megatron21-t2-gpt3-175b-ptdp-384gpu",
    "megatron21-t2-gpt3-175b-ptdp-768gpu", "megatron21-t2-gpt3-175b-ptdp-1536gpu",
    "mtnlg-530b-2240gpu", "mtnlg-530b-2800gpu", "mtnlg-530b-3360gpu",
    "megatron21-t2-gpt3-175b-zero3-384gpu", "megatron21-t2-gpt3-175b-zero3-768gpu",
    "megatron21-t2-gpt3-175b-zero3-1536gpu",
)
PREFILL = (
    "trtllm-v05-h100-llama2-7b-ttft-isl128", "trtllm-v05-h100-llama2-7b-ttft-isl2048",
    "trtllm-v05-h100-llama2-70b-tp4-ttft-isl128", "trtllm-v05-h100-llama2-70b-tp4-ttft-isl2048",
    "trtllm-v05-a100-llama2-7b-ttft-isl2048", "trtllm-v05-a100-llama2-70b-tp4-ttft-isl2048",
    "trtllm-v05-a100-llama2-7b-ttft-isl128", "trtllm-v05-a100-llama2-70b-tp4-ttft-isl128",
    "nim18-h100x2-llama33-70b-5000in-500out-c1",
)
DECODE = (
    "trtllm-v061-h100-llama2-70b-tp2-bs64-2048in-2048out",
    "trtllm-v061-h100-llama2-70b-tp2-bs1024-128in-128out",
    "trtllm-v061-h100-llama2-7b-tp1-bs112-128in-2048out",
    "trtllm-v061-h100-llama2-7b-tp1-bs768-128in-128out",
    "trtllm-v061-h100-llama2-7b-tp1-bs80-2048in-128out",
    "trtllm-v061-h100-llama2-7b-tp1-bs48-2048in-2048out",
    "trtllm-v061-h100-llama2-70b-tp4-bs480-128in-2048out",
    "trtllm-v061-h100-llama2-70b-tp2-bs96-2048in-128out",
    "nim18-h100x2-llama33-70b-500in-2000out-c1",
)
#: the anchors the fitted constant (the GEMM ceiling, ``presets.expand.GEMM_CEILING``) was
#: chosen on; reported apart from the rest
FIT_IDS = ("megatron21-t1-gpt-18p4b", "megatron21-t1-gpt-76p1b", "megatron21-t1-gpt-310p1b")
#: the anchors the FP8 GEMM ceiling (``presets.expand.GEMM_CEILING_FP8``) was chosen on: the
#: compute-bound FP8 prefills that are not launch-bound short prompts, one per engine
#: generation (TensorRT-LLM v0.5 on one H100, 2023; NIM 1.8 on 2 x H100, 2025)
FP8_FIT_IDS = ("trtllm-v05-h100-llama2-7b-ttft-isl2048",
               "nim18-h100x2-llama33-70b-5000in-500out-c1")
#: engines whose generation attention kernel reads each KV head once per query head of its
#: group: TensorRT-LLM before 0.7.1, whose release notes list "MMHA optimization for MQA and
#: GQA" and "FP8 KV cache support for XQA kernel" (docs/source/release-notes.md)
NO_GQA_DECODE_KERNEL = ("TensorRT-LLM v0.5", "TensorRT-LLM v0.6")
#: the anchor the serving GEMM ceiling for 2-byte words (``presets.expand.GEMM_CEILING_SERVING``)
#: was chosen on: the one compute-bound FP16 prefill (TensorRT-LLM v0.5 on one A100)
SERVING_FIT_IDS = ("trtllm-v05-a100-llama2-7b-ttft-isl2048",)
#: engines whose passes are modelled with a kernel's HBM traffic and its math adding up
#: (``overlap = "none"``) instead of overlapping (the serving default ``"compute_memory"``):
#: TensorRT-LLM v0.5, chosen on its fit anchor (docs/validation.md, "What was fitted")
NO_OVERLAP_ENGINES = ("TensorRT-LLM v0.5",)
#: every fit anchor (marked "f" / "(fit)", apart in the summary)
ALL_FIT_IDS = FIT_IDS + FP8_FIT_IDS + SERVING_FIT_IDS
SKIPPED = {
    "llama3-405b-*": "no global batch or micro-batch in the source; context parallelism",
    "nemo2407-*": "FP8 Transformer Engine (mixed FP8/BF16 kernels) and recomputation not "
                  "stated; left for the next slice",
    "bloom-176b-384gpu": "ALiBi, embedding LayerNorm and a 250k vocabulary (LM head not "
                         "modelled yet)",
    "opt-175b-992gpu": "PP and DP not in the source",
    "trtllm-po-*, nim18-*-c50, trtllm-v05-h200-*": "in-flight batching at a scheduler-chosen "
                                                   "batch: no fixed batch to model",
    "mlperf-*": "time to train: no configuration in the source",
}
GPUS_PER_NODE = 8
#: the serving engines compared (TensorRT-LLM, NIM on it) run a fused causal attention kernel
#: in the prefill (TensorRT-LLM's context FMHA)
FUSED = "fused_attention = true\n"
FIT_GRID = tuple(round(0.40 + 0.025 * i, 3) for i in range(23))  # 0.400 ... 0.950


@dataclass(frozen=True)
class Row:
    id: str
    kind: str
    unit: str
    measured: float
    predicted: float  #: realistic model
    dfmodel: float  #: DFModel's equations
    fits_dram: bool
    source: str

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def dfmodel_error(self) -> float:
        return self.dfmodel / self.measured - 1.0


# --------------------------------------------------------------------------- specs
def _word(run: dict) -> int:
    return 1 if "FP8" in str(run["config"].get("precision", "")) else 2


def _chip(run: dict) -> str:
    gpus = run["system"]["gpus"]
    return "h100" if "H100" in gpus else "a100"


def _model_keys(run: dict, seq_len: int) -> tuple[str, str]:
    """(the [workload] shape keys, the [graph] layer keys) of the run's model."""
    m = run["model"]
    hidden, heads = m["hidden"], m["heads"]
    gated = m["ffn_hidden"] != 4 * hidden  # GPT: 4h MLP; Llama: gated (SwiGLU)
    wl = (f"hidden_dim = {hidden}\nnum_head = {heads}\nhead_dim = {hidden // heads}\n"
          f"num_layer = {m['layers']}\nseq_len = {seq_len}\n")
    graph = f"num_kv_head = {m['kv_heads']}\ngated_ffn = {int(gated)}\n"
    return wl, graph


def _dim(fabric: str, size: int, par: str) -> str:
    return (f'[[system.network]]\nfabric = "{fabric}"\nsize = {size}\n'
            f'parallelism = "{par}"\n')


def _system(run: dict, chips: int, dims: str, model: str, ceiling: float | None,
            overlap: str = "") -> str:
    util = f"compute_util = {ceiling}\n" if ceiling is not None and model == "realistic" else ""
    if overlap and model == "realistic":
        util += f'overlap = "{overlap}"\n'
    return (f'[system]\npreset = "{_chip(run)}"\nnum_chip = {chips}\n{dims}'
            f'[execution]\nmodel = "{model}"\nword_bytes = {_word(run)}\n{util}'
            f"{'' if model == 'realistic' else 'compute_util = 0.0' + chr(10)}"
            '[search]\nseed = 0\n')


def _parallel(run: dict) -> tuple[int, int, int]:
    """(TP, PP, DP) of a training run; a ZeRO-3 run "without model parallelism" (the
    scheme Megatron-LM's Table 2 compares against) is DP over every GPU."""
    c = run["config"]
    if "TP" not in c and c.get("zero_stage") == 3:
        return 1, 1, run["system"]["gpu_count"]
    return c["TP"], c["PP"], c["DP"]


def _schedule(run: dict) -> str:
    """The [training] choices the run states: ZeRO stage (0 when the source gives none),
    no sequence parallelism (none of these runs used it); the interleave degree left to
    the search where the source says the interleaved schedule ran without giving its
    degree (Megatron-LM SC'21 Table 1), 1 otherwise (DeepSpeed's pipeline and ZeRO-3 have
    no interleaving; Table 2 names none)."""
    c = run["config"]
    interleaved = "interleaved" in str(c.get("interleaving") or "")
    return (f'zero_stage = {int(c.get("zero_stage") or 0)}\nsequence_parallel = false\n'
            f'interleave = {chr(34) + "auto" + chr(34) if interleaved else 1}\n')


def training_toml(run: dict, model: str, ceiling: float | None = None) -> str:
    c = run["config"]
    tp, pp, dp = _parallel(run)
    wl, graph = _model_keys(run, c["seq_len"])
    mb = c.get("micro_batch") or 1
    dims = _dim("nvlink", tp, "tp") + _dim("infiniband", pp, "pp") + _dim("infiniband", dp, "dp")
    full = ("full" in str(c.get("recomputation", "")) or run["id"].startswith("mtnlg")
            or c.get("zero_stage") == 3)
    return (f'[workload]\nkind = "llm"\n{wl}global_batch_size = {c["global_batch"]}\n'
            f'micro_batch_size = {mb}\n[graph]\ngenerator = "llm"\n'
            f'ffn_dim = {run["model"]["ffn_hidden"]}\n{graph}'
            f'vocab_size = {run["model"]["vocab"]}\nembedding = true\nlm_head = true\n'
            + _system(run, tp * pp * dp, dims, model, ceiling)
            + f'[training]\nmemory_model = "training"\n'
              f'recompute = "{"full" if full else "none"}"\n' + _schedule(run))


def serving_toml(run: dict, model: str, phase: str, batch: int = 1,
                 ceiling: float | None = None) -> str:
    """One serving step (``kind = "llm_serving"``): the prefill of ``batch`` prompts, or one
    decode step of ``batch`` sequences over the mean context."""
    c, m = run["config"], run["model"]
    tp, hidden, heads = c["TP"], m["hidden"], m["heads"]
    gated = m["ffn_hidden"] != 4 * hidden
    out = c["output_len"] if phase == "decode" else 1
    per_head = phase == "decode" and str(c["framework"]).startswith(NO_GQA_DECODE_KERNEL)
    serial = "none" if str(c["framework"]).startswith(NO_OVERLAP_ENGINES) else ""
    return (f'[workload]\nkind = "llm_serving"\nphase = "{phase}"\nhidden_dim = {hidden}\n'
            f'num_head = {heads}\nhead_dim = {hidden // heads}\nnum_kv_head = {m["kv_heads"]}\n'
            f'ffn_dim = {m["ffn_hidden"]}\ngated_ffn = {int(gated)}\nnum_layer = {m["layers"]}\n'
            f'prompt_len = {c["input_len"]}\noutput_len = {out}\nbatch_size = {batch}\n'
            f'max_batch_size = {max(batch, 256)}\n'
            f'[graph]\ngenerator = "llm-serving"\n{FUSED}'
            + ("kv_per_query_head = true\n" if per_head else "")
            + _system(run, tp, _dim("nvlink", tp, "tp"), model, ceiling, serial))


# --------------------------------------------------------------------------- runs
def run_seconds(toml_text: str, name: str) -> tuple[float, bool]:
    """(final_s, fits in HBM) of one spec; with unlimited DRAM when it does not fit."""
    import dfsearch
    from dfsearch.errors import InfeasibleError
    from dfsearch.loader import load_toml_spec

    spec = load_toml_spec(toml_text, file=f"{name}.toml", base_dir=ROOT)
    try:
        return dfsearch.run(spec).evaluation.final_s, True
    except InfeasibleError:
        pass
    try:
        result = dfsearch.run(dfsearch.replace(spec, "system.memory.dram_bytes", 0))
    except InfeasibleError:  # another constraint (DFModel's SRAM rule): no time to compare
        return math.nan, False
    return result.evaluation.final_s, False


def megatron_flop(run: dict) -> float:
    """Megatron-LM's FLOP per iteration (its Eq. 3, recomputation included)."""
    m, c = run["model"], run["config"]
    b, s, n, h, v = c["global_batch"], c["seq_len"], m["layers"], m["hidden"], m["vocab"]
    return 96.0 * b * s * n * h * h * (1 + s / (6 * h) + v / (16 * n * h))


def figure(run: dict, model: str, ceiling: float | None = None) -> tuple[str, float, float, bool]:
    """(unit, measured, predicted, fits in HBM) of one run under ``model``."""
    kind, meas, c = run["kind"], run["measured"], run["config"]
    if kind == "training":
        t, fits = run_seconds(training_toml(run, model, ceiling), run["id"])
        if "seconds_per_iteration" in meas:
            return "s/iter", meas["seconds_per_iteration"], t, fits
        gpus = math.prod(_parallel(run))
        return "TFLOP/s/GPU", meas["tflops_per_gpu"], megatron_flop(run) / t / gpus / 1e12, fits
    if kind == "prefill":
        t, fits = run_seconds(serving_toml(run, model, "prefill", ceiling=ceiling), run["id"])
        return "TTFT ms", meas["ttft_ms"], t * 1e3, fits
    bs = c.get("batch_size") or 1
    step, fits = run_seconds(serving_toml(run, model, "decode", bs, ceiling), run["id"])
    if "itl_ms" in meas:
        return "ITL ms", meas["itl_ms"], step * 1e3, fits
    pre, fits2 = run_seconds(serving_toml(run, model, "prefill", bs, ceiling), run["id"])
    rate = bs * c["output_len"] / (pre + c["output_len"] * step) / c["TP"]
    return "tok/s/GPU", meas["output_tokens_per_s_per_gpu"], rate, fits and fits2


def evaluate(runs: dict[str, dict], ids: tuple[str, ...], ceiling: float | None = None
             ) -> list[Row]:
    rows = []
    for rid in ids:
        run = runs[rid]
        unit, meas, pred, fits = figure(run, "realistic", ceiling)
        _, _, base, _ = figure(run, "dfmodel")
        src = run["source"]
        rows.append(Row(rid, run["kind"], unit, float(meas), pred, base, fits,
                        f"{src.get('title', '')[:40]} ({src.get('year', '')})"))
        print(f"  {rid}: {pred:.4g} vs {meas:.4g} {unit}", file=sys.stderr, flush=True)
    return rows


def summary(rows: list[Row]) -> dict[str, dict[str, float]]:
    """Mean and max |error| per kind (realistic, DFModel), all runs and the non-fit ones."""
    out: dict[str, dict[str, float]] = {}
    fit = ALL_FIT_IDS
    for kind in ("training", "prefill", "decode"):
        held = [r for r in rows if r.id not in fit]
        splits = (("all", rows), ("held out", held)) if len(held) < len(rows) else (("all", rows),)
        for label, sel in splits:
            if label == "held out" and all(r.id not in fit for r in rows if r.kind == kind):
                continue
            errs = [abs(r.error) for r in sel if r.kind == kind]
            base = [abs(r.dfmodel_error) for r in sel if r.kind == kind]
            if errs:
                out[f"{kind} ({label})"] = {
                    "n": len(errs), "mean_abs_error": sum(errs) / len(errs), "max_abs_error":
                    max(errs), "dfmodel_mean_abs_error": sum(base) / len(base),
                    "dfmodel_max_abs_error": max(base)}
    return out


def format_table(rows: list[Row], summ: dict[str, dict[str, float]]) -> str:
    head = (f"{'id':52s} {'kind':8s} {'unit':11s} {'measured':>9s} {'realistic':>9s} "
            f"{'error':>7s} {'dfmodel':>9s} {'error':>7s}  source")
    lines = [head, "-" * len(head)]
    for r in rows:
        mark = ("*" if not r.fits_dram else "") + ("f" if r.id in ALL_FIT_IDS else "")
        lines.append(f"{r.id + mark:52s} {r.kind:8s} {r.unit:11s} {r.measured:9.4g} "
                     f"{r.predicted:9.4g} {r.error:+7.1%} {r.dfmodel:9.4g} "
                     f"{r.dfmodel_error:+7.1%}  {r.source}")
    lines.append("")
    lines.append("* needs more than the GPU's HBM (time evaluated with unlimited DRAM); "
                 "f: a fit anchor")
    for k, v in summ.items():
        lines.append(f"{k:22s} n={v['n']:2.0f}  realistic mean |err| {v['mean_abs_error']:6.1%}"
                     f"  max {v['max_abs_error']:6.1%}   dfmodel mean "
                     f"{v['dfmodel_mean_abs_error']:6.1%}  max {v['dfmodel_max_abs_error']:6.1%}")
    return "\n".join(lines)


def format_markdown(rows: list[Row], summ: dict[str, dict[str, float]]) -> str:
    """The table and the summary as docs/validation.md shows them."""
    lines = ["| run | kind | unit | measured | realistic | error | DFModel eqs. | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = (" *" if not r.fits_dram else "") + (" (fit)" if r.id in ALL_FIT_IDS else "")
        lines.append(f"| {r.id}{mark} | {r.kind} | {r.unit} | {r.measured:.4g} | "
                     f"{r.predicted:.4g} | {r.error:+.1%} | {r.dfmodel:.4g} | "
                     f"{r.dfmodel_error:+.1%} |")
    lines += ["", "| kind | runs | realistic mean abs. error | max | DFModel eqs. mean | max |",
              "|---|---|---|---|---|---|"]
    for k, v in summ.items():
        lines.append(f"| {k} | {v['n']:.0f} | {v['mean_abs_error']:.1%} | "
                     f"{v['max_abs_error']:.1%} | {v['dfmodel_mean_abs_error']:.1%} | "
                     f"{v['dfmodel_max_abs_error']:.1%} |")
    return "\n".join(lines)


def fit_ceiling(runs: dict[str, dict], ids: tuple[str, ...] = FIT_IDS) -> float:
    """The GEMM ceiling on ``FIT_GRID`` that minimises the mean |error| over ``ids``."""
    best, best_err = FIT_GRID[0], math.inf
    for u in FIT_GRID:
        errs = []
        for rid in ids:
            _, meas, pred, _ = figure(runs[rid], "realistic", u)
            errs.append(abs(pred / meas - 1.0))
        err = sum(errs) / len(errs)
        print(f"  ceiling {u:.3f}: mean |error| on the anchors {err:.1%}", file=sys.stderr)
        if err < best_err:
            best, best_err = u, err
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated run ids")
    ap.add_argument("--json", type=Path, help="write the rows and the summary here")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--fit", action="store_true",
                    help="choose the GEMM ceilings (FP16/BF16, FP8) on their fit anchors and "
                         "print them (no table)")
    args = ap.parse_args(argv)
    runs = {r["id"]: r for r in json.loads(DATA.read_text())}
    if args.fit:
        print(f"GEMM ceiling fitted on {', '.join(FIT_IDS)}: {fit_ceiling(runs)}")
        print(f"FP8 GEMM ceiling fitted on {', '.join(FP8_FIT_IDS)}: "
              f"{fit_ceiling(runs, FP8_FIT_IDS)}")
        print(f"Serving GEMM ceiling (2-byte words) fitted on {', '.join(SERVING_FIT_IDS)}: "
              f"{fit_ceiling(runs, SERVING_FIT_IDS)}")
        return 0
    ids = TRAINING + PREFILL + DECODE
    if args.only:
        ids = tuple(i for i in ids if i in args.only.split(","))
    rows = evaluate(runs, ids)
    summ = summary(rows)
    print(format_markdown(rows, summ) if args.markdown else format_table(rows, summ))
    print("\nskipped: " + "; ".join(f"{k}: {v}" for k, v in SKIPPED.items()))
    if args.json:
        args.json.write_text(json.dumps({
            "rows": [{**r.__dict__, "error": r.error, "dfmodel_error": r.dfmodel_error}
                     for r in rows], "summary": summ, "fit_ids": ALL_FIT_IDS},
            indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
