"""The capacity bisection of benchmarks/exact_vs_heuristic.py (``_min_feasible``)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("exact_vs_heuristic_bench",
                                                  ROOT / "benchmarks" / "exact_vs_heuristic.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("exact_vs_heuristic_bench", mod)
    spec.loader.exec_module(mod)
    return mod


B = _bench()


def test_an_unchecked_sram_ends_at_once_and_is_left_alone() -> None:
    """HPL checks no SRAM: a mapping fits one byte, so there is nothing to bisect (before,
    the bisection never ended) and ``_tighten`` leaves the problem as it is."""
    p = B.hpl_instances(quick=True)[0].problem
    assert not p.constants.sram_check
    assert B._min_feasible(p, "sram", 1e13) is None
    q, notes = B._tighten(p, 1.05, None)
    assert q is p and notes == "SRAM unchecked"


def test_a_checked_sram_bisects_to_the_smallest_mapped_capacity() -> None:
    """The DLRM instance checks its SRAM: the result maps, 3 % less does not (the bisection
    stops within 2 % of a capacity that does not map; mapping is monotone in the capacity)."""
    p = next(i.problem for i in B.dlrm_instances(quick=True) if "SRAM" in i.notes)
    assert p.constants.sram_check
    cap = B._min_feasible(B._with_caps(p, sram=1e13), "sram", 1e13)
    assert cap is not None and math.isfinite(cap)
    assert B._feasible(B._with_caps(p, sram=cap))
    assert not B._feasible(B._with_caps(p, sram=cap * 0.97))
