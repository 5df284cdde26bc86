"""The compiled code shipped with dfsearch (issue 25, item 2): a first run after an install
compiles nothing the archive covers, the archive is used only where it fits, and it is kept
current with the sources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_layered import _problem

from dfsearch import prebuild
from dfsearch.cost import prebuilt
from dfsearch.cost._jit import _ShippedOnlyCache, source_digest
from dfsearch.search import _dp


def test_every_shipped_archive_is_current_with_the_sources() -> None:
    """A change to a jitted module (or what it imports) makes the shipped code stale: it is
    then never used, and a first run compiles for ~20 s. Rebuild: python -m dfsearch.prebuild."""
    archives = sorted(prebuilt.FOLDER.glob("*.bin"))
    assert archives, f"no archive in {prebuilt.FOLDER}"
    for path in archives:
        head = prebuilt.read_header(path)
        assert head is not None, f"{path} is not an archive"
        assert head["source_digest"] == source_digest(), (
            f"{path.name} was built from other sources: run python -m dfsearch.prebuild")
        assert head["format"] == prebuilt.FORMAT


def test_an_archive_is_used_only_where_everything_matches() -> None:
    wanted = prebuilt.header("abc")
    assert prebuilt.why_unusable(dict(wanted), wanted) is None
    assert prebuilt.why_unusable(None, wanted) == (
        f"no compiled code is shipped for {wanted['triple']} and Python {wanted['python']}")
    for field, value, says in (
        ("numba", "0.1.0", "for Numba 0.1.0, this is"),
        ("llvmlite", "0.1.0", "for llvmlite 0.1.0, this is"),
        ("python", "2.7", "for Python 2.7, this is"),
        ("triple", "aarch64-apple-darwin", "for target aarch64-apple-darwin, this is"),
        ("format", 0, "for archive format 0, this is"),
        ("source_digest", "def", "older than the sources"),
    ):
        why = prebuilt.why_unusable({**wanted, field: value}, wanted)
        assert why is not None and says in why, (field, why)


def test_a_file_that_is_not_an_archive_has_no_header(tmp_path: Path) -> None:
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01 not an archive\n")
    assert prebuilt.read_header(tmp_path / "junk.bin") is None
    assert prebuilt.read_header(tmp_path / "missing.bin") is None


def test_a_damaged_archive_is_not_used(tmp_path: Path) -> None:
    """An archive cut short (or otherwise damaged) has no entries: every function compiles."""
    path = tmp_path / "a.bin"
    prebuilt.write_archive(path, {"f(int64,)": b"payload"}, "abc", "generic")
    assert prebuilt.read_header(path)["entries"] == 1
    assert prebuilt.read_entries(path) == {"f(int64,)": b"payload"}
    path.write_bytes(path.read_bytes()[:-5])
    assert prebuilt.read_header(path) is not None and prebuilt.read_entries(path) is None
    assert prebuilt.read_entries(tmp_path / "missing.bin") is None


def test_the_archive_can_be_turned_off(monkeypatch) -> None:
    monkeypatch.setenv(prebuilt.OFF_VARIABLE, "off")
    assert prebuilt.turned_off()
    assert "turned off" in prebuilt.why_not_used("any")
    monkeypatch.setenv(prebuilt.OFF_VARIABLE, "on")
    assert not prebuilt.turned_off()


def test_the_archive_covers_every_shipped_example() -> None:
    """The builder runs every example the package ships (and the serve examples)."""
    listed = {Path(c[-1]).name for c in prebuild.commands() if c[0] in ("run", "serve")}
    shipped = {p.name for p in prebuild.EXAMPLES.glob("*.toml")}
    shipped |= {p.name for p in (prebuild.EXAMPLES / "serve").glob("*.toml")}
    assert shipped <= listed


@pytest.mark.slow
def test_a_first_run_after_an_install_compiles_nothing(tmp_path: Path) -> None:
    """The README's first command with an empty Numba cache folder: no compilation (no
    first-run line) and the answer; the machine code made from the archive is saved to the
    cache folder, so that the next run finds it there, archive off."""
    why = prebuild.check()
    if why is not None:  # another platform or Numba version: the archive cannot apply
        pytest.skip(why)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for archive in ("on", "off"):
        proc = subprocess.run([sys.executable, "-m", "dfsearch", "run"],
                              env={**env, prebuilt.OFF_VARIABLE: archive},
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert "compiling" not in proc.stderr, (archive, proc.stderr)
        assert "OPTIMAL" in proc.stdout


def test_without_a_cache_folder_the_archive_still_serves() -> None:
    """A read-only install (no writable cache folder): the function's cache is
    ``_ShippedOnlyCache``, which saves nothing but makes the archive's code runnable; that
    code computes what the function compiled here computes."""
    why = prebuild.check()
    if why is not None:
        pytest.skip(why)
    problem = _problem(3, 9, 9, training=True)
    expected = _dp.topological_order(problem.kernels, problem.edges)  # compiled or cached here
    sig = next(iter(_dp.topological_order.overloads))
    cres = _ShippedOnlyCache(_dp.topological_order.py_func).load_overload(
        sig, _dp.topological_order.targetctx)  # fmt: skip
    assert cres is not None and tuple(cres.signature.args) == tuple(sig)
    np.testing.assert_array_equal(cres.entry_point(problem.kernels, problem.edges), expected)
    assert sorted(expected.tolist()) == list(range(9))
