"""What a user sees on the first run and while a search runs (issue 21, item 1): a line while
the evaluator compiles, and progress lines in seconds that always end."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numba
import pytest

from dfsearch import api
from dfsearch.cli import _ProgressLine
from dfsearch.cost._jit import on_first_compilation
from dfsearch.loader import load_spec
from dfsearch.search.strategies.base import SearchProgress

PIPELINE = Path(__file__).resolve().parents[1] / "examples" / "gpt_pipeline.toml"


def _fresh_function(module: str):
    """A new function (never compiled) that claims to live in ``module``."""
    def add_one(x):
        return x + 1

    add_one.__module__ = module
    return numba.njit(cache=False)(add_one)


def test_the_first_compilation_of_a_dfsearch_function_is_announced_once() -> None:
    said: list[str] = []
    ours, again, theirs = (_fresh_function(m) for m in ("dfsearch.fake", "dfsearch.fake", "elsewhere"))
    with on_first_compilation(lambda: said.append("compiling")):
        theirs(1)  # another package's function: not ours to announce
        assert said == []
        ours(1)
        assert said == ["compiling"]
        again(2.0)  # a second compilation in the same run: said once only
        ours(1)  # already compiled: no event at all
    assert said == ["compiling"]
    _fresh_function("dfsearch.fake")(3)  # outside the block: the listener is gone
    assert said == ["compiling"]


def test_compiled_code_that_is_already_loaded_is_not_announced() -> None:
    """The evaluator of the built-in example, once compiled in this process (or loaded from
    Numba's cache), runs again without the line."""
    spec = load_spec(Path(__file__).resolve().parents[1] / "examples" / "gpt3_1T_sn30.toml")
    api.run(spec)  # compiles or loads from the cache, outside the block
    said: list[str] = []
    with on_first_compilation(lambda: said.append("compiling")):
        api.run(spec)
    assert said == []


def test_a_warm_run_in_a_new_process_is_not_announced() -> None:
    """A second process finds the compiled code in Numba's on-disk cache: no line (the
    object-mode block of the work-budget check, compiled in every process, is not a first
    run's compilation)."""
    api.run(load_spec(Path(__file__).resolve().parents[1] / "examples" / "gpt3_1T_sn30.toml"))
    proc = subprocess.run([sys.executable, "-m", "dfsearch", "run"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert "compiling" not in proc.stderr and "OPTIMAL" in proc.stdout


def test_the_progress_line_ends_however_the_search_stopped(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    line = _ProgressLine(clock=lambda: 0.0)
    line.end()  # nothing shown: nothing to end
    assert err.getvalue() == ""
    line(SearchProgress(3, 10, 1.5))  # a search that stopped (pruned, budget, Ctrl-C) at 3 of 10
    line.end()
    assert err.getvalue() == "\r  searching 0m00s: 3/10 outer choices, best 1.5 s, 0 evaluations   \n"
    line.end()  # ended once
    assert err.getvalue().count("\n") == 1


def test_stage_search_progress_is_in_seconds_and_reaches_the_total() -> None:
    """The whole-model stage search reports the best time in seconds (it printed
    nanoseconds labelled 's') and a last call with every choice done."""
    calls: list[tuple[int, int, float | None]] = []
    result = api.run(load_spec(PIPELINE), progress=lambda p: calls.append((p.done, p.total, p.best_s)))
    assert result.stages is not None and calls
    done, total, best = calls[-1]
    assert done == total == result.search.candidates
    assert best == pytest.approx(result.evaluation.final_s, rel=1e-12)
    assert all(b is None or b < 1e6 for _, _, b in calls)  # seconds, not nanoseconds
