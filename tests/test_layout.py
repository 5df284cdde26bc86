"""The records at the Numba boundary (``cost/layout.py``, docs/design.md "The Numba
boundary") keep one type whatever the problem, so the jitted code compiles once, and the
overlap rule has one definition shared by the compiled and the pure-Python code."""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import pytest

import dfsearch
from dfsearch.codes import Dim, Overlap, WorkloadKind
from dfsearch.cost.layout import Constants, EdgeTable, KernelTable
from dfsearch.cost.lower import Outer, effective_num_config, lower
from dfsearch.cost.overlap import combine_overlap
from dfsearch.loader import load_spec
from dfsearch.search import outer
from dfsearch.search.sharding import solve_spec_sharding

from specs import random_spec

EXAMPLES = sorted((Path(dfsearch.__file__).parent / "examples").glob("*.toml"))


def _problem(spec, num_config: int = 2):
    shape = outer.shapes(spec)[0]
    t = outer.tile_counts(spec)[0]
    if spec.workload.kind is WorkloadKind.LLM:
        sharding = solve_spec_sharding(spec, shape, t).sharding
    else:
        sharding = tuple(Dim.NO for _ in spec.graph.kernels)
    c = effective_num_config(spec, num_config)
    return lower(spec, Outer(shape, sharding, outer.micro_batch_size(spec), t, c))


def _problems():
    for path in EXAMPLES:
        yield path.stem, _problem(load_spec(path))
    yield "random-cycle", _problem(random_spec(1, 7, num_config=3, cycle=True, sram=1e6), 3)
    yield "random-flop", _problem(random_spec(2, 7, num_config=3, cycle=False, sram=1e6), 3)


def test_constants_fields_have_their_annotated_python_types():
    hints = typing.get_type_hints(Constants)
    for name, p in _problems():
        for field, want in hints.items():
            value = getattr(p.constants, field)
            assert type(value) is want, (name, field, type(value))


def test_tables_are_read_only_with_one_dtype_per_field():
    dtypes: dict[str, np.dtype] = {}
    for name, p in _problems():
        for table in (p.kernels, p.edges):
            assert isinstance(table, (KernelTable, EdgeTable))
            for field, arr in zip(table._fields, table):
                key = f"{type(table).__name__}.{field}"
                assert not arr.flags.writeable, (name, key)
                assert arr.flags.c_contiguous, (name, key)
                assert dtypes.setdefault(key, arr.dtype) == arr.dtype, (name, key, arr.dtype)


def test_every_problem_has_the_same_numba_type():
    """One type across workloads and compute models: one compiled specialisation."""
    numba = pytest.importorskip("numba")
    types = {name: numba.typeof((p.kernels, p.edges, p.constants)) for name, p in _problems()}
    assert len(set(types.values())) == 1, types


@pytest.mark.parametrize("overlap", list(Overlap))
def test_compiled_and_plain_overlap_rule_agree(overlap):
    from dfsearch.cost.evaluate import combine_overlap as compiled

    rng = np.random.default_rng(int(overlap))
    for tc, tm, tn in rng.uniform(0.0, 10.0, size=(50, 3)):
        assert compiled(tc, tm, tn, int(overlap)) == combine_overlap(tc, tm, tn, overlap)
    want = {Overlap.PERFECT: 3.0, Overlap.COMPUTE_MEMORY: 4.0, Overlap.NONE: 6.0}[overlap]
    assert combine_overlap(3.0, 2.0, 1.0, overlap) == want  # docs/model.md, the three modes
