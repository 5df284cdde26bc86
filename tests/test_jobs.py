"""Several cores on one point: ``--jobs`` / ``search.jobs`` (issue 26, item 2).

The result must be the one-core result bit for bit (only the seconds differ), whatever the
number of processes; bad values are refused in one line with exit code 2.
"""

from __future__ import annotations

import json
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


def test_workers_answer_the_outer_choices(monkeypatch) -> None:
    """With search.jobs = 2 the answers come from the workers (not the search's own
    process), and the result is still the one-core result."""
    taken = []
    take = Speculation.take

    def counting(self, pair, c, allowance, state):
        a = take(self, pair, c, allowance, state)
        taken.append(a is not None)
        return a

    spec = load_spec(MANY)
    one = engine.search(spec)
    monkeypatch.setattr(Speculation, "take", counting)
    two = engine.search(replace(spec, search=replace(spec.search, jobs=2)))
    assert len(taken) == one.search.solved and all(taken)
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
