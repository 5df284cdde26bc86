"""Issue 14: several layers in one graph, read from DFModel's input format and pinned to
DFModel's printed numbers.

No published DFModel input has ``num_layer_in_graph > 1`` (tests/data/dfmodel/llm/README.md
lists what was searched), so these tests stack DFModel's published one-layer input
(tests/data/dfmodel/llm/megatron_145b_a100_r_r_r_8x8x24: Megatron-LM 145.6B, 80 layers, a
fixed TP 8 x PP 8 x DP 24 torus, kernel by kernel) into an N-layer graph in DFModel's own
text format, the way ``dfsearch``'s ``llm`` generator stacks layers (docs/model.md, "Several
layers in one graph"): kernels renamed ``<name>_L<i>`` and renumbered, the forward kernels of
L1..LN then the backward kernels of LN..L1, each layer's 53 connections, plus two links per
layer boundary (``Add_2_L<i>`` -> ``Add_Prev_Layer_L<i+1>``, ``K_bwd_L<i+1>`` ->
``Loss_bwd_L<i>``), and ``num_layer_in_graph: N`` added to the ``llm`` block. The stacked
text goes through ``load_dfmodel_file`` like any DFModel input, and is then read with our rules
for N stacked layers (``workload.partition_graph`` off), not DFModel's pipeline partitioning
(tests/test_partition.py).

With N = 2 or 5, E = 80 / N executions and PP = 8 give N x ceil(E / 8) = 10 layers per stage,
as in DFModel's run. DFModel's printed mapping (its TP/PP/DP, ``sharding[i,j]``, micro-batch 1,
``num_tile 2048``, one kernel per configuration), repeated in every layer, then reproduces
every printed number except for what the one-layer graph leaves out: the tensors that cross
a layer boundary. Each link costs, per graph execution (closed forms, S = the producer's
per-chip bytes = hidden x seq x word / TP = 6291456):

* a DRAM write in the producer's configuration and a DRAM read in the consumer's, S / B_dram
  each (kernel by kernel, every edge goes through DRAM);
* an all-gather in the producer's configuration, S (TP - 1) / (TP beta_TP) (the shard-byte
  rule, docs/model.md "Shard-byte all-gather"): DFModel's mapping shards ``Add_2`` on M and
  ``K_bwd`` on OUTER but replicates ``Add_Prev_Layer`` and ``Loss_bwd``.

So each of the 41 N configuration times is DFModel's Per_Config_II of the same kernel, plus
those terms at the 4 (N - 1) link ends, and the final time is DFModel's plus
(N - 1) Delta x (E / PP) x num_micro_batch x pipeline_factor (both printed by DFModel), with
Delta = 2 (2 S / B_dram + all-gather). With N = 4 (E = 20, not a multiple of PP = 8) a stage
holds ceil(20 / 8) = 3 executions = 12 layers, not DFModel's 10: a different model.

The search on the stacked graphs must be no slower than DFModel's printed 12.914 s and no
faster than its printed MIP bound 11.872 s.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dfsearch.codes import Dim, RunStatus
from dfsearch.cost.model import evaluate
from dfsearch.decision import Decision
from dfsearch.io.dfmodel import load_dfmodel_file
from dfsearch.loader import replace_field
from dfsearch.search.engine import search

CASE = Path(__file__).parent / "data" / "dfmodel" / "llm" / "megatron_145b_a100_r_r_r_8x8x24"
LAYERS, TP, PP, DP = 80, 8, 8, 24
DRAM_BW = 2039.0  # memory.dram_bw, GB/s = bytes/ns
BETA_TP = 600.0  # link_bw_x, the TP dimension
HIDDEN, SEQ, WORD = 12288, 2048, 2
SHARD = HIDDEN * SEQ * WORD / TP  # the producer's shard_M x shard_N x word: 6291456 bytes
DRAM_NS = SHARD / DRAM_BW  # one write or one read of a link tensor
GATHER_NS = SHARD * (TP - 1) / (TP * BETA_TP)  # shard-byte all-gather on the TP ring
LINK_PAIR_NS = 2 * (2 * DRAM_NS + GATHER_NS)  # both links of one layer boundary
LINKS = {"Add_2": (1, GATHER_NS + DRAM_NS), "Add_Prev_Layer": (-1, DRAM_NS),
         "K_bwd": (-1, GATHER_NS + DRAM_NS), "Loss_bwd": (1, DRAM_NS)}  # fmt: skip
"""Link ends: kernel -> (+1: links to the next layer, -1: to the previous one; added ns)."""


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# --------------------------------------------------------------------------- DFModel's log
def log_text() -> str:
    return (CASE / "log.txt").read_text()


def logged(label: str) -> float:
    found = re.findall(rf"^{re.escape(label)} (\S+)$", log_text(), re.MULTILINE)
    assert found, label
    return float(found[-1])


def logged_iis() -> list[float]:
    found = re.findall(r"^Per_Config_II\[(\d+)\] (\S+)$", log_text(), re.MULTILINE)
    assert [int(i) for i, _ in found] == list(range(41))
    return [float(v) for _, v in found]


def logged_sharding() -> list[Dim]:
    ones = re.findall(r"^sharding\[(\d+),(\d+)\] 1\.0$", log_text(), re.MULTILINE)
    chosen = {int(i): Dim(int(j) + 1) for i, j in ones}
    return [chosen[i] for i in range(len(chosen))]


def logged_status() -> tuple[float, float]:
    found = re.findall(r"^Best objective (\S+), best bound (\S+), gap", log_text(), re.M)
    return float(found[-1][0]), float(found[-1][1])


# --------------------------------------------------------------------------- stacking
def _blocks(text: str, head: str) -> list[str]:
    """The top-level ``head { ... }`` blocks of ``text``, in order."""
    out, start = [], 0
    while (at := text.find(head + " {", start)) >= 0:
        depth, end = 0, at
        for end in range(text.index("{", at), len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        out.append(text[at : end + 1])
        start = end + 1
    return out


def _field(block: str, name: str) -> str:
    return re.search(rf"\b{name}: (\S+)", block).group(1).strip('"')


def layer_order(text: str, n: int) -> list[tuple[int, str]]:
    """(layer, kernel name) of the stacked graph's kernels, in file order."""
    kernels = _blocks(text[: text.index("\nsystem {")], "kernels")
    fwd = [_field(b, "name") for b in kernels if "fwd_bwd: FWD" in b]
    bwd = [_field(b, "name") for b in kernels if "fwd_bwd: BWD" in b]
    return [(i, k) for i in range(1, n + 1) for k in fwd] + [
        (i, k) for i in range(n, 0, -1) for k in bwd
    ]


def stacked_text(text: str, n: int) -> str:
    """DFModel's one-layer input ``text`` as an ``n``-layer graph (module docstring)."""
    cut = text.index("\nsystem {")
    kernels = {_field(b, "name"): b for b in _blocks(text[:cut], "kernels")}
    old_id = {name: int(_field(b, "id")) for name, b in kernels.items()}
    new_id = {key: i for i, key in enumerate(layer_order(text, n), 1)}
    by_old = {(layer, old_id[name]): new for (layer, name), new in new_id.items()}
    parts = []
    for (layer, name), new in new_id.items():
        block = kernels[name].replace(f'name: "{name}"', f'name: "{name}_L{layer}"', 1)
        parts.append(re.sub(r"\n  id: \d+\n", f"\n  id: {new}\n", block, count=1))
    edges = [
        (by_old[layer, int(_field(c, "startIdx"))], by_old[layer, int(_field(c, "endIdx"))])
        for layer in range(1, n + 1)
        for c in _blocks(text[:cut], "connections")
    ]
    for i in range(1, n):
        edges.append((new_id[i, "Add_2"], new_id[i + 1, "Add_Prev_Layer"]))
        edges.append((new_id[i + 1, "K_bwd"], new_id[i, "Loss_bwd"]))
    parts += [
        f"connections {{\n  startIdx: {s}\n  endIdx: {e}\n  id: {k}\n}}"
        for k, (s, e) in enumerate(edges, 1)
    ]
    tail = text[cut:].replace(
        f"num_layer: {LAYERS}\n", f"num_layer: {LAYERS}\n\t\tnum_layer_in_graph: {n}\n", 1
    )
    assert tail != text[cut:]
    return "dataflow_graph {\n" + "\n".join(parts) + "\n}" + tail


@pytest.fixture(scope="module")
def stacked(tmp_path_factory):
    """n -> (spec of the n-layer input, DFModel's mapping repeated in every layer)."""
    text = (CASE / "setup.txt").read_text()
    one = load_dfmodel_file(CASE / "setup.txt")
    position = {k.name: i for i, k in enumerate(one.graph.kernels)}
    sharding = logged_sharding()
    out = {}
    for n in (2, 4, 5):
        path = tmp_path_factory.mktemp(f"layers{n}") / "setup.txt"
        path.write_text(stacked_text(text, n))
        # our reading of N stacked layers, not DFModel's pipeline partitioning
        spec = replace_field(load_dfmodel_file(path), "workload.partition_graph", False)
        shard = tuple(sharding[position[name]] for _, name in layer_order(text, n))
        out[n] = spec, Decision(
            shape=(int(logged("TP")), int(logged("PP")), int(logged("DP"))), sharding=shard,
            micro_batch_size=int(logged("micro_batch_size")), num_tile=int(logged("num_tile")),
            config=tuple(range(len(shard))),
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("n", [2, 4, 5])
def test_stacked_input_loads(stacked, n):
    spec, _ = stacked[n]
    assert spec.workload.num_layer_in_graph == n and spec.workload.num_layer == LAYERS
    assert len(spec.graph.kernels) == 41 * n
    assert len(spec.graph.connections) == 53 * n + 2 * (n - 1)
    names = [k.name for k in spec.graph.kernels]
    assert (
        names[:2] == ["Add_Prev_Layer_L1", "LayerNorm_1_L1"]
        and names[-1] == "Q_bwd_weight_update_L1"
    )


def test_link_ends_are_sharded_as_the_closed_forms_assume():
    """DFModel's mapping: Add_2 on M, K_bwd on OUTER (producers), their consumers replicated."""
    one = load_dfmodel_file(CASE / "setup.txt")
    shard = dict(zip((k.name for k in one.graph.kernels), logged_sharding()))
    assert (shard["Add_2"], shard["K_bwd"]) == (Dim.M, Dim.OUTER)
    assert (shard["Add_Prev_Layer"], shard["Loss_bwd"]) == (Dim.NO, Dim.NO)
    assert SHARD == 6291456  # 1536 x 2048 x 2: Add_2 and K_bwd shard one dimension by TP
    assert rel(GATHER_NS, 9175.04) < 1e-12  # 6291456 x 7 / (8 x 600)


@pytest.mark.parametrize("n", [2, 5])
def test_dfmodel_mapping_every_configuration_time(stacked, n):
    spec, decision = stacked[n]
    ev = evaluate(spec, decision)
    assert ev.feasible
    iis = logged_iis()
    one = [k.name for k in load_dfmodel_file(CASE / "setup.txt").graph.kernels]
    for c, (layer, name) in enumerate(layer_order((CASE / "setup.txt").read_text(), n)):
        expected = iis[one.index(name)]
        step, extra = LINKS.get(name, (0, 0.0))
        if step and 1 <= layer + step <= n:
            expected += extra
        assert rel(ev.configs[c].ii_ns, expected) < 1e-6, (c, name, layer)
    assert rel(ev.all_config_ii_ns, n * logged("all_config_II") + (n - 1) * LINK_PAIR_NS) < 1e-6


@pytest.mark.parametrize("n", [2, 5])
def test_dfmodel_mapping_reproduces_the_printed_numbers(stacked, n):
    spec, decision = stacked[n]
    ev = evaluate(spec, decision)
    executions = LAYERS // n // PP
    assert ev.layers_per_stage == executions and n * executions == logged("layer_per_stage")
    assert ev.num_micro_batch == logged("num_micro_batch_per_pipeline")
    assert rel(ev.pipeline_factor, logged("pipeline_factor")) < 1e-9
    assert rel(ev.p2p_ns, logged("ns_per_batch") - logged("C18478")) < 1e-9  # per model layer
    extra = ((n - 1) * LINK_PAIR_NS * executions * logged("num_micro_batch_per_pipeline")
             * logged("pipeline_factor"))  # fmt: skip
    assert rel(ev.final_ns, logged("final_ns") + extra) < 1e-6
    assert rel(ev.utilization, logged("util") * logged("final_ns") / ev.final_ns) < 1e-6
    assert rel(ev.workload_flop, logged("FLOP")) < 1e-12
    assert rel(ev.price.system_cost, logged("total_cost")) < 1e-6
    assert rel(ev.price.system_power, logged("total_power")) < 1e-6


def test_four_layers_make_a_stage_of_twelve_layers(stacked):
    """E = 80 / 4 = 20 executions on PP = 8: ceil(20 / 8) = 3 per stage = 12 layers, where
    DFModel's one-layer run has 10; the FLOP (all 80 layers) and the p2p term stay."""
    spec, decision = stacked[4]
    ev = evaluate(spec, decision)
    assert ev.feasible and ev.layers_per_stage == 3 and logged("layer_per_stage") == 10
    assert rel(ev.workload_flop, logged("FLOP")) < 1e-12
    assert rel(ev.p2p_ns, logged("ns_per_batch") - logged("C18478")) < 1e-9
    assert rel(ev.all_config_ii_ns, 4 * logged("all_config_II") + 3 * LINK_PAIR_NS) < 1e-6
    assert ev.final_ns > logged("final_ns")


@pytest.mark.parametrize("n", [2, 5])
def test_search_within_dfmodel_incumbent_and_bound(stacked, n):
    """DFModel: time limit, incumbent 12.914 s, bound 11.872 s. Ours on the stacked graph:
    feasible, no slower than DFModel's incumbent nor than its mapping repeated, no faster
    than its bound."""
    spec, decision = stacked[n]
    best, bound = logged_status()
    r = search(spec, time_limit_s=10.0)
    assert r.status in (RunStatus.OPTIMAL, RunStatus.FEASIBLE_NOT_PROVEN,
                        RunStatus.STOPPED_BY_LIMIT)  # fmt: skip
    ev = r.evaluation
    assert ev is not None and ev.feasible and ev.decision.shape == (TP, PP, DP)
    assert ev.final_ns <= best * (1 + 1e-9)
    assert ev.final_ns <= evaluate(spec, decision).final_ns * (1 + 1e-9)
    assert ev.final_ns >= bound * (1 - 1e-9)
