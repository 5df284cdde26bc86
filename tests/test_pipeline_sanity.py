"""LLM pipeline and shape sanity (issue 11): the tile size is a lower bound, pipeline p2p only
with a pipeline, no pipeline deeper than the model, the micro-batch size searched, mapping
shapes that agree with the spec's network.

Expected values are closed forms (DFModel's rule tile_size x T >= seq_len, the p2p formula
2 x hidden x seq x word x layers / bandwidth, the ordered factorisations with PP <= layers) or
brute force over the outer choice in question, each solved exactly.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

import dfsearch
from dfsearch.api import load as api_load
from dfsearch.codes import Parallelism, RunStatus, Status, Topology
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import evaluate, evaluate_problem, outer_status
from dfsearch.decision import Decision
from dfsearch.errors import SpecError
from dfsearch.loader import load_toml_spec, replace_field
from dfsearch.mapping import load_mapping
from dfsearch.quirks import Quirks
from dfsearch.search import outer as outer_mod
from dfsearch.search.assign import assign_configs
from dfsearch.search.engine import search
from dfsearch.search.sharding import solve_spec_sharding
from dfsearch.spec import Memory, NetworkDim

from specs import random_spec

EXAMPLES = Path(dfsearch.__file__).parent / "examples"
GPT15 = EXAMPLES / "gpt3_1.5B_a100x4.toml"


def small_llm(net: str, *, num_chip: int, num_layer: int = 4, batch: int = 8, mbs: int = 0,
              tile_size: int = 0, extra: str = "") -> dfsearch.spec.Spec:  # fmt: skip
    """A small LLM training layer (the generator's graph) on ``num_chip`` chips; ``net`` is
    the ``[[system.network]]`` tables."""
    text = f"""
[workload]
kind = "llm"
hidden_dim = 64
num_head = 4
head_dim = 16
seq_len = 64
num_layer = {num_layer}
global_batch_size = {batch}
micro_batch_size = {mbs}
tile_size = {tile_size}

[graph]
generator = "llm"

[system]
num_chip = {num_chip}

[system.accelerator]
cores = 64
systolic_width = 8
systolic_height = 8
sram_bytes = 4e6
freq_GHz = 1.0

[system.memory]
dram_bw_GBps = 100.0
{extra}
{net}

[execution]
num_config = 2
word_bytes = 2
"""
    return load_toml_spec(text, file="<small_llm>", base_dir=Path("."))


def gpt15():
    """The GPT-3 1.5B example: 41 kernels on a 4-chip TP ring, seq_len 1024, 24 layers."""
    return dfsearch.load(GPT15)


def ring(size: int, par: str, bw: float = 50.0) -> str:
    return (f'[[system.network]]\ntopology = "ring"\nsize = {size}\nlink_bw_GBps = {bw}\n'
            f'parallelism = "{par}"\n')  # fmt: skip


def solve_exactly(spec, shape, t, mbs, c):
    """The exact optimum (final_ns, evaluation) of one outer choice, or (inf, None)."""
    sharding = solve_spec_sharding(spec, shape, t).sharding
    outer = Outer(shape, sharding, mbs, t, c)
    if outer_status(spec, outer)[0] is not Status.OK:
        return math.inf, None
    problem = lower(spec, outer)
    a = assign_configs(problem)
    assert a.exhaustive
    if a.config is None:
        return math.inf, None
    d = Decision(shape=shape, sharding=sharding, micro_batch_size=mbs, num_tile=t,
                 config=a.config)  # fmt: skip
    ev = evaluate_problem(spec, problem, d)
    return (ev.final_ns, ev) if ev.feasible else (math.inf, None)


# --------------------------------------------------------------------------- 1. tile size
@pytest.mark.parametrize(("seq", "tile_size"), [(64, 0), (64, 1), (64, 20), (64, 64), (64, 1000),
                                                (1024, 1024), (1000, 3), (97, 10)])  # fmt: skip
def test_tile_size_is_a_lower_bound_on_the_tile_count(seq, tile_size):
    """Candidates: the divisors of seq_len with tile_size x T >= seq_len, plus
    ceil(seq_len / tile_size) when it is not a divisor; every divisor without a tile size."""
    spec = gpt15()
    spec = replace(spec, workload=replace(spec.workload, seq_len=seq, tile_size=tile_size))
    divs = [d for d in range(1, seq + 1) if seq % d == 0]
    if tile_size == 0:
        expected = divs
    else:
        fewest = -(-seq // tile_size)
        expected = sorted({fewest} | {d for d in divs if tile_size * d >= seq})
        assert all(tile_size * t >= seq for t in expected)
    assert outer_mod.tile_counts(spec) == expected


def test_a_tile_size_no_longer_pins_the_tile_count():
    """tile_size = seq_len used to force one tile, which does not fit the SRAM; as a lower
    bound it leaves the search every tile count, and the answer is the free search's."""
    spec = replace_field(gpt15(), "workload.tile_size", 1024)
    r = search(spec)
    assert r.status is RunStatus.OPTIMAL
    t = r.evaluation.decision.num_tile
    assert spec.workload.tile_size * t >= spec.workload.seq_len
    free = search(replace_field(gpt15(), "workload.tile_size", 0))
    assert r.evaluation.final_ns == pytest.approx(free.evaluation.final_ns, rel=1e-12)


def test_tile_size_search_agrees_with_brute_force_over_the_tile_count():
    """Small case (cycle model, T = 1 does not fit the SRAM, more tiles cost cycles): every T
    from 1 to seq_len solved exactly; with a tile size the search finds the best T allowed by
    the bound and proves it, never a better T below the bound."""
    base = random_spec(1, 6, num_config=2, cycle=True, sram=5e4)
    value = {t: solve_exactly(base, (4,), t, 1, 2)[0] for t in range(1, 65)}
    for tile_size in (5, 7, 33):
        spec = replace(base, workload=replace(base.workload, tile_size=tile_size))
        fewest = -(-64 // tile_size)
        allowed = [t for t in range(fewest, 65) if 64 % t == 0 or t == fewest]
        assert outer_mod.tile_counts(spec) == allowed
        r = search(spec)
        best = min(value[t] for t in allowed)
        assert r.status is RunStatus.OPTIMAL
        assert r.evaluation.final_ns == pytest.approx(best, rel=1e-12)
        assert value[r.evaluation.decision.num_tile] == pytest.approx(best, rel=1e-12)
        assert tile_size * r.evaluation.decision.num_tile >= 64
        if tile_size < 10:  # the bound binds: fewer tiles would be faster
            assert min(value.values()) < best


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(text)
    return path


def test_mapping_num_tile_below_the_tile_size_bound_is_an_error(tmp_path):
    spec = replace_field(gpt15(), "workload.tile_size", 100)  # ceil(1024 / 100) = 11
    sharded = "[config]\n" + "".join(f'"{k.name}" = {0 if i < 18 else 1}\n'
                                     for i, k in enumerate(spec.graph.kernels))  # fmt: skip
    with pytest.raises(SpecError) as err:
        load_mapping(_write(tmp_path, f"shape = [4]\nnum_tile = 8\n{sharded}"), spec)
    assert [i.path for i in err.value.issues] == ["num_tile"]
    msg = str(err.value)
    assert "ceil(1024 / 100) = 11" in msg and "Got 8 instead" in msg and "tile_size" in msg
    d = load_mapping(_write(tmp_path, f"shape = [4]\nnum_tile = 11\n{sharded}"), spec)
    assert d.num_tile == 11
    assert (
        load_mapping(_write(tmp_path, f"shape = [4]\nnum_tile = 16\n{sharded}"), spec).num_tile
        == 16
    )


# --------------------------------------------------------------------------- 2. p2p
def _pp1_spec(pp_size: int = 1):
    """GPT-3 1.5B on 4 chips as TP 4 x PP ``pp_size`` (a 2-D torus, r_r)."""
    spec = gpt15()
    net = (
        replace(spec.system.network[0], size=4),
        NetworkDim(
            topology=Topology.RING, size=pp_size, link_bw_GBps=25.0, parallelism=Parallelism.PP
        ),  # fmt: skip
    )
    system = replace(spec.system, num_chip=4 * pp_size, network=net)
    cost = replace(spec.cost, link_power_J_per_GB=(0.0104, 0.0104))
    return api_load(replace(spec, system=system, cost=cost))


def _decision(spec, shape):
    r = search(spec)
    d = r.evaluation.decision
    assert d.shape == shape
    return d


def test_no_pipeline_p2p_without_a_pipeline():
    """PP = 1: nothing is sent between stages, p2p = 0; the quirk p2p_without_pipeline (DFModel)
    charges 2 x hidden x seq x word x layers / link bandwidth, outside the overlap."""
    spec = _pp1_spec(1)
    d = _decision(spec, (4, 1))
    fixed = evaluate(spec, d)
    dfm = evaluate(spec, d, quirks=Quirks(p2p_without_pipeline=True))
    closed = 2 * 2048 * 1024 * 2 * 24 / 25.0  # ns: 8.05 ms
    assert fixed.p2p_ns == 0.0
    assert dfm.p2p_ns == pytest.approx(closed, rel=1e-15)
    assert dfm.final_ns - fixed.final_ns == pytest.approx(closed, rel=1e-9)
    assert Quirks.dfmodel().p2p_without_pipeline and not Quirks.textbook().p2p_without_pipeline
    assert not Quirks().p2p_without_pipeline  # fixed by default


def test_pipeline_p2p_is_unchanged_with_a_pipeline():
    spec = _pp1_spec(2)
    d = Decision(shape=(4, 2), sharding=_decision(_pp1_spec(1), (4, 1)).sharding,
                 micro_batch_size=1, num_tile=8, config=(0,) * 18 + (1,) * 23)  # fmt: skip
    closed = 2 * 2048 * 1024 * 2 * 24 / 25.0
    for q in (Quirks(), Quirks.dfmodel()):
        assert evaluate(spec, d, quirks=q).p2p_ns == pytest.approx(closed, rel=1e-15)


def test_the_reference_twin_agrees_on_p2p():
    from dfsearch.cost.reference import reference_evaluate

    spec = _pp1_spec(1)
    d = _decision(spec, (4, 1))
    assert reference_evaluate(spec, d).p2p_ns == 0.0
    q = Quirks(p2p_without_pipeline=True)
    assert reference_evaluate(spec, d, quirks=q).p2p_ns == pytest.approx(
        evaluate(spec, d, quirks=q).p2p_ns
    )


# --------------------------------------------------------------------------- 3. PP > layers
def test_a_fixed_pipeline_deeper_than_the_model_is_rejected():
    spec = dfsearch.load(EXAMPLES / "gpt3_1T_sn30.toml")  # TP 8 x PP 128, 128 layers
    assert replace_field(spec, "workload.num_layer", 128).workload.num_layer == 128
    with pytest.raises(SpecError) as err:
        replace_field(spec, "workload.num_layer", 100)
    assert [i.path for i in err.value.issues] == ["system.network[1].size"]
    msg = str(err.value)
    assert "workload.num_layer = 100" in msg and "Got 128 instead" in msg and "pipeline" in msg


def test_a_pipeline_implied_by_the_only_free_size_is_rejected():
    # 1-D pp network: PP = num_chip
    with pytest.raises(SpecError) as err:
        small_llm(ring(0, "pp"), num_chip=8, num_layer=4)
    assert [i.path for i in err.value.issues] == ["system.network[0].size"]
    assert "1-dimensional network spans system.num_chip = 8 chips" in str(err.value)
    assert "PP = 8" in str(err.value)
    # TP fixed to 2, PP the only free size: PP = 16 / 2 = 8 > 4 layers
    with pytest.raises(SpecError) as err:
        small_llm(ring(2, "tp") + ring(0, "pp"), num_chip=16, num_layer=4)
    assert [i.path for i in err.value.issues] == ["system.network[1].size"]
    assert "16 / 2 = 8 chips" in str(err.value)
    # fine: PP = 4 layers, or another free size
    small_llm(ring(4, "tp") + ring(0, "pp"), num_chip=16, num_layer=4)
    small_llm(ring(0, "tp") + ring(0, "pp"), num_chip=16, num_layer=4)


def test_free_shapes_never_have_more_stages_than_layers():
    """(tp, pp) on 16 chips with 2 layers: the ordered factorisations with pp <= 2."""
    spec = small_llm(ring(0, "tp") + ring(0, "pp"), num_chip=16, num_layer=2)
    assert outer_mod.shapes(spec) == [(8, 2), (16, 1)]
    spec3 = small_llm(ring(0, "tp") + ring(0, "pp") + ring(0, "dp"), num_chip=8, num_layer=2,
                      batch=8)  # fmt: skip
    expected = [(t, p, d) for t in (1, 2, 4, 8) for p in (1, 2, 4, 8) for d in (1, 2, 4, 8)
                if t * p * d == 8 and p <= 2]  # fmt: skip
    assert outer_mod.shapes(spec3) == sorted(expected)
    r = search(spec)
    assert r.evaluation.pp <= 2 and r.status is RunStatus.OPTIMAL


# --------------------------------------------------------------------------- 4. micro-batch
def test_micro_batch_candidates():
    spec = small_llm(ring(0, "tp") + ring(0, "dp"), num_chip=4, batch=12)
    assert spec.workload.micro_batch_size == 0
    model = dfsearch.workloads.model_of(spec.workload)
    assert model.micro_batch_sizes(spec, 1) == [1, 2, 3, 4, 6, 12]
    assert model.micro_batch_sizes(spec, 2) == [1, 2, 3, 6]
    assert model.micro_batch_sizes(spec, 8) == [1]  # 12 % 8: outer_status reports it
    # no faster second DRAM tier: 1 dominates, it alone is solved
    assert outer_mod.micro_batch_sizes(spec, (2, 2)) == [1]
    pinned = replace_field(spec, "workload.micro_batch_size", 3)
    assert outer_mod.micro_batch_sizes(pinned, (2, 2)) == [3]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_micro_batch_one_wins_without_a_faster_dram_tier(seed):
    """The dominance argument (docs/model.md, "Micro-batch size"): each candidate m solved
    exactly; none beats m = 1, and the search (which solves m = 1 only) is optimal over them.
    TP x PP x DP with a gradient all-reduce, a bubble and a finite DRAM."""
    net = ring(0, "tp") + ring(2, "pp") + ring(0, "dp", bw=10.0 * (seed + 1))
    extra = [
        "",
        "dram_bytes = 2e6",
        "second_dram_bw_GBps = 50.0\nsecond_dram_bytes = 1e9\ndram_bytes = 1e6",
    ][seed]
    spec = small_llm(net, num_chip=8, num_layer=4, batch=8, extra=extra)
    r = search(spec)
    best, best_m = math.inf, None
    for shape in outer_mod.shapes(spec):
        dp = shape[2]
        for m in dfsearch.workloads.model_of(spec.workload).micro_batch_sizes(spec, dp):
            for t in outer_mod.tile_counts(spec):
                value = solve_exactly(spec, shape, t, m, 2)[0]
                if value < best * (1 - 1e-12):
                    best, best_m = value, m
    assert best_m == 1
    assert r.evaluation.final_ns == pytest.approx(best, rel=1e-12)
    assert r.evaluation.decision.micro_batch_size == 1


def _faster_tier_spec(seed: int):
    """One configuration per kernel (a forced assignment) and a second DRAM tier 100 times
    faster than the first, whose capacity the footprint of micro-batch 1 fills exactly: every
    larger micro-batch overflows into the faster blend."""
    spec = random_spec(seed, 6, num_config=6)
    g = spec.graph
    spec = replace(
        spec, graph=replace(g, kernels=tuple(replace(k, memory_bytes=1e5) for k in g.kernels))
    )
    _, ev = solve_exactly(spec, (4,), 4, 1, 6)
    mem = Memory(dram_bw_GBps=10.0, dram_bytes=ev.dram_bytes, second_dram_bw_GBps=1000.0,
                 second_dram_bytes=1e9)  # fmt: skip
    return replace(spec, system=replace(spec.system, memory=mem))


@pytest.mark.parametrize("seed", range(3))
def test_micro_batch_is_searched_when_a_faster_tier_breaks_the_dominance(seed):
    """Brute force over the micro-batch sizes (divisors of 8): the search's answer is the best
    of them, here a micro-batch of 2 or more, and it is proven."""
    spec = _faster_tier_spec(seed)
    model = dfsearch.workloads.model_of(spec.workload)
    assert not model.smallest_micro_batch_wins(spec)
    assert outer_mod.micro_batch_sizes(spec, (4,)) == [1, 2, 4, 8]
    value = {m: min(solve_exactly(spec, (4,), t, m, 6)[0] for t in outer_mod.tile_counts(spec))
             for m in (1, 2, 4, 8)}  # fmt: skip
    best = min(value.values())
    assert best < value[1]
    r = search(spec)
    assert r.status is RunStatus.OPTIMAL
    assert r.evaluation.final_ns == pytest.approx(best, rel=1e-12)
    assert value[r.evaluation.decision.micro_batch_size] == pytest.approx(best, rel=1e-12)
    assert r.search.candidates == len(outer_mod.tile_counts(spec)) * 4  # x one count
    if seed == 0:  # the sampler draws the micro-batch size too (a small space: all of it)
        sampled = search(replace(spec, search=replace(spec.search, strategy="optuna")))
        assert sampled.evaluation.final_ns == pytest.approx(best, rel=1e-12)


# --------------------------------------------------------------------------- 5. mapping shape
def test_mapping_shape_must_match_fixed_sizes_and_the_chip_count(tmp_path):
    spec = small_llm(ring(0, "tp") + ring(2, "pp"), num_chip=8, num_layer=4)
    cfg = "[config]\n" + "".join(f'"{k.name}" = {0 if i < 18 else 1}\n'
                                 for i, k in enumerate(spec.graph.kernels))  # fmt: skip
    ok = load_mapping(_write(tmp_path, f"shape = [4, 2]\nnum_tile = 4\n{cfg}"), spec)
    assert ok.shape == (4, 2)
    with pytest.raises(SpecError) as err:
        load_mapping(_write(tmp_path, f"shape = [2, 4]\nnum_tile = 4\n{cfg}"), spec)
    assert [i.path for i in err.value.issues] == ["shape[1]"]
    assert "must be 2, the size system.network[1].size fixes. Got 4 instead." in str(err.value)
    with pytest.raises(SpecError) as err:
        load_mapping(_write(tmp_path, f"shape = [2, 2]\nnum_tile = 4\n{cfg}"), spec)
    assert [i.path for i in err.value.issues] == ["shape"]
    assert "= 8. Got 2 * 2 = 4 instead." in str(err.value)
