"""Evaluate a complete decision: lower, call the jitted evaluator, wrap the numbers.

``evaluate(spec, decision)`` is what reports and tests use; searches call the jitted batch
evaluator directly through ``Evaluator``, which keeps the lowered arrays for one set of
outer choices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dfsearch.codes import MemoryModel, Status
from dfsearch.cost.layout import NUM_CFG, NUM_RES, ConfigCol, ResultSlot
from dfsearch.cost.lower import Outer, Problem, effective_num_config, lower
from dfsearch.cost.price import Price, price
from dfsearch.cost.training import DramUse
from dfsearch.decision import Decision
from dfsearch.quirks import Quirks
from dfsearch.spec import Spec
from dfsearch.workloads import memory_model, model_of
from dfsearch.workloads.base import ServingStep

__all__ = ["ConfigTimes", "Evaluation", "Evaluator", "Outputs", "evaluate", "outer_status"]


@dataclass(frozen=True, slots=True)
class ConfigTimes:
    """One configuration of a mapping: its kernels and times (ns), as DFModel logs them."""

    kernels: tuple[str, ...]
    compute_ns: float
    memory_ns: float
    network_ns: float
    ii_ns: float
    sram_bytes: float
    num_tile: int

    @property
    def bottleneck(self) -> str:
        parts = {"compute": self.compute_ns, "memory": self.memory_ns, "network": self.network_ns}
        return max(parts, key=parts.__getitem__) if self.ii_ns > 0 else "-"


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Everything the model says about one decision: times, statistics, cost and power."""

    decision: Decision
    status: Status
    violation: float
    final_ns: float
    ns_per_batch: float
    all_config_ii_ns: float
    p2p_ns: float
    dram_bytes: float
    dram_bw_GBps: float
    configs: tuple[ConfigTimes, ...]
    par_lane: tuple[int, ...]
    par_stage: tuple[int, ...]
    weight_tiling: tuple[int, ...]
    workload_flop: float
    peak_gflops: float
    num_chip: int
    tp: int
    pp: int
    dp: int
    num_micro_batch: int
    layers_per_stage: int
    pipeline_factor: float
    price: Price
    shard_dims: tuple[tuple[int, int, int], ...]
    #: DRAM per chip by purpose (the working set is ``dram_bytes - dram_use.fixed``)
    dram_use: DramUse = DramUse()
    memory_model: MemoryModel = MemoryModel.DFMODEL  #: what ``dram_bytes`` counts
    step: ServingStep | None = None  #: the serving step (``llm_serving``), else None
    #: DFModel's latency of one inference pass through every layer (``llm`` inference
    #: graphs, feasible): layers per stage x PP x all-config II + the pipeline hops
    final_latency_ns: float | None = None

    @property
    def feasible(self) -> bool:
        return self.status is Status.OK

    @property
    def final_s(self) -> float:
        return self.final_ns / 1e9

    @property
    def utilization(self) -> float:
        """System FLOPS utilisation, as DFModel prints it."""
        if not self.feasible or self.final_ns <= 0:
            return 0.0
        return self.workload_flop / self.final_s / self.num_chip / self.peak_gflops / 1e9


def outer_status(spec: Spec, outer: Outer) -> tuple[Status, float]:
    """Infeasibility that the outer choices alone cause: the shape product, then the
    workload's own rule (``WorkloadModel.outer_status``: batch divisibility)."""
    prod = 1
    for s in outer.shape:
        prod *= s
    chips = spec.system.num_chip // spec.num_copy
    if prod != chips or any(s < 1 for s in outer.shape):
        return Status.SHAPE, float(prod - chips)
    return model_of(spec.workload).outer_status(spec, outer)


class Outputs(NamedTuple):
    """The jitted evaluator's full outputs for one assignment (``Evaluator.full``)."""

    status: Status
    per_config: np.ndarray  #: float64 (C, NUM_CFG): columns ``layout.ConfigCol``
    totals: np.ndarray  #: float64 (NUM_RES,): slots ``layout.ResultSlot``
    par_lane: np.ndarray  #: int64 (n,): PL of every kernel
    par_stage: np.ndarray  #: int64 (n,): PS of every kernel
    weight_tiling: np.ndarray  #: int64 (n,): weight tiling factor of every kernel

    @property
    def all_config_ii_ns(self) -> float:
        """Sum of the configurations' IIs (meaningful when the status is OK)."""
        return float(self.totals[ResultSlot.ALL_II])


class Evaluator:
    """The jitted evaluator bound to one lowered problem (fixed outer choices)."""

    def __init__(self, problem: Problem) -> None:
        from dfsearch.cost import evaluate as ev

        self.problem = problem
        self._ev = ev

    def batch(self, configs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """final_ns (inf if infeasible), status and violation of every row of ``configs``."""
        p = self.problem
        configs = np.ascontiguousarray(configs, dtype=np.int64)
        m = configs.shape[0]
        finals = np.empty(m)
        statuses = np.empty(m, dtype=np.int64)
        viol = np.empty(m)
        self._ev.evaluate_batch(p.kernels, p.edges, p.constants, configs, finals, statuses, viol)
        return finals, statuses, viol

    def full(
        self, config: tuple[int, ...], par_lane: tuple[int, ...] = (), par_stage: tuple[int, ...] = ()
    ) -> Outputs:
        """Status, per-configuration and total outputs, PL, PS and weight tiling of one
        assignment."""
        p = self.problem
        n, nc = p.num_kernels, p.num_config
        cfg = np.zeros((nc, NUM_CFG))
        res = np.zeros(NUM_RES)
        pl = np.zeros(n, np.int64)
        ps = np.zeros(n, np.int64)
        if par_lane:
            pl[:] = par_lane
        if par_stage:
            ps[:] = par_stage
        k_pl, k_ps, k_tf = np.ones(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64)
        st = self._ev.evaluate_one(
            p.kernels, p.edges, p.constants, np.asarray(config, np.int64), pl, ps, cfg, res,
            k_pl, k_ps, k_tf,
        )  # fmt: skip
        return Outputs(Status(int(st)), cfg, res, k_pl, k_ps, k_tf)


def evaluate(spec: Spec, decision: Decision, *, quirks: Quirks | None = None) -> Evaluation:
    """Evaluate one complete decision with DFModel's equations, under the spec's ``quirks``
    (``quirks``: when given, they replace the spec's).

    Raises
    ------
    ValueError
        If the decision's lengths do not match the spec.
    """
    requested = decision.num_config or ((max(decision.config) + 1) if decision.config else 1)
    outer = Outer(
        shape=decision.shape,
        sharding=decision.sharding,
        micro_batch_size=decision.micro_batch_size,
        num_tile=decision.num_tile,
        num_config=effective_num_config(spec, requested),
        placement=decision.placement,
    )
    if quirks is not None:
        spec = dataclasses.replace(spec, quirks=quirks)
    problem = lower(spec, outer)
    return evaluate_problem(spec, problem, decision)


def evaluate_problem(
    spec: Spec, problem: Problem, decision: Decision, *, quirks: Quirks | None = None
) -> Evaluation:
    """Like ``evaluate`` for an already lowered problem (lowered under the same quirks)."""
    if quirks is not None:
        spec = dataclasses.replace(spec, quirks=quirks)
    ost, oviol = outer_status(spec, problem.outer)
    n = problem.num_kernels
    if ost is not Status.OK:
        res = np.zeros(NUM_RES)
        res[ResultSlot.VIOLATION] = oviol
        one = np.ones(n, np.int64)
        out = Outputs(ost, np.zeros((problem.num_config, NUM_CFG)), res, one, one, one)
    else:
        out = Evaluator(problem).full(decision.config, decision.par_lane, decision.par_stage)
    status, cfg, res = out.status, out.per_config, out.totals
    members: list[list[str]] = [[] for _ in range(problem.num_config)]
    for name, c in zip(problem.names, decision.config):
        if 0 <= c < problem.num_config:
            members[c].append(name)
    rows = cfg.tolist()  # Python floats, as float() of each cell
    configs = tuple(
        ConfigTimes(
            kernels=tuple(members[c]),
            compute_ns=row[ConfigCol.COMPUTE],
            memory_ns=row[ConfigCol.MEMORY],
            network_ns=row[ConfigCol.NETWORK],
            ii_ns=row[ConfigCol.II],
            sram_bytes=row[ConfigCol.SRAM],
            num_tile=int(row[ConfigCol.TILES]),
        )
        for c, row in zip(range(problem.num_config), rows)
    )
    feasible = status is Status.OK
    dram_bw = float(res[ResultSlot.DRAM_BW]) if feasible else spec.system.memory.dram_bw_GBps
    hops = problem.latency_hops_ns
    latency = None if hops is None or not feasible else (
        problem.layers_per_stage * problem.pp * float(res[ResultSlot.ALL_II]) + hops)
    return Evaluation(
        decision=decision,
        status=status,
        violation=float(res[ResultSlot.VIOLATION]),
        final_ns=float(res[ResultSlot.FINAL]) if feasible else float("inf"),
        ns_per_batch=float(res[ResultSlot.BATCH]) if feasible else float("inf"),
        all_config_ii_ns=float(res[ResultSlot.ALL_II]),
        p2p_ns=problem.constants.p2p_ns,
        dram_bytes=float(res[ResultSlot.DRAM]),
        dram_bw_GBps=dram_bw,
        configs=configs,
        par_lane=tuple(int(v) for v in out.par_lane),
        par_stage=tuple(int(v) for v in out.par_stage),
        weight_tiling=tuple(int(v) for v in out.weight_tiling),
        workload_flop=problem.workload_flop,
        peak_gflops=problem.peak_gflops,
        num_chip=problem.num_chip,
        tp=problem.tp,
        pp=problem.pp,
        dp=problem.dp,
        num_micro_batch=problem.num_micro_batch,
        layers_per_stage=problem.layers_per_stage,
        pipeline_factor=problem.pipeline_factor,
        price=price(spec, problem.outer.shape, dram_bw),
        shard_dims=tuple(zip(problem.shard_m, problem.shard_k, problem.shard_n)),
        dram_use=problem.dram,
        memory_model=memory_model(spec),
        step=problem.step,
        final_latency_ns=latency,
    )
