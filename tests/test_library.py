"""The benchmark library (benchmarks/library.py; docs/exact.md, "Benchmark library").

The CI subset (the manifest's ``small`` instances) runs through the default strategy, which
must land between the records: at or above the proven lower bound and, where the optimum is
proven, within 1e-6 of it. The records come from ``python benchmarks/library.py --record``,
and every ``small`` instance is one whose optimum the exact solver (CP-SAT, hinted with the
contiguous-order DP's assignment, never with the default strategy's) proved, so the golden
value does not come from the path under test.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the default strategy's value may exceed a proven optimum by this much (relative): the
#: exact solver proves optima up to its integer scaling slack (docs/exact.md, about 1e-7)
TOLERANCE = 1e-6


def _load_library():
    spec = importlib.util.spec_from_file_location("library_bench", ROOT / "benchmarks" / "library.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("library_bench", mod)
    spec.loader.exec_module(mod)
    return mod


LIB = _load_library()
FAM = LIB.families()
DATA = LIB.load_manifest()
SMALL = [d for d in DATA["instances"] if d.get("small")]


def test_manifest_is_todays_grid_of_six_families() -> None:
    names = [d["name"] for d in DATA["instances"]]
    assert names == [e.name for e in FAM.entries()], "the manifest is stale: run --record"
    assert len(names) >= 100 and len(set(names)) == len(names)
    assert {d["family"] for d in DATA["instances"]} == {"layer", "stacked", "whole", "dlrm", "hpl", "fft"}
    assert {d["model"] for d in DATA["instances"]} == {"flop", "cycle"}
    assert {d["system"] for d in DATA["instances"]} == {"compute", "memory", "network"}
    sizes = [d["kernels"] for d in DATA["instances"] if "kernels" in d]
    assert len(sizes) == len(names) and max(sizes) >= 5_000


def test_records_are_consistent() -> None:
    """Every record: bound <= best value; "proven" exactly when the bound meets the value;
    the best value is the smallest of its runs and the bound the largest (capped)."""
    for d in DATA["instances"]:
        rec = d["record"]
        if rec is None:
            continue
        best, bound = rec["best_value_ns"], rec["best_bound_ns"]
        runs = rec["runs"].values()
        values = [r["value_ns"] for r in runs if r.get("value_ns") is not None]
        assert bound == max(min(r["bound_ns"], best if best is not None else math.inf)
                            for r in runs if r.get("bound_ns") is not None), d["name"]
        if best is None:  # no run found a mapping
            assert not values and rec["proven"] == (rec["exact_status"] == "infeasible"), d["name"]
            continue
        assert best == min(values), d["name"]
        assert bound <= best, d["name"]
        assert rec["proven"] == (bound >= best * (1 - LIB.PROOF_REL)), d["name"]


def test_small_subset_is_proven_by_the_exact_solver() -> None:
    assert len(SMALL) >= 8
    assert len({d["family"] for d in SMALL}) >= 3
    for d in SMALL:
        rec = d["record"]
        assert rec["exact_status"] == "optimal" and rec["proven"], d["name"]
        exact = rec["runs"]["exact"]
        assert exact["value_ns"] <= rec["best_value_ns"] * (1 + TOLERANCE), d["name"]


@pytest.mark.parametrize("entry", SMALL, ids=[d["name"] for d in SMALL])
def test_default_strategy_reaches_the_proven_optimum(entry: dict) -> None:
    p = FAM.build(FAM.Entry.from_json(entry))
    assert FAM.fingerprint(p) == entry["fingerprint"], "the instance lowers differently: re-record"
    run = LIB.run_strategy(p, "auto", LIB.BUDGET)
    rec = entry["record"]
    assert run.value_ns is not None and math.isfinite(run.value_ns)
    assert run.value_ns >= rec["best_bound_ns"] * (1 - 1e-9)
    assert run.value_ns <= rec["best_value_ns"] * (1 + TOLERANCE)
