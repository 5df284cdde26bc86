"""Serving-capacity studies: a study whose base spec has a ``[serve]`` table runs each point
through ``dfsearch serve``'s search and writes its figures (docs/studies.md,
"Serving-capacity studies")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dfsearch.capacity.command import COLUMNS
from dfsearch.cli import app
from dfsearch.study.study import load_study
from dfsearch.study.table import SERVE_METRICS, read_table

EXAMPLE = Path(__file__).resolve().parents[1] / "dfsearch/examples/serve/serve_llama3_70b.toml"
SMALL = {  # the small model and space of tests/test_serve_cli.py: each search takes a moment
    "hidden_dim = 8192": "hidden_dim = 1024", "num_head = 64": "num_head = 8", "ffn_dim = 28672": "ffn_dim = 4096",
    "num_layer = 80": "num_layer = 4", "rate_per_s = 20.0": "rate_per_s = 1000.0", "requests = 2000": "requests = 400",
    "tp = [1, 2, 4, 8]": "tp = [1, 2]", "max_chips = 64": "max_chips = 8", "batch_caps = [32, 64, 128, 256]":
    "batch_caps = [16, 64]", "ttft_p99_s = 1.0": "ttft_p99_s = 0.02", "tpot_p99_s = 0.050": "tpot_p99_s = 0.0002",
}  # fmt: skip


def serve_spec(path: Path, tpot: str = "0.0002") -> Path:
    text = EXAMPLE.read_text()
    for old, new in SMALL.items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text.replace("tpot_p99_s = 0.0002", f"tpot_p99_s = {tpot}"))
    return path


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_serve_study_row_is_what_dfsearch_serve_answers_for_the_same_spec(tmp_path):
    serve_spec(tmp_path / "base.toml")
    study = tmp_path / "study.toml"
    study.write_text('[study]\nbase = "base.toml"\n[axes]\n"serve.tpot_p99_s" = [0.0002, 1e-6]\n')
    r = invoke("sweep", study, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert "feasible 1, infeasible 1" in r.output
    header, rows = read_table(tmp_path / "out/results.csv")
    assert header[-len(SERVE_METRICS):] == list(SERVE_METRICS)
    # point 0: the row holds dfsearch serve's answer (--json "best"), column for column
    r0 = invoke("serve", serve_spec(tmp_path / "p0.toml", "0.0002"), "--json", "-")
    assert r0.exit_code == 0, r0.output
    best = json.loads(r0.output)["best"]
    assert rows[0]["status"] == "optimal" and rows[0]["meets_slos"] is True
    assert {k: rows[0][k] for k in COLUMNS} == {k: (None if v == "" else v) for k, v in best.items()}
    assert rows[0]["kv_utilisation"] > 0 and rows[0]["joules_per_token"] > 0  # the spec's chips have 700 W
    # point 1: no deployment meets a 1 us TPOT: a row with dfsearch serve's reason, not a crash
    r1 = invoke("serve", serve_spec(tmp_path / "p1.toml", "1e-6"))
    assert r1.exit_code == 1
    assert rows[1]["status"] == "infeasible" and rows[1]["meets_slos"] is False
    assert rows[1]["message"].startswith("no deployment of <= 8 chips meets the SLOs")
    assert rows[1]["message"].split(". Closest")[0] in r1.output
    # resumable: a second sweep runs nothing and keeps the table
    before = (tmp_path / "out/results.csv").read_bytes()
    again = invoke("sweep", study, "-o", tmp_path / "out")
    assert again.exit_code == 0 and "(0 run, 2 already in the table)" in again.output
    assert (tmp_path / "out/results.csv").read_bytes() == before


def test_a_bad_serve_axis_value_exits_2_naming_the_point_and_the_field(tmp_path):
    serve_spec(tmp_path / "base.toml")
    study = tmp_path / "study.toml"
    study.write_text('[study]\nbase = "base.toml"\n[axes]\n"serve.rate_per_s" = [5.0, 0]\n')
    r = invoke("sweep", study, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert "serve.rate_per_s must be a number > 0. Got 0 instead." in r.output
    assert "(point serve.rate_per_s=0)" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out/results.csv").exists()  # refused before any search


def test_the_shipped_serve_study_builds_its_six_points_each_with_its_serve_table():
    s = load_study(Path(__file__).resolve().parents[1] / "dfsearch/examples/studies/serve_rate_slo.toml")
    points = s.points()
    assert s.serves and len(points) == 6
    tables = [s.point_serve(p).data["serve"] for p in points]
    assert [(t["rate_per_s"], t["tpot_p99_s"]) for t in tables] == [
        (r, t) for r in (250.0, 500.0, 1000.0) for t in (0.0001, 0.0004)]
    assert all(t["tp"] == [1, 2] and t["max_chips"] == 8 for t in tables)  # the [set] edits


def test_nsga2_sampling_refuses_a_serve_study_with_exit_2(tmp_path):
    serve_spec(tmp_path / "base.toml")
    study = tmp_path / "study.toml"
    study.write_text('[study]\nbase = "base.toml"\n[axes]\n"serve.rate_per_s" = [5.0, 10.0]\n')
    r = invoke("sweep", study, "-o", tmp_path / "out", "--sample", "nsga2", "--trials", "2")
    assert r.exit_code == 2 and "is a serving-capacity study" in r.output and "Traceback" not in r.output
