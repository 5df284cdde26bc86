"""DFModel import -> convert -> load is the identity; pinned configurations survive the search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings

from dfsearch.errors import SpecError
from dfsearch.io.dfmodel import load_dfmodel
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_toml_spec
from dfsearch.search.engine import search

DATA = Path(__file__).parent / "data" / "dfmodel"
SETUPS = sorted(DATA.glob("*/setup*.txt"))


@pytest.mark.parametrize("path", SETUPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_convert_then_load_equals_direct_import(path, tmp_path):
    direct = load_dfmodel(path.read_text(), file=str(path))
    toml = spec_to_toml(direct)
    assert load_toml_spec(toml, file="converted.toml", base_dir=tmp_path) == direct


def _random_dfmodel_inputs():
    from test_dfmodel_import import _dfmodel_input  # the importer's own Hypothesis strategy

    return _dfmodel_input()


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate))
@given(case=_random_dfmodel_inputs())
def test_random_dfmodel_input_survives_convert(case, tmp_path_factory):
    text, _expected = case
    try:
        spec = load_dfmodel(text)
    except SpecError as exc:  # pins that no mapping can honour are refused, naming the pin
        assert all(i.path.endswith(".config") for i in exc.issues), exc
        assume(False)
    base = tmp_path_factory.mktemp("convert")
    assert load_toml_spec(spec_to_toml(spec), file="c.toml", base_dir=base) == spec


def test_pinned_configs_are_honoured():
    """A vendor mapping given by `config:` fields is evaluated as given; the rest searched."""
    path = DATA / "readme_gpt3_1T_sn30_1024chips_r_r_8x128" / "setup.txt"
    spec = load_dfmodel(path.read_text())
    pins = {"FFN1": 2, "GeLU": 2, "FFN0_bwd_weight_update": 5}
    kernels = tuple(replace(k, config=pins.get(k.name, -1)) for k in spec.graph.kernels)
    pinned = replace(spec, graph=replace(spec.graph, kernels=kernels))
    r = search(pinned)
    cfg = dict(zip((k.name for k in kernels), r.evaluation.decision.config))
    assert all(cfg[name] == c for name, c in pins.items())
    free = search(spec)
    assert r.evaluation.final_ns >= free.evaluation.final_ns * (1 - 1e-12)
