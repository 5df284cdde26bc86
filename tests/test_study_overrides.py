"""``[[override]]`` tables of a study file (docs/studies.md, "Settings that differ per point"):
field edits for the points whose axis values satisfy a condition, applied after the
catalogue axes and before the field path axes; every mistake is a house-style error (file,
key, bad value; exit 2 on the command line)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
from dfsearch.cli import app
from dfsearch.errors import SpecError
from dfsearch.spec import AUTO
from dfsearch.study.study import load_study

EXAMPLES = Path(dfsearch.__file__).parent / "examples"
GPT1T = EXAMPLES / "gpt3_1T_sn30.toml"
FFT_DSE = EXAMPLES / "studies" / "inputs" / "fft_dse_setup.txt"

SN30_KBK = """
[[override]]
where = "accelerator == 'sn30'"
set = { "execution.style" = "kernel_by_kernel", "execution.num_config" = 0 }
"""


def study(tmp_path: Path, body: str, base: Path = GPT1T) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(f'[study]\nbase = "{base}"\n{body}')
    return path


def specs(path: Path) -> dict[tuple, object]:
    s = load_study(path)
    return {p.values: s.point_spec(p) for p in s.points()}


def test_override_edits_only_the_points_it_picks(tmp_path):
    got = specs(study(tmp_path, '[axes]\naccelerator = ["h100", "sn30", "wse2"]\n' + SN30_KBK))
    styles = {k[0]: (v.execution.style.label, v.execution.num_config) for k, v in got.items()}
    # h100 and wse2 keep their catalogue styles; sn30's (dataflow, 6) is overridden
    assert styles == {"h100": ("kernel_by_kernel", 0), "sn30": ("kernel_by_kernel", 0), "wse2": ("dataflow", 1)}


def test_conditions_joined_by_and_pick_one_cell(tmp_path):
    body = ('[axes]\naccelerator = ["h100", "tpu_v4"]\ntopology = ["torus2d", "dragonfly"]\n'
            '[[override]]\nwhere = "accelerator == \'h100\' and topology == \'dragonfly\'"\n'
            'set = { "system.accelerator.cores" = 528 }\n')  # fmt: skip
    cores = {k: v.system.accelerator.cores for k, v in specs(study(tmp_path, body, base=FFT_DSE)).items()}
    assert cores == {("h100", "torus2d"): 1056, ("h100", "dragonfly"): 528,
                     ("tpu_v4", "torus2d"): 8, ("tpu_v4", "dragonfly"): 8}  # fmt: skip


def test_a_list_of_conditions_means_all_of_them_and_overrides_apply_in_file_order(tmp_path):
    body = ('[axes]\naccelerator = ["h100", "sn30"]\nmemory = ["ddr", "hbm"]\n'
            '[[override]]\nwhere = ["accelerator == \'sn30\'", "memory == \'hbm\'"]\n'
            'set = { "execution.compute_util" = 0.5 }\n'
            '[[override]]\nwhere = "memory == \'hbm\'"\nset = { "execution.compute_util" = 0.7 }\n')  # fmt: skip
    util = {k: v.execution.compute_util for k, v in specs(study(tmp_path, body)).items()}
    # the second table (every hbm point) comes later in the file, so it wins on (sn30, hbm)
    assert util == {("h100", "ddr"): 0.9, ("h100", "hbm"): 0.7, ("sn30", "ddr"): 0.9, ("sn30", "hbm"): 0.7}


def test_override_comes_after_the_presets_and_before_the_field_path_axes(tmp_path):
    body = ('[axes]\naccelerator = ["h100"]\n"execution.compute_util" = [0.5]\n'
            '[[override]]\nwhere = "accelerator == \'h100\'"\n'
            'set = { "system.accelerator.sram_bytes" = 167772160.0, "execution.compute_util" = 0.1 }\n')  # fmt: skip
    (spec,) = specs(study(tmp_path, body)).values()
    assert spec.system.accelerator.sram_bytes == 167772160.0  # the preset's 118489090 is replaced
    assert spec.execution.compute_util == 0.5  # the axis, applied last, wins


def test_numeric_conditions_on_a_field_path_axis(tmp_path):
    body = ('[axes]\n"system.memory.dram_bw_GBps" = [300, 600, 1200]\n'
            '[[override]]\nwhere = "system.memory.dram_bw_GBps >= 600"\nset = { "execution.num_config" = "auto" }\n')  # fmt: skip
    got = {k[0]: v.execution.num_config for k, v in specs(study(tmp_path, body)).items()}
    assert got == {300: 6, 600: AUTO, 1200: AUTO}


def test_override_changes_the_points_digest_input(tmp_path):
    """An override is part of the point's spec, so a resumed sweep sees it (the digest
    is computed from the spec)."""
    plain = specs(study(tmp_path, '[axes]\naccelerator = ["sn30"]\n'))
    (tmp_path / "b").mkdir()
    over = specs(study(tmp_path / "b", '[axes]\naccelerator = ["sn30"]\n' + SN30_KBK))
    assert plain[("sn30",)].execution != over[("sn30",)].execution


@pytest.mark.parametrize(("body", "message"), [
    ('[[override]]\nwhere = "topology == \'torus2d\'"\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where may only test axes (here: accelerator). Got 'topology' in \"topology == 'torus2d'\"."),
    ('[[override]]\nwhere = "accelerator == \'h200\'"\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where \"accelerator == 'h200'\" never holds: the axis 'accelerator' has the values 'h100', 'sn30'."),
    ('[[override]]\nwhere = "accelerator > 3"\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where 'accelerator > 3': > compares numbers; the axis 'accelerator' or the value is not numeric."),
    ('[[override]]\nwhere = "accelerator"\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where must be comparisons"),
    ('[[override]]\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where is required: conditions on the axes"),
    ('[[override]]\nwhere = []\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where is required: conditions on the axes"),
    ('[[override]]\nwhere = ["accelerator == \'sn30\'", 3]\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].where[1] must be comparisons"),
    ('[[override]]\nwhere = "accelerator == \'sn30\'"\n',
     "override[0].set must be a non-empty table: \"field.path\" = value. Got None instead."),
    ('[[override]]\nwhere = "accelerator == \'sn30\'"\nset = {}\n',
     "override[0].set must be a non-empty table"),
    ('[[override]]\nwhere = "accelerator == \'sn30\'"\nset = { "bad path!" = 1 }\n',
     "override[0].set.bad path! is not a field path"),
    ('[[override]]\nwhen = "accelerator == \'sn30\'"\nwhere = "accelerator == \'sn30\'"\nset = { "execution.compute_util" = 0.5 }\n',
     "override[0].when is not a key of a study file"),
])  # fmt: skip
def test_bad_overrides_are_refused_with_the_key(tmp_path, body, message):
    path = study(tmp_path, '[axes]\naccelerator = ["h100", "sn30"]\n' + body)
    with pytest.raises(SpecError) as e:
        load_study(path)
    assert message in str(e.value)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("value", ["3", "[1, 2]", '"accelerator == 1"'])
def test_override_must_be_an_array_of_tables(tmp_path, value):
    with pytest.raises(SpecError, match="override must be an array of tables"):
        path = tmp_path / "study.toml"
        path.write_text(f'override = {value}\n[study]\nbase = "{GPT1T}"\n[axes]\naccelerator = ["sn30"]\n')
        load_study(path)


def test_an_override_that_breaks_a_point_names_the_point_and_the_table(tmp_path):
    s = load_study(study(tmp_path, '[axes]\naccelerator = ["sn30"]\n[[override]]\nwhere = "accelerator == \'sn30\'"\n'
                                   'set = { "system.memory.dram_bw_GBps" = -1 }\n'))  # fmt: skip
    with pytest.raises(SpecError, match=r"point accelerator=sn30\).*system.memory.dram_bw_GBps must be > 0"):
        s.point_spec(s.points()[0])


def test_cli_refuses_a_bad_override_with_exit_2_and_no_traceback(tmp_path):
    path = study(tmp_path, '[axes]\naccelerator = ["sn30"]\n[[override]]\nwhere = "memory == \'ddr\'"\nset = { "execution.num_config" = 0 }\n')
    r = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "out"), "--dry-run"])
    assert r.exit_code == 2
    assert "override[0].where may only test axes" in r.output and "Traceback" not in r.output
