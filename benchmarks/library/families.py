"""The instance families of the benchmark library (docs/exact.md, "Benchmark library").

Every instance is one lowered configuration-assignment problem (fixed outer choices): a
dataflow graph from ``dfsearch.kernels.generators`` on a small synthetic system, lowered with
``dfsearch.cost.lower.lower``. An instance is named by its family and a few parameters
(``Entry``); ``build`` turns the parameters into the problem deterministically, so the
manifest stores parameters, never arrays.

Families (``entries()`` lists the grid):

* ``layer``: one GPT layer, forward (18 kernels), forward with 4 experts (23) or forward and
  backward (41);
* ``stacked``: N forward layers or N training layers in one graph (36-1,312 kernels);
* ``whole``: a whole model, embedding + N layers + LM head (forward 220-5,944 kernels,
  training 501-5,913);
* ``dlrm``: DLRM training steps with 4-400 MLP layers (12-1,200 kernels);
* ``hpl``: HPL panel-iteration chains (16-4,096 kernels);
* ``fft``: the two-step FFT (2 kernels: trivial, kept as the forced corner case).

Systems (``SYSTEMS``): ``compute`` (fast DRAM and links, unlimited SRAM: the compute term
binds), ``memory`` (DDR at 100 GB/s and an SRAM of 1.25x the smallest one the contiguous
order DP can map: spills to slow DRAM bind; graphs up to about 400 kernels, as the SRAM
bisection solves each ~25 times; HPL and FFT check no SRAM, there only the DDR is slow) and
``network`` (16 chips on 10 GB/s links: the collectives bind). Models: ``flop`` (compute_util 0.7) and ``cycle`` (the systolic cycle
model, compute_util 0).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import Any

from dfsearch.codes import Dim, Equations, ExecutionStyle, Overlap, Parallelism, Topology
from dfsearch.cost.lower import Outer, Problem, lower
from dfsearch.kernels import generators
from dfsearch.spec import (
    Accelerator,
    Cost,
    DLRMWorkload,
    Execution,
    FFTWorkload,
    HPLWorkload,
    LLMWorkload,
    Memory,
    NetworkDim,
    SearchSettings,
    Spec,
    System,
)

__all__ = ["SYSTEMS", "Entry", "build", "build_unconstrained", "entries", "fingerprint"]


@dataclass(frozen=True)
class SystemKind:
    """One system regime: what binds the configurations' IIs."""

    dram_bw_GBps: float
    link_bw_GBps: float
    num_chip: int
    sram_factor: float | None  #: SRAM = factor x the smallest the order DP maps; None: unlimited


SYSTEMS: dict[str, SystemKind] = {
    "compute": SystemKind(dram_bw_GBps=4000.0, link_bw_GBps=400.0, num_chip=4, sram_factor=None),
    "memory": SystemKind(dram_bw_GBps=100.0, link_bw_GBps=400.0, num_chip=4, sram_factor=1.25),
    "network": SystemKind(dram_bw_GBps=2000.0, link_bw_GBps=10.0, num_chip=16, sram_factor=None),
}

#: evaluations of one order-DP solve of the SRAM bisection (a work budget: deterministic)
_MAPS_BUDGET = 200_000
#: the SRAM of the unlimited systems (bytes)
_NO_LIMIT = 1e15


@dataclass(frozen=True)
class Entry:
    """One library instance: family, graph parameters, model, system and configurations."""

    family: str
    graph: tuple[tuple[str, Any], ...]  #: generator parameters (sorted pairs)
    model: str  #: "flop" or "cycle"
    system: str  #: a key of SYSTEMS
    configs: int  #: num_config of the lowered problem

    @property
    def name(self) -> str:
        g = "-".join(f"{k}{_short(v)}" for k, v in self.graph)
        return f"{self.family}-{g}-{self.model}-{self.system}-c{self.configs}"

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "graph": dict(self.graph), "model": self.model,
                "system": self.system, "configs": self.configs}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entry:
        return cls(d["family"], tuple(sorted(d["graph"].items())), d["model"], d["system"],
                   int(d["configs"]))  # fmt: skip


def _short(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _entry(family: str, model: str, system: str, configs: int, **graph: Any) -> Entry:
    return Entry(family, tuple(sorted(graph.items())), model, system, configs)


# --------------------------------------------------------------------------- the grid
def _layer_entries() -> list[Entry]:
    out = []
    for kind in ("fwd", "moe", "train"):
        for model in ("flop", "cycle"):
            for system in SYSTEMS:
                for configs in (4, 8):
                    out.append(_entry("layer", model, system, configs, kind=kind))
    return out


def _stacked_entries() -> list[Entry]:
    grid = [("fwd", 2, 4), ("fwd", 4, 8), ("fwd", 16, 32), ("fwd", 64, 128),
            ("train", 2, 4), ("train", 8, 16), ("train", 32, 64)]  # fmt: skip
    out = []
    for kind, layers, configs in grid:
        for model, system in _systems_for(layers * 41):
            out.append(_entry("stacked", model, system, configs, kind=kind, layers=layers))
    return out


def _systems_for(kernels: int) -> tuple[tuple[str, str], ...]:
    """(model, system) pairs of a family's graph: the memory-bound system (whose SRAM is
    found by bisection, ~25 order-DP solves) only up to 400 kernels."""
    if kernels <= 400:
        return (("flop", "compute"), ("cycle", "memory"), ("flop", "network"))
    return (("flop", "compute"), ("cycle", "compute"), ("flop", "network"))


def _whole_entries() -> list[Entry]:
    grid = [("fwd", 12, 24), ("fwd", 48, 96), ("fwd", 330, 660),
            ("train", 12, 24), ("train", 48, 96), ("train", 144, 288)]  # fmt: skip
    out = []
    for kind, layers, configs in grid:
        for model, system in (("flop", "compute"), ("cycle", "network")):
            out.append(_entry("whole", model, system, configs, kind=kind, layers=layers))
    return out


def _dlrm_entries() -> list[Entry]:
    out = []
    for mlp, configs in ((2, 4), (4, 6), (8, 8), (32, 16), (200, 64)):
        for model, system in _systems_for(6 * mlp):
            out.append(_entry("dlrm", model, system, configs, mlp=mlp))
    return out


def _hpl_entries() -> list[Entry]:
    out = []
    for iters, configs in ((16, 4), (64, 8), (256, 16), (1024, 32), (4096, 64)):
        for model, system in (("flop", "compute"), ("cycle", "memory"), ("flop", "network")):
            out.append(_entry("hpl", model, system, configs, iterations=iters))
    return out


def _fft_entries() -> list[Entry]:
    out = []
    for length in (4096, 65536, 1048576):
        for configs in (1, 2):
            out.append(_entry("fft", "cycle", "network", configs, length=length))
    return out


def entries() -> list[Entry]:
    """Every library instance, in manifest order."""
    return (_layer_entries() + _stacked_entries() + _whole_entries() + _dlrm_entries()
            + _hpl_entries() + _fft_entries())  # fmt: skip



# --------------------------------------------------------------------------- specs
def _system(kind: SystemKind, *, ring: int, second: int = 0, tp: bool = False) -> System:
    dims = [NetworkDim(topology=Topology.RING, link_bw_GBps=kind.link_bw_GBps, size=ring,
                       parallelism=Parallelism.TP if tp else Parallelism.NONE)]  # fmt: skip
    if second:
        dims.append(NetworkDim(topology=Topology.RING, link_bw_GBps=kind.link_bw_GBps, size=second))
    return System(
        num_chip=kind.num_chip,
        accelerator=Accelerator(cores=64, systolic_width=8, systolic_height=8,
                                sram_bytes=_NO_LIMIT, freq_GHz=1.0),  # fmt: skip
        memory=Memory(dram_bw_GBps=kind.dram_bw_GBps, dram_bytes=0.0),
        network=tuple(dims),
    )


def _execution(model: str, configs: int, word: int, overlap: Overlap) -> Execution:
    return Execution(style=ExecutionStyle.DATAFLOW, num_config=configs, overlap=overlap,
                     compute_util=0.0 if model == "cycle" else 0.7, word_bytes=word,
                     equations=Equations.V1)  # fmt: skip


_LLM = dict(hidden=256, num_head=4, head_dim=64, seq=256, word=2)


def _llm_graph(e: Entry):
    g = dict(e.graph)
    kind, layers = g["kind"], int(g.get("layers", 1))
    ends = e.family == "whole"
    extra: dict[str, Any] = dict(layers=layers)
    if ends:
        extra.update(vocab_size=8192, embedding=True, lm_head=True)
    if kind == "moe":
        extra.update(num_expert=4, top_k=2)
    gen = generators.llm_fwdbwd if kind == "train" else generators.llm_fwd
    return gen(**_LLM, **extra), layers


def _llm_problem(e: Entry) -> Problem:
    from dfsearch.search.sharding import solve_spec_sharding

    graph, layers = _llm_graph(e)
    kind = SYSTEMS[e.system]
    ring = kind.num_chip
    spec = Spec(
        graph=graph,
        system=_system(kind, ring=ring, tp=True),
        cost=Cost(),
        execution=_execution(e.model, e.configs, 2, Overlap.PERFECT),
        workload=LLMWorkload(hidden_dim=256, head_dim=64, num_head=4, seq_len=256,
                             num_layer=layers, num_layer_in_graph=layers, global_batch_size=16,
                             micro_batch_size=1, vocab_size=8192 if e.family == "whole" else None),
        search=SearchSettings(seed=0),
    )
    sharding = solve_spec_sharding(spec, (ring,), 4).sharding
    return lower(spec, Outer((ring,), sharding, 1, 4, e.configs))


def _dlrm_problem(e: Entry) -> Problem:
    mlp = int(dict(e.graph)["mlp"])
    g = generators.dlrm(mlp_dim=128, bottom_num_mlp=mlp, top_num_mlp=mlp, pooled_row=4, row=1000,
                        num_table=8, emb_dim=32, micro_batch_size=64, word=2)  # fmt: skip
    kind = SYSTEMS[e.system]
    spec = Spec(
        graph=g,
        system=_system(kind, ring=4, second=kind.num_chip // 4),
        cost=Cost(),
        execution=_execution(e.model, e.configs, 2, Overlap.PERFECT),
        workload=DLRMWorkload(num_table=8, emb_dim=32, row=1000, global_batch_size=1024),
    )
    shape = (4, kind.num_chip // 4)
    return lower(spec, Outer(shape, tuple(Dim.NO for _ in g.kernels), 1, 1, e.configs))


def _hpl_problem(e: Entry) -> Problem:
    iters = int(dict(e.graph)["iterations"])
    b = 16
    g = generators.hpl(n=iters * b, b=b, iteration=iters, word=8)
    kind = SYSTEMS[e.system]
    spec = Spec(
        graph=g,
        system=_system(kind, ring=4, second=kind.num_chip // 4),
        cost=Cost(),
        execution=_execution(e.model, e.configs, 8, Overlap.NONE),
        workload=HPLWorkload(n=iters * b, b=b),
    )
    shape = (4, kind.num_chip // 4)
    return lower(spec, Outer(shape, tuple(Dim.NO for _ in g.kernels), 1, 1, e.configs))


def _fft_problem(e: Entry) -> Problem:
    length = int(dict(e.graph)["length"])
    g = generators.fft(length=length, r=2, word=8)
    kind = SYSTEMS[e.system]
    spec = Spec(
        graph=g,
        system=_system(kind, ring=kind.num_chip),
        cost=Cost(),
        execution=_execution(e.model, e.configs, 8, Overlap.PERFECT),
        workload=FFTWorkload(length=length),
    )
    return lower(spec, Outer((kind.num_chip,), (Dim.NO, Dim.NO), 1, 1, e.configs))


_BUILDERS = {"layer": _llm_problem, "stacked": _llm_problem, "whole": _llm_problem,
             "dlrm": _dlrm_problem, "hpl": _hpl_problem, "fft": _fft_problem}  # fmt: skip


# --------------------------------------------------------------------------- capacities
def _with_sram(p: Problem, sram: float) -> Problem:
    return dataclasses.replace(p, constants=p.constants._replace(sram_cap=float(sram)))


def _maps(p: Problem) -> bool:
    """Does the contiguous-order DP find a mapping (feasible => truly feasible)?"""
    from dfsearch.search.assign import assign_configs
    from dfsearch.search.strategies.base import control_array

    control = control_array(max_evaluations=_MAPS_BUDGET)
    return assign_configs(p, method="order-dp", control=control).config is not None


def _tight_sram(p: Problem, factor: float) -> Problem:
    """SRAM = factor x the smallest capacity (to 2 %) at which the order DP maps ``p``:
    a reproducible "small SRAM" (the true minimum can be lower)."""
    hi = 1e13
    if not _maps(_with_sram(p, hi)) or _maps(_with_sram(p, 1.0)):
        return p  # infeasible anyway, or the workload checks no SRAM (HPL, FFT)
    lo = 1.0
    while hi - lo > 0.02 * hi:
        mid = math.sqrt(lo * hi) if hi > 1e3 * lo else (lo + hi) / 2
        if _maps(_with_sram(p, mid)):
            hi = mid
        else:
            lo = mid
    return _with_sram(p, math.floor(hi * factor))


def build_unconstrained(e: Entry) -> Problem:
    """The lowered problem of one entry before its SRAM is set (cheap: no search)."""
    return _BUILDERS[e.family](e)


def build(e: Entry) -> Problem:
    """The lowered problem of one entry (deterministic)."""
    p = build_unconstrained(e)
    factor = SYSTEMS[e.system].sram_factor
    if factor is not None:
        p = _tight_sram(p, factor)
    return p


def fingerprint(p: Problem) -> str:
    """A short hash of the lowered arrays: a record is stale when the problem it was made
    for lowers differently today (a model change)."""
    h = hashlib.sha256()
    for table in (p.kernels, p.edges, p.constants):
        for v in table:
            h.update(repr(v.tobytes() if hasattr(v, "tobytes") else v).encode())
    return h.hexdigest()[:16]
