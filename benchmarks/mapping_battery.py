"""Mapping-file battery (issue 21, item 6): mutants of mapping files fed to ``dfsearch eval``.

    python benchmarks/mapping_battery.py --mutants 600 --seed 0 [--subprocess]

The sources are ``tests/_mutants.py``'s ``MAPPING_SPECS``: each spec is run once (its
``--mapping-out`` TOML and its ``--json`` are the two mapping sources), then mutant i is
``mapping_mutant_from_seed(sources, seed * 1_000_003 + i)`` evaluated by
``check_mapping_mutant``: exit 0, 1 or 2 without a traceback, exit 2 naming the mapping file
and a field path, exit 1 naming the kernel, edge or configuration and a unit. In process by
default (fast); ``--subprocess`` runs each ``eval`` as ``python -m dfsearch`` with a timeout,
so that a hang is seen. Exit status 0 when no failure was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import _mutants as M  # noqa: E402 - needs tests/ on sys.path (above)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subprocess", action="store_true", help="each eval in its own process")
    args = ap.parse_args(argv)
    runner = M.run_subprocess if args.subprocess else M.run_inprocess
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        sources = M.mapping_sources(Path(root), runner=runner)
        print(f"mapping battery: {len(sources)} sources ({time.perf_counter() - t0:.0f} s), "
              f"{args.mutants} mutants, seed {args.seed}", flush=True)  # fmt: skip
        codes: Counter = Counter()
        kinds: Counter = Counter()
        failing = []
        for i in range(args.mutants):
            src, mutant = M.mapping_mutant_from_seed(sources, args.seed * 1_000_003 + i)
            with tempfile.TemporaryDirectory(dir=root) as d:
                rep = M.check_mapping_mutant(src, mutant, Path(d), runner)
            codes[rep.code] += 1
            for f in rep.failures:
                kinds[f.kind] += 1
            if rep.failures:
                failing.append(rep)
    print(f"{args.mutants} mutants in {time.perf_counter() - t0:.0f} s: exits "
          f"{dict(sorted(codes.items(), key=str))}; failures {dict(kinds) or 0}")  # fmt: skip
    for rep in failing[:10]:
        print(f"  {rep.label}\n    " + "\n    ".join(str(f) for f in rep.failures))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
