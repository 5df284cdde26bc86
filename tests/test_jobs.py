"""Several cores on one point: ``--jobs`` / ``search.jobs`` (issue 26, item 2).

The result must be the one-core result bit for bit (only the seconds differ), whatever the
number of processes; bad values are refused in one line with exit code 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.errors import SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_spec, load_toml_spec, replace_field
from dfsearch.search import engine
from dfsearch.search.speculation import Speculation
from dfsearch.search.strategies import assignment_strategy
from dfsearch.search.strategies.base import control_array
from dfsearch.search.warmup import warm_up
from dfsearch.search.workers import WorkerPool, task_of
from dfsearch.study.point import point_digest

EXAMPLES = Path(__file__).parent.parent / "dfsearch" / "examples"
#: 11 outer choices: 4 solved, 7 pruned by bounds (a few evaluations each)
QUICK = EXAMPLES / "gpt3_1.5B_a100x4.toml"
#: 12 outer choices, all solved (shapes x tile counts), thousands of evaluations
MANY = EXAMPLES / "gpt3_1T_sn30.toml"


def _run_json(tmp_path: Path, spec: Path, *extra: str) -> dict:
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    r = CliRunner().invoke(app, ["run", "--quiet", str(spec), "--json", str(out), *extra])
    assert r.exit_code in (0, 1), r.output
    data = json.loads(out.read_text())
    data["search"].pop("seconds")
    return data


@pytest.mark.parametrize("spec", [QUICK, MANY], ids=["pruned-choices", "many-choices"])
def test_jobs_2_gives_the_json_of_jobs_1(tmp_path, spec) -> None:
    one = _run_json(tmp_path, spec)
    two = _run_json(tmp_path, spec, "--jobs", "2")
    assert one["search"]["solved"] >= 4  # several outer choices were solved, not one
    assert json.dumps(two, sort_keys=True) == json.dumps(one, sort_keys=True)


def test_jobs_3_under_a_budget_that_runs_out_gives_the_json_of_jobs_1(tmp_path) -> None:
    """The budget ends the search part-way: answers computed ahead with more evaluations
    left than the one-core search had must not be used where the budget would have cut
    them (the search's own process solves those again)."""
    one = _run_json(tmp_path, MANY, "--max-evaluations", "2000")
    assert one["search"]["status"] == "stopped_by_limit"  # the budget did bite
    assert 0 < one["search"]["solved"] < one["search"]["candidates"]
    three = _run_json(tmp_path, MANY, "--max-evaluations", "2000", "--jobs", "3")
    assert json.dumps(three, sort_keys=True) == json.dumps(one, sort_keys=True)


def test_a_worker_loads_the_compiled_code_from_the_disk_cache() -> None:
    """A worker's answer is this process's answer, and its first outer choice costs it about
    an import, not a compilation: with the cache written (``warm_up``), its CPU seconds stay
    far below the ~40 s of compiling every jitted function (``cost/_jit.py``: the cache is
    keyed on the sources, which the worker shares)."""
    warm_up()
    spec = load_spec(MANY)
    problem = next(iter(_lowered_problems(spec)))
    pool = WorkerPool(1)
    try:
        assert pool.submit(0, task_of(0, problem, "auto", 0, float("inf"), 1e9))
        done, died = [], []
        while not done and not died:
            done, died = pool.collect(1.0)
    finally:
        pool.close()
    assert done and not died
    here = assignment_strategy("auto").assign(problem, seed=0, control=control_array(max_evaluations=1e9))
    assert done[0].assignment == here and here.evaluations > 0  # the same answer as here
    assert done[0].cpu_s < 12.0, f"the worker used {done[0].cpu_s:.1f} CPU s: did it compile?"


def _lowered_problems(spec):
    from dfsearch.cost.lower import Outer, lower
    from dfsearch.search import outer

    shape = outer.shapes(spec)[0]
    place = outer.placements(spec, shape)[0]
    t = outer.tile_counts(spec)[0]
    sharding = engine.outer_sharding(spec, shape, t, place)
    mbs = outer.micro_batch_sizes(spec, shape, place)[0]
    yield lower(spec, Outer(shape, sharding, mbs, t, 4, place))


def test_workers_answer_the_outer_choices(monkeypatch) -> None:
    """With search.jobs = 2 the answers come from the workers (not the search's own
    process), two outer choices are in flight at once, and the result is still the one-core
    result."""
    taken, in_flight = [], []
    take, fill = Speculation.take, Speculation._fill

    def counting(self, pair, c, allowance, state):
        a = take(self, pair, c, allowance, state)
        taken.append(a is not None)
        return a

    def filling(self, here, allowance, state):
        fill(self, here, allowance, state)
        in_flight.append(len(self.running))

    spec = load_spec(MANY)
    one = engine.search(spec)
    monkeypatch.setattr(Speculation, "take", counting)
    monkeypatch.setattr(Speculation, "_fill", filling)
    two = engine.search(replace(spec, search=replace(spec.search, jobs=2)))
    assert len(taken) == one.search.solved and all(taken)
    assert max(in_flight) == 2  # both workers had an outer choice at once
    assert two.evaluation == one.evaluation
    assert replace(two.search, seconds=0.0) == replace(one.search, seconds=0.0)


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "257", ""])
def test_bad_jobs_option_exits_2_in_one_line(value) -> None:
    r = CliRunner().invoke(app, ["run", "--quiet", str(QUICK), "--jobs", value])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"--jobs {value}:"), r.output
    assert "from 1 to 256" in lines[0]


@pytest.mark.parametrize("value", ["0", "300", "1.5", '"2"'])
def test_bad_search_jobs_in_a_spec_exits_2_naming_the_field(tmp_path, value) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(QUICK.read_text() + f"\n[search]\njobs = {value}\n")  # it has no [search]
    with pytest.raises(SpecError, match=r"search\.jobs"):
        load_spec(bad)
    r = CliRunner().invoke(app, ["run", "--quiet", str(bad)])
    assert r.exit_code == 2 and "search.jobs" in r.output and "Traceback" not in r.output


def test_search_jobs_is_written_back_and_leaves_study_digests_alone() -> None:
    spec = load_spec(QUICK)
    two = replace_field(spec, "search.jobs", 2)
    assert two.search.jobs == 2 and spec.search.jobs == 1
    assert "jobs = 2" in spec_to_toml(two) and "jobs" not in spec_to_toml(spec)
    assert load_toml_spec(spec_to_toml(two), file="t", base_dir=Path(".")).search.jobs == 2
    assert point_digest(two, 0) == point_digest(spec, 0)  # it changes no result


CTRL_C_AT_SOLVE = """
import os, signal, sys
import dfsearch.search.engine as engine
solve, calls = engine._solve, []
def solve_then_ctrl_c(*args):
    calls.append(1)
    if len(calls) == {n}:
        os.killpg(os.getpgid(0), signal.SIGINT)  # Ctrl-C at a terminal: the whole group
    return solve(*args)
engine._solve = solve_then_ctrl_c
from dfsearch.cli import main
sys.argv = ["dfsearch", "run", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_ctrl_c_with_workers_reports_interrupted_and_exits_130(tmp_path) -> None:
    """A Ctrl-C sent to the process group while workers solve ahead: the search stops, the
    best mapping so far is reported as interrupted, exit 130, and no worker prints a
    traceback (they ignore Ctrl-C; the search's process stops them)."""
    js = tmp_path / "o.json"
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_AT_SOLVE.format(n=4), str(MANY), "--quiet", "--jobs", "2",
         "--json", str(js)],
        capture_output=True, text=True, timeout=300, start_new_session=True,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 130, out[-2000:]
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    data = json.loads(js.read_text())
    assert data["status"] == "interrupted"
    assert data["search"]["solved"] < data["search"]["candidates"]
