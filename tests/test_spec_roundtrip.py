"""Spec -> TOML -> Spec is the identity (bit-exact floats), for random valid specs."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dfsearch.codes import (
    TOPOLOGY_VARIANTS,
    Collective,
    ComputeType,
    Dim,
    Equations,
    ExecutionStyle,
    KernelKind,
    Overlap,
    Parallelism,
    Phase,
)
from dfsearch.io.toml_writer import graph_to_toml, spec_to_toml, toml_value
from dfsearch.kernels.graph import sharding_choices
from dfsearch.loader import load_graph_file, load_toml_spec
from dfsearch.pins import pin_issues
from dfsearch.spec import (
    AUTO,
    Accelerator,
    Connection,
    Cost,
    DLRMWorkload,
    Execution,
    FFTWorkload,
    Graph,
    HPLWorkload,
    Kernel,
    LLMWorkload,
    Memory,
    NetworkDim,
    SearchSettings,
    Spec,
    System,
)
from dfsearch.validate import validate_spec

SETTINGS = settings(deadline=None, derandomize=True, max_examples=40)

sizes = st.floats(min_value=0.0, max_value=1e15, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
dims_ = st.integers(1, 64)
names = st.text(
    st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8
)  # any printable or control character: exercises the writer's string escapes


def _legal_shardings(k: Kernel, llm: bool) -> list[Dim | None]:
    if not llm:
        return [None, Dim.NO]
    out: list[Dim | None] = [None] if k.tiling is not Dim.NO else []
    for c in sharding_choices(replace(k, sharding=None)):
        same = c is not Dim.NO and k.tiling is not Dim.NO and (
            {c, k.tiling} <= {Dim.OUTER, Dim.M} or c is k.tiling
        )
        if not same:
            out.append(c)
    return out


@st.composite
def kernels(draw: st.DrawFn, name: str, llm: bool, num_config: int) -> Kernel:
    kind = draw(st.sampled_from(list(KernelKind)))
    outer, m, n = draw(dims_), draw(dims_), draw(dims_)
    k = draw(dims_) if kind.has_k else 1
    if llm:  # a tiling that leaves the inter-chip pass a legal choice
        tilings = [Dim.N] + ([Dim.K] if kind.has_k else []) + ([Dim.M] if outer == 1 else [])
    else:
        tilings = [Dim.NO, Dim.OUTER, Dim.M, Dim.N] + ([Dim.K] if kind.has_k else [])
    weight = kind is KernelKind.GEMM_WEIGHT
    kern = Kernel(
        name=name,
        kind=kind,
        type=draw(st.sampled_from(list(ComputeType))),
        phase=draw(st.sampled_from(list(Phase))),
        outer=outer,
        m=m,
        k=k,
        n=n,
        tiling=draw(st.sampled_from(tilings)),
        config=draw(st.integers(-1, num_config - 1)) if num_config > 0 else -1,
        input_bytes=draw(st.none() | sizes),
        input2_bytes=draw(st.none() | sizes) if kind.num_inputs == 2 else None,
        weight_bytes=draw(st.none() | sizes) if weight else None,
        output_bytes=draw(st.none() | sizes),
        communication=draw(st.sampled_from(list(Collective))),
        communication_bytes=draw(sizes),
        communication2=draw(st.sampled_from(list(Collective))),
        communication2_bytes=draw(sizes),
        memory_bytes=draw(sizes),
        num_input=draw(st.integers(0, 3)),
        skip_weight=draw(st.booleans()) if weight else False,
        use_effective_stage=draw(st.booleans()) if weight else False,
        sram_extra_bytes=draw(sizes),
        dram_extra_bytes=draw(sizes),
        num_expert=draw(st.integers(0, 8)),
        id=draw(st.none() | st.integers(0, 2**40)),
    )
    if Collective.EXPERT_ALL_TO_ALL in (kern.communication, kern.communication2):
        kern = replace(kern, num_expert=max(1, kern.num_expert))  # it needs experts
    if llm and _legal_shardings(kern, llm) in ([], [None]):  # give the pass a choice
        kern = replace(kern, m=max(2, m), tiling=Dim.N)
    return replace(kern, sharding=draw(st.sampled_from(_legal_shardings(kern, llm))))


@st.composite
def graphs(draw: st.DrawFn, llm: bool, num_config: int) -> Graph:
    labels = draw(st.lists(names, min_size=1, max_size=8, unique=True))
    ks = tuple(draw(kernels(nm, llm, num_config)) for nm in labels)
    pairs = [(i, j) for i in range(len(ks)) for j in range(i + 1, len(ks))]  # file order = topological
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=12)) if pairs else []
    conns = tuple(
        Connection(
            src=ks[i].name,
            dst=ks[j].name,
            zero_out=draw(st.booleans()),
            id=draw(st.none() | st.integers(0, 1000)),
        )
        for i, j in chosen
    )
    return Graph(kernels=ks, connections=conns)


_PAR = {
    1: [(Parallelism.TP,), (Parallelism.PP,), (Parallelism.DP,)],
    2: [(Parallelism.TP, Parallelism.PP), (Parallelism.TP, Parallelism.DP), (Parallelism.PP, Parallelism.DP)],
    3: [(Parallelism.TP, Parallelism.PP, Parallelism.DP)],
}


@st.composite
def systems(draw: st.DrawFn, kind: str, num_copy: int) -> System:
    ndim = draw(st.integers(2 if kind == "hpl" else 1, 3))
    topo = draw(st.sampled_from([v for v in TOPOLOGY_VARIANTS.values() if len(v) == ndim]))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    if kind == "llm":
        num_chip = math.prod(shape)
        par = draw(st.sampled_from(_PAR[ndim]))
        sizes_ = [0] * ndim if ndim == 1 and draw(st.booleans()) else shape
        if ndim > 1:  # some sizes left to the search
            sizes_ = [s if draw(st.booleans()) else 0 for s in shape]
        hbd = draw(st.integers(0, 8)) if ndim == 3 else 0
    else:
        num_chip = math.prod(shape) * num_copy
        par = (Parallelism.NONE,) * ndim
        sizes_ = shape
        hbd = 0
    net = tuple(
        NetworkDim(topology=t, link_bw_GBps=draw(positive), size=s, parallelism=p)
        for t, s, p in zip(topo, sizes_, par)
    )
    acc = Accelerator(
        cores=draw(st.integers(1, 2000)),
        systolic_width=draw(st.integers(1, 64)),
        systolic_height=draw(st.integers(1, 64)),
        sram_bytes=draw(sizes),
        freq_GHz=draw(st.floats(min_value=1e-3, max_value=1e3)),  # docs/spec.md "Ranges"
        pmu=0,
        pmu_bytes=draw(sizes),
        link_latency_ns=draw(sizes),
    )
    second = draw(sizes)
    mem = Memory(
        dram_bw_GBps=draw(positive),
        dram_bytes=draw(sizes),
        second_dram_bw_GBps=draw(positive) if second > 0 else draw(st.just(0.0) | positive),
        second_dram_bytes=second,
    )
    return System(num_chip=num_chip, accelerator=acc, memory=mem, network=net, hbd=hbd)


@st.composite
def workloads(draw: st.DrawFn, kind: str) -> object:
    if kind == "llm":
        heads, hd = draw(st.integers(1, 64)), draw(st.integers(1, 256))
        return LLMWorkload(
            hidden_dim=heads * hd,
            head_dim=hd,
            num_head=heads,
            seq_len=draw(st.integers(1, 10**6)),
            num_layer=draw(st.integers(4, 200)),  # >= any pp size drawn (1 to 4)
            global_batch_size=draw(st.integers(1, 10**9)),
            micro_batch_size=draw(st.integers(0, 64)),
            tile_size=draw(st.integers(0, 4096)),
        )
    copies = draw(st.integers(1, 3))
    if kind == "dlrm":
        return DLRMWorkload(
            num_table=draw(st.integers(1, 1000)),
            emb_dim=draw(st.integers(1, 512)),
            row=draw(st.integers(1, 10**8)),
            global_batch_size=draw(st.integers(1, 10**9)),
            num_copy=copies,
        )
    if kind == "hpl":
        return HPLWorkload(n=draw(st.integers(1, 10**6)), b=draw(st.integers(1, 4096)), num_copy=copies)
    return FFTWorkload(length=draw(st.integers(1, 10**13)), num_copy=copies)


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    kind = draw(st.sampled_from(["llm", "dlrm", "hpl", "fft"]))
    workload = draw(workloads(kind))
    style = draw(st.sampled_from(list(ExecutionStyle)))
    n_max = 8
    if style is ExecutionStyle.KERNEL_BY_KERNEL:
        num_config = 0
    else:
        num_config = draw(st.sampled_from([0, AUTO, 1, 2, 3, n_max + 2]))
    graph = draw(graphs(kind == "llm", num_config))
    if style is ExecutionStyle.KERNEL_BY_KERNEL and draw(st.booleans()):
        num_config = len(graph.kernels)
    system = draw(systems(kind, getattr(workload, "num_copy", 1)))
    execution = Execution(
        style=style,
        num_config=num_config,
        overlap=draw(st.sampled_from(list(Overlap))),
        compute_util=draw(st.just(0.0) | st.floats(1e-6, 1.0)),
        word_bytes=draw(st.integers(1, 8)),
        equations=draw(st.sampled_from(list(Equations))),
        separate_rs_ag_for_ar=draw(st.booleans()),
        skip_inter_chip_optimization=draw(st.booleans()),
        effective_stage=draw(st.integers(0, 8)),
        replicate_sram_index_bug=draw(st.booleans()),
    )
    cost = Cost(
        link_price_per_GBps=draw(sizes),
        switch_price_per_GBps=draw(sizes),
        dram_price_per_GBps=draw(sizes),
        chip_price=draw(sizes),
        link_power_J_per_GB=tuple(draw(st.lists(sizes, max_size=len(system.network)))),
        switch_power_J_per_GB=draw(sizes),
        dram_power_J_per_GB=draw(sizes),
        chip_power_W=draw(sizes),
    )
    search = SearchSettings(
        seed=draw(st.integers(0, 2**32 - 1)),
        time_limit_s=draw(positive),
        max_evaluations=draw(st.integers(1, 2**40)),
        joint_sharding=draw(st.booleans()),
    )
    if pin_issues(graph, execution):  # pins no mapping can honour are refused: unpin them
        graph = replace(graph, kernels=tuple(replace(k, config=-1) for k in graph.kernels))
    return Spec(graph=graph, system=system, cost=cost, execution=execution, workload=workload, search=search)


def _reload(text: str) -> Spec:
    return load_toml_spec(text, file="roundtrip.toml", base_dir=Path("."))


@SETTINGS
@given(specs())
def test_spec_roundtrip(spec: Spec) -> None:
    assert validate_spec(spec) == []  # the strategy makes valid specs only
    text = spec_to_toml(spec)
    back = _reload(text)
    assert back == spec
    assert spec_to_toml(back) == text  # stable output


@SETTINGS
@given(specs())
def test_graph_file_roundtrip(tmp_path_factory, spec: Spec) -> None:
    path = tmp_path_factory.mktemp("g") / "graph.toml"
    path.write_text(graph_to_toml(spec.graph, header="generated\nby a test"), encoding="utf-8")
    assert load_graph_file(path) == spec.graph


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_are_written_bit_exactly(x: float) -> None:
    back = tomllib.loads(f"x = {toml_value(x)}")["x"]
    assert isinstance(back, float)
    assert back == x and math.copysign(1.0, back) == math.copysign(1.0, x)


@SETTINGS
@given(names)
def test_strings_are_escaped(text: str) -> None:
    assert tomllib.loads(f"x = {toml_value(text)}")["x"] == text


def test_defaults_are_left_out() -> None:
    spec = Spec(
        graph=Graph(kernels=(Kernel(name="x", kind=KernelKind.GEMM, type=ComputeType.SYSTOLIC, m=2, k=1, n=3),)),
        system=System(
            num_chip=1,
            accelerator=Accelerator(cores=1, systolic_width=1, systolic_height=1, sram_bytes=0.0, freq_GHz=1.0),
            memory=Memory(dram_bw_GBps=1.0),
            network=(NetworkDim(topology=next(iter(TOPOLOGY_VARIANTS.values()))[0], link_bw_GBps=1.0, size=1),),
        ),
        cost=Cost(),
        execution=Execution(style=ExecutionStyle.KERNEL_BY_KERNEL),
        workload=FFTWorkload(length=4),
    )
    text = spec_to_toml(spec)
    # k stays although it equals its default (a GEMM must state it); type is always written;
    # cost and search are all defaults, so their tables are left out
    assert text == """[workload]
kind = "fft"
length = 4

[[graph.kernels]]
name = "x"
kind = "gemm"
type = "systolic"
m = 2
k = 1
n = 3

[system]
num_chip = 1

[system.accelerator]
cores = 1
systolic_width = 1
systolic_height = 1
sram_bytes = 0.0
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 1.0

[[system.network]]
topology = "ring"
link_bw_GBps = 1.0
size = 1

[execution]
style = "kernel_by_kernel"
"""
    assert _reload(text) == spec


def test_num_config_auto_is_written_as_word() -> None:
    text = 'num_config = "auto"'
    spec = Spec(
        graph=Graph(kernels=(Kernel(name="x", kind=KernelKind.ELEMENTWISE, type=ComputeType.SIMD, m=2, n=3),)),
        system=System(
            num_chip=1,
            accelerator=Accelerator(cores=1, systolic_width=1, systolic_height=1, sram_bytes=0.0, freq_GHz=1.0),
            memory=Memory(dram_bw_GBps=1.0),
            network=(NetworkDim(topology=next(iter(TOPOLOGY_VARIANTS.values()))[0], link_bw_GBps=1.0, size=1),),
        ),
        cost=Cost(),
        execution=Execution(num_config=AUTO),
        workload=FFTWorkload(length=4),
    )
    out = spec_to_toml(spec)
    assert text in out
    assert _reload(out) == spec
