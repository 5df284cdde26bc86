"""Validation of specs: one bad input per rule of docs/spec.md, asserting the message text.

Semantic rules are tested by changing one field of a valid spec, writing it as TOML and
loading it (so loader, writer and validator are exercised together); parse-level problems by
the files in tests/data/bad/ (each says what it must produce in ``# expect:`` lines).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from dfsearch.codes import Dim, ExecutionStyle, Parallelism, Topology
from dfsearch.errors import SpecError
from dfsearch.io.toml_writer import graph_to_toml, spec_to_toml
from dfsearch.loader import load_graph_file, load_input, load_spec, load_toml_spec
from dfsearch.spec import Connection, Graph, NetworkDim, Spec
from dfsearch.validate import validate_graph, validate_spec

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"

_SYSTEM = """
[system.accelerator]
cores = 4
systolic_width = 4
systolic_height = 4
sram_bytes = 1e6
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 100.0
"""

#: LLM spec with an explicit 4-kernel graph on a 2 x 2 torus (tp, pp).
LLM = """
[workload]
kind = "llm"
hidden_dim = 64
num_head = 4
head_dim = 16
seq_len = 32
num_layer = 2
global_batch_size = 8

[[graph.kernels]]
name = "a"
kind = "elementwise"
m = 64
n = 32
tiling = "n"
input_bytes = 4096
output_bytes = 4096

[[graph.kernels]]
name = "b"
kind = "gemm_weight"
outer = 4
m = 16
k = 64
n = 32
tiling = "n"
input_bytes = 4096
weight_bytes = 8192
output_bytes = 4096

[[graph.kernels]]
name = "c"
kind = "gemm"
m = 64
k = 16
n = 32
tiling = "n"

[[graph.kernels]]
name = "d"
kind = "elementwise2"
m = 64
n = 32
tiling = "n"

[[graph.connections]]
src = "a"
dst = "b"

[[graph.connections]]
src = "b"
dst = "c"

[[graph.connections]]
src = "a"
dst = "c"

[[graph.connections]]
src = "c"
dst = "d"

[[graph.connections]]
src = "a"
dst = "d"

[system]
num_chip = 4
""" + _SYSTEM + """
[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 50.0
parallelism = "tp"

[[system.network]]
topology = "ring"
size = 2
link_bw_GBps = 25.0
parallelism = "pp"

[cost]
link_power_J_per_GB = [0.01, 0.01]
"""

_SW_SW = """
[system]
num_chip = 4
""" + _SYSTEM + """
[[system.network]]
topology = "switch"
size = 2
link_bw_GBps = 50.0

[[system.network]]
topology = "switch"
size = 2
link_bw_GBps = 25.0
"""

DLRM = """
[workload]
kind = "dlrm"
num_table = 2
emb_dim = 4
row = 10
global_batch_size = 8

[graph]
generator = "dlrm"
mlp_dim = 8
bottom_num_mlp = 1
top_num_mlp = 1
pooled_row = 1
micro_batch_size = 4

[execution]
style = "kernel_by_kernel"
""" + _SW_SW

HPL = """
[workload]
kind = "hpl"
n = 8
b = 2

[graph]
generator = "hpl"
""" + _SW_SW

FFT = """
[workload]
kind = "fft"
length = 16

[graph]
generator = "fft"
""" + _SW_SW

BASES = {"llm": LLM, "dlrm": DLRM, "hpl": HPL, "fft": FFT}


def _load(text: str) -> Spec:
    return load_toml_spec(text, file="spec.toml", base_dir=Path("."))


def _messages(err: SpecError) -> list[str]:
    return [i.render() for i in err.issues]


def _problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        _load(text)
    return _messages(info.value)


@pytest.fixture(scope="module")
def bases() -> dict[str, Spec]:
    return {k: _load(v) for k, v in BASES.items()}


# --------------------------------------------------------------------------- mutations
def kern(i: int, **kw: object) -> Callable[[Spec], Spec]:
    def f(s: Spec) -> Spec:
        ks = list(s.graph.kernels)
        ks[i] = dataclasses.replace(ks[i], **kw)
        return dataclasses.replace(s, graph=dataclasses.replace(s.graph, kernels=tuple(ks)))

    return f


def conns(*pairs: tuple[str, str]) -> Callable[[Spec], Spec]:
    def f(s: Spec) -> Spec:
        c = tuple(Connection(src=a, dst=b) for a, b in pairs)
        return dataclasses.replace(s, graph=dataclasses.replace(s.graph, connections=c))

    return f


def add_conn(src: str, dst: str) -> Callable[[Spec], Spec]:
    def f(s: Spec) -> Spec:
        c = (*s.graph.connections, Connection(src=src, dst=dst))
        return dataclasses.replace(s, graph=dataclasses.replace(s.graph, connections=c))

    return f


def part(name: str, **kw: object) -> Callable[[Spec], Spec]:
    """Replace fields of a top-level part (workload, execution, cost, search)."""
    return lambda s: dataclasses.replace(s, **{name: dataclasses.replace(getattr(s, name), **kw)})


def system(**kw: object) -> Callable[[Spec], Spec]:
    return lambda s: dataclasses.replace(s, system=dataclasses.replace(s.system, **kw))


def sub(name: str, **kw: object) -> Callable[[Spec], Spec]:
    """Replace fields of system.accelerator or system.memory."""
    return system_f(lambda sy: dataclasses.replace(sy, **{name: dataclasses.replace(getattr(sy, name), **kw)}))


def system_f(fn: Callable) -> Callable[[Spec], Spec]:
    return lambda s: dataclasses.replace(s, system=fn(s.system))


def net(i: int, **kw: object) -> Callable[[Spec], Spec]:
    def fn(sy):
        dims = list(sy.network)
        dims[i] = dataclasses.replace(dims[i], **kw)
        return dataclasses.replace(sy, network=tuple(dims))

    return system_f(fn)


def dims(*spec: tuple[str, int, str]) -> Callable[[Spec], Spec]:
    """Replace the whole network: (topology, size, parallelism) per dimension."""

    def fn(sy):
        d = tuple(
            NetworkDim(
                topology=Topology.from_label(t),
                size=n,
                link_bw_GBps=10.0,
                parallelism=Parallelism.from_label(p),
            )
            for t, n, p in spec
        )
        return dataclasses.replace(sy, network=d)

    return system_f(fn)


def chain(*fs: Callable[[Spec], Spec]) -> Callable[[Spec], Spec]:
    def f(s: Spec) -> Spec:
        for g in fs:
            s = g(s)
        return s

    return f


def reorder(*order: int) -> Callable[[Spec], Spec]:
    def f(s: Spec) -> Spec:
        ks = tuple(s.graph.kernels[i] for i in order)
        return dataclasses.replace(s, graph=dataclasses.replace(s.graph, kernels=ks))

    return f


_A, _B, _C = 'graph.kernels[0] ("a")', 'graph.kernels[1] ("b")', 'graph.kernels[2] ("c")'

# (rule id, base, mutation, one expected message line)
RULES = [
    # ---- graph
    ("unique-names", "llm", kern(3, name="c"),
     'graph.kernels[3] ("c").name is already used by graph.kernels[2]; kernel names must be unique.'),
    ("empty-name", "llm", kern(0, name=""), "graph.kernels[0].name must not be empty."),
    ("dim-ge-1", "llm", kern(0, m=0), f"{_A}.m must be >= 1. Got 0 instead."),
    ("outer-ge-1", "llm", kern(1, outer=0), f"{_B}.outer must be >= 1. Got 0 instead."),
    ("k-is-1-elementwise", "llm", kern(0, k=4),
     f"{_A}.k must be 1 for an elementwise kernel (it has no k dimension). Got 4 instead."),
    ("weight-only-gemm-weight", "llm", kern(2, weight_bytes=10.0),
     f"{_C}.weight_bytes is only allowed on gemm_weight kernels; this kernel is 'gemm'."),
    ("input2-only-two-input", "llm", kern(0, input2_bytes=1.0),
     f"{_A}.input2_bytes is only allowed on two-input kernels ('gemm', 'elementwise2'); "
     "this kernel is 'elementwise'."),
    ("skip-weight-only-gemm-weight", "llm", kern(2, skip_weight=True),
     f"{_C}.skip_weight is only allowed on gemm_weight kernels; this kernel is 'gemm'."),
    ("kernel-size-ge-0", "llm", kern(1, output_bytes=-1.0), f"{_B}.output_bytes must be >= 0. Got -1 instead."),
    ("memory-bytes-ge-0", "llm", kern(1, memory_bytes=-5.0), f"{_B}.memory_bytes must be >= 0. Got -5 instead."),
    ("comm-bytes-ge-0", "llm", kern(1, communication_bytes=-0.5),
     f"{_B}.communication_bytes must be >= 0. Got -0.5 instead."),
    ("num-input-ge-0", "llm", kern(1, num_input=-1), f"{_B}.num_input must be >= 0. Got -1 instead."),
    ("config-ge-minus-1", "llm", kern(0, config=-2), f"{_A}.config must be >= 0, or -1 (free). Got -2 instead."),
    ("no-k-tiling-elementwise", "llm", kern(0, tiling=Dim.K),
     f"{_A}.tiling cannot be 'k' for an elementwise kernel (it has no k dimension)."),
    ("tiling-sharding-same-dim", "llm", kern(1, sharding=Dim.N),
     f"{_B}: tiling 'n' and sharding 'n' name the same dimension ('outer' and 'm' count as one); "
     "a tiled dimension cannot be sharded."),
    ("tiling-m-sharding-outer", "llm", kern(1, tiling=Dim.M, sharding=Dim.OUTER),
     f"{_B}: tiling 'm' and sharding 'outer' name the same dimension ('outer' and 'm' count as "
     "one); a tiled dimension cannot be sharded."),
    ("sharding-outer-forced", "llm", kern(1, sharding=Dim.M),
     f"{_B}.sharding must be one of 'outer' for this kernel (no size-1 or tiled "
     "dimension, 'outer' whenever outer > 1, never 'none' with a weight). Got 'm' instead."),
    ("sharding-size-1-dim", "llm", kern(0, sharding=Dim.K),
     f"{_A}.sharding must be one of 'm', 'none' for this kernel (no size-1 or tiled "
     "dimension, 'outer' whenever outer > 1, never 'none' with a weight). Got 'k' instead."),
    ("sharding-weight-not-none", "llm", kern(1, outer=1, m=64, sharding=Dim.NO),
     f"{_B}.sharding must be one of 'm', 'k' for this kernel (no size-1 or tiled "
     "dimension, 'outer' whenever outer > 1, never 'none' with a weight). Got 'none' instead."),
    ("non-llm-not-sharded", "dlrm", kern(0, sharding=Dim.M),
     'graph.kernels[0] ("MLP_1").sharding must be \'none\' or omitted: a dlrm workload is never '
     "sharded across chips. Got 'm' instead."),
    ("endpoint-did-you-mean", "llm", conns(("a", "b"), ("b", "cc")),
     "graph.connections[1].dst 'cc' is not a kernel name; did you mean 'c'?"),
    ("endpoint-unknown", "llm", conns(("zzz", "b")), "graph.connections[0].src 'zzz' is not a kernel name."),
    ("self-loop", "llm", conns(("a", "b"), ("c", "c")),
     "graph.connections[1]: connects 'c' to itself; a dataflow graph must be acyclic."),
    ("cycle", "llm", add_conn("d", "b"),
     "graph has a cycle: b -> c -> d -> b. A dataflow graph must be acyclic."),
    ("llm-tiling-none", "llm", kern(0, tiling=Dim.NO),
     f"{_A}.tiling must name a dimension for an LLM kernel whose sharding the inter-chip pass "
     "chooses (DFModel's pass needs a tiled dimension); tile one (decode graphs tile 'n'), pin "
     "'sharding', or set execution.skip_inter_chip_optimization. Got 'none' instead."),
    ("llm-no-legal-sharding", "llm", kern(1, tiling=Dim.M),
     f"{_B}: has no legal sharding: the inter-chip pass may only pick 'outer', which tiling 'm' "
     "forbids ('outer' and 'm' count as one dimension); tile another "
     "dimension or pin 'sharding'."),
    # ---- system
    ("num-chip-ge-1", "fft", system(num_chip=0), "system.num_chip must be >= 1. Got 0 instead."),
    ("cores-gt-0", "llm", sub("accelerator", cores=0), "system.accelerator.cores must be > 0. Got 0 instead."),
    ("systolic-gt-0", "llm", sub("accelerator", systolic_height=-1),
     "system.accelerator.systolic_height must be > 0. Got -1 instead."),
    ("freq-gt-0", "llm", sub("accelerator", freq_GHz=0.0), "system.accelerator.freq_GHz must be > 0. Got 0 instead."),
    ("sram-ge-0", "llm", sub("accelerator", sram_bytes=-1.0),
     "system.accelerator.sram_bytes must be >= 0. Got -1 instead."),
    ("pmu-unsupported", "llm", sub("accelerator", pmu=4),
     "system.accelerator.pmu must be 0: place-and-route mode (accelerator.pmu > 0) is not "
     "supported. Got 4 instead."),
    ("link-latency-ge-0", "llm", sub("accelerator", link_latency_ns=-1.5),
     "system.accelerator.link_latency_ns must be >= 0. Got -1.5 instead."),
    ("dram-bw-gt-0", "llm", sub("memory", dram_bw_GBps=0.0), "system.memory.dram_bw_GBps must be > 0. Got 0 instead."),
    ("dram-bytes-ge-0", "llm", sub("memory", dram_bytes=-1.0), "system.memory.dram_bytes must be >= 0. Got -1 instead."),
    ("second-tier-bw", "llm", sub("memory", second_dram_bytes=1e9),
     "system.memory.second_dram_bw_GBps must be > 0 when system.memory.second_dram_bytes > 0. Got 0 instead."),
    ("network-grid-over-3", "llm", dims(*[("ring", 0, "tp")] * 4),
     "system.network topologies of more than 3 dimensions must not all be direct (ring, "
     "mesh): a grid has bisection rules for 2 and 3 dimensions only; any mix of kinds with a "
     "switch or fc dimension is allowed. Got r_r_r_r instead."),
    ("topology-variant", "hpl", chain(net(0, topology=Topology.SWITCH), net(1, topology=Topology.RING)),
     "system.network topologies must form one of DFModel's 11 variants: r, sw, fc, r_r, r_fc, "
     "r_sw, sw_sw, fc_fc, r_r_r, r_sw_sw, sw_sw_sw (one word per dimension, in order; r = ring, "
     "sw = switch, fc = fc). Got sw_r instead."),
    ("link-bw-gt-0", "llm", net(1, link_bw_GBps=-25.0), "system.network[1].link_bw_GBps must be > 0. Got -25 instead."),
    ("network-size-ge-0", "llm", net(1, size=-2), "system.network[1].size must be >= 0. Got -2 instead."),
    ("llm-parallelism-tuple", "llm", chain(net(0, parallelism=Parallelism.PP), net(1, parallelism=Parallelism.TP)),
     "system.network parallelism must be one of tp | pp | dp (1 dimension); (tp, pp) | (tp, dp) | "
     "(pp, dp) (2 dimensions); (tp, pp, dp) (3 dimensions), in dimension order. "
     "Got (pp, tp) instead."),
    # a dimension without parallelism is placed by the search (issue 11 item 4): the fixed
    # kinds of such a network must each be on one dimension only
    ("llm-parallelism-once", "llm", dims(("ring", 0, "tp"), ("ring", 0, "tp"), ("ring", 0, "auto")),
     "system.network[1].parallelism must differ from system.network[0].parallelism: each of "
     "tp, pp, dp is carried by one dimension at most (omit the field or write 'auto' to let the "
     "search choose). Got 'tp' instead."),
    ("llm-fixed-sizes-divide", "llm", chain(net(0, size=3), net(1, size=0)),
     "system.network fixed sizes must divide system.num_chip = 4. Got 3 instead."),
    ("llm-sizes-multiply", "llm", net(1, size=4),
     "system.network sizes must multiply to system.num_chip = 4. Got 2 * 4 = 8 instead."),
    ("llm-1d-size", "llm", chain(dims(("ring", 2, "tp")), part("cost", link_power_J_per_GB=())),
     "system.network[0].size must be 0 or system.num_chip = 4 for a 1-dimensional network. Got 2 instead."),
    ("hbd-needs-3d", "llm", system(hbd=2),
     "system.hbd must be 0 unless the network has 3 dimensions with parallelism (tp, pp, dp). "
     "Got 2 instead."),
    ("hbd-ge-0", "llm", system(hbd=-1), "system.hbd must be >= 0. Got -1 instead."),
    ("hbd-non-llm", "fft", system(hbd=2),
     "system.hbd must be 0 for a fft workload (it only applies to LLMs on a (tp, pp, dp) network). Got 2 instead."),
    ("non-llm-size-required", "dlrm", net(0, size=0),
     "system.network[0].size must be > 0 for a dlrm workload (only LLM workloads search the "
     "network shape). Got 0 instead."),
    ("non-llm-no-parallelism", "dlrm", net(0, parallelism=Parallelism.DP),
     "system.network[0].parallelism must be omitted for a dlrm workload (tp/pp/dp apply to LLM "
     "workloads only). Got 'dp' instead."),
    ("num-copy-divides", "dlrm", part("workload", num_copy=3),
     "workload.num_copy must divide system.num_chip = 4. Got 3 instead."),
    ("non-llm-sizes-multiply", "fft", part("workload", num_copy=2),
     "system.network sizes must multiply to system.num_chip / workload.num_copy = 2. Got 2 * 2 = 4 instead."),
    ("hpl-2d", "hpl", dims(("switch", 4, "none")),
     "system.network must have 2 or 3 dimensions for an hpl workload (the process grid is X x Y). Got 1 instead."),
    # ---- cost
    ("cost-ge-0", "llm", part("cost", chip_price=-1.0), "cost.chip_price must be >= 0. Got -1 instead."),
    ("link-power-ge-0", "llm", part("cost", link_power_J_per_GB=(0.0, -0.5)),
     "cost.link_power_J_per_GB[1] must be >= 0. Got -0.5 instead."),
    ("link-power-per-dim", "llm", part("cost", link_power_J_per_GB=(0.1, 0.1, 0.1)),
     "cost.link_power_J_per_GB must have at most one entry per network dimension (2). Got 3 entries instead."),
    # ---- execution
    ("word-ge-1", "llm", part("execution", word_bytes=0), "execution.word_bytes must be >= 1. Got 0 instead."),
    ("compute-util-range", "llm", part("execution", compute_util=1.5),
     "execution.compute_util must be between 0 and 1. Got 1.5 instead."),
    ("num-config-ge-0", "llm", part("execution", num_config=-3),
     "execution.num_config must be >= 0 or 'auto'. Got -3 instead."),
    ("effective-stage-ge-0", "llm", part("execution", effective_stage=-1),
     "execution.effective_stage must be >= 0. Got -1 instead."),
    ("kbk-num-config", "llm", part("execution", style=ExecutionStyle.KERNEL_BY_KERNEL, num_config=2),
     "execution.num_config must be 0 or the number of kernels (4) when execution.style = "
     "'kernel_by_kernel'. Got 2 instead."),
    ("pinned-config-lt-num-config", "llm", chain(part("execution", num_config=2), kern(0, config=2)),
     f"{_A}.config must be < execution.num_config = 2. Got 2 instead."),
    ("file-order-topological", "llm", reorder(1, 0, 2, 3),
     "graph.connections[0]: 'a' -> 'b' goes backwards in the kernel file order (kernel 1 -> "
     "kernel 0); with one configuration per kernel (execution.num_config = 0) kernels run in "
     "file order, so list 'a' before 'b'."),
    ("file-order-kbk", "llm", chain(reorder(1, 0, 2, 3), part("execution", style=ExecutionStyle.KERNEL_BY_KERNEL)),
     "graph.connections[0]: 'a' -> 'b' goes backwards in the kernel file order (kernel 1 -> "
     "kernel 0); with one configuration per kernel (execution.style = 'kernel_by_kernel') "
     "kernels run in file order, so list 'a' before 'b'."),
    # ---- workload
    ("heads-times-dim", "llm", part("workload", hidden_dim=60),
     "workload.hidden_dim must equal workload.num_head * workload.head_dim = 4 * 16 = 64. Got 60 instead."),
    ("seq-len-ge-1", "llm", part("workload", seq_len=0), "workload.seq_len must be >= 1. Got 0 instead."),
    ("global-batch-ge-1", "llm", part("workload", global_batch_size=0),
     "workload.global_batch_size must be >= 1. Got 0 instead."),
    ("micro-batch-ge-0", "llm", part("workload", micro_batch_size=-1),
     "workload.micro_batch_size must be >= 0. Got -1 instead."),
    ("tile-size-ge-0", "llm", part("workload", tile_size=-1), "workload.tile_size must be >= 0. Got -1 instead."),
    ("layers-in-graph-divide", "llm", part("workload", num_layer_in_graph=3),
     "workload.num_layer_in_graph must divide workload.num_layer = 2: one graph execution runs "
     "num_layer_in_graph consecutive layers (docs/model.md, \"Several layers in one graph\"). "
     "Got 3 instead."),
    ("pp-le-graph-executions", "llm", part("workload", num_layer_in_graph=2),
     "system.network[1].size must be <= workload.num_layer / workload.num_layer_in_graph = "
     "2 / 2 = 1: it is the pipeline (pp) size, and every pipeline stage holds at least one "
     "graph execution. Got 2 instead."),
    ("dlrm-fields-ge-1", "dlrm", part("workload", emb_dim=0), "workload.emb_dim must be >= 1. Got 0 instead."),
    ("hpl-fields-ge-1", "hpl", part("workload", b=0), "workload.b must be >= 1. Got 0 instead."),
    ("fft-fields-ge-1", "fft", part("workload", length=0), "workload.length must be >= 1. Got 0 instead."),
    # ---- search
    ("time-limit-ge-0", "llm", part("search", time_limit_s=-1.0), "search.time_limit_s must be >= 0. Got -1 instead."),
    ("max-evaluations-gt-0", "llm", part("search", max_evaluations=0), "search.max_evaluations must be > 0. Got 0 instead."),
    ("seed-ge-0", "llm", part("search", seed=-1), "search.seed must be an integer in [0, 2**32 - 1]. Got -1 instead."),
]


def test_bases_are_valid(bases: dict[str, Spec]) -> None:
    for spec in bases.values():
        assert validate_spec(spec) == []


@pytest.mark.parametrize(("base", "mutate", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule(bases: dict[str, Spec], base: str, mutate: Callable[[Spec], Spec], expected: str) -> None:
    bad = mutate(bases[base])
    assert expected in [i.render() for i in validate_spec(bad)]
    # the same problem through the TOML loader, with the file name in front
    problems = _problems(spec_to_toml(bad))
    assert expected in problems


def test_rule_ids_are_unique() -> None:
    assert len({r[0] for r in RULES}) == len(RULES)


def test_fusion_allows_any_file_order(bases: dict[str, Spec]) -> None:
    """With fewer configurations than kernels the file order is free (configs are searched)."""
    spec = chain(reorder(1, 0, 2, 3), part("execution", num_config=2))(bases["llm"])
    assert validate_spec(spec) == []


def test_graph_needs_a_kernel() -> None:
    assert [i.render() for i in validate_graph(Graph(kernels=()))] == [
        "graph.kernels must hold at least one kernel."
    ]


def test_cycle_reported_once_without_order_complaints(bases: dict[str, Spec]) -> None:
    msgs = [i.render() for i in validate_spec(add_conn("d", "b")(bases["llm"]))]
    assert msgs == ["graph has a cycle: b -> c -> d -> b. A dataflow graph must be acyclic."]


def test_cycle_and_unknown_endpoint_reported_together(bases: dict[str, Spec]) -> None:
    spec = chain(add_conn("d", "b"), add_conn("d", "e"))(bases["llm"])
    assert [i.render() for i in validate_spec(spec)] == [
        "graph.connections[6].dst 'e' is not a kernel name.",
        "graph has a cycle: b -> c -> d -> b. A dataflow graph must be acyclic.",
    ]


def test_dfmodel_vocabulary_names_kernels(bases: dict[str, Spec]) -> None:
    """Semantic messages name kernels by name as well as position (also for generated graphs)."""
    # DLRM generator order: MLP_1, MLP_2, then backward MLP_2_bwd, MLP_1_bwd, ...
    msgs = [i.render() for i in validate_spec(kern(3, m=0)(bases["dlrm"]))]
    assert msgs == ['graph.kernels[3] ("MLP_1_bwd").m must be >= 1. Got 0 instead.']


# --------------------------------------------------------------------------- loader level
def test_collects_every_problem_at_once() -> None:
    text = LLM.replace('head_dim = 16', 'head_dim = 16.5').replace(
        'link_bw_GBps = 25.0', 'link_bw_GBps = -25'
    ) + '\n[execution]\noverlap = "full"\ncompute_util = 2.0\n'
    assert _problems(text) == [
        "workload.head_dim must be an integer. Got 16.5 instead.",
        "system.network[1].link_bw_GBps must be > 0. Got -25 instead.",
        "execution.overlap must be one of 'perfect', 'compute_memory', 'none'. Got 'full' instead.",
        "execution.compute_util must be between 0 and 1. Got 2 instead.",
    ]


def test_error_text_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(LLM.replace("freq_GHz = 1.0", "freq_GHz = -1.0"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: system.accelerator.freq_GHz must be > 0. Got -1 instead."
    assert info.value.file == str(path)
    assert info.value.exit_code == 2


def test_misspelt_key_does_not_cause_follow_up_errors() -> None:
    """'tilling' -> did-you-mean; tiling's default ('none') must not trigger the LLM tiling rule."""
    text = LLM.replace('name = "a"\nkind = "elementwise"\nm = 64\nn = 32\ntiling = "n"',
                       'name = "a"\nkind = "elementwise"\nm = 64\nn = 32\ntilling = "n"')
    assert _problems(text) == ["graph.kernels[0]: unknown key 'tilling'; did you mean 'tiling'?"]


def test_unknown_key_without_close_match_lists_allowed() -> None:
    text = LLM.replace("num_chip = 4", "num_chip = 4\nchips_per_node = 8")
    assert _problems(text) == [
        "system: unknown key 'chips_per_node' (allowed: num_chip, accelerator, memory, network, hbd)."
    ]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: no such file."


def test_directory_is_not_a_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a directory, not a file."


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(b"[workload]\nkind = \"llm\xff\"\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: cannot read: not UTF-8 text")


def test_broken_toml_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text('[workload]\nkind = "llm"\nhidden_dim 64\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    assert text.startswith(f"{path}: invalid TOML: ")
    assert "(at line 3, column 12)" in text


# --------------------------------------------------------------------------- bad files
def _bad_files() -> list[Path]:
    return sorted(BAD.glob("*.toml"))


@pytest.mark.parametrize("path", _bad_files(), ids=lambda p: p.stem)
def test_bad_file(path: Path) -> None:
    """Each file in tests/data/bad lists the problems it must produce, in order."""
    expected = [
        line.removeprefix("# expect:").strip()
        for line in path.read_text().splitlines()
        if line.startswith("# expect:")
    ]
    assert expected, f"{path.name} has no '# expect:' line"
    with pytest.raises(SpecError) as info:
        load_input(path)
    got = _messages(info.value)
    if expected[0].startswith("invalid TOML:"):
        assert len(got) == 1 and got[0].startswith(expected[0]), got
    else:
        assert got == expected


def test_there_are_bad_files() -> None:
    assert len(_bad_files()) >= 15


# --------------------------------------------------------------------------- graph forms
def _spec_without_graph(text: str) -> str:
    """LLM base with the [[graph...]] tables removed."""
    head, rest = text.split("[[graph.kernels]]", 1)
    tail = rest[rest.index("[system]"):]
    return head + "{graph}\n" + tail


def test_generator_defaults_come_from_workload_and_execution() -> None:
    from dfsearch.kernels.generators import llm_fwdbwd

    text = _spec_without_graph(LLM).replace("{graph}", '[graph]\ngenerator = "llm"\n')
    text += "\n[execution]\nword_bytes = 4\nnum_config = 2\n"
    spec = _load(text)
    assert spec.graph == llm_fwdbwd(hidden=64, num_head=4, head_dim=16, seq=32, word=4)


def test_generator_parameter_overrides_default() -> None:
    from dfsearch.kernels.generators import llm_fwd

    text = _spec_without_graph(LLM).replace("{graph}", '[graph]\ngenerator = "llm-fwd"\nseq = 16\n')
    assert _load(text).graph == llm_fwd(hidden=64, num_head=4, head_dim=16, seq=16, word=2)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ('generator = "llm"\nhiden = 64', ["graph: unknown key 'hiden'; did you mean 'hidden'?"]),
        ('generator = "lm"', [
            "graph.generator must be one of 'llm', 'llm-fwd', 'llm-decode', 'llm-serving', 'dlrm', 'hpl', 'fft'. Got 'lm' instead."
        ]),
        ('generator = "hpl"', [
            "graph.generator must be one of 'llm', 'llm-fwd', 'llm-decode' for workload.kind = 'llm'. Got 'hpl' instead."
        ]),
        ('generator = "llm"\nseq = 2.5', ["graph.seq must be an integer. Got 2.5 instead."]),
        ('generator = 3', ["graph.generator must be a string. Got 3 instead."]),
        ('include = 3', ["graph.include must be a string. Got 3 instead."]),
        ("", ["graph needs one of 'generator', 'include' or [[graph.kernels]] (see docs/spec.md)."]),
        ('generator = "llm"\ninclude = "g.toml"', [
            "graph must use exactly one of 'generator', 'include' and [[graph.kernels]]. Got 'generator' and 'include'."
        ]),
        ('generator = "llm"\nconnections = []', ["graph.connections is only allowed together with [[graph.kernels]]."]),
    ],
    ids=["param-typo", "unknown-generator", "generator-kind", "param-int", "generator-type",
         "include-type", "no-graph", "two-forms", "connections-with-generator"],
)
def test_graph_form_errors(graph: str, expected: list[str]) -> None:
    text = _spec_without_graph(LLM).replace("{graph}", "[graph]\n" + graph + "\n")
    assert _problems(text) == expected


def test_generator_problems_are_reported_with_field_paths() -> None:
    """Problems the generator finds in its parameters come back as issues on graph.<param>."""
    text = HPL.replace('generator = "hpl"', 'generator = "hpl"\nb = 16')
    problems = _problems(text)
    assert problems and all(p.startswith("graph.b ") for p in problems)


def test_include_graph_file(tmp_path: Path, bases: dict[str, Spec]) -> None:
    spec = bases["llm"]
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "layer.toml").write_text(graph_to_toml(spec.graph, header="test graph"))
    main = tmp_path / "spec.toml"
    main.write_text(_spec_without_graph(LLM).replace("{graph}", '[graph]\ninclude = "graphs/layer.toml"\n'))
    assert load_spec(main) == spec


def test_include_missing_file(tmp_path: Path) -> None:
    main = tmp_path / "spec.toml"
    main.write_text(_spec_without_graph(LLM).replace("{graph}", '[graph]\ninclude = "nope.toml"\n'))
    with pytest.raises(SpecError) as info:
        load_spec(main)
    assert _messages(info.value) == [f"graph.include: in {tmp_path / 'nope.toml'}: no such file."]


def test_include_invalid_graph_file(tmp_path: Path, bases: dict[str, Spec]) -> None:
    g = kern(0, m=0)(bases["llm"]).graph
    (tmp_path / "g.toml").write_text(graph_to_toml(g))
    main = tmp_path / "spec.toml"
    main.write_text(_spec_without_graph(LLM).replace("{graph}", '[graph]\ninclude = "g.toml"\n'))
    with pytest.raises(SpecError) as info:
        load_spec(main)
    assert _messages(info.value) == [
        f'graph.include: in {tmp_path / "g.toml"}: graph.kernels[0] ("a").m must be >= 1. Got 0 instead.'
    ]


def test_load_input_tells_graph_files_from_specs(tmp_path: Path, bases: dict[str, Spec]) -> None:
    spec = bases["llm"]
    (tmp_path / "g.toml").write_text(graph_to_toml(spec.graph))
    (tmp_path / "s.toml").write_text(spec_to_toml(spec))
    assert load_input(tmp_path / "g.toml") == spec.graph
    assert load_graph_file(tmp_path / "g.toml") == spec.graph
    assert load_input(tmp_path / "s.toml") == spec


def test_graph_file_rejects_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(LLM)
    with pytest.raises(SpecError) as info:
        load_graph_file(path)
    assert "unexpected table 'workload': a graph file holds only the [graph] table." in _messages(info.value)


def test_graph_file_must_be_explicit(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[graph]\ngenerator = "llm"\n')
    with pytest.raises(SpecError) as info:
        load_graph_file(path)
    assert _messages(info.value) == [
        "graph: unknown key 'generator' (allowed: kernels, connections).",
        "graph.kernels is required (a graph file holds [[graph.kernels]] and [[graph.connections]]).",
    ]


# --------------------------------------------------------------------------- format detection
_DFMODEL = DATA / "dfmodel" / "fft_1024gpu_sw_sw_8x128" / "setup.txt"


@pytest.mark.skipif(not _DFMODEL.exists(), reason="DFModel case not copied into tests/data")
def test_dfmodel_detected_by_content_not_suffix(tmp_path: Path) -> None:
    odd = tmp_path / "looks_like.toml"
    odd.write_text(_DFMODEL.read_text())
    spec = load_spec(odd)
    assert spec.workload.kind.label == "fft" and len(spec.graph.kernels) == 2
    toml_named_txt = tmp_path / "setup.txt"
    toml_named_txt.write_text(FFT)
    assert load_spec(toml_named_txt) == _load(FFT)
