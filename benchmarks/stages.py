"""Whole models in pipeline stages (issue 14): how long the stage search takes and what it
proves.

Cases (each a stacked graph of one layer with the embedding and LM head, the layer run
num_layer times per micro-batch; docs/model.md, "Pipeline stages of a whole model"):

* ``distilgpt-16``: ``examples/gpt_pipeline.toml`` (12 layers, V = 50,257, 16 GPUs, the
  second ring's role free: PP or DP);
* ``distilgpt-pp4``: the same with PP 4 on the second ring (four stages, the head's stage
  holds one layer);
* ``gpt3-1t-pp128``: the README case (GPT-3 1T, 1,024 SN30 chips, TP 8 x PP 128) with V =
  51,200: every stage one layer, the head's stage the slowest;
* ``gpt3-1t-free``: the same with both network sizes and roles free (535 outer choices).

Each case is searched once after a warm-up, without a time limit. Columns: outer choices,
solved, pruned by bounds, search seconds, status, final time per batch, PP, the slowest
stage and its share of the batch, and the stage boundaries that cut inside a layer.
``--stage-cuts`` sets ``search.stage_cuts = true`` (stage boundaries may cut inside a layer;
end stages may hold no whole layer).

Usage: ``python benchmarks/stages.py [--case NAME|all] [--stage-cuts]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CASES = ("distilgpt-16", "distilgpt-pp4", "gpt3-1t-pp128", "gpt3-1t-free")


def spec_text(case: str, stage_cuts: bool = False) -> str:
    if stage_cuts:
        text = spec_text(case)
        if "[search]" in text:
            return text.replace("[search]", "[search]\nstage_cuts = true", 1)
        return text + "\n[search]\nstage_cuts = true\n"
    if case == "distilgpt-16":
        return (EXAMPLES / "gpt_pipeline.toml").read_text()
    if case == "distilgpt-pp4":
        return spec_text("distilgpt-16").replace("link_bw_GBps = 100.0\n",
                                                 'link_bw_GBps = 100.0\nparallelism = "pp"\n')
    text = (EXAMPLES / "gpt3_1T_sn30.toml").read_text()
    text = text.replace("num_layer = 128 ", "vocab_size = 51200\nnum_layer = 128 ", 1)
    text = text.replace('\ngenerator = "llm"', '\ngenerator = "llm"\nembedding = true\nlm_head = true', 1)
    if case == "gpt3-1t-free":
        text = text.replace("size = 8\n", "size = 0\n", 1).replace("size = 128\n", "size = 0\n", 1)
        text = text.replace('parallelism = "tp"\n', "", 1).replace('parallelism = "pp"\n', "", 1)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="all", choices=[*CASES, "all"])
    ap.add_argument("--stage-cuts", action="store_true", help="search.stage_cuts = true")
    args = ap.parse_args()
    from dfsearch.loader import load_toml_spec
    from dfsearch.plan import run as search
    from dfsearch.search.warmup import warm_up

    warm_up()
    print(f"{'case':<15}{'choices':>8}{'solved':>8}{'pruned':>8}{'search s':>10}  {'status':<20}"
          f"{'final s':>10}{'PP':>5}{'slowest':>10}{'share':>7}{'cuts':>6}")  # fmt: skip
    for case in CASES if args.case == "all" else (args.case,):
        spec = load_toml_spec(spec_text(case, args.stage_cuts), file=f"{case}.toml", base_dir=EXAMPLES)
        t0 = time.perf_counter()
        r = search(spec)
        dt = time.perf_counter() - t0
        s, ev, plan = r.search, r.evaluation, r.stages
        slow = max(st.time_ns for st in plan.stages) if plan else float("nan")
        share = plan.micro_batches * slow / plan.batch_ns if plan else float("nan")
        print(f"{case:<15}{s.candidates:>8}{s.solved:>8}{s.pruned:>8}{dt:>10.2f}  "
              f"{s.status.label:<20}{ev.final_s if ev else float('nan'):>10.4g}"
              f"{ev.pp if ev else 0:>5}{slow / 1e6:>8.4g}ms{share:>7.1%}"
              f"{sum(bool(st.ends_after) for st in plan.stages) if plan else 0:>6}")  # fmt: skip


if __name__ == "__main__":
    main()
