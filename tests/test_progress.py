"""Progress records, the progress line and ``search.gap`` / ``--gap`` (issue 26 item 3)."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from test_outer_search import free_spec
from typer.testing import CliRunner

from dfsearch.cli import _ProgressLine, app
from dfsearch.codes import RunStatus
from dfsearch.loader import load_spec, load_toml_spec
from dfsearch.plan import run as plan_run
from dfsearch.search.engine import GAP_STOP, _gap, search
from dfsearch.search.strategies.base import SearchProgress
from dfsearch.spec import SearchSettings

EXAMPLES = Path(__file__).parent.parent / "dfsearch" / "examples"
QUICK = EXAMPLES / "gpt3_1.5B_a100x4.toml"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------- the gap
def test_gap_is_best_minus_bound_over_best() -> None:
    assert _gap(200.0, 150.0) == 0.25  # (200 - 150) / 200
    assert _gap(200.0, 200.0) == 0.0
    assert _gap(200.0, 250.0) == 0.0  # a bound above the incumbent proves it: no negative gap
    assert _gap(math.inf, 150.0) is None  # no incumbent
    assert _gap(200.0, 0.0) is None  # a bound of 0 proves nothing


# --------------------------------------------------------------------------- the line
def test_progress_line_shows_every_field_and_ends_with_a_newline() -> None:
    out, clock = io.StringIO(), FakeClock()
    line = _ProgressLine(stream=out, clock=clock)
    clock.now += 65.4
    line(SearchProgress(12, 40, 1.25, 1.0, 0.2, 1_234_567, 20_000_000))
    line.end()
    assert out.getvalue() == (
        "\r  searching 1m05s: 12/40 outer choices, best 1.25 s, bound 1 s, gap 20.00%, "
        "1,234,567/20,000,000 evaluations   \n"
    )


def test_progress_line_redraws_at_most_five_times_a_second_and_ends_with_the_last() -> None:
    out, clock = io.StringIO(), FakeClock()
    line = _ProgressLine(stream=out, clock=clock)
    line(SearchProgress(1, 10))  # drawn: the first
    clock.now += 0.125
    line(SearchProgress(2, 10))  # held back: 0.125 s after the last drawing
    assert out.getvalue().count("\r") == 1 and "2/10" not in out.getvalue()
    clock.now += 0.125
    line(SearchProgress(3, 10))  # 0.25 s after: drawn
    clock.now += 0.0625
    line(SearchProgress(4, 10, 2.0))  # held back, then drawn by end
    assert out.getvalue().count("\r") == 2
    line.end()
    text = out.getvalue()
    assert text.count("\r") == 3 and "4/10 outer choices, best 2 s" in text and text.endswith("\n")
    assert "no feasible mapping yet" in text.split("\r")[1]


# --------------------------------------------------------------------------- search.gap
def _trajectory(spec) -> list[SearchProgress]:
    records: list[SearchProgress] = []
    search(spec, progress=records.append)
    return records


def test_gap_stops_at_the_first_state_within_it_and_reports_it() -> None:
    """The full search passes through a state with a proven gap g (incumbent vs the lowest
    open bound) before it proves optimality; with search.gap = g it stops exactly there,
    FEASIBLE_NOT_PROVEN with stopped_by "gap", and its bound stays admissible."""
    spec = free_spec(0)
    full = search(spec)
    records = _trajectory(spec)
    assert full.status is RunStatus.OPTIMAL
    first = next(p for p in records if p.gap is not None)
    assert 0 < first.gap < 1 and first.done < first.total  # an intermediate, open state
    stopped = search(replace(spec, search=replace(spec.search, gap=first.gap)))
    s = stopped.search
    assert (s.status, s.stopped_by) == (RunStatus.FEASIBLE_NOT_PROVEN, GAP_STOP)
    assert s.solved + s.pruned == first.done and s.solved < full.search.solved
    assert stopped.evaluation.final_s == first.best_s
    assert (stopped.evaluation.final_s - s.lower_bound_s) / stopped.evaluation.final_s <= first.gap
    assert s.lower_bound_s <= full.evaluation.final_s <= stopped.evaluation.final_s
    assert any(f"{first.gap:.3%}" in n for n in s.notes)
    # a gap just below it does not stop there: the search goes on to the proof
    on = search(replace(spec, search=replace(spec.search, gap=first.gap * 0.999)))
    assert on.status is RunStatus.OPTIMAL and on.search.stopped_by == ""
    assert on.evaluation.final_s == full.evaluation.final_s


def test_gap_zero_is_the_search_to_the_end() -> None:
    spec = free_spec(1)
    assert SearchSettings().gap == 0.0
    a, b = search(spec), search(replace(spec, search=replace(spec.search, gap=0.0)))
    drop = ("seconds",)
    ja = {k: v for k, v in a.to_json().items() if k not in drop}
    jb = {k: v for k, v in b.to_json().items() if k not in drop}
    ja["search"] = {k: v for k, v in ja["search"].items() if k not in drop}
    jb["search"] = {k: v for k, v in jb["search"].items() if k not in drop}
    assert json.dumps(ja, sort_keys=True, default=str) == json.dumps(jb, sort_keys=True, default=str)


def test_cli_gap_zero_gives_the_same_json_as_no_gap(tmp_path) -> None:
    outs = []
    for extra in ([], ["--gap", "0"]):
        out = tmp_path / f"r{len(outs)}.json"
        r = CliRunner().invoke(app, ["run", "--quiet", str(QUICK), "--json", str(out), *extra])
        assert r.exit_code == 0, r.output
        data = json.loads(out.read_text())
        data["search"].pop("seconds")
        outs.append(data)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("value", ["1", "1.5", "-0.01", "nan"])
def test_bad_gap_option_exits_2_in_one_line(value) -> None:
    r = CliRunner().invoke(app, ["run", "--quiet", str(QUICK), "--gap", value])
    assert r.exit_code == 2 and "Traceback" not in r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "--gap" in lines[0] and ">= 0 and < 1" in lines[0]


def test_bad_search_gap_in_a_spec_exits_2_naming_the_field(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    text = QUICK.read_text()
    assert "[search]" not in text
    bad.write_text(text + "\n[search]\ngap = 1.0\n")
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "search.gap" in r.output and "Got 1" in r.output and str(bad.name) in r.output


# --------------------------------------------------------------------------- inside a choice
def _stacked_gpt(layers: int) -> str:
    text = QUICK.read_text()
    text = text.replace("num_layer = 24", f"num_layer = 24\nnum_layer_in_graph = {layers}")
    return text.replace("num_config = 2", f"num_config = {2 * layers}")


def test_long_assignment_searches_report_between_their_jitted_calls_and_change_nothing() -> None:
    """A 4-layer graph (164 kernels) goes through the layered search: the callback is also
    called from inside each outer choice, its records never go back, and the answer is the
    same bit for bit as without a callback."""
    spec = load_toml_spec(_stacked_gpt(4), file="stacked.toml", base_dir=EXAMPLES)
    records: list[SearchProgress] = []
    with_line = search(spec, progress=records.append)
    without = search(spec)
    s = with_line.search
    assert "layered" in s.method
    assert len(records) > s.solved + 1  # one per solved choice and the last: more came from inside
    assert all(a.done <= b.done and a.evaluations <= b.evaluations for a, b in pairwise(records))
    assert records[-1].evaluations == s.evaluations
    ja, jb = with_line.to_json(), without.to_json()
    ja["search"].pop("seconds"), jb["search"].pop("seconds")
    assert ja == jb


def test_a_gap_stop_whose_bound_meets_the_answer_is_optimal() -> None:
    """The whole-model example: the search reaches a state where the open bound equals the
    incumbent up to the last bits; a gap stop there is a proof (as at the end of a search)."""
    spec = load_spec(EXAMPLES / "gpt_whole_model.toml")
    r = search(replace(spec, search=replace(spec.search, gap=0.5)))
    assert (r.status, r.search.stopped_by) == (RunStatus.OPTIMAL, GAP_STOP)
    assert r.search.lower_bound_s == pytest.approx(r.evaluation.final_s, rel=1e-12)


def test_a_plan_of_sub_searches_stopped_at_their_gap_is_not_proven_nor_stopped() -> None:
    """In the stage plan each piece search stops at its own gap: the plan's answer is not
    proven and not labelled as stopped by a limit; its bound stays below the optimum."""
    spec = load_spec(EXAMPLES / "gpt_pipeline.toml")
    full = plan_run(spec)
    r = plan_run(replace(spec, search=replace(spec.search, gap=0.5)))
    assert full.status is RunStatus.OPTIMAL
    assert (r.status, r.search.stopped_by) == (RunStatus.FEASIBLE_NOT_PROVEN, "")
    assert r.search.lower_bound_s <= full.evaluation.final_s <= r.evaluation.final_s
