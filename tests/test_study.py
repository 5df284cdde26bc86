"""Study files (docs/studies.md): axes, presets from the catalogue, zip/cross, filters, the
fixed edits, and the house-style errors (file, field path, bad value, expected; exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
from dfsearch.cli import app
from dfsearch.errors import SpecError
from dfsearch.spec import AUTO
from dfsearch.study import catalogue
from dfsearch.study.study import load_study

EXAMPLES = Path(dfsearch.__file__).parent / "examples"
GPT1T = EXAMPLES / "gpt3_1T_sn30.toml"
GPT_SMALL = EXAMPLES / "gpt3_1.5B_a100x4.toml"


def write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def study(tmp_path: Path, body: str, base: Path = GPT_SMALL, head: str = "") -> Path:
    return write(tmp_path, f'[study]\nbase = "{base}"\n{head}\n{body}')


# ----------------------------------------------------------------------------- points
def test_cross_product_first_axis_slowest(tmp_path):
    s = load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800, 1555]\n'
                                   '"execution.compute_util" = [0.5, 0.9, 1.0]'))
    pts = s.points()
    assert [p.values for p in pts] == [(800, 0.5), (800, 0.9), (800, 1.0), (1555, 0.5), (1555, 0.9), (1555, 1.0)]
    spec = s.point_spec(pts[4])
    assert spec.system.memory.dram_bw_GBps == 1555.0 and spec.execution.compute_util == 0.9


def test_zip_pairs_values_and_needs_equal_lengths(tmp_path):
    s = load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800, 1555]\n'
                                   '"execution.compute_util" = [0.5, 0.9]', head='combine = "zip"'))
    assert [p.values for p in s.points()] == [(800, 0.5), (1555, 0.9)]
    with pytest.raises(SpecError, match=r"axes with combine = \"zip\" every axis needs the same number"):
        load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800, 1555]\n'
                                   '"execution.compute_util" = [0.5]', head='combine = "zip"'))


def test_dotted_keys_are_field_paths_too(tmp_path):
    s = load_study(study(tmp_path, "[axes]\nsystem.memory.dram_bw_GBps = [800]\n[set]\nexecution.compute_util = 0.5"))
    assert s.axes[0].name == "system.memory.dram_bw_GBps"
    assert s.point_spec(s.points()[0]).execution.compute_util == 0.5


def test_workload_axis_regenerates_the_graph(tmp_path):
    """A generated graph follows an edited workload (dfsearch.replace keeps the graph as is)."""
    s = load_study(study(tmp_path, '[axes]\n"workload.seq_len" = [512, 1024]'))
    a, b = (s.point_spec(p) for p in s.points())
    assert b.graph.flop > a.graph.flop * 1.9


def test_no_axes_is_the_base_once(tmp_path):
    s = load_study(study(tmp_path, ""))
    assert len(s.points()) == 1
    assert s.point_spec(s.points()[0]) == dfsearch.load(GPT_SMALL)


def test_axis_beats_preset_beats_set(tmp_path):
    s = load_study(study(tmp_path, '[set]\n"system.accelerator.cores" = 7\n[axes]\naccelerator = ["sn30"]\n'
                                   '"system.accelerator.freq_GHz" = [2.0]', base=GPT1T))
    acc = s.point_spec(s.points()[0]).system.accelerator
    assert acc.cores == 1280 and acc.freq_GHz == 2.0


# ----------------------------------------------------------------------------- filters
def test_filter_on_axis_and_on_field(tmp_path):
    s = load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800, 1555]\n'
                                   'accelerator = ["h100", "sn30"]',
                         head="filter = [\"system.memory.dram_bw_GBps > 1000 and accelerator != 'sn30'\"]",
                         base=GPT1T))
    assert [p.values for p in s.points()] == [(1555, "h100")]
    assert len(s.all_points()) == 4


def test_filter_reads_defaults_the_base_file_leaves_out(tmp_path):
    # the base leaves search.max_evaluations at its default (20 million)
    s = load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800]',
                         head='filter = "search.max_evaluations == 20000000"'))
    assert len(s.points()) == 1


@pytest.mark.parametrize("text, expect", [
    ('"num_chip = 4"', "study.filter must be comparisons NAME OP VALUE"),
    ('"__import__(\'os\') == 1"', "study.filter must be comparisons"),
    ('"system.nochip == 4"', "study.filter names no axis and no field of the spec: 'system.nochip'"),
    ('"workload.kind < 3"', "study.filter cannot compare"),
])
def test_bad_filters(tmp_path, text, expect):
    with pytest.raises(SpecError, match=expect.replace("(", r"\(").replace(")", r"\)")):
        load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800]', head=f"filter = {text}")).points()


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("body, expect", [
    ('[axes]\naccelerator = ["h100", "h200"]', "axes.accelerator[1] must be one of 'h100', 'tpu_v4', 'sn30', 'wse2'"),
    ('[axes]\ntopology = "torus2d"', "axes.topology must be a non-empty array of values. Got 'torus2d' instead."),
    ('[axes]\nmemory = []', "axes.memory must be a non-empty array"),
    ('[axes]\n"system.num_chip" = [4, 4]', "axes.system.num_chip lists a value twice"),
    ('[axes]\n"system..x" = [1]', "is neither a catalogue axis"),
    ('[axis]\nmemory = ["ddr"]', "axis is not a key of a study file; did you mean 'axes'?"),
])
def test_bad_study_input_names_file_path_value_expected(tmp_path, body, expect):
    path = study(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_study(path)
    assert expect in str(info.value) and str(path) in str(info.value)


def test_study_keys_are_checked(tmp_path):
    with pytest.raises(SpecError, match=r"study.combine must be one of 'cross', 'zip'. Got 'product' instead."):
        load_study(study(tmp_path, "", head='combine = "product"'))
    with pytest.raises(SpecError, match=r"study.seed must be an integer in \[0, 2\*\*32 - 1\]"):
        load_study(study(tmp_path, "", head="seed = -1"))
    with pytest.raises(SpecError, match="study is required"):
        load_study(write(tmp_path, '[axes]\nmemory = ["ddr"]'))
    with pytest.raises(SpecError, match=r"study.base .*missing.toml"):
        load_study(write(tmp_path, '[study]\nbase = "missing.toml"'))


def test_invalid_point_names_the_point_and_field(tmp_path):
    s = load_study(study(tmp_path, '[axes]\n"system.memory.dram_bw_GBps" = [800, -1]'))
    with pytest.raises(SpecError) as info:
        s.point_spec(s.points()[1])
    text = str(info.value)
    assert "point system.memory.dram_bw_GBps=-1" in text
    assert "system.memory.dram_bw_GBps must be > 0. Got -1 instead." in text


def test_unknown_field_path_is_the_loaders_error(tmp_path):
    s = load_study(study(tmp_path, '[axes]\n"system.memory.dram_bandwidth" = [800]'))
    with pytest.raises(SpecError, match="dram_bandwidth"):
        s.point_spec(s.points()[0])


def test_cli_bad_study_exits_2(tmp_path):
    path = study(tmp_path, '[axes]\naccelerator = ["h200"]')
    r = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert "axes.accelerator[0] must be one of" in r.output and "Got 'h200' instead." in r.output
    assert not (tmp_path / "out").exists()


def test_cli_dry_run_lists_points(tmp_path):
    path = study(tmp_path, '[axes]\nmemory = ["ddr", "hbm"]\ninterconnect = ["pcie", "nvlink"]', base=GPT1T)
    r = CliRunner().invoke(app, ["sweep", str(path), "-o", str(tmp_path / "out"), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "4 points" in r.output and "point 3: memory=hbm, interconnect=nvlink" in r.output


# ----------------------------------------------------------------------------- catalogue
def test_catalogue_point_reproduces_the_published_readme_system(tmp_path):
    """sn30 + 2-D torus + DDR + PCIe is DFModel's README input (LLM/DSE sn30 files give the
    same chip, tests/data/dfmodel/readme_* is that input): the preset point of any base
    equals the shipped README example in every system and cost field."""
    readme = dfsearch.load(GPT1T)
    s = load_study(study(tmp_path, '[axes]\naccelerator = ["sn30"]\ntopology = ["torus2d"]\n'
                                   'memory = ["ddr"]\ninterconnect = ["pcie"]', base=GPT1T))
    spec = s.point_spec(s.points()[0])
    assert spec.system.accelerator == readme.system.accelerator
    assert spec.system.network == readme.system.network
    assert spec.system.memory.dram_bw_GBps == readme.system.memory.dram_bw_GBps
    assert abs(spec.system.memory.dram_bytes - readme.system.memory.dram_bytes) < 1e6  # float32 in setup.txt
    assert spec.cost == readme.cost
    assert spec.execution.num_config == 6


def test_presets_set_the_documented_fields(tmp_path):
    s = load_study(study(tmp_path, '[axes]\naccelerator = ["h100"]\ntopology = ["torus3d"]\n'
                                   'memory = ["hbm"]\ninterconnect = ["nvlink"]', base=GPT1T))
    spec = s.point_spec(s.points()[0])
    assert [(d.topology.label, d.size, d.parallelism.label, d.link_bw_GBps) for d in spec.system.network] == [
        ("ring", 8, "tp", 450.0), ("ring", 64, "pp", 50.0), ("ring", 2, "dp", 50.0)]
    assert spec.cost.link_power_J_per_GB == (0.0104, 0.052, 0.052)
    assert spec.system.memory.dram_bw_GBps == 3072.0 and spec.cost.dram_power_J_per_GB == 0.05624
    assert spec.execution.style.label == "kernel_by_kernel" and spec.execution.num_config == 0
    assert spec.system.accelerator.peak_gflops == catalogue.ACCELERATORS["h100"].peak_gflops


def test_topology_keeps_base_links_without_interconnect(tmp_path):
    s = load_study(study(tmp_path, '[axes]\ntopology = ["torus3d", "dgx2"]', base=GPT1T))
    for p in s.points():
        spec = s.point_spec(p)
        assert {d.link_bw_GBps for d in spec.system.network} == {50.0}
        assert len(spec.cost.link_power_J_per_GB) == len(spec.system.network)
    assert s.point_spec(s.points()[1]).system.variant == "sw_sw"


def test_every_catalogue_entry_cites_the_published_input():
    published = re.compile(r"^(LLM|DLRM|FFT|HPL)/DSE/system/[^ ]+/user_input/setup\.txt$")
    for axis, presets in catalogue.PRESETS.items():
        for p in presets.values():
            if axis == "style":  # ours: a style and the configuration count it needs
                assert p.source.startswith("docs/spec.md")
            else:
                assert published.match(p.source), p.source
    assert catalogue.COMMIT == "04f93d5ea1179ff967e26116b09853db972a2fb0"


def test_shipped_grid_has_80_valid_points():
    s = load_study(EXAMPLES / "studies" / "gpt3_1T_grid.toml")
    points = s.points()
    assert len(points) == 80
    specs = [s.point_spec(p) for p in points]
    assert {sp.system.variant for sp in specs} == {"r_r", "r_r_r", "fc_fc", "r_sw", "sw_sw"}
    assert {sp.execution.equations.label for sp in specs} == {"design_space"}
    assert len({(sp.system, sp.cost) for sp in specs}) == 80


# ----------------------------------------------------------------------------- part 2
FFT_DSE = EXAMPLES / "studies" / "inputs" / "fft_dse_setup.txt"


def test_topology_on_a_fixed_network_workload_has_no_roles_and_takes_the_networks_sizes(tmp_path):
    body = ('[networks]\ntorus3d = [8, 8, 16]\n'
            '[axes]\ntopology = ["torus2d", "torus3d"]\ninterconnect = ["nvlink_all"]\n')  # fmt: skip
    s = load_study(study(tmp_path, body, base=FFT_DSE))
    two, three = (s.point_spec(p) for p in s.points())
    assert [d.size for d in two.system.network] == [8, 128]  # the preset's own sizes
    assert [d.size for d in three.system.network] == [8, 8, 16]
    assert all(d.parallelism.label == "none" for d in three.system.network)
    assert [d.link_bw_GBps for d in three.system.network] == [450.0, 450.0, 450.0]
    assert three.cost.link_power_J_per_GB == (0.0104, 0.0104, 0.0104)


def test_networks_table_is_checked(tmp_path):
    with pytest.raises(SpecError) as e:
        load_study(study(tmp_path, '[networks]\ntorus3d = [8, 128]\nring9 = [4]\n[axes]\ntopology = ["torus3d"]\n'))
    text = str(e.value)
    assert "networks.torus3d must be 3 positive integers, one size per dimension of r_r_r" in text
    assert "networks.ring9 must name a topology of the catalogue" in text


def test_style_axis_sets_the_configuration_count_it_needs(tmp_path):
    s = load_study(study(tmp_path, '[axes]\naccelerator = ["sn30"]\nstyle = ["dataflow", "kernel_by_kernel"]\n', base=GPT1T))
    flow, kbk = (s.point_spec(p).execution for p in s.points())
    assert flow.style.label == "dataflow" and flow.num_config == AUTO
    assert kbk.style.label == "kernel_by_kernel" and kbk.num_config == 0


def test_compute_share_splits_a_fixed_chip(tmp_path):
    body = '[area]\nunits = 2080\nmemory_unit_bytes = 524288\n[axes]\ncompute_share = [0.2, 0.5, 0.8]\n'
    s = load_study(study(tmp_path, body, base=GPT1T))
    chips = [s.point_spec(p).system.accelerator for p in s.points()]
    assert [c.cores for c in chips] == [416, 1040, 1664]
    assert [c.sram_bytes for c in chips] == [1664 * 524288, 1040 * 524288, 416 * 524288]
    assert all(c.cores + c.sram_bytes / 524288 == 2080 for c in chips)
    with pytest.raises(SpecError, match="area is required by the axis 'compute_share'"):
        load_study(study(tmp_path, '[axes]\ncompute_share = [0.5]\n', base=GPT1T))
    with pytest.raises(SpecError, match=r"axes.compute_share\[0\] must be a share of compute units"):
        load_study(study(tmp_path, '[area]\nunits = 10\nmemory_unit_bytes = 1\n[axes]\ncompute_share = [1.5]\n'))


def test_a_table_value_sets_only_the_fields_it_names(tmp_path):
    s = load_study(study(tmp_path, '[axes]\n"system.accelerator" = [{ cores = 7 }]\n'))
    acc = s.point_spec(s.points()[0]).system.accelerator
    from dfsearch.loader import load_spec

    base = load_spec(GPT_SMALL).system.accelerator
    assert acc.cores == 7 and acc.sram_bytes == base.sram_bytes and acc.freq_GHz == base.freq_GHz


@pytest.mark.parametrize(("name", "count"), [("dlrm_grid", 80), ("hpl_grid", 80), ("fft_grid", 80),
                                             ("gpt3_175B_sram_dram", 18), ("area_split", 21)])  # fmt: skip
def test_shipped_studies_build_every_point(name, count):
    s = load_study(EXAMPLES / "studies" / f"{name}.toml")
    points = s.points()
    assert len(points) == count
    specs = [s.point_spec(p) for p in points]
    assert len({(sp.system, sp.cost, sp.execution) for sp in specs}) == count
