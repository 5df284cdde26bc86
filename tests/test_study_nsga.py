"""`dfsearch sweep --sample nsga2`: seeded and deterministic, the same rows as an enumerated
sweep, resumable, filters respected, and on a small space it finds the exact front."""

from __future__ import annotations

import csv
from pathlib import Path

from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.study.nsga import nsga_sweep
from dfsearch.study.pareto import pareto_front
from dfsearch.study.runner import sweep
from dfsearch.study.study import load_study
from dfsearch.study.table import read_table
from tests.test_study_sweep import make_study

# 4 x 3 = 12 points; more DRAM bandwidth costs more ($1 per GB/s per chip) and runs faster
AXES = ('[axes]\n"system.memory.dram_bw_GBps" = [200, 400, 900, 1555]\n'
        '"execution.compute_util" = [0.5, 0.7, 0.9]\n')  # fmt: skip


def rows_of(folder: Path) -> list[dict[str, str]]:
    rows = list(csv.DictReader((folder / "results.csv").open()))
    for r in rows:
        r.pop("seconds")
    return rows


def test_same_seed_same_points_and_table(tmp_path):
    study = load_study(make_study(tmp_path, AXES))
    a = nsga_sweep(study, tmp_path / "a", trials=16, seed=5, population=4)
    b = nsga_sweep(study, tmp_path / "b", trials=16, seed=5, population=4)
    assert rows_of(tmp_path / "a") == rows_of(tmp_path / "b")
    assert a.ran == b.ran and a.ran >= 2


def test_rows_are_the_enumerated_sweeps_rows(tmp_path):
    study = load_study(make_study(tmp_path, AXES))
    sweep(study, tmp_path / "all")
    nsga_sweep(study, tmp_path / "nsga", trials=12, seed=1, population=4)
    every = {r["point"]: r for r in rows_of(tmp_path / "all")}
    sampled = rows_of(tmp_path / "nsga")
    assert sampled and all(r == every[r["point"]] for r in sampled)


def test_finds_the_front_of_a_space_it_could_enumerate(tmp_path):
    study = load_study(make_study(tmp_path, AXES))
    sweep(study, tmp_path / "all")
    _, every = read_table(tmp_path / "all" / "results.csv")
    exact = {r["point"] for r in pareto_front(every, ("throughput", "cost"))}
    assert 1 < len(exact) < len(every)  # a real trade-off, not a single best point
    nsga_sweep(study, tmp_path / "nsga", trials=40, seed=0, population=6)
    _, found = read_table(tmp_path / "nsga" / "results.csv")
    assert {r["point"] for r in pareto_front(found, ("throughput", "cost"))} == exact
    assert len(found) == len({r["point"] for r in found})  # each point searched once


def test_resume_replays_the_trials_without_searching_again(tmp_path):
    study = load_study(make_study(tmp_path, AXES))
    nsga_sweep(study, tmp_path / "once", trials=20, seed=2, population=4)
    nsga_sweep(study, tmp_path / "twice", trials=8, seed=2, population=4)  # "interrupted"
    again = nsga_sweep(study, tmp_path / "twice", trials=20, seed=2, population=4)
    assert rows_of(tmp_path / "twice") == rows_of(tmp_path / "once")
    assert again.done_before > 0
    assert nsga_sweep(study, tmp_path / "twice", trials=20, seed=2, population=4).ran == 0


def test_filtered_points_are_never_searched(tmp_path):
    head = 'filter = "system.memory.dram_bw_GBps >= 900"'
    study = load_study(make_study(tmp_path, AXES, head=head))
    nsga_sweep(study, tmp_path / "out", trials=20, seed=0, population=4)
    _, rows = read_table(tmp_path / "out" / "results.csv")
    assert rows and all(r["system.memory.dram_bw_GBps"] >= 900 for r in rows)


def test_command_line(tmp_path):
    path = make_study(tmp_path, AXES)
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", str(path), "-o", str(tmp_path / "out"), "--sample", "nsga2",
                              "--trials", "10", "--seed", "4", "--quiet"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "nsga2 (10 trials, seed 4)" in res.output and "Pareto front over throughput, cost" in res.output
    bad = runner.invoke(app, ["sweep", str(path), "-o", str(tmp_path / "x"), "--sample", "random"])
    assert bad.exit_code == 2
    pool = runner.invoke(app, ["sweep", str(path), "-o", str(tmp_path / "y"), "--sample", "nsga2", "--jobs", "2"])
    assert pool.exit_code == 2 and "drop --jobs" in pool.output
