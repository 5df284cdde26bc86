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
    solves: list[str] = []
    fresh = sharding_mod._solve_spec
    monkeypatch.setattr(sharding_mod, "_solve_spec", lambda *a: solves.append("x") or fresh(*a))
    shape = (8, 128)
    first = solve_spec_sharding(spec, shape, 2048)
    n = len(solves)  # 1, or 0 if an earlier test of this process solved it
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
    assert n <= 1


@pytest.mark.parametrize("tp, t", [(1, 1), (8, 2048), (16, 64)])
def test_memoised_solutions_equal_fresh_solves(tp, t):
    spec = load_spec(EXAMPLE)
    shape = (tp, 1024 // tp)
    for other in (spec, *_variants(spec).values()):
        got = solve_spec_sharding(other, shape, t)
        want = solve_spec_sharding(other, shape, t, memo=False)
        assert (got.sharding, got.bytes, got.edge_collectives) == (want.sharding, want.bytes, want.edge_collectives)
