"""The LLM-serving tables of docs/serving.md, measured side by side in one run.

All on the setting of the DFModel paper's serving study: Llama-3-8B (GQA, SwiGLU) on 16
SN40L-like chips (dfsearch/examples/llama3_8b_decode_sn40l.toml), a 4096-token prompt and
128 generated tokens; each row is one ``dfsearch.run`` with the network pinned to TP x PP
rings (25 GB/s links, 150 ns latency):

1. decode, batch 1: TPOT and tokens/s for every TP x PP = 16;
2. prefill, batch 1: TTFT and prompt tokens/s for every TP x PP = 16;
3. the batch sweep at TP 16: TPOT and tokens/s for B = 1 .. 256;
4. the paper comparison at TP 16 x PP 1, batch 1 (DFModel modelled 1188 tokens/s, SN40L
   measured 1100);
5. speculative decoding (dfsearch/examples/llama3_405b_specdec_sn40l.toml: Llama-3.1-405B
   target, Llama-3-8B draft, TP 16): speedup over plain decode for window K x acceptance
   rate alpha, sequence and tree.

Usage: ``python benchmarks/serving_tables.py [--json PATH]``. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECODE = ROOT / "dfsearch/examples/llama3_8b_decode_sn40l.toml"
SPECDEC = ROOT / "dfsearch/examples/llama3_405b_specdec_sn40l.toml"
SHAPES = [(16, 1), (8, 2), (4, 4), (2, 8), (1, 16)]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
WINDOWS = [1, 2, 4, 8]
ALPHAS = [0.5, 0.7, 0.8, 0.9]
DFMODEL_MODELLED, SN40L_MEASURED = 1188.0, 1100.0

_NET = """[[system.network]]
topology = "ring"
size = {tp}
link_bw_GBps = 25.0
parallelism = "tp"

[[system.network]]
topology = "ring"
size = {pp}
link_bw_GBps = 25.0
parallelism = "pp"
"""


def serving_spec(*, tp: int = 16, pp: int = 1, phase: str = "decode", batch: int = 1):
    """The decode example with the network pinned to TP x PP rings, the phase and batch set
    (objective: the step latency of the phase)."""
    from dfsearch.loader import load_toml_spec

    text = DECODE.read_text()
    text = re.sub(r'\[\[system.network\]\].*?parallelism = "tp"\n', _NET.format(tp=tp, pp=pp),
                  text, flags=re.S)  # fmt: skip
    text = text.replace('phase = "decode"', f'phase = "{phase}"')
    text = text.replace("batch_size = 1 ", f"batch_size = {batch} ")
    if phase == "prefill":
        text = text.replace('objective = "tpot"', 'objective = "ttft"')
    return load_toml_spec(text, file=str(DECODE), base_dir=DECODE.parent)


def run_metrics(spec) -> dict:
    import dfsearch
    from dfsearch.workloads.serving import serving_metrics

    r = dfsearch.run(spec)
    m = serving_metrics(r.evaluation)
    return {"step_ms": m.step_ns / 1e6, "tokens_per_s": m.tokens_per_s,
            "optimal": r.search.optimal}  # fmt: skip


def parallelism_table(phase: str) -> list[dict]:
    return [{"tp": tp, "pp": pp, **run_metrics(serving_spec(tp=tp, pp=pp, phase=phase))}
            for tp, pp in SHAPES]  # fmt: skip


def batch_table() -> list[dict]:
    return [{"batch": b, **run_metrics(serving_spec(batch=b))} for b in BATCHES]


def specdec_table(scheme: str) -> list[dict]:
    import dfsearch

    base = dfsearch.load(SPECDEC)
    rows = []
    for k in WINDOWS:
        for alpha in ALPHAS:
            spec = dfsearch.replace(base, "speculative.window", k)
            spec = dfsearch.replace(spec, "speculative.acceptance_rate", alpha)
            spec = dfsearch.replace(spec, "speculative.scheme", scheme)
            sp = dfsearch.run(spec).speculative
            rows.append({"scheme": scheme, "window": k, "alpha": alpha,
                         "expected_tokens": sp.expected_tokens, "speedup": sp.speedup,
                         "draft_ms": sp.draft_ns / 1e6, "verify_ms": sp.verify_ns / 1e6,
                         "tokens_per_s": sp.tokens_per_s_replica * sp.dp,
                         "optimal": sp.optimal})  # fmt: skip
    return rows


def _md(rows: list[dict], cols: list[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(c[1] for c in cols) + " |"
    sep = "|" + "|".join("---:" for _ in cols) + "|"
    body = ["| " + " | ".join(format(r[c[0]], c[2]) for c in cols) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def _grid(rows: list[dict], scheme: str) -> str:
    """Speedup by window (rows) and acceptance rate (columns)."""
    head = "| K \\ alpha | " + " | ".join(f"{a:g}" for a in ALPHAS) + " |"
    sep = "|" + "|".join("---:" for _ in range(len(ALPHAS) + 1)) + "|"
    body = []
    for k in WINDOWS:
        cells = [r for r in rows if r["window"] == k and r["scheme"] == scheme]
        body.append(f"| {k} | " + " | ".join(f"{r['speedup']:.2f}x (E {r['expected_tokens']:.2f})"
                                             for r in cells) + " |")  # fmt: skip
    return "\n".join([head, sep, *body])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", type=Path, help="also write every row as JSON")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = {
        "decode": parallelism_table("decode"),
        "prefill": parallelism_table("prefill"),
        "batch": batch_table(),
        "specdec": specdec_table("sequence") + specdec_table("tree"),
    }
    ms = [
        ("step_ms", "ms", ".4g"),
        ("tokens_per_s", "tokens/s", ",.1f"),
        ("optimal", "proven", ""),
    ]
    print("## Decode, batch 1: TP x PP on 16 SN40L-like chips\n")
    print(
        _md(out["decode"], [("tp", "TP", "d"), ("pp", "PP", "d"), *ms]).replace(
            "| ms |", "| TPOT ms |"
        )
    )
    print("\n## Prefill (4096 tokens), batch 1: TP x PP on 16 SN40L-like chips\n")
    print(
        _md(out["prefill"], [("tp", "TP", "d"), ("pp", "PP", "d"), *ms]).replace(
            "| ms |", "| TTFT ms |"
        )
    )
    print("\n## Decode batch sweep at TP 16 x PP 1\n")
    print(_md(out["batch"], [("batch", "batch", "d"), *ms]).replace("| ms |", "| TPOT ms |"))
    paper = out["decode"][0]["tokens_per_s"]
    print("\n## The paper's setting: Llama-3-8B decode, TP 16 x PP 1, batch 1\n")
    print(f"dfsearch {paper:,.0f} tokens/s; DFModel modelled {DFMODEL_MODELLED:,.0f} "
          f"({paper / DFMODEL_MODELLED - 1:+.1%}), SN40L measured {SN40L_MEASURED:,.0f} "
          f"({paper / SN40L_MEASURED - 1:+.1%})")  # fmt: skip
    for scheme in ("sequence", "tree"):
        print(
            f"\n## Speculative decoding ({scheme}): 405B target, 8B draft, TP 16, batch 1 -- "
            "speedup over plain decode\n"
        )
        print(_grid(out["specdec"], scheme))
    proven = all(r["optimal"] for rows in out.values() for r in rows)
    print(
        f"\n{sum(len(v) for v in out.values())} runs in {time.perf_counter() - t0:.1f} s; "
        f"every run proven optimal: {proven}"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
