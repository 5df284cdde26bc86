"""Study data is never lost or silently wrong: the results-table reader checks every cell,
no command writes over its input, a sweep locks its output folder, Ctrl-C is honoured on
every point, bad output folders exit 2, points are built lazily and a resume rebuilds
nothing already done."""

from __future__ import annotations

import os
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
from dfsearch.study import runner
from dfsearch.study.folder import folder_lock
from dfsearch.study.runner import SweepInterrupted, sweep
from dfsearch.study.study import Study, load_study
from dfsearch.study.table import TableWriter, columns, read_table
from tests.test_study_sweep import make_study, rows_without_seconds

EXAMPLES = Path(dfsearch.__file__).parent / "examples"
HPL_GRID = EXAMPLES / "studies" / "hpl_grid.toml"


def good_table(folder: Path) -> Path:
    """Three rows: two feasible, one infeasible."""
    folder.mkdir(exist_ok=True)
    path = folder / "results.csv"
    with TableWriter(path, columns(["accelerator", "memory"])) as w:
        for i, (acc, mem) in enumerate([("h100", "ddr"), ("h100", "hbm"), ("sn30", "ddr")]):
            row = {"point": i, "accelerator": acc, "memory": mem, "status": "optimal", "digest": "0123456789abcdef"}
            if i < 2:
                row |= {"final_s": 1.0 + i, "system_cost": 10.0 - i, "system_power": 5.0}
            else:
                row |= {"status": "infeasible", "message": "DRAM, too small"}
            w.write(row)
    return path


def fake_metrics(task: runner.Task) -> dict:
    """A point's metrics without a search (the sweep machinery only)."""
    bw = task.spec.system.memory.dram_bw_GBps
    return {"status": "optimal", "final_s": 1000.0 / bw, "system_cost": bw, "system_power": 1.0, "seed": task.seed}


def grid_study(tmp_path: Path, n: int = 10) -> Path:
    values = ", ".join(str(100 + 10 * i) for i in range(n))
    utils = ", ".join(f"{(i + 1) / (n + 1):.4f}" for i in range(n))
    return make_study(tmp_path, f'[axes]\n"system.memory.dram_bw_GBps" = [{values}]\n"execution.compute_util" = [{utils}]\n')


def edit(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_bytes().split(b"\n")
    assert old.encode() in lines[line - 1], (old, lines[line - 1])
    lines[line - 1] = lines[line - 1].replace(old.encode(), new.encode(), 1)
    path.write_bytes(b"\n".join(lines))


# ----------------------------------------------------------------------------- reader
BAD_TABLES = [  # (line, old text, new text, what the message must say)
    (1, "point,", "pt,", "line 1, column 1 must be 'point'. Got 'pt'"),
    (1, "memory,", "accelerator,", "line 1, column 3 repeats the column 'accelerator'"),
    (1, ",digest", ",digestX", "line 1 lacks the columns digest"),
    (2, "0,h100,ddr,", "0,h100,", "line 2 has 42 cells; the header has 43 columns"),
    (2, "0,h100,", "x,h100,", "line 2, column 'point' must be an integer >= 0. Got 'x'"),
    (3, "1,h100,", "-1,h100,", "line 3, column 'point' must be an integer >= 0. Got '-1'"),
    (2, "optimal,1.0,", "optimal,fast,", "line 2, column 'final_s' must be a finite number > 0 or empty. Got 'fast'"),
    (2, "optimal,1.0,", "optimal,nan,", "line 2, column 'final_s' must be a finite number > 0 or empty. Got 'nan'"),
    (2, "optimal,1.0,", "optimal,0,", "line 2, column 'final_s' must be a finite number > 0"),
    (3, "optimal,", "best,", "line 3, column 'status' must be one of optimal, "),
    (4, "2,sn30,", "0,sn30,", "line 4, column 'point' repeats point 0 (already on line 2)"),
    (3, "hbm", "h\xe9m", "line 3 is not UTF-8 text (byte 0xc3"),
    (4, "DRAM, too small", 'DRAM" x', "line 4 is not valid CSV"),
    (2, ",10.0,", ",,", "line 2, column 'system_cost' is empty, but final_s is set"),
    (3, ",,,", ",\x00,,", "line 3, column 'throughput_per_s' must be a finite number or empty. Got '\\x00'"),
    (1, ",message,plan,", ",message,plan,plan,", "line 1, column 34 repeats the column 'plan'"),
    (2, "0123456789abcdef,,", "0123456789abcdef,,two words", "line 2, column 'plan' must be a plan kind's name"),
    (2, "0123456789abcdef,,,", "0123456789abcdef,,,-2", "line 2, column 'batch' must be an integer >= 0. Got '-2'"),
]


@pytest.mark.parametrize("line, old, new, message", BAD_TABLES)
def test_bad_table_is_refused_naming_file_line_and_column(tmp_path, line, old, new, message):
    path = good_table(tmp_path / "r")
    if new == "h\xe9m":
        data = path.read_bytes().replace(b"hbm", b"h\xe9m")  # a Latin-1 byte, not UTF-8
        path.write_bytes(data)
        message = "line 3 is not UTF-8 text (byte 0xe9"
    else:
        edit(path, line, old, new)
    with pytest.raises(SpecError) as e:
        read_table(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value), str(e.value)
    for command in (["pareto", str(path)], ["plot", str(tmp_path / "r"), "--kind", "pareto"]):
        r = CliRunner().invoke(app, command)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output
        assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit)


def test_good_table_reads_and_a_cut_last_row_is_left_out_with_a_note(tmp_path):
    path = good_table(tmp_path)
    _, rows = read_table(path)
    assert [r["point"] for r in rows] == [0, 1, 2] and rows[0]["final_s"] == 1.0 and rows[2]["final_s"] is None
    path.write_bytes(path.read_bytes() + b"3,sn30,hbm,opti")  # a row cut by a killed sweep
    assert [r["point"] for r in read_table(path)[1]] == [0, 1, 2]
    r = CliRunner().invoke(app, ["pareto", str(path)])
    assert r.exit_code == 0 and "line 5 has no line end" in r.output and "2 of 2 feasible points" in r.output


def test_a_table_without_the_headline_columns_reads_them_empty(tmp_path):
    """A table written before the plan's headline columns (``result.HEADLINE``) still reads
    (``pareto``, ``plot``); its rows hold None there. Resuming it is refused (other columns)."""
    from dfsearch.result import HEADLINE

    path = good_table(tmp_path)
    lines = path.read_text().splitlines()
    cut = len(HEADLINE)
    path.write_text("".join(",".join(line.split(",")[:-cut]) + "\n" for line in lines))
    header, rows = read_table(path)
    assert "plan" not in header and [r["final_s"] for r in rows] == [1.0, 2.0, None]
    assert all(r[name] is None for r in rows for name in HEADLINE)
    assert CliRunner().invoke(app, ["pareto", str(path)]).exit_code == 0


def test_empty_or_missing_table_exit_2(tmp_path):
    (tmp_path / "results.csv").write_text("")
    r = CliRunner().invoke(app, ["pareto", str(tmp_path)])
    assert r.exit_code == 2 and "is empty: no header line" in r.output
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.csv").mkdir()
    r = CliRunner().invoke(app, ["pareto", str(tmp_path / "d")])
    assert r.exit_code == 2 and "is not a file" in r.output


# ----------------------------------------------------------------------------- no overwrite
def test_no_command_writes_over_its_input(tmp_path):
    path = good_table(tmp_path)
    before = path.read_bytes()
    r = CliRunner().invoke(app, ["pareto", str(path), "--json", str(path)])
    assert r.exit_code == 2 and "is an input file of this command" in r.output
    r = CliRunner().invoke(app, ["plot", str(tmp_path), "--kind", "pareto", "-o", str(path)])
    assert r.exit_code == 2 and "is an input file of this command" in r.output
    study = grid_study(tmp_path, 2)
    r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(tmp_path), "--json", str(path)])
    assert r.exit_code == 2 and "is an input file of this command" in r.output
    r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(tmp_path / "x"), "--json", str(study)])
    assert r.exit_code == 2 and "is an input file of this command" in r.output
    assert path.read_bytes() == before


# ----------------------------------------------------------------------------- lock
def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run_point", fake_metrics)
    study = load_study(grid_study(tmp_path, 2))
    out = tmp_path / "out"
    out.mkdir()
    with folder_lock(out):
        with pytest.raises(SpecError, match=r"is in use: another sweep \(process \d+\) is writing its results there"):
            sweep(study, out)
        r = CliRunner().invoke(app, ["sweep", str(tmp_path / "study.toml"), "-o", str(out)])
        assert r.exit_code == 2 and "is in use" in r.output
    assert not (out / "results.csv").exists()
    assert sweep(study, out).ran == 4  # released at the end of the block


def test_the_lock_of_a_killed_process_is_released(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    code = ("import sys, time; from pathlib import Path; from dfsearch.study.folder import folder_lock\n"
            "with folder_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(120)")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(SpecError, match="is in use"), folder_lock(out):
            pass
    finally:
        proc.kill()  # SIGKILL: no clean-up in the holder
        proc.wait()
    monkeypatch.setattr(runner, "run_point", fake_metrics)
    assert sweep(load_study(grid_study(tmp_path, 2)), out).ran == 4


# ----------------------------------------------------------------------------- Ctrl-C
def sigint_during_solve(monkeypatch, when: int = 1) -> list[int]:
    """Make the ``when``-th outer-choice solve receive Ctrl-C just before it runs."""
    from dfsearch.search import engine

    real, calls = engine._solve, [0]

    def solve(st, p, c):
        calls[0] += 1
        if calls[0] == when:
            signal.raise_signal(signal.SIGINT)
        return real(st, p, c)

    monkeypatch.setattr(engine, "_solve", solve)
    return calls


def test_ctrl_c_during_a_one_choice_search_is_reported(monkeypatch):
    """The HPL example has one outer choice: a Ctrl-C during it used to vanish (no poll)."""
    from dfsearch.search.engine import search

    spec = dfsearch.load(EXAMPLES / "hpl_576gpu.toml")
    calls = sigint_during_solve(monkeypatch)
    result = search(spec)
    assert result.search.candidates == 1 and result.search.stopped_by == "interrupted"
    calls[0] = 0
    assert runner.run_point(runner.Task(0, spec, 0))[runner.CTRL_C] is True


def test_ctrl_c_in_a_sweep_stops_it_after_the_point_and_resumes(tmp_path, monkeypatch):
    study = load_study(make_study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [400, 800, 1200, 1555]\n',
                                  base=EXAMPLES / "hpl_576gpu.toml"))  # fmt: skip
    sweep(study, tmp_path / "full")
    sigint_during_solve(monkeypatch, when=2)
    with pytest.raises(SweepInterrupted) as e:
        sweep(study, tmp_path / "out")
    rows = read_table(tmp_path / "out" / "results.csv")[1]
    assert e.value.written == len(rows) and [r["point"] for r in rows] in ([0], [0, 1])
    assert all(r["status"] != "interrupted" for r in rows)
    monkeypatch.undo()
    assert sweep(study, tmp_path / "out").ran == 4 - len(rows)
    assert rows_without_seconds(tmp_path / "out" / "results.csv") == rows_without_seconds(tmp_path / "full" / "results.csv")


def sigint_default() -> None:
    """SIGINT handled as usual in the child even when the tests run as a background job
    (started with SIGINT ignored, which Python keeps)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_sigint_stops_a_sweep_of_cheap_points_every_time(tmp_path):
    """SIGINT to `dfsearch sweep` on the HPL grid (80 one-choice points): exit 130 with the
    table short of 80 rows, three times at three moments; the last run completes it."""
    out = tmp_path / "out"
    table = out / "results.csv"
    for k in range(3):
        before = len(read_table(table)[1]) if table.exists() else 0
        proc = subprocess.Popen([sys.executable, "-m", "dfsearch", "sweep", str(HPL_GRID), "-o", str(out), "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=sigint_default)  # fmt: skip
        deadline = time.monotonic() + 300  # a safety net only
        while time.monotonic() < deadline and proc.poll() is None:
            if table.exists() and table.read_bytes().count(b"\n") >= before + 2 + k:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        rows = len(read_table(table)[1])
        assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
        assert before < rows < 80
    r = subprocess.run([sys.executable, "-m", "dfsearch", "sweep", str(HPL_GRID), "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0 and len(read_table(table)[1]) == 80


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="POSIX signals and process groups")
def test_ctrl_c_to_the_process_group_stops_a_pool_sweep(tmp_path):
    """A terminal's Ctrl-C reaches the workers too: a worker stopped while waiting for a task
    used to die holding the pool's queue lock, and the sweep then hung in terminate."""
    out = tmp_path / "out"
    table = out / "results.csv"
    proc = subprocess.Popen([sys.executable, "-m", "dfsearch", "sweep", str(HPL_GRID), "-o", str(out), "-q", "-j", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=sigint_default)  # fmt: skip
    deadline = time.monotonic() + 300  # a safety net only
    while time.monotonic() < deadline and proc.poll() is None:
        if table.exists() and table.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the sweep did not end after Ctrl-C")
    assert proc.returncode == 130 and "interrupted after" in err and "Traceback" not in err, err
    assert 2 <= len(read_table(table)[1]) < 80


# ----------------------------------------------------------------------------- -o
def test_wrong_output_folders_exit_2(tmp_path):
    study = grid_study(tmp_path, 2)
    (tmp_path / "afile").write_text("x")
    for out, message in ((tmp_path / "afile", "is a file; expected a folder"),
                         (tmp_path / "afile" / "sub", "cannot create the folder")):  # fmt: skip
        r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(out)])
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output
    (tmp_path / "t" / "results.csv").mkdir(parents=True)
    r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(tmp_path / "t")])
    assert r.exit_code == 2 and "is not a regular file" in r.output


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_read_only_output_folder_exit_2(tmp_path):
    """A folder this process cannot write in: mode 555 for a user; for root (who writes
    anywhere else, as in CI), a folder of the kernel's sysfs, where no file can be made."""
    if os.geteuid() == 0:
        out = Path("/sys/kernel")
        assert out.is_dir(), "no sysfs: nothing here is read-only for root"
    else:
        out = tmp_path / "ro"
        out.mkdir()
        out.chmod(0o555)
    try:
        r = CliRunner().invoke(app, ["sweep", str(grid_study(tmp_path, 2)), "-o", str(out)])
    finally:
        if out.is_relative_to(tmp_path):
            out.chmod(0o755)
    assert r.exit_code == 2 and "cannot write in this folder" in r.output, r.output


def test_full_disk_while_sweeping_exit_2_and_keeps_the_rows(tmp_path, monkeypatch):
    import errno

    from dfsearch.study import table

    monkeypatch.setattr(runner, "run_point", fake_metrics)
    real, calls = os.fsync, [0]

    def fsync(fd):
        calls[0] += 1
        if calls[0] == 2:  # the header, then the next sync of the rows: the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(table.os, "fsync", fsync)
    r = CliRunner().invoke(app, ["sweep", str(grid_study(tmp_path, 2)), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2 and "cannot write: No space left on device" in r.output, r.output
    assert "results.csv" in r.output and not isinstance(r.exception, OSError)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_plot_to_a_full_disk_exit_2(tmp_path):
    pytest.importorskip("matplotlib")
    good_table(tmp_path)
    (tmp_path / "full.png").symlink_to("/dev/full")
    r = CliRunner().invoke(app, ["plot", str(tmp_path), "--kind", "pareto", "-o", str(tmp_path / "full.png")])
    assert r.exit_code == 2 and "cannot write" in r.output and "Traceback" not in r.output


# ----------------------------------------------------------------------------- catalogue, plots
@pytest.mark.parametrize("values", ['[["h100"]]', "[{ chip = \"h100\" }]", "[1.5]", "[true]"])
def test_catalogue_axis_rejects_tables_and_lists(tmp_path, values):
    study = make_study(tmp_path, f"[axes]\naccelerator = {values}\n")
    r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(tmp_path / "out"), "--dry-run"])
    assert r.exit_code == 2 and "axes.accelerator[0] must be one of 'h100'" in r.output and "Traceback" not in r.output


def test_plot_refuses_unknown_extensions_and_oversized_figures(tmp_path):
    pytest.importorskip("matplotlib")
    from dfsearch.study import plots

    good_table(tmp_path)
    for name, got in (("fig.csv", "'.csv'"), ("fig.txt", "'.txt'"), ("fig", "no extension")):
        r = CliRunner().invoke(app, ["plot", str(tmp_path), "-o", str(tmp_path / name)])
        assert r.exit_code == 2 and "must name an image format" in r.output and got in r.output
        assert not (tmp_path / name).exists()
    header = columns(["a", "b"])
    rows = [{c: None for c in header} | {"point": i, "a": i, "b": 0, "final_s": 1.0, "system_cost": 1.0,
                                         "system_power": 1.0, "utilization": 0.5} for i in range(600)]  # fmt: skip
    with pytest.raises(SpecError, match="breakdown draws one bar per feasible point: this table has 600"):
        plots.breakdown_figure(header, rows)
    with pytest.raises(SpecError, match="heatmap draws one row or column per value of a: this table has 600"):
        plots.heatmap_figure(header, rows, "utilization")
    fig = plots.breakdown_figure(header, rows[:400])
    assert max(fig.get_size_inches()) <= plots.MAX_INCHES


# ----------------------------------------------------------------------------- streaming
def counting_point_spec(monkeypatch) -> list[int]:
    real, calls = Study.point_spec, [0]

    def point_spec(self, point):
        calls[0] += 1
        return real(self, point)

    monkeypatch.setattr(Study, "point_spec", point_spec)
    return calls


def stop_after(n: int):
    def progress(done, total, elapsed, ran):
        if ran >= n:
            raise KeyboardInterrupt

    return progress


def test_points_are_built_when_reached_and_a_resume_rebuilds_nothing_done(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run_point", fake_metrics)
    study = load_study(grid_study(tmp_path, 30))  # 900 points
    calls = counting_point_spec(monkeypatch)
    assert runner.precheck(study) == 30 + 30 - 1  # one point per axis value, before any search
    calls[0] = 0
    with pytest.raises(KeyboardInterrupt):
        sweep(study, tmp_path / "out", progress=stop_after(5))
    assert calls[0] == 59 + 5  # the previous version built all 900 specs and digests first
    calls[0] = 0
    with pytest.raises(KeyboardInterrupt):
        sweep(study, tmp_path / "out", progress=stop_after(1))
    assert calls[0] == 59 + 1 + 1  # the first done row's digest check, then the new point
    (tmp_path / "out" / runner.STAMP_NAME).unlink()  # a table of an older version: every row checked
    calls[0] = 0
    with pytest.raises(KeyboardInterrupt):
        sweep(study, tmp_path / "out", progress=stop_after(1))
    assert calls[0] == 59 + 6 + 1
    assert [r["point"] for r in read_table(tmp_path / "out" / "results.csv")[1]] == list(range(7))


def test_a_bad_axis_value_fails_before_any_search(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run_point", fake_metrics)
    values = ", ".join(str(100 + i) for i in range(50)) + ", -1"
    study = load_study(make_study(tmp_path, f'[axes]\n"execution.compute_util" = [0.5, 0.9]\n"system.memory.dram_bw_GBps" = [{values}]\n'))
    with pytest.raises(SpecError, match=r"point execution.compute_util=0.5, system.memory.dram_bw_GBps=-1\): system.memory.dram_bw_GBps must be > 0"):
        sweep(study, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_resume_still_refuses_a_changed_study(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run_point", fake_metrics)
    path = grid_study(tmp_path, 3)
    sweep(load_study(path), tmp_path / "out", progress=None)
    text = path.read_text()
    path.write_text(text.replace("[100, 110, 120]", "[100, 115, 120]"))  # an axis value changed
    with pytest.raises(SpecError, match="the row of point 3 is not a point of this study"):
        sweep(load_study(path), tmp_path / "out")
    path.write_text(text.replace('base = "base.toml"', 'base = "base.toml"\nfilter = "system.memory.dram_bw_GBps > 100"'))
    with pytest.raises(SpecError, match="the row of point 0 is not a point of this study"):
        sweep(load_study(path), tmp_path / "out")  # a filter now drops done points
    path.write_text(text)
    base = tmp_path / "base.toml"
    base.write_text(base.read_text().replace("global_batch_size = 8192", "global_batch_size = 4096"))
    with pytest.raises(SpecError, match="the row of point 0 was computed for another spec or seed"):
        sweep(load_study(path), tmp_path / "out")


def test_a_million_point_study_counts_without_enumerating():
    s = Study("s.toml", Path("b.toml"), {}, {}, tuple(
        __import__("dfsearch.study.study", fromlist=["Axis"]).Axis(f"x{i}", tuple(range(100)), False) for i in range(3)
    ), "cross", (), (), None, "s")  # fmt: skip
    assert s.size() == 1_000_000 and runner._total(s) == 1_000_000
    assert s.point_at(999_999).values == (99, 99, 99) and s.point_at(123_456).values == (12, 34, 56)
    assert next(s.iter_points()).index == 0


# ----------------------------------------------------------------------------- fuzz
@pytest.mark.slow
def test_mutated_tables_and_study_files_never_give_a_traceback(tmp_path):
    """A few dozen mutants of a results table (fed to pareto, plot or a resumed sweep) and of
    study files (fed to sweep): every one exits 0 or 2 with the file named, no traceback.
    ``python tests/_data_mutants.py`` runs hundreds."""
    sys.path.insert(0, str(Path(__file__).parent))
    import _data_mutants as D

    study, table = D.small_table(tmp_path)
    reports = [D.check_table_mutant(seed, tmp_path, study, table) for seed in range(40)]
    sources = D.study_sources()
    reports += [D.check_study_mutant(seed, tmp_path, sources) for seed in range(20)]
    assert [str(f) for r in reports for f in r.failures] == []
    assert {r.code for r in reports} == {0, 2}  # both valid and refused mutants were seen
