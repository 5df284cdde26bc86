"""DistServe's goodput per GPU, co-located against split prefill and decode, simulated.

The published experiment (Zhong et al., "DistServe", OSDI 2024, section 2 and Figure 1): a
13B model on A100 80 GB GPUs, requests of 512 input and 64 output tokens, SLOs P90 TTFT
<= 0.4 s and P90 TPOT <= 40 ms. Goodput: the highest request rate at which at least 90 %
of the requests meet both SLOs. Published: one co-located GPU 1.6 requests/s; a
prefill-only GPU 5.6 and a decode-only GPU 10 requests/s; two prefill GPUs and one decode
GPU 10 requests/s, 3.3 per GPU, 2.1x the co-located.

Here: the step times of TP 1 on the A100 preset from dfsearch's own mappings (realistic
execution model), the request-level simulator of ``dfsearch.capacity`` (Poisson arrivals,
the first tenth not measured), and for each deployment the highest rate on a grid of 0.1
requests/s whose measured requests meet both SLOs at >= 90 %. The co-located replica is the
simulator's scheduler (decodes first, chunked prefill) with a token budget of
``--colocated-chunk`` tokens; the prefill pool takes one 512-token prompt per iteration.

Usage: ``python benchmarks/serve_distserve.py [--requests N] [--json PATH]`` (about a minute
on one core, most of it the step searches).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "benchmarks/data/distserve_opt13b_a100.toml"
TTFT_S, TPOT_S, ATTAINMENT = 0.4, 0.040, 0.90
PUBLISHED = {"colocated": 1.6, "prefill_only": 5.6, "decode_only": 10.0, "split_2p1d": 10.0,
             "split_2p1d_per_gpu": 3.3, "ratio_per_gpu": 2.1}


def _model(cache_chunks: tuple[int, ...]):
    from dfsearch.capacity import command
    from dfsearch.capacity.mapped_steps import (
        Shape,
        StepCache,
        batch_grid,
        context_grid,
        digest,
        prefill_grid,
        replica_model,
    )
    from dfsearch.capacity.serve_spec import read_serve_spec
    from dfsearch.capacity.spec_measure import SpecMeasure

    data, serve = read_serve_spec(SPEC)
    chip = serve.chips[0]
    usable = serve.memory_fraction * command.chip_dram_bytes(SPEC, data, chip)
    cache = StepCache(SpecMeasure(data, str(SPEC), serve.scale_out_bw_GBps, serve.chips), digest(data))
    model = replica_model(cache, Shape(1, 1, chip.name, chip.dollars_per_chip_hour),
                          prefills=prefill_grid(set(cache_chunks)), batches=batch_grid(serve.batch_caps),
                          contexts=context_grid(513, 576), usable_bytes_per_chip=usable)
    return serve, model, cache.searches


def _attainment(reqs, first, finish) -> float:
    w = len(reqs) // 10
    ttft = first[w:] - reqs.arrival_s[w:]
    tpot = (finish[w:] - first[w:]) / (reqs.output_tokens[w:] - 1)
    return float(((ttft <= TTFT_S) & (tpot <= TPOT_S)).mean())


def _goodput(run, rates) -> float:
    """The highest rate of ``rates`` (ascending) before the first whose attainment is < 90 %."""
    best = 0.0
    for r in rates:
        if run(r) < ATTAINMENT:
            break
        best = r
    return best


def main() -> None:
    from dfsearch.capacity.deployments import (
        Candidate,
        run_colocated,
        run_decode_pool,
        run_prefill_pool,
    )
    from dfsearch.capacity.traffic import Fixed, Poisson, Traffic, requests
    from dfsearch.codes import ServeMode

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--colocated-chunk", type=int, default=2048)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    serve, m, searches = _model((512, args.colocated_chunk))
    cap, block = serve.batch_caps[0], serve.block_tokens

    def reqs_at(rate):
        return requests(Traffic(Poisson(rate), Fixed(512), Fixed(64)), args.requests, 0)

    def colocated(rate):
        q = reqs_at(rate)
        first, finish, _ = run_colocated(q, m, Candidate(ServeMode.COLOCATED, m.shape, 1, cap, args.colocated_chunk),
                                         block)
        return _attainment(q, first, finish)

    def split(p, d, prefill_only=False, decode_only=False):
        def run(rate):
            q = reqs_at(rate)
            if decode_only:  # every request arrives prefilled: its first token at its arrival
                first = q.arrival_s.copy()
            else:
                first, _ = run_prefill_pool(q, m, p, 512, block)
            if prefill_only:
                w = len(q) // 10
                return float((first[w:] - q.arrival_s[w:] <= TTFT_S).mean())
            finish, _ = run_decode_pool(q, first, np.zeros(len(q)), m, d, cap, block)
            return _attainment(q, first, finish)
        return run

    grid = [round(0.1 * i, 1) for i in range(1, 401)]
    got = {"colocated": _goodput(colocated, grid), "prefill_only": _goodput(split(1, 0, prefill_only=True), grid),
           "decode_only": _goodput(split(0, 1, decode_only=True), grid), "split_2p1d": _goodput(split(2, 1), grid)}
    got["split_2p1d_per_gpu"] = got["split_2p1d"] / 3
    got["ratio_per_gpu"] = got["split_2p1d_per_gpu"] / got["colocated"] if got["colocated"] else float("inf")
    print(f"step searches: {searches}; KV cache {m.kv_capacity_bytes / 1e9:.3g} GB")
    print("| goodput (requests/s, >= 90 % within both SLOs) | published | simulated | error |\n|---|---:|---:|---:|")
    for k, pub in PUBLISHED.items():
        print(f"| {k} | {pub:g} | {got[k]:.3g} | {got[k] / pub - 1:+.0%} |")
    if args.json:
        args.json.write_text(json.dumps({"published": PUBLISHED, "simulated": got}, indent=1))


if __name__ == "__main__":
    main()
