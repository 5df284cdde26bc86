"""Workload kinds are registered (dfsearch/workloads/), not switched on.

The registry tests check that every kind has one model and that the tables derived from the
models (ranges, generators) agree. ``test_a_new_kind_needs_only_its_module`` is the contract
of docs/extending.md ("Adding a workload kind"): a kind defined in one module and registered
in a copy of the registry loads from TOML, validates, lowers, is searched, evaluated,
reported and written back, with nothing else changed.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import pytest

import dfsearch
from dfsearch import workloads
from dfsearch.codes import Collective, Dim, NetworkTerm, Status, WorkloadKind, _Coded
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import evaluate_problem, outer_status
from dfsearch.decision import Decision
from dfsearch.errors import SpecError
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.kernels.generators import GENERATORS
from dfsearch.loader import load_toml_spec
from dfsearch.report import describe_spec
from dfsearch.search import outer as outer_mod
from dfsearch.validate import RANGES, Range
from dfsearch.workloads import WORKLOADS, Batch, Lowering, NetworkNeeds, WorkloadModel, model_of
from dfsearch.workloads.base import CollectiveNeed, DramUse

PKG = Path(dfsearch.__file__).parent


# --------------------------------------------------------------------------- the registry
def test_every_workload_kind_has_exactly_one_model():
    assert list(WORKLOADS) == list(WorkloadKind)
    for kind, model in WORKLOADS.items():
        assert isinstance(model, WorkloadModel)
        assert model.kind is kind
        assert dataclasses.fields(model) == ()  # stateless
        with pytest.raises(dataclasses.FrozenInstanceError):
            model.x = 1  # type: ignore[attr-defined]
        kind_field = {f.name: f for f in dataclasses.fields(model.spec_class)}["kind"]
        assert kind_field.default is kind and not kind_field.init


def test_spec_reexports_the_workload_dataclasses():
    """Each registered kind's input dataclass lives in the data layer (workload_specs), is one
    member of the ``Workload`` union, and spec and the kind's module re-export it."""
    import sys
    import typing

    from dfsearch import spec, workload_specs

    classes = [model.spec_class for model in WORKLOADS.values()]
    assert set(typing.get_args(workload_specs.Workload)) == set(classes)
    for model, cls in zip(WORKLOADS.values(), classes):
        assert cls.__module__ == "dfsearch.workload_specs"
        assert getattr(spec, cls.__name__) is cls
        assert getattr(sys.modules[type(model).__module__], cls.__name__) is cls


def test_field_ranges_are_the_documented_ranges():
    """Every integer field of a workload has a range (num_layer_in_graph: it divides
    num_layer), the kinds agree on shared fields, and validate.RANGES holds exactly these."""
    seen: dict[str, tuple] = {}
    for model in WORKLOADS.values():
        ints = {
            f.name
            for f in dataclasses.fields(model.spec_class)
            if f.init and f.type == "int" and f.name != "num_layer_in_graph"
        }
        assert set(model.field_ranges) == ints, model.kind
        for name, rng in model.field_ranges.items():
            assert seen.setdefault(name, rng) == rng, name
    workload_keys = {k for k in RANGES if k.startswith("workload.")}
    assert workload_keys == {f"workload.{n}" for n in seen}
    for name, rng in seen.items():
        assert RANGES[f"workload.{name}"] == Range(*rng)


def test_every_generator_belongs_to_exactly_one_kind():
    owners = [g for m in WORKLOADS.values() for g in m.generators]
    assert sorted(owners) == sorted(GENERATORS)
    assert len(owners) == len(set(owners))


def test_no_workload_branches_outside_the_package():
    """Call sites ask the registry. Allowed: the package itself, the enum, the pure-Python
    twin (the test oracle keeps its own branches), the DFModel importer (format code) and the
    input dataclasses (each names its kind)."""
    allowed = {"codes.py", "reference.py", "dfmodel.py", "workload_specs.py"}
    pattern = re.compile(
        r"WorkloadKind\.[A-Z]|isinstance\([^)]*(?:LLM|DLRM|HPL|FFT)Workload|"
        r"\.kind is (?:not )?WorkloadKind"
    )
    offenders = [
        f"{path.relative_to(PKG)}:{text.count(chr(10), 0, m.start()) + 1}"
        for path in PKG.rglob("*.py")
        if "workloads" not in path.parts and path.name not in allowed
        for text in [path.read_text()]
        for m in pattern.finditer(text)
    ]
    assert offenders == []


def test_no_single_run_kind_changes_the_batch_multiplier():
    """HPL and FFT run once per batch: the generic pipeline formula gives exactly 1."""
    from dfsearch.quirks import Quirks
    from dfsearch.workloads.base import pipeline_factors

    one = Batch(global_batch=1, micro_batch=1, dp=1, pp=1, layers=1)
    for quirks in (Quirks(), Quirks(bubble_over_layers_per_stage=False)):
        assert pipeline_factors(one, quirks) == (1.0, 1.0)


# --------------------------------------------------------------------------- a new kind
class ToyKind(_Coded):
    """Stand-in for a new ``codes.WorkloadKind`` member (an enum cannot grow at run time;
    a real kind adds ``TOY = 5`` there)."""

    TOY = 99


@dataclass(frozen=True, slots=True, kw_only=True)
class ToyWorkload:
    points: int
    batches: int = 1
    kind: ToyKind = field(default=ToyKind.TOY, init=False)


@dataclass(frozen=True)
class Toy(WorkloadModel):
    """Every kernel's N split over the chips, ``batches`` runs per batch, each kernel's
    output sent once over dimension 0's links, the points as fixed DRAM."""

    kind = ToyKind.TOY  # type: ignore[assignment]
    spec_class = ToyWorkload
    field_ranges = MappingProxyType({"points": (1, 2**40, "elements"), "batches": (1, 2**20, "")})

    def outer_status(self, spec, outer):
        chips = spec.system.num_chip
        rest = spec.workload.points % chips
        return (Status.DIVISIBILITY, float(rest)) if rest else (Status.OK, 0.0)

    def batch(self, spec, outer, groups):
        return Batch(global_batch=spec.workload.batches, micro_batch=1, dp=1, pp=1, layers=1)

    def shard_dims(self, spec, kernel, choice, tp, t, shape):
        k = kernel.k if kernel.kind.has_k else 1
        return kernel.rows, k, -(-kernel.n // spec.system.num_chip)

    def network(self, ctx: Lowering) -> NetworkNeeds:
        # every kernel sends its output to a neighbour over dimension 0, once per tile
        return NetworkNeeds(tuple(
            CollectiveNeed(Collective.POINT_TO_POINT, ctx.output_bytes(i), 0,
                           NetworkTerm.KERNEL_TILE, i)
            for i in range(len(ctx.dims))
        ))  # fmt: skip

    def dram(self, ctx, weight_bytes, extra_bytes):
        return DramUse(data=ctx.spec.workload.points * ctx.word / ctx.chips_per_copy + extra_bytes)

    def describe(self, workload):
        return f"{workload.points} points, {workload.batches} batches"


TOY_SPEC = """
[workload]
kind = "toy"
points = {points}
batches = 3

[[graph.kernels]]
name = "scale"
kind = "elementwise"
m = 1024
n = 4096

[[graph.kernels]]
name = "project"
kind = "gemm_weight"
m = 256
k = 512
n = 4096

[system]
num_chip = 4

[system.accelerator]
cores = 8
systolic_width = 4
systolic_height = 4
sram_bytes = 1e9
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 1000.0

[[system.network]]
topology = "ring"
size = {size}
link_bw_GBps = 100.0

[execution]
compute_util = 0.5
"""


@pytest.fixture
def toy_registry(monkeypatch):
    """A copy of the registry with the toy kind added (the library's stays read-only)."""
    fresh = MappingProxyType({**workloads.WORKLOADS, ToyKind.TOY: Toy()})
    monkeypatch.setattr(workloads, "WORKLOADS", fresh)
    return fresh


def _toy(points: int = 4096, size: int = 4):
    text = TOY_SPEC.format(points=points, size=size)
    return load_toml_spec(text, file="toy.toml", base_dir=Path("."))


def test_a_new_kind_needs_only_its_module(toy_registry):
    spec = _toy()
    assert isinstance(spec.workload, ToyWorkload) and isinstance(model_of(spec.workload), Toy)
    assert "workload  TOY: 4096 points, 3 batches" in describe_spec(spec)
    assert load_toml_spec(spec_to_toml(spec), file="back.toml", base_dir=Path(".")) == spec

    # closed form (FLOP model, one configuration per kernel, perfect overlap): peak =
    # 2 * 4 * 4 * 8 * 1 GHz = 256 GFLOP/s at utilisation 0.5; N = 4096 / 4 chips = 1024
    scale_c = 1024 * 1024 / 128.0  # SIMD FLOP (at the systolic peak) / rate, ns
    scale_n = 1024 * 1024 * 2 / 100.0  # output bytes / link GB/s
    project_c = 2.0 * 256 * 1024 * 512 / 128.0
    project_n = 256 * 1024 * 2 / 100.0
    expected_ns = 3 * (max(scale_c, scale_n) + max(project_c, project_n))

    assert outer_mod.shapes(spec) == [(4,)] and outer_mod.tile_counts(spec) == [1]
    outer = Outer((4,), (Dim.NO, Dim.NO), 1, 1, 2)
    problem = lower(spec, outer)
    assert problem.constants.batch_mult == 3.0
    assert problem.constants.dram_fixed == 4096 * 2 / 4
    assert list(problem.kernels.net_tile_ns) == [scale_n, project_n]
    decision = Decision(
        shape=(4,), sharding=(Dim.NO, Dim.NO), micro_batch_size=1, num_tile=1, config=(0, 1)
    )
    ev = evaluate_problem(spec, problem, decision)
    assert ev.status is Status.OK
    assert ev.final_ns == pytest.approx(expected_ns, rel=1e-12)

    result = dfsearch.run(spec)
    assert result.evaluation.final_ns == pytest.approx(expected_ns, rel=1e-12)


def test_a_new_kind_brings_its_own_rules(toy_registry):
    """Validation (field ranges, the fixed-network default) and outer divisibility come
    from the model."""
    with pytest.raises(SpecError) as err:
        _toy(points=2**41, size=0)
    text = str(err.value)
    assert "workload.points must be between 1 and 2^40 = 1099511627776 elements" in text
    assert "system.network[0].size must be > 0 for a toy workload" in text
    spec = _toy(points=4098)
    status = outer_status(spec, Outer((4,), (Dim.NO, Dim.NO), 1, 1, 2))
    assert status == (Status.DIVISIBILITY, 2.0)


def test_an_unregistered_kind_is_not_a_word():
    """The TOML words are the registered kinds' labels: without the toy, 'toy' is refused."""
    words = ("workload.kind must be one of 'llm', 'dlrm', 'hpl', 'fft', 'llm_serving'. "
             "Got 'toy' instead.")
    with pytest.raises(SpecError, match=re.escape(words)):
        _toy()
