"""Work a search or a sweep does once and reuses (issue 25): a lowered problem serves every
configuration count of its outer choice (``cost.lower.with_num_config``), and the
arithmetic of shard dimensions is the closed form of docs/model.md."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

import dfsearch
from dfsearch.codes import Dim, WorkloadKind
from dfsearch.cost.lower import Outer, effective_num_config, lower, with_num_config
from dfsearch.kernels.generators import llm_fwdbwd
from dfsearch.loader import load_spec
from dfsearch.search import engine, outer
from dfsearch.search.sharding import solve_spec_sharding
from dfsearch.workloads.base import tiled_shard_dims

EXAMPLES = sorted((Path(dfsearch.__file__).parent / "examples").glob("*.toml"))


def _outer(spec, c: int) -> Outer:
    shape = outer.shapes(spec)[0]
    t = outer.tile_counts(spec)[0]
    if spec.workload.kind is WorkloadKind.LLM:
        sharding = solve_spec_sharding(spec, shape, t).sharding
    else:
        sharding = tuple(Dim.NO for _ in spec.graph.kernels)
    return Outer(shape, sharding, outer.micro_batch_size(spec), t, effective_num_config(spec, c))


def _same(a, b) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, tuple) and hasattr(x, "_fields"):  # a record of arrays or scalars
            for name, u, v in zip(x._fields, x, y):
                assert np.array_equal(u, v), (f.name, name, u, v)
        else:
            assert x == y, (f.name, x, y)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_problem_for_another_count_equals_lowering_again(path):
    spec = load_spec(path)
    n = len(spec.graph.kernels)
    counts = sorted({effective_num_config(spec, c) for c in (1, 2, 3, n - 1, n) if c >= 1})
    base = lower(spec, _outer(spec, counts[0]))
    for c in counts:
        again = lower(spec, replace(base.outer, num_config=c))
        _same(with_num_config(base, spec, c), again)


def test_search_keeps_its_answer_when_it_can_keep_one_lowered_problem(monkeypatch):
    spec = load_spec(Path(dfsearch.__file__).parent / "examples" / "gpt3_1T_sn30.toml")
    full = engine.search(spec)
    monkeypatch.setattr(engine, "LOWERED_KEPT", 1)  # every reuse but the last one dropped
    small = engine.search(spec)
    assert small.evaluation is not None and full.evaluation is not None
    assert small.evaluation.final_s == full.evaluation.final_s
    assert small.evaluation.decision == full.evaluation.decision
    assert small.search.evaluations == full.search.evaluations


def test_tiled_shard_dims_divides_each_dimension_by_its_cuts():
    g = llm_fwdbwd(hidden=256, num_head=4, head_dim=64, seq=128, word=2)
    k = next(k for k in g.kernels if k.kind.has_k and k.tiling is Dim.N)
    rows, kk, nn = k.rows, k.k, k.n
    cd = lambda a, b: -(-a // b)  # noqa: E731
    assert tiled_shard_dims(k, Dim.K, 3, 5) == (rows, cd(kk, 3), cd(nn, 5))
    assert tiled_shard_dims(k, Dim.N, 3, 5) == (rows, kk, cd(nn, 15))  # both cuts on N
    assert tiled_shard_dims(k, Dim.M, 2, 1) == (cd(rows, 2), kk, nn)
    assert tiled_shard_dims(k, Dim.NO, 4, 2) == (rows, kk, cd(nn, 2))
