"""How a sweep moves points and rows (issue 25): chunks of consecutive points for the
workers, and a table synced to disk once a second at most while every row reaches the
operating system at once."""

from __future__ import annotations

import hashlib
import json
import types
from pathlib import Path

import pytest

import dfsearch
from dfsearch.loader import load_spec, parse_toml, spec_from_data, spec_to_data
from dfsearch.study import table as table_mod
from dfsearch.study.point import CHUNK_MAX, chunk_size, chunks, point_digest
from dfsearch.study.study import Point


def test_chunks_are_consecutive_and_cover_every_point_once():
    points = [Point(i, (i,)) for i in range(10)]
    parts = list(chunks(iter(points), 4))
    assert [len(p) for p in parts] == [4, 4, 2]
    assert [p for part in parts for p in part] == points


def test_chunk_size_gives_each_worker_several_chunks_within_bounds():
    assert chunk_size(1_600, 2) == min(CHUNK_MAX, 1_600 // 16) == 32
    assert chunk_size(500, 16) == 500 // (8 * 16) == 3
    assert chunk_size(5, 16) == 1  # fewer points than workers: one point a chunk
    assert chunk_size(10**6, 1) == CHUNK_MAX


def test_rows_reach_the_file_at_once_and_disk_once_a_second(tmp_path, monkeypatch):
    clock = {"now": 100.0}
    synced: list[float] = []
    monkeypatch.setattr(table_mod, "time", types.SimpleNamespace(monotonic=lambda: clock["now"]))
    monkeypatch.setattr(table_mod.os, "fsync", lambda fd: synced.append(clock["now"]))
    path = tmp_path / "results.csv"
    with table_mod.TableWriter(path, ["point", "x"], sync_every_s=1.0) as t:
        assert synced == [100.0]  # the header: the first write syncs
        for i in range(5):  # 0.25 s apart: rows at 100.25 ... 101.25
            clock["now"] += 0.25
            t.write({"point": i, "x": i})
            assert path.read_text().count("\n") == i + 2  # in the file at once
        assert synced == [100.0, 101.0]  # 1 s after the header, then not before 102.0
    assert synced == [100.0, 101.0, 101.25]  # and on close
    assert path.read_text().splitlines() == ["point,x", *(f"{i},{i}" for i in range(5))]


def test_without_a_period_every_row_is_synced(tmp_path, monkeypatch):
    synced: list[int] = []
    monkeypatch.setattr(table_mod.os, "fsync", lambda fd: synced.append(fd))
    with table_mod.TableWriter(tmp_path / "results.csv", ["point"]) as t:
        for i in range(3):
            t.write({"point": i})
    assert len(synced) == 1 + 3 + 1  # header, rows, close


EXAMPLES = sorted((Path(dfsearch.__file__).parent / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_point_digest_is_the_digest_of_the_whole_specs_data(path):
    """The digest (which reuses a graph's data across points) is the SHA-256 of the spec's
    full data and seed as sorted JSON, as a table written before it holds."""
    spec = load_spec(path)
    for seed in (0, 7):
        text = json.dumps([spec_to_data(spec), seed], sort_keys=True, default=str)
        want = hashlib.sha256(text.encode()).hexdigest()[:16]
        assert point_digest(spec, seed) == want
        assert point_digest(spec, seed) == want  # the graph's data reused


def test_points_differing_off_the_graph_share_the_generated_graph_and_keep_their_own_digest():
    path = EXAMPLES[0].parent / "gpt3_1T_sn30.toml"  # [graph] generator = "llm"
    data = parse_toml(path.read_text(), str(path))
    other = dict(data, workload=dict(data["workload"], global_batch_size=2 * data["workload"]["global_batch_size"]))
    a = spec_from_data(data, file="a.toml", base_dir=EXAMPLES[0].parent)
    b = spec_from_data(other, file="b.toml", base_dir=EXAMPLES[0].parent)
    assert a.graph is b.graph  # generated once for equal parameters
    assert point_digest(a, 0) != point_digest(b, 0)


def test_a_failed_last_sync_is_an_error_naming_the_file(tmp_path, monkeypatch):
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    t = table_mod.TableWriter(tmp_path / "results.csv", ["point"], sync_every_s=60.0)
    t.write({"point": 0})  # the header was synced when it was written; this row is not yet
    monkeypatch.setattr(table_mod.os, "fsync", full)
    with pytest.raises(table_mod.SpecError, match="No space left on device"):
        t.close()
    assert (tmp_path / "results.csv").read_text() == "point\n0\n"  # the rows stay
