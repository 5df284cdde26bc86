"""Every entry point sees every plan (issue 22, item 4): for every shipped example (and a
DFModel input cut into pipeline partitions, the one plan kind no example uses), the Python
API (``api.run``), ``dfsearch run --json -``, a one-point ``dfsearch sweep`` (a study with
``base = <example>`` and no axes) and ``dfsearch eval`` of the mapping the run wrote give the
same numbers: ``final_s``, utilisation, status, cost, power, parallelism and the plan's
headline figures (``result.HEADLINE``: plan kind, serving tokens/s and latency, speculative
tokens/s and speedup, stages). Values are compared exactly: JSON and the results table both
write a float's shortest round-trip form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
from dfsearch import api
from dfsearch.cli import app
from dfsearch.result import HEADLINE
from dfsearch.study.table import read_table

EXAMPLES = sorted((Path(dfsearch.__file__).parent / "examples").glob("*.toml"))
PARTITIONED = Path(__file__).parent / "data" / "dfmodel" / "partition" / "example_gpt3_1T_4layer_2pp_2" / "setup.txt"
CASES = [*EXAMPLES, PARTITIONED]
#: the speculative example (whose sweep row used to lack the speculative figures) stays in
#: the quick subset; the rest together take ~15 s
PARAMS = [pytest.param(p, id=p.stem if p.suffix == ".toml" else "partition",
                       marks=() if "specdec" in p.stem else pytest.mark.slow) for p in CASES]  # fmt: skip

#: the figures every entry point reports alike, beside the headline ones
SHARED = ("final_s", "utilization", "system_cost", "system_power", "tp", "pp", "dp", "num_config")
#: the headline figures only a search finds (``eval`` of the mapping file has the plain
#: decode's decision, not the speculative plan's draft and verification mappings)
SEARCHED = ("speculative_tokens_per_s", "speculative_time_per_token_s", "speculative_speedup")


def _cli_json(args: list[str]) -> dict:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _figures(source: dict, status: str | None = None) -> dict:
    """The compared figures of a JSON object (headline figures in ``headline``) or a
    results-table row (one column each)."""
    headline = source.get("headline", source)
    out = {k: source[k] for k in SHARED} | {k: headline[k] for k in HEADLINE}
    return out | {"status": status if status is not None else source["status"]}


@pytest.mark.parametrize("path", PARAMS)
def test_run_json_sweep_and_eval_agree(path, tmp_path):
    result = api.run(path)
    expected = _figures(result.to_json())
    assert expected["plan"] == result.plan and expected["status"] == result.status.label
    assert result.headline() == {k: expected[k] for k in HEADLINE}

    mapping = tmp_path / "mapping.toml"
    data = _cli_json(["run", str(path), "--quiet", "--mapping-out", str(mapping), "--json", "-"])
    assert _figures(data) == expected and data["headline"] == result.headline()

    study = tmp_path / "study.toml"
    study.write_text(f"[study]\nbase = {json.dumps(str(path))}\n")
    r = CliRunner().invoke(app, ["sweep", str(study), "-o", str(tmp_path / "out"), "--quiet"])
    assert r.exit_code == 0, r.output
    header, rows = read_table(tmp_path / "out" / "results.csv")
    assert set(HEADLINE) <= set(header) and len(rows) == 1
    assert _figures(rows[0]) == expected
    assert rows[0]["lower_bound_s"] == data["lower_bound_s"]
    if result.plan == "speculative":  # the sweep's row used to lack these
        assert round(rows[0]["speculative_tokens_per_s"], 2) == 85.96
        assert round(rows[0]["speculative_speedup"], 2) == 2.81

    evaluated = _cli_json(["eval", str(path), "--mapping", str(mapping), "--json", "-"])
    assert evaluated["status"] == "evaluated"
    searched_only = dict.fromkeys(SEARCHED)
    assert _figures(evaluated, expected["status"]) | searched_only == expected | searched_only
    assert all(evaluated["headline"][k] is None for k in SEARCHED)


def test_every_plan_kind_is_covered():
    """The cases above run every registered plan kind and a serving spec."""
    from dfsearch.plan import PLAN_KINDS, kind_of

    kinds = {kind_of(api.load(p)).name for p in CASES}
    assert kinds == set(PLAN_KINDS)
    assert any(api.load(p).workload.kind.label == "llm_serving" for p in EXAMPLES)
