"""Training schedule choices of the realistic model (docs/model.md, "Training schedule
choices"): interleaved 1F1B, ZeRO stages, tree vs ring all-reduce, and the search over
recompute / sequence parallelism / ZeRO stage / interleave as outer choices."""

from __future__ import annotations

from pathlib import Path

import pytest

import dfsearch
from dfsearch.codes import Collective, Recompute
from dfsearch.errors import InfeasibleError, SpecError
from dfsearch.loader import load_toml_spec
from dfsearch.system.alpha_beta import AlphaBeta, tree_crossover_bytes, tree_steps

ROOT = Path(__file__).parent.parent

#: GPT layer, h = 256, 8 layers, on TP 1 x PP 2 x DP 2 A100s (the realistic model)
SMALL = """
[workload]
kind = "llm"
hidden_dim = 256
num_head = 4
head_dim = 64
num_layer = 8
seq_len = 128
global_batch_size = 32
micro_batch_size = 1
[graph]
generator = "llm"
[system]
preset = "a100"
num_chip = 4
{memory}
[[system.network]]
fabric = "nvlink"
size = 1
parallelism = "tp"
[[system.network]]
fabric = "infiniband"
size = 2
parallelism = "pp"
[[system.network]]
fabric = "infiniband"
size = 2
parallelism = "dp"
[search]
seed = 0
[training]
{training}
"""
FIXED = 'recompute = "none"\nsequence_parallel = false\nzero_stage = 0\ninterleave = 1\n'
H, LPS, DP = 256, 4, 2
PARAMS = LPS * 12 * H * H  # per chip of a stage: QKV, projection and the 4h MLP, 12 h^2


def _spec(training: str = FIXED, memory: str = ""):
    return load_toml_spec(SMALL.format(training=training, memory=memory), file="s.toml",
                          base_dir=ROOT)


def _fixed(**kw) -> str:
    vals = {"recompute": '"none"', "sequence_parallel": "false", "zero_stage": "0",
            "interleave": "1", **kw}
    return "".join(f"{k} = {v}\n" for k, v in vals.items())


def test_interleaving_divides_the_bubble_and_multiplies_the_stage_crossings():
    """Realistic 1F1B: pipeline factor 1 + (PP - 1) / (v nmb), nmb = 32 / DP = 16; a
    micro-batch crosses v PP - 1 boundaries: the p2p time grows by (2 v - 1) / (2 - 1)."""
    one = dfsearch.run(_spec(_fixed(interleave=1))).evaluation
    two = dfsearch.run(_spec(_fixed(interleave=2))).evaluation
    assert one.pipeline_factor == pytest.approx(1 + 1 / 16, rel=1e-12)
    assert two.pipeline_factor == pytest.approx(1 + 1 / 32, rel=1e-12)
    assert two.p2p_ns == pytest.approx(3 * one.p2p_ns, rel=1e-12)
    # kept activations of the first stage: x (1 + (PP - 1) / (PP v)) = 1.25
    assert two.dram_use.activations == pytest.approx(1.25 * one.dram_use.activations, rel=1e-12)


def test_an_interleave_the_layers_per_stage_do_not_divide_by_is_infeasible():
    with pytest.raises(InfeasibleError) as e:
        dfsearch.run(_spec(_fixed(interleave=3)))
    v = e.value.result.violations[0]
    assert v.constraint == "schedule"
    assert "training.interleave" in v.message() or "interleave" in v.message()


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_memory_per_gpu(stage: int):
    """P = 4 layers x 12 h^2 parameters per chip: weights 2 P (ZeRO-3: 2 P / DP + one
    layer's 2 x 12 h^2 gathered), gradients 4 P (/ DP from stage 2), optimizer 12 P
    (/ DP from stage 1)."""
    use = dfsearch.run(_spec(_fixed(zero_stage=stage))).evaluation.dram_use
    layer = 12 * H * H * 2
    weights = 2 * PARAMS / DP + layer if stage >= 3 else 2 * PARAMS
    assert use.weights == pytest.approx(weights, rel=1e-12)
    assert use.gradients == pytest.approx(4 * PARAMS / (DP if stage >= 2 else 1), rel=1e-12)
    assert use.optimizer == pytest.approx(12 * PARAMS / (DP if stage >= 1 else 1), rel=1e-12)


def test_higher_zero_stages_add_data_parallel_traffic():
    """Stage 1 = the all-reduce's ring volume as RS + AG; 2 and 3 add per micro-batch traffic,
    so no stage is faster than the one below it."""
    times = [dfsearch.run(_spec(_fixed(zero_stage=z))).evaluation.final_s for z in range(4)]
    assert times == sorted(times)
    assert times[3] > times[1]


def test_tree_all_reduce_below_the_crossover_ring_above():
    """p = 8, alpha = 1 us, busbw = 0.8 x 300 GB/s: the tree (6 steps, volume 2) wins below
    alpha busbw p ((p - 1) - log2 p) = 1000 x 240 x 8 x 4 = 7.68 MB per chip."""
    ab = AlphaBeta(bus_efficiency=0.8, step_ns=1000.0)
    assert tree_steps(8) == 6 and tree_steps(2) == 2 and tree_steps(5) == 6
    cross = tree_crossover_bytes(8, 1000.0, 240.0)
    assert cross == pytest.approx(7.68e6)

    def t(n: float, **kw) -> float:
        return ab.time_ns(Collective.ALL_REDUCE, n, degree=8, link_bw_GBps=300.0, **kw)

    below, above = 0.9 * cross, 1.1 * cross
    assert t(below) == pytest.approx(6000 + 2 * below / 240, rel=1e-12)
    assert t(above) == pytest.approx(14000 + 1.75 * above / 240, rel=1e-12)
    assert t(below, ring_only=True) == pytest.approx(14000 + 1.75 * below / 240, rel=1e-12)
    assert tree_crossover_bytes(2, 1000.0, 240.0) == 0.0  # the ring always wins on 2 chips
    assert ab.time_ns(Collective.ALL_GATHER, below, degree=8, link_bw_GBps=300.0) == (
        pytest.approx(7000 + 0.875 * below / 240, rel=1e-12))  # no tree form


def test_auto_and_left_out_choices_are_searched_explicit_ones_fixed():
    s = _spec('recompute = "auto"\nzero_stage = 2\n')
    assert s.training.searched == ("recompute", "sequence_parallel", "interleave")
    assert s.training.zero_stage == 2
    r = dfsearch.run(s)
    assert r.spec.training.zero_stage == 2
    assert "training choices searched" in r.search.notes[-1]


def test_the_search_picks_no_recompute_when_memory_allows_and_full_when_not():
    free = dfsearch.run(_spec(_fixed(recompute='"auto"')))
    assert free.spec.training.recompute is Recompute.NONE
    full = dfsearch.run(_spec(_fixed(recompute='"full"'))).evaluation.dram_bytes
    tight = f"[system.memory]\ndram_bytes = {full * 1.0001:.0f}\n"
    # the [system.memory] table must come after [system]'s own keys
    chosen = dfsearch.run(_spec(_fixed(recompute='"auto"'), memory=tight))
    assert free.evaluation.dram_bytes > full * 1.0001  # none does not fit there
    assert chosen.spec.training.recompute is Recompute.FULL
    assert chosen.evaluation.final_s > free.evaluation.final_s


def test_no_candidate_fits_names_the_binding_constraint():
    tiny = "[system.memory]\ndram_bytes = 1000000\n"
    with pytest.raises(InfeasibleError) as e:
        dfsearch.run(_spec('recompute = "auto"\nzero_stage = "auto"\n', memory=tiny))
    r = e.value.result
    assert r.spec.training.recompute is Recompute.FULL and r.spec.training.zero_stage == 3
    assert r.violations and r.violations[0].constraint.startswith("dram")


def test_the_choice_search_is_deterministic():
    a = dfsearch.run(_spec(""))
    b = dfsearch.run(_spec(""))
    assert a.evaluation.final_s == b.evaluation.final_s
    assert a.spec.training == b.spec.training


def test_bad_zero_stage_is_a_spec_error():
    with pytest.raises(SpecError, match=r"training.zero_stage.*Got 5"):
        _spec("zero_stage = 5\n")


def test_dfmodel_equations_search_nothing_left_out():
    """Left-out choices are searched under the realistic model only; DFModel's equations
    keep the defaults (an explicit "auto" is still searched)."""
    text = SMALL.format(training="", memory="").replace("seed = 0", "seed = 0\n[execution]\n"
                                                         'model = "dfmodel"')
    spec = load_toml_spec(text, file="s.toml", base_dir=ROOT)
    assert spec.training.searched == ()
    spec = load_toml_spec(text + 'interleave = "auto"\n', file="s.toml", base_dir=ROOT)
    assert spec.training.searched == ("interleave",)


def _net_once(training: str, mbs: int = 1):
    """(kernels, per-kernel once-per-execution network ns, the spec) of SMALL lowered at its
    searched decision with micro-batch ``mbs``."""
    from dfsearch.cost.lower import Outer, lower

    spec = _spec(training)
    spec = dfsearch.replace(spec, "workload.micro_batch_size", mbs)
    d = dfsearch.run(spec).evaluation.decision
    p = lower(spec, Outer(d.shape, d.sharding, d.micro_batch_size, d.num_tile, d.num_config,
                          d.placement))
    return spec.graph.kernels, p.kernels.net_once_ns, spec


def test_zero3_traffic_is_spread_over_the_passes_it_overlaps():
    """Realistic ZeRO-3: per weight and micro-batch of m sequences one all-gather rides on
    the forward kernels and an all-gather + a reduce-scatter on the backward kernels, each
    kernel carrying its share of its pass's FLOP; per sequence, / m. DP = 2 on 25 GB/s
    InfiniBand links at 0.8: an all-gather of b bytes is 1 us + b / 2 / 20 GB/s."""
    from dfsearch.codes import Phase

    for m in (1, 2):
        kernels, once, spec = _net_once(_fixed(zero_stage=3), mbs=m)
        eff = spec.system.network[2].bus_efficiency or spec.execution.bus_efficiency
        busbw = eff * spec.system.network[2].link_bw_GBps
        weights = [k for k in kernels if k.communication is Collective.ALL_REDUCE_PERIODIC]
        ag = sum(1000.0 + (k.rows * k.n * 2) * 0.5 / busbw for k in weights)
        fwd = [i for i, k in enumerate(kernels) if k.phase is Phase.FWD and k.flop > 0]
        bwd = [i for i, k in enumerate(kernels) if k.phase is Phase.BWD and k.flop > 0]
        assert sum(once[i] for i in fwd) == pytest.approx(ag / m, rel=1e-9)
        assert sum(once[i] for i in bwd) == pytest.approx(2 * ag / m, rel=1e-9)
        big = max(fwd, key=lambda i: kernels[i].flop)
        share = kernels[big].flop / sum(kernels[i].flop for i in fwd)
        assert once[big] == pytest.approx(share * ag / m, rel=1e-9)


def test_a_mapping_file_carries_the_chosen_training_choices(tmp_path):
    """``run --mapping-out`` records the choices the search made; ``eval`` applies them and
    reproduces the run's time."""
    from typer.testing import CliRunner

    from dfsearch.cli import app

    spec_file = tmp_path / "s.toml"
    spec_file.write_text(SMALL.format(training='recompute = "auto"\ninterleave = "auto"\n',
                                      memory=""))
    out = tmp_path / "m.toml"
    runner = CliRunner()
    r = runner.invoke(app, ["run", str(spec_file), "-q", "--mapping-out", str(out),
                            "--json", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "[training]" in text and "interleave = 2" in text
    e = runner.invoke(app, ["eval", str(spec_file), "--mapping", str(out),
                            "--json", str(tmp_path / "e.json")])
    assert e.exit_code == 0, e.output
    import json

    ran = json.loads((tmp_path / "r.json").read_text())
    got = json.loads((tmp_path / "e.json").read_text())
    assert got["final_s"] == ran["final_s"]
    assert ran["training_choices"]["interleave"] == 2
    report = runner.invoke(app, ["eval", str(spec_file), "--mapping", str(out)])
    assert "interleave 2" in report.output  # the memory line names the applied choice


def test_optimal_only_when_every_candidate_is_proven():
    """Searched to the end, every candidate is proven (or bounded out by a proven one) and
    the run is optimal with its bound at its value; when one candidate that was searched is
    not proven, neither is the run."""
    from dataclasses import replace

    from dfsearch.codes import RunStatus
    from dfsearch.plan import run as plan_run
    from dfsearch.plan.training_choices import run_choices

    spec = _spec('recompute = "auto"\nzero_stage = "auto"\ninterleave = 1\n'
                 'sequence_parallel = false\n', memory="[system.memory]\ndram_bytes = 1\n")
    spec = dfsearch.replace(spec, "system.memory.dram_bytes", 0)  # unlimited
    full = plan_run(spec)
    assert full.status is RunStatus.OPTIMAL
    assert full.search.lower_bound_s == pytest.approx(full.evaluation.final_s, rel=1e-9)
    seen = []

    def unproven_first(one):
        r = plan_run(replace(one, training=replace(one.training, searched=())))
        seen.append((one.training.recompute, one.training.zero_stage))
        if len(seen) == 1:  # the first candidate searched: not proven
            r = replace(r, search=replace(r.search, status=RunStatus.FEASIBLE_NOT_PROVEN))
        return r

    cut = run_choices(spec, unproven_first)
    assert seen == [(Recompute.NONE, 0)]  # it bounds every other candidate out
    assert cut.status is RunStatus.FEASIBLE_NOT_PROVEN
    assert "not proven over every candidate" in cut.search.notes[-1]
