"""`dfsearch sweep`: one row per point streamed to results.csv, resume after an interrupt or a
kill, refusal of a table another study wrote, the same table for any --jobs, JSON summary."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
from dfsearch.cli import app
from dfsearch.errors import SpecError
from dfsearch.study.runner import SweepInterrupted, sweep
from dfsearch.study.study import load_study
from dfsearch.study.table import METRICS, read_table

from _clock import load_factor

EXAMPLES = Path(dfsearch.__file__).parent / "examples"
BASE = EXAMPLES / "gpt3_1.5B_a100x4.toml"
AXES = '[axes]\n"system.memory.dram_bw_GBps" = [400, 1555]\n"execution.compute_util" = [0.5, 0.9]\n'


def make_study(tmp_path: Path, axes: str = AXES, base: Path = BASE, head: str = "") -> Path:
    shutil.copy(base, tmp_path / "base.toml")
    path = tmp_path / "study.toml"
    path.write_text(f'[study]\nbase = "base.toml"\n{head}\n{axes}')
    return path


def rows_without_seconds(path: Path) -> list[dict[str, str]]:
    rows = list(csv.DictReader(path.open()))
    for r in rows:
        r.pop("seconds")
    return rows


def test_table_has_one_row_per_point_with_the_runs_numbers(tmp_path):
    study = load_study(make_study(tmp_path))
    summary = sweep(study, tmp_path / "out")
    header, rows = read_table(tmp_path / "out" / "results.csv")
    assert header == ["point", "system.memory.dram_bw_GBps", "execution.compute_util", *METRICS]
    assert [r["point"] for r in rows] == [0, 1, 2, 3] and summary.ran == 4 and summary.feasible == 4
    r = rows[3]
    run = dfsearch.run(study.point_spec(study.points()[3]))
    ev = run.evaluation
    assert (r["system.memory.dram_bw_GBps"], r["execution.compute_util"]) == (1555, 0.9)
    assert r["final_s"] == ev.final_s and r["utilization"] == ev.utilization
    assert r["throughput_per_s"] == 1.0 / ev.final_s
    assert r["system_cost"] == ev.price.system_cost and r["system_power"] == ev.price.system_power
    gflops = ev.workload_flop / ev.final_s / 1e9
    assert r["cost_efficiency"] == pytest.approx(gflops / ev.price.system_cost, rel=1e-12)
    assert r["power_efficiency"] == pytest.approx(gflops / ev.price.system_power, rel=1e-12)
    assert (r["tp"], r["pp"], r["dp"]) == (ev.tp, ev.pp, ev.dp)
    assert r["status"] == run.status.label and r["lower_bound_s"] == run.search.lower_bound_s
    assert r["compute_ns"] == pytest.approx(sum(c.compute_ns for c in ev.configs))
    assert r["seed"] == 0 and len(r["digest"]) == 16


def test_infeasible_point_is_a_row_with_its_status_and_reason(tmp_path):
    study = load_study(make_study(tmp_path, '[axes]\n"system.memory.dram_bytes" = [1000000, 0]'))
    sweep(study, tmp_path / "out")
    _, rows = read_table(tmp_path / "out" / "results.csv")
    assert rows[0]["status"] == "infeasible" and rows[0]["final_s"] is None
    assert "DRAM" in rows[0]["message"]
    assert rows[1]["final_s"] is not None


def test_study_seed_is_every_points_seed(tmp_path):
    study = load_study(make_study(tmp_path, head="seed = 7"))
    sweep(study, tmp_path / "out")
    assert {r["seed"] for r in read_table(tmp_path / "out" / "results.csv")[1]} == {7}


def test_resume_skips_done_points_and_completes_the_same_table(tmp_path):
    study = load_study(make_study(tmp_path))
    sweep(study, tmp_path / "full")
    full = tmp_path / "full" / "results.csv"
    part = tmp_path / "part"
    part.mkdir()
    lines = full.read_text().splitlines(keepends=True)
    (part / "results.csv").write_text("".join(lines[:3]) + lines[3][:17])  # 2 rows + a cut row
    summary = sweep(study, part)
    assert (summary.done_before, summary.ran) == (2, 2)
    assert rows_without_seconds(part / "results.csv") == rows_without_seconds(full)


def test_ctrl_c_keeps_written_rows_and_resumes(tmp_path):
    study = load_study(make_study(tmp_path))

    def stop_after_two(done, total, elapsed, ran):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(study, tmp_path / "out", progress=stop_after_two)
    assert [r["point"] for r in read_table(tmp_path / "out" / "results.csv")[1]] == [0, 1]
    summary = sweep(study, tmp_path / "out")
    assert (summary.done_before, summary.ran) == (2, 2)


def test_interrupted_search_is_not_recorded(tmp_path, monkeypatch):
    """A point whose search Ctrl-C stopped (status interrupted) is not a result: no row."""
    from dfsearch.study import runner

    real = runner.run_point

    def interrupted_third(task):
        row = real(task)
        return row | {"status": "interrupted"} if task.point == 2 else row

    monkeypatch.setattr(runner, "run_point", interrupted_third)
    with pytest.raises(SweepInterrupted, match="after 2 of 4 points"):
        sweep(load_study(make_study(tmp_path)), tmp_path / "out")
    assert len(read_table(tmp_path / "out" / "results.csv")[1]) == 2


def test_changed_base_spec_is_refused_then_fresh_starts_anew(tmp_path):
    path = make_study(tmp_path)
    sweep(load_study(path), tmp_path / "out")
    base = tmp_path / "base.toml"
    base.write_text(base.read_text().replace("global_batch_size = 8192", "global_batch_size = 4096"))
    with pytest.raises(SpecError, match=r"was computed for another spec or seed.*--fresh"):
        sweep(load_study(path), tmp_path / "out")
    r = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2 and "--fresh" in r.output
    summary = sweep(load_study(path), tmp_path / "out", fresh=True)
    assert (summary.done_before, summary.ran) == (0, 4)


def test_table_of_another_study_is_refused(tmp_path):
    sweep(load_study(make_study(tmp_path)), tmp_path / "out")
    other = make_study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [400, 1555]')
    with pytest.raises(SpecError, match="has the columns of another study"):
        sweep(load_study(other), tmp_path / "out")


def test_table_of_another_version_is_refused_saying_so(tmp_path):
    """A table whose axis columns match but whose result columns differ (written before the
    headline columns) is refused as another version's."""
    path = make_study(tmp_path)
    sweep(load_study(path), tmp_path / "out")
    table = tmp_path / "out" / "results.csv"
    table.write_text("".join(",".join(line.split(",")[:-1]) + "\n" for line in table.read_text().splitlines()))
    with pytest.raises(SpecError, match=r"has the result columns of another version of dfsearch.*--fresh"):
        sweep(load_study(path), tmp_path / "out")


@pytest.mark.slow
def test_same_table_whatever_jobs(tmp_path):
    """Determinism: same study and seed, identical table for --jobs 1 and 2 (the seconds
    column, a wall-clock time, aside)."""
    path = make_study(tmp_path)
    r1 = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "j1"), "-q"])
    r2 = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "j2"), "-q", "--jobs", "2"])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    assert "process-pool" in r2.output
    a, b = rows_without_seconds(tmp_path / "j1" / "results.csv"), rows_without_seconds(tmp_path / "j2" / "results.csv")
    assert a == b and len(a) == 4


def test_json_summary_and_pareto(tmp_path):
    path = make_study(tmp_path)
    r = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "out"), "--json", "-",
                                 "--pareto", "throughput,cost"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert (data["points"], data["ran"], data["feasible"], data["backend"]) == (4, 4, 4, "in-process")
    assert data["pareto"]["objectives"] == ["throughput", "cost"] and data["pareto"]["points"]
    r = CliRunner().invoke(app, ["pareto", str(tmp_path / "out"), "--objectives", "throughput,power"])
    assert r.exit_code == 0 and "Pareto front over throughput, power" in r.output


def test_pareto_option_errors_exit_2(tmp_path):
    r = CliRunner().invoke(app, ["pareto", str(tmp_path), "--objectives", "throughput"])
    assert r.exit_code == 2 and "must name 2 or 3 distinct objectives" in r.output
    r = CliRunner().invoke(app, ["pareto", str(tmp_path)])
    assert r.exit_code == 2 and "has no results table" in r.output


@pytest.mark.slow
def test_progress_line_on_stderr_and_quiet(tmp_path):
    path = make_study(tmp_path)
    out = subprocess.run([sys.executable, "-m", "dfsearch", "sweep", str(path), "-o", str(tmp_path / "a")],
                         capture_output=True, text=True, check=True)
    assert "sweep: 4/4 points" in out.stderr and "ETA" in out.stderr
    assert "sweep:" not in out.stdout
    out = subprocess.run([sys.executable, "-m", "dfsearch", "sweep", str(path), "-o", str(tmp_path / "b"), "-q"],
                         capture_output=True, text=True, check=True)
    assert out.stderr == ""


@pytest.mark.slow
@pytest.mark.wallclock
def test_killed_sweep_resumes(tmp_path):
    """SIGKILL after the first rows: the flushed rows survive, the rerun completes the table."""
    axes = '[axes]\n"system.memory.dram_bw_GBps" = [400, 800, 1200, 1555]\n"execution.compute_util" = [0.5, 0.7, 0.9]\n'
    path = make_study(tmp_path, axes)
    table = tmp_path / "out" / "results.csv"
    proc = subprocess.Popen([sys.executable, "-m", "dfsearch", "sweep", str(path), "-o", str(tmp_path / "out"), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120 * load_factor()  # a safety stop only
    while time.time() < deadline and (not table.exists() or table.read_text().count("\n") < 3):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    written = len(read_table(table)[1])
    assert written >= 2
    summary = sweep(load_study(path), tmp_path / "out")
    assert summary.done_before == written and summary.done_before + summary.ran == 12
    sweep(load_study(path), tmp_path / "fresh")
    assert rows_without_seconds(table) == rows_without_seconds(tmp_path / "fresh" / "results.csv")


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_table(tmp_path):
    """--dask on a LocalCluster (2 worker processes): the same table as in-process."""
    distributed = pytest.importorskip("distributed")
    path = make_study(tmp_path)
    sweep(load_study(path), tmp_path / "local")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:  # fmt: skip
        r = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "dask"), "-q",
                                     "--dask", cluster.scheduler_address, "--json", "-"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["backend"] == "dask"
    assert rows_without_seconds(tmp_path / "dask" / "results.csv") == rows_without_seconds(tmp_path / "local" / "results.csv")
