"""The measured all-reduce bus bandwidth curve of a fabric (docs/model.md, "The realistic
execution model"): its reading at a message size, the floor it puts on an all-reduce's time,
its place in the nvlink4 preset and its validation."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from dfsearch.codes import Collective, Parallelism
from dfsearch.errors import SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_toml_spec, spec_from_data
from dfsearch.presets import expand_presets
from dfsearch.presets.fabrics import FABRICS
from dfsearch.system.alpha_beta import AlphaBeta, curve_busbw
from dfsearch.system.fabric import Fabric

SIZES = (1e6, 4e6, 16e6)
BUSBW = (50.0, 150.0, 300.0)
CURVE = (SIZES, BUSBW)
MIB = 1024 * 1024


def test_the_curve_passes_through_its_points():
    for s, b in zip(SIZES, BUSBW, strict=True):
        assert curve_busbw(s, SIZES, BUSBW) == pytest.approx(b, rel=1e-12)


def test_between_points_the_curve_is_linear_in_log2_size():
    # 2e6 is half way from 1e6 to 4e6 in log2: (50 + 150) / 2
    assert curve_busbw(2e6, SIZES, BUSBW) == pytest.approx(100.0, rel=1e-12)
    # 8e6 is half way from 4e6 to 16e6: (150 + 300) / 2
    assert curve_busbw(8e6, SIZES, BUSBW) == pytest.approx(225.0, rel=1e-12)


def test_below_the_smallest_size_the_time_is_fixed_and_above_the_largest_busbw_is():
    # busbw proportional to size: 50 x 0.25e6 / 1e6
    assert curve_busbw(0.25e6, SIZES, BUSBW) == pytest.approx(12.5, rel=1e-12)
    assert curve_busbw(1e9, SIZES, BUSBW) == 300.0


AB = AlphaBeta(bus_efficiency=0.8, step_ns=1000.0)


def test_a_small_all_reduce_takes_the_measured_time():
    """2e6 bytes over 4 chips on 450 GB/s links: alpha-beta gives the faster of ring
    6 x 1 us + 2e6 x 1.5 / 360 = 14333.3 ns and tree 4 x 1 us + 2e6 x 2 / 360 = 15111.1 ns;
    the curve reads 100 GB/s at 2e6 bytes, so the all-reduce takes 2e6 x 1.5 / 100 = 30000 ns.
    """
    plain = AB.time_ns(Collective.ALL_REDUCE, 2e6, degree=4, link_bw_GBps=450.0)
    assert plain == pytest.approx(6000 + 2e6 * 1.5 / 360, rel=1e-12)
    timed = AB.time_ns(Collective.ALL_REDUCE, 2e6, degree=4, link_bw_GBps=450.0, curve=CURVE)
    assert timed == pytest.approx(2e6 * 1.5 / 100.0, rel=1e-12)
    # shared by two strided groups: half the measured bandwidth each
    shared = AB.time_ns(Collective.ALL_REDUCE, 2e6, degree=4, link_bw_GBps=450.0, share=2,
                        curve=CURVE)
    assert shared == pytest.approx(2e6 * 1.5 / 50.0, rel=1e-12)


def test_a_large_all_reduce_takes_the_slower_of_alpha_beta_and_the_curve():
    """1e9 bytes over 8 chips, where the curve reads its last point, 300 GB/s. On 100 GB/s
    links (80 GB/s bus) the ring, 14 x 1 us + 1e9 x 1.75 / 80, is slower than the curve's
    1e9 x 1.75 / 300 and stays; on 450 GB/s links (360 GB/s bus) the curve's time binds."""
    ring = 14 * 1000 + 1e9 * 1.75 / 80.0
    t = AB.time_ns(Collective.ALL_REDUCE, 1e9, degree=8, link_bw_GBps=100.0, curve=CURVE)
    assert t == pytest.approx(ring, rel=1e-12)
    t = AB.time_ns(Collective.ALL_REDUCE, 1e9, degree=8, link_bw_GBps=450.0, curve=CURVE)
    assert t == pytest.approx(1e9 * 1.75 / 300.0, rel=1e-12)


def test_the_curve_is_an_all_reduce_curve_only():
    for op in (Collective.ALL_GATHER, Collective.POINT_TO_POINT):
        plain = AB.time_ns(op, 2e6, degree=4, link_bw_GBps=450.0)
        assert AB.time_ns(op, 2e6, degree=4, link_bw_GBps=450.0, curve=CURVE) == plain


def test_the_nvlink4_curve_is_the_cited_table():
    curve = FABRICS["nvlink4"].all_reduce_curve
    assert curve is not None and curve.group == 8
    assert curve.sizes_bytes[0] == 1024 and curve.sizes_bytes[-1] == 8 * 1024**3
    assert len(curve.sizes_bytes) == len(curve.busbw_GBps) == 24
    # the quoted row: "| 2M | 88.78 |"
    assert curve.busbw_GBps[curve.sizes_bytes.index(2 * MIB)] == 88.78
    assert "github.com/Azure/AI-benchmarking-guide" in curve.source.url
    assert all(b > a for a, b in zip(curve.sizes_bytes, curve.sizes_bytes[1:], strict=False))


SPEC = """\
[workload]
model = "llama2-70b"
global_batch_size = 8
[system]
preset = "h100-sxm-80gb"
num_chip = 8
[[system.network]]
fabric = "nvlink"
"""


def _spec(text: str):
    return spec_from_data(expand_presets(tomllib.loads(text), "spec.toml"), file="spec.toml",
                          base_dir=Path("."))


def test_the_nvlink_fabric_brings_its_curve_into_the_spec_and_back_out():
    spec = _spec(SPEC)
    dim = spec.system.network[0]
    curve = FABRICS["nvlink4"].all_reduce_curve
    assert dim.all_reduce_sizes_bytes == curve.sizes_bytes
    assert dim.all_reduce_busbw_GBps == curve.busbw_GBps
    again = load_toml_spec(spec_to_toml(spec), file="again.toml", base_dir=Path("."))
    assert again.system.network[0] == dim


def test_a_2_mib_tp4_all_reduce_on_nvlink4_takes_the_measured_88_78_gbps_time():
    """Four H100s on NVLink 4 as one TP group: alpha-beta alone would price 2 MiB at
    6 steps x the step latency + 2 MiB x 1.5 / (0.822 x 450 GB/s), about 10 us; the cited
    table reads 88.78 GB/s at 2 MiB: 2 MiB x 1.5 / 88.78 = 35432.85 ns."""
    text = SPEC.replace("num_chip = 8", "num_chip = 4") + 'size = 4\nparallelism = "tp"\n'
    fabric = Fabric.of(_spec(text), (4,))
    t = fabric.collective_time_ns(Collective.ALL_REDUCE, 2 * MIB, Parallelism.TP)
    assert t == pytest.approx(2 * MIB * 1.5 / 88.78, rel=1e-12)
    assert math.isclose(t, 35432.85, rel_tol=1e-6)


@pytest.mark.parametrize("extra, path, words", [
    ("all_reduce_sizes_bytes = [1e6, 2e6]\nall_reduce_busbw_GBps = [10.0]\n",
     "system.network[0].all_reduce_busbw_GBps", "one value per entry"),
    ("all_reduce_sizes_bytes = [2e6, 1e6]\nall_reduce_busbw_GBps = [10.0, 20.0]\n",
     "system.network[0].all_reduce_sizes_bytes[1]", "must be larger than the size before"),
    ("all_reduce_sizes_bytes = [1e6, 2e6]\nall_reduce_busbw_GBps = [10.0, -1.0]\n",
     "system.network[0].all_reduce_busbw_GBps[1]", "must be > 0"),
])
def test_a_bad_curve_is_a_spec_error_naming_the_field(extra, path, words):
    with pytest.raises(SpecError) as err:
        _spec(SPEC + extra)
    text = str(err.value)
    assert path in text and words in text
