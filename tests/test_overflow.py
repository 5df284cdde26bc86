"""Arithmetic that cannot silently wrap (issue 9, item 4).

Every numeric field has a finite range (``dfsearch.validate.RANGES``, docs/spec.md "Ranges"),
the cycle model's int64 cycle counts are bounded by ``MAX_KERNEL_WORK``, and the violated
amounts the evaluator returns are the true overflows. The CLI reproducers below exited 0 with
nonsense (or raised a traceback, or hung) before the range checks existed.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dfsearch.cli import app
from dfsearch.codes import (
    ComputeType,
    Dim,
    ExecutionStyle,
    KernelKind,
    Parallelism,
    Status,
    Topology,
)
from dfsearch.decision import Decision
from dfsearch.spec import (
    Accelerator,
    Connection,
    Cost,
    Execution,
    Graph,
    Kernel,
    LLMWorkload,
    Memory,
    NetworkDim,
    Spec,
    System,
)
from dfsearch.validate import MAX_KERNEL_WORK, RANGES, validate_spec

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
runner = CliRunner()

# Two weight GEMMs in one configuration on one chip; the cycle model unless util is set.
TEMPLATE = """\
[workload]
kind = "llm"
hidden_dim = 1024
head_dim = 64
num_head = 16
seq_len = 512
num_layer = {num_layer}
global_batch_size = {gbs}
micro_batch_size = 1

[[graph.kernels]]
name = "G0"
kind = "gemm_weight"
phase = "fwd"
m = {m}
k = {k}
n = {n}
tiling = "n"
sharding = "m"
id = {id}

[[graph.kernels]]
name = "G1"
kind = "gemm_weight"
phase = "fwd"
m = {m}
k = {k}
n = {n}
tiling = "n"
sharding = "m"

[[graph.connections]]
src = "G0"
dst = "G1"

[system]
num_chip = {num_chip}

[system.accelerator]
cores = {cores}
systolic_width = 1
systolic_height = 1
sram_bytes = 1e24
freq_GHz = {freq}

[system.memory]
dram_bw_GBps = {dram_bw}

[[system.network]]
topology = "ring"
link_bw_GBps = {link_bw}
size = 1
parallelism = "tp"

[execution]
num_config = 1
compute_util = {util}

[search]
time_limit_s = 30
"""
DEFAULTS = dict(
    num_layer=1, gbs=1, m=1024, k=1024, n=1024, id=0, num_chip=1, cores=1000, freq=1.0,
    dram_bw=1000, link_bw=100, util=0,
)  # fmt: skip


def _write(tmp_path: Path, **over: object) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(TEMPLATE.format(**(DEFAULTS | over)))
    return path


def _assert_clean_exit_2(output: str, exit_code: int, file: str, *fragments: str) -> None:
    assert exit_code == 2, output
    assert "Traceback" not in output, output
    assert file in output, output
    for f in fragments:
        assert f in output, output


def test_template_is_valid_and_runs(tmp_path):
    r = runner.invoke(app, ["validate", str(_write(tmp_path))])
    assert r.exit_code == 0, r.output


# (overrides, field path named, rest of the message): each exited 0 with a wrong or infinite
# answer, or raised a traceback (exit 1), before the range checks.
CASES = [
    # the reproducer: 2.1e6^3 cycles wrapped around int64 -> "199.997 %, proven optimal"
    ("two-huge-gemms-cycle-model", dict(m=2_100_000, k=2_100_000, n=2_100_000),
     'graph.kernels[0] ("G0"):', "must be <= 2^60"),
    ("freq-1e-300", dict(freq=1e-300),
     "system.accelerator.freq_GHz", "must be between 0.001 and 1000 GHz. Got 1e-300 instead."),
    ("freq-1e300", dict(freq=1e300), "system.accelerator.freq_GHz", "Got 1e+300 instead."),
    ("dram-bw-tiny", dict(dram_bw=1e-300), "system.memory.dram_bw_GBps", "1e-06 and 1000000000 GB/s"),
    ("link-bw-tiny", dict(link_bw=5e-324), "system.network[0].link_bw_GBps", "GB/s"),
    ("compute-util-tiny", dict(util=1e-300), "execution.compute_util", "or 0 for the cycle model"),
    ("num-chip-2^63", dict(num_chip=2**63), "system.num_chip", "Got 9223372036854775808 instead."),
    ("m-2^63", dict(m=2**63), 'graph.kernels[0] ("G0").m', "2^40"),
    ("n-2^64", dict(n=2**64, util=0.5), 'graph.kernels[1] ("G1").n', "elements"),
    ("cores-2^63", dict(cores=2**63), "system.accelerator.cores", "2^24"),
    ("num-layer-2^64", dict(num_layer=2**64), "workload.num_layer", "2^24"),
    ("batch-2^63", dict(gbs=2**63), "workload.global_batch_size", "2^40"),
    ("kernel-id-2^63", dict(id=2**63), 'graph.kernels[0] ("G0").id', "2^63 - 1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("over", "path", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_run_rejects_out_of_range_values(tmp_path, over, path, message):
    spec = _write(tmp_path, **over)
    r = runner.invoke(app, ["run", str(spec)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    _assert_clean_exit_2(r.output, r.exit_code, "spec.toml", path, message)


def _subprocess(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dfsearch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_generator_parameter_2_63_is_a_clean_error(tmp_path):
    """A generator parameter that would make 2^63 kernels (it hung before)."""
    text = (ROOT / "dfsearch" / "examples" / "dlrm_a100x128.toml").read_text()
    text, n = re.subn(r"(?m)^bottom_num_mlp = \d+", f"bottom_num_mlp = {2**63}", text)
    assert n == 1
    spec = tmp_path / "dlrm.toml"
    spec.write_text(text)
    p = _subprocess("validate", str(spec))
    _assert_clean_exit_2(
        p.stdout + p.stderr, p.returncode, "dlrm.toml", "graph.bottom_num_mlp", "2^40"
    )


def test_generator_kernel_count_is_bounded(tmp_path):
    text = (ROOT / "dfsearch" / "examples" / "dlrm_a100x128.toml").read_text()
    text = re.sub(r"(?m)^bottom_num_mlp = \d+", "bottom_num_mlp = 1000000", text)
    spec = tmp_path / "dlrm.toml"
    spec.write_text(text)
    p = _subprocess("validate", str(spec))
    _assert_clean_exit_2(
        p.stdout + p.stderr, p.returncode, "dlrm.toml", "graph.bottom_num_mlp", "kernels"
    )


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        (
            "freq: 1.41",
            "freq: 1e-30",
            "system.accelerator.freq_GHz must be between 0.001 and 1000 GHz",
        ),
        (
            "core: 6912",
            "core: 9000000000000000000",
            "system.accelerator.cores must be between 1 and 2^24",
        ),
        ("dram_bw: 2039.0", "dram_bw: 1e-30", "system.memory.dram_bw_GBps must be between"),
        (
            "length: 1073740000000",
            "length: 9223372036854775807",
            "workload.length must be between 1 and 2^62",
        ),
    ],
    ids=["freq", "cores", "dram-bw", "fft-length"],
)
@pytest.mark.slow
def test_dfmodel_input_out_of_range(tmp_path, old, new, fragment):
    text = (DATA / "dfmodel" / "fft_1024gpu_sw_sw_8x128" / "setup.txt").read_text()
    assert old in text
    setup = tmp_path / "setup.txt"
    setup.write_text(text.replace(old, new, 1))
    p = _subprocess("run", str(setup))
    _assert_clean_exit_2(p.stdout + p.stderr, p.returncode, "setup.txt", fragment)


def test_every_range_is_finite_and_documented():
    doc = (ROOT / "docs" / "spec.md").read_text()
    table = doc[doc.index("### Ranges") :]
    for key, r in RANGES.items():
        assert 0 <= r.lo <= r.hi < float("inf"), key
        if isinstance(r.hi, int):
            assert r.hi < 2**63, key
        name = key.rsplit(".", 1)[-1].rstrip("[]")
        grouped = name.endswith("_bytes") or key.startswith("cost.")  # "every ... field" rows
        assert f"`{name}`" in table or grouped, key


# --------------------------------------------------------------------------- the cycle model
def _gemm(name: str, m: int, k: int, n: int) -> Kernel:
    return Kernel(
        name=name, kind=KernelKind.GEMM_WEIGHT, type=ComputeType.SYSTOLIC, m=m, k=k, n=n,
        tiling=Dim.N,
    )  # fmt: skip


def _cycle_spec(kernels, *, cores: int, w: int = 1, h: int = 1, tp: int = 1, num_config: int = 1,
                dram_bytes: float = 0.0, mbs: int = 1, gbs: int = 1, chain: bool = True) -> Spec:  # fmt: skip
    names = [k.name for k in kernels]
    conns = tuple(Connection(src=a, dst=b) for a, b in itertools.pairwise(names)) if chain else ()
    return Spec(
        graph=Graph(kernels=tuple(kernels), connections=conns),
        system=System(
            num_chip=tp,
            accelerator=Accelerator(
                cores=cores, systolic_width=w, systolic_height=h, sram_bytes=1e24, freq_GHz=1.0
            ),
            memory=Memory(dram_bw_GBps=1000.0, dram_bytes=dram_bytes),
            network=(
                NetworkDim(
                    topology=Topology.RING, link_bw_GBps=100.0, size=tp, parallelism=Parallelism.TP
                ),
            ),
        ),
        cost=Cost(),
        execution=Execution(
            style=ExecutionStyle.DATAFLOW, num_config=num_config, compute_util=0.0
        ),
        workload=LLMWorkload(
            hidden_dim=64,
            head_dim=16,
            num_head=4,
            seq_len=64,
            num_layer=1,
            global_batch_size=gbs,
            micro_batch_size=mbs,
        ),
    )


def test_kernel_work_bound_is_enforced_exactly():
    at = _cycle_spec([_gemm("a", 2**20, 2**20, 2**20)], cores=8)
    assert validate_spec(at) == []
    over = _cycle_spec([_gemm("a", 2**20 + 1, 2**20, 2**20)], cores=8)
    assert [i.path for i in validate_spec(over)] == ['graph.kernels[0] ("a"):']
    # the FLOP model does not count cycles in integers: only the per-dimension ranges apply
    flop = Spec(**{f: getattr(over, f) for f in over.__dataclass_fields__ if f != "execution"},
                execution=Execution(num_config=1, compute_util=0.5))  # fmt: skip
    assert validate_spec(flop) == []


def test_lower_refuses_a_kernel_beyond_the_bound_built_without_validation():
    from dfsearch.cost.lower import Outer, lower

    spec = _cycle_spec([_gemm("a", 2**21, 2**21, 2**21)], cores=8)
    with pytest.raises(ValueError, match="2\\^60"):
        lower(
            spec,
            Outer(shape=(1,), sharding=(Dim.M,), micro_batch_size=1, num_tile=1, num_config=1),
        )


@pytest.mark.parametrize("budget", [1, 7, 1000, 2**24])
@pytest.mark.parametrize(("a", "b", "z"), [(2**20, 2**20, 2**20), (2**60, 1, 1), (1, 2**30, 2**30),
                                           (999_983, 1_000_003, 1_152_917), (2**40, 2**20, 1)])  # fmt: skip
def test_min_cycles_never_wraps_at_the_bound(a, b, z, budget):
    from dfsearch.cost.evaluate import min_cycles

    assert a * b * z <= MAX_KERNEL_WORK
    cyc, pl, ps = (int(v) for v in min_cycles(a, b, z, budget))
    assert pl >= 1 and ps >= 1 and pl * ps <= budget
    assert cyc == -(-a // pl) * -(-b // ps) * z  # exact, in Python integers
    assert cyc >= -(-a * b * z // budget)  # no allocation beats the perfect split


def test_allocate_two_kernels_at_the_bound():
    """The binary search on the cycle target runs up to 2^60 + 2^60 without wrapping."""
    from dfsearch.cost.evaluate import _allocate

    k_a = np.array([2**20, 2**20], np.int64)
    k_b = np.array([2**20, 2**20], np.int64)
    k_z = np.array([2**20, 2**20], np.int64)
    zero = np.zeros(2, np.int64)
    k_pl, k_ps = np.ones(2, np.int64), np.ones(2, np.int64)
    for cores in (2, 3, 1000, 2**24):
        cyc, st, _ = _allocate(np.arange(2), 0, 2, k_a, k_b, k_z, cores, zero, zero, k_pl, k_ps)
        assert st == 0
        assert int(k_pl @ k_ps) <= cores
        each = [
            -(-int(k_a[i]) // int(k_pl[i])) * -(-int(k_b[i]) // int(k_ps[i])) * int(k_z[i])
            for i in range(2)
        ]
        assert int(cyc) == max(each) >= 2 * 2**60 // cores


def test_allocate_saturates_oversized_fixed_pairs():
    """Core pairs from a mapping larger than the chip must report CORES, not wrap around."""
    from dfsearch.cost.evaluate import _allocate

    one = np.ones(1, np.int64)
    pl = np.array([2**40], np.int64)
    ps = np.array([2**40], np.int64)
    _, st, need = _allocate(
        np.arange(1), 0, 1, one, one, one, 1000, pl, ps, one.copy(), one.copy()
    )
    assert st == int(Status.CORES) and need > 1000


def _differential_cases():
    big = 2**20
    yield "one-kernel-at-bound", _cycle_spec([_gemm("a", big, big, big)], cores=12), (Dim.M,), (0,)
    yield (
        "two-kernels-shared",
        _cycle_spec([_gemm("a", big, big, big), _gemm("b", big - 1, big + 1, big // 2)], cores=5),
        (Dim.M, Dim.N),
        (0, 0),
    )
    yield "three-kernels-two-configs", _cycle_spec(
        [_gemm("a", 3 * 2**18, big, big), _gemm("b", 1_048_573, 1_048_571, 1_048_569),
         _gemm("c", 2**30, 2**15, 2**15)],
        cores=9, w=3, h=2, num_config=2,
    ), (Dim.M, Dim.K, Dim.M), (0, 0, 1)  # fmt: skip
    yield "tp2-near-bound", _cycle_spec(
        [_gemm("a", 2**21, 2**20, 2**19), _gemm("b", 2**19, 2**21, 2**20)], cores=16, tp=2, w=2, h=4,
    ), (Dim.M, Dim.K), (0, 0)  # fmt: skip


@pytest.mark.parametrize(("spec", "sharding", "config"), [c[1:] for c in _differential_cases()],
                         ids=[c[0] for c in _differential_cases()])  # fmt: skip
def test_jitted_and_reference_agree_near_the_bound(spec, sharding, config):
    from test_reference_differential import compare

    assert validate_spec(spec) == []
    tp = spec.system.num_chip
    decision = Decision(
        shape=(tp,), sharding=sharding, micro_batch_size=1, num_tile=1, config=config
    )
    ref = compare(spec, decision)
    assert ref.status is Status.OK
    assert max(ref.max_cycles) >= 2**53  # at or beyond float64's exact integers: ints were needed


# --------------------------------------------------------------------------- violated amounts
@pytest.mark.slow
def test_set_cost_dram_violation_is_the_true_overflow_in_bytes():
    """With micro-batch 2, live activations count twice in DRAM: the overflow of a set is
    act_mult * (its live bytes - the live cap), the evaluator's total - capacity."""
    from dfsearch.cost import evaluate as ev
    from dfsearch.cost.layout import NUM_SET, ResultSlot, SetSlot
    from dfsearch.cost.lower import Outer, lower
    from dfsearch.cost.model import Evaluator

    a = Kernel(
        name="a", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD, m=64, n=64, tiling=Dim.N
    )
    b = Kernel(
        name="b", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD, m=64, n=64, tiling=Dim.N
    )
    spec = _cycle_spec([a, b], cores=8, num_config=2, dram_bytes=1000.0, mbs=2, gbs=4)
    p = lower(spec, Outer(shape=(1,), sharding=(Dim.NO, Dim.NO), micro_batch_size=2, num_tile=1,
                          num_config=2))  # fmt: skip
    full = Evaluator(p).full((0, 1))
    assert full.status == int(Status.DRAM)
    true = 2 * 64 * 64 * 2 - 1000.0  # mbs * edge bytes - capacity
    assert full.totals[ResultSlot.VIOLATION] == true
    k = p.constants
    live_cap = (k.dram_cap - k.dram_fixed) / k.dram_act_mult
    out = np.zeros(NUM_SET)
    n = p.num_kernels
    ev.set_cost(p.kernels, p.edges, k, np.array([1, 0], np.int64), k.dram_bw, live_cap, 0,
                np.zeros(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
                np.zeros(n, np.int64), out)  # fmt: skip
    assert out[SetSlot.STATUS] == int(Status.DRAM)
    assert out[SetSlot.VIOLATION] == true
