"""What the points of a study share (issue 25, cheap points): memos keyed on the identity of
a generated graph and on the numbers a computation reads, so that points differing
elsewhere reuse the work and points differing there do not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import dfsearch
from dfsearch.loader import load_spec
from dfsearch.memo import by_identity_and_key
from dfsearch.search import sharding as sharding_mod
from dfsearch.search.sharding import solve_spec_sharding

EXAMPLE = Path(dfsearch.__file__).parent / "examples" / "gpt3_1T_sn30.toml"


def test_by_identity_and_key_runs_once_per_object_and_key_and_forgets_the_oldest():
    calls: list[tuple[int, int]] = []

    @by_identity_and_key(2)
    def f(obj: list[int], key: int, extra: str) -> tuple[int, int]:
        calls.append((len(obj), key))
        return len(obj), key

    a, b = [1], [1]  # equal but distinct objects
    assert f(a, 1, "x") == (1, 1) and f(a, 1, "y") == (1, 1)  # rest not keyed
    assert calls == [(1, 1)]
    f(b, 1, "x")  # another object: computed again
    assert len(calls) == 2
    f(a, 2, "x")  # another key: computed again; (a, 1) is now the oldest of 3 > 2
    assert len(calls) == 3
    f(b, 1, "x")  # kept
    assert len(calls) == 3
    f(a, 1, "x")  # dropped: computed again
    assert len(calls) == 4


def _variants(spec):
    """Specs on the example's graph object, each changing one field."""
    ex, acc, sysm = spec.execution, spec.system.accelerator, spec.system
    return {
        "global batch": replace(spec, workload=replace(spec.workload, global_batch_size=2 * spec.workload.global_batch_size)),
        "DRAM bandwidth": replace(spec, system=replace(sysm, memory=replace(sysm.memory, dram_bw_GBps=2 * sysm.memory.dram_bw_GBps))),
        "peak": replace(spec, system=replace(sysm, accelerator=replace(acc, freq_GHz=acc.freq_GHz / 3))),
        "compute_util": replace(spec, execution=replace(ex, compute_util=0.5)),
        "word": replace(spec, execution=replace(ex, word_bytes=4)),
        "sequence parallel": replace(spec, training=replace(spec.training, sequence_parallel=True)),
    }  # fmt: skip


def test_the_sharding_memo_reuses_a_solution_only_when_the_numbers_it_reads_are_equal(monkeypatch):
    """Changing a field the sharding does not read (global batch, DRAM bandwidth) reuses the
    solution; changing one it reads (rate, word, the sequence-parallel rule, TP, the tile
    count) solves again."""
    spec = load_spec(EXAMPLE)
    spec = replace(spec, graph=replace(spec.graph, kernels=spec.graph.kernels))  # a graph of its own
    solves: list[str] = []
    fresh = sharding_mod._solve_spec
    monkeypatch.setattr(sharding_mod, "_solve_spec", lambda *a: solves.append("x") or fresh(*a))
    shape = (8, 128)
    first = solve_spec_sharding(spec, shape, 2048)
    assert len(solves) == 1
    for name, other in _variants(spec).items():
        assert other.graph is spec.graph
        before = len(solves)
        again = solve_spec_sharding(other, shape, 2048)
        reused = name in ("global batch", "DRAM bandwidth")
        assert len(solves) == before + (0 if reused else 1), name
        if reused:
            assert again is first
    before = len(solves)
    solve_spec_sharding(spec, (16, 64), 2048)  # another TP
    solve_spec_sharding(spec, shape, 64)  # another tile count
    assert len(solves) == before + 2


@pytest.mark.parametrize("tp, t", [(1, 1), (8, 2048), (16, 64)])
def test_memoised_solutions_equal_fresh_solves(tp, t):
    spec = load_spec(EXAMPLE)
    shape = (tp, 1024 // tp)
    for other in (spec, *_variants(spec).values()):
        got = solve_spec_sharding(other, shape, t)
        want = solve_spec_sharding(other, shape, t, memo=False)
        assert (got.sharding, got.bytes, got.edge_collectives) == (want.sharding, want.bytes, want.edge_collectives)


def _lowering_variants(spec):
    """The sharding memo's variants, and fields lowering reads besides."""
    from dfsearch.codes import Recompute

    quirks = spec.quirks
    flipped = replace(quirks, simd_at_systolic_peak=not quirks.simd_at_systolic_peak)
    return {
        **_variants(spec),
        "recompute": replace(spec, training=replace(spec.training, recompute=Recompute.FULL)),
        "quirks": replace(spec, quirks=flipped),
        "cycle model": replace(spec, execution=replace(spec.execution, compute_util=0.0)),
    }


def _same_problem(a, b, name: str) -> None:
    import numpy as np

    for table in ("kernels", "edges", "constants"):
        x, y = getattr(a, table), getattr(b, table)
        for field, u, v in zip(x._fields, x, y):
            assert np.array_equal(u, v), (name, table, field)
    assert (a.shard_m, a.shard_k, a.shard_n, a.workload_flop) == (b.shard_m, b.shard_k, b.shard_n, b.workload_flop), name


@pytest.mark.parametrize("replicated", [False, True], ids=["solved", "replicated"])
def test_lowering_on_a_shared_graph_equals_lowering_on_a_copy_of_it(replicated):
    """Lowering keeps what it computes from the graph, the sharding and the spec fields it
    reads per graph object; each variant, lowered after the base spec on the same graph
    object, gives the problem of a fresh lowering on an equal graph of its own (with the
    solved sharding, and every kernel replicated, where sequence parallelism splits the
    elementwise kernels)."""
    from dfsearch.codes import Dim
    from dfsearch.cost.lower import Outer, lower

    spec = load_spec(EXAMPLE)
    shape, t = (8, 128), 64
    sharding = solve_spec_sharding(spec, shape, t, memo=False).sharding
    if replicated:
        sharding = tuple(Dim.NO for _ in sharding)
    outer = Outer(shape, sharding, 1, t, 6)
    lower(spec, outer)  # fills the memos for the base spec
    for name, other in {"base": spec, **_lowering_variants(spec)}.items():
        copy = replace(other, graph=replace(other.graph, kernels=other.graph.kernels))
        assert copy.graph is not other.graph
        _same_problem(lower(other, outer), lower(copy, outer), name)


def test_edge_relayouts_are_the_rule_applied_to_every_connection():
    from dfsearch.codes import Dim
    from dfsearch.kernels.graph import (
        GraphStructure,
        downstream_layout,
        edge_relayouts,
        relayout,
        upstream_layout,
    )

    spec = load_spec(EXAMPLE)
    g = spec.graph
    st = GraphStructure.of(g)
    solved = solve_spec_sharding(spec, (8, 128), 2048, memo=False).sharding
    for sharding in (solved, tuple(Dim.NO for _ in g.kernels), solved[::-1]):
        want = tuple(relayout(upstream_layout(sharding[s]), downstream_layout(g.kernels[d], st.operand[e], sharding[d]))
                     for e, (s, d) in enumerate(zip(st.src, st.dst)))  # fmt: skip
        assert edge_relayouts(g, sharding) == want
        assert edge_relayouts(g, sharding) == want  # kept


def test_a_graph_checked_again_gives_the_issues_of_a_fresh_check():
    """The graph's issues are found once per graph object and flag, and reported in full
    (a list of its own) each time."""
    from dfsearch.validate import validate_graph, validate_parts

    spec = load_spec(EXAMPLE)
    bad = replace(spec.graph, kernels=(replace(spec.graph.kernels[0], m=0), *spec.graph.kernels[1:]))
    want = validate_graph(bad)
    assert any(".m" in i.path for i in want)
    for _ in range(2):
        got = validate_parts(graph=bad)
        assert got == want
        got.clear()  # the caller's list: the next check is not affected
    assert validate_parts(graph=bad, workload=spec.workload)[: len(want)] == want


def test_the_digest_is_that_of_the_whole_data_when_the_specs_words_hold_the_graphs_stand_in():
    """``point_digest`` splices the graph's JSON text, encoded once per graph, in place of a
    stand-in; a spec whose own words contain the stand-in is encoded whole, same digest."""
    import hashlib
    import json

    from dfsearch.loader import spec_to_data
    from dfsearch.study import point

    spec = load_spec(EXAMPLE)
    odd = replace(spec, search=replace(spec.search, strategy=point._GRAPH_MARK))
    for s in (spec, odd):
        text = json.dumps([spec_to_data(s), 3], sort_keys=True, default=str)
        assert point.point_digest(s, 3) == hashlib.sha256(text.encode()).hexdigest()[:16]
