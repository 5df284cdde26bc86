"""How far every shipped example's answer can be from the optimum (issue 26).

Runs each search example of ``dfsearch/examples/*.toml`` with its default settings (after
compiling every jitted function, ``search/warmup.py``), one at a time, and lists its status,
final time per batch (the example's objective value where it is not time), the lower bound
the result states, the gap (final - bound) / final, and the CPU seconds of the search
(process time). A gap above ``--limit`` (default 0.5 %) is flagged with ``<<``, as is a
bound above the final value (a bug: the bound must hold for every mapping). The exit status
is 1 when any example is flagged, else 0.

Usage: ``python benchmarks/gaps.py [NAME ...] [--limit 0.005] [--json PATH]`` (NAME: a file
stem, e.g. ``dlrm_a100x128``; default all).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hard import measure  # the same measurement as the hard targets (this folder)

EXAMPLES = Path(__file__).resolve().parents[1] / "dfsearch" / "examples"


def flagged(row: dict[str, object], limit: float) -> bool:
    """A gap above ``limit``, no bound at all, or a bound above the final value."""
    gap, final, bound = row["gap"], row["final_s"], row["bound_s"]
    if bound is not None and bound > final * (1 + 1e-12):  # type: ignore[operator]
        return True
    return not (isinstance(gap, float) and gap <= limit)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="example stems (default: all)")
    ap.add_argument("--limit", type=float, default=0.005, help="largest gap not flagged")
    ap.add_argument("--json", default="", help="also write the rows as JSON to this path")
    args = ap.parse_args()
    paths = sorted(EXAMPLES.glob("*.toml"))
    if args.names:
        paths = [EXAMPLES / f"{n}.toml" for n in args.names]
    from dfsearch.search.warmup import warm_up

    warm_up()
    print(f"{'example':<28} {'status':>20} {'final s':>13} {'bound s':>13} {'gap':>8} {'CPU s':>7}")
    rows, bad = [], 0
    for p in paths:
        r = measure(p)
        rows.append(r)
        flag = flagged(r, args.limit)
        bad += flag
        bound = f"{r['bound_s']:>13.7g}" if r["bound_s"] is not None else f"{'none':>13}"
        print(f"{r['name']:<28} {r['status']:>20} {r['final_s']:>13.7g} {bound} "
              f"{r['gap']:>8.3%} {r['cpu_s']:>7.2f}{'  <<' if flag else ''}", flush=True)  # fmt: skip
    print(f"{bad} of {len(rows)} flagged (gap above {args.limit:.2%}, no bound, or bound above final)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
