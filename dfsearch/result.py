"""The result of a run: the best mapping (if any), its evaluation, its status and bound, and
when nothing is feasible, which constraints bind and by how much."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dfsearch.codes import ObjectiveKind, RunStatus
from dfsearch.cost.model import Evaluation
from dfsearch.sanity import spec_warnings
from dfsearch.spec import Spec
from dfsearch.system.placement import placement_texts
from dfsearch.workloads.serving import serving_metrics

if TYPE_CHECKING:
    from dfsearch.cost.partition import PartitionPlan
    from dfsearch.cost.stages import StagePlan
    from dfsearch.plan.speculative import SpeculativeResult

__all__ = ["SearchStats", "RunResult", "PhaseResult", "PlanSection", "Violation", "format_bytes",
           "HEADLINE"]

#: the headline figures of a run beside ``final_s`` and ``utilization``, by name: what a user
#: of its plan reads first (``RunResult.headline``; the JSON's ``headline`` and the columns of
#: a sweep's results table, docs/studies.md). None where they do not apply.
HEADLINE = (
    "plan",  # the plan kind that ran (docs/design.md: single, stages, partition, speculative)
    "batch",  # llm_serving: sequences per replica in a step
    "tokens_per_s",  # llm_serving: of the system (prefill: prompt tokens; decode: generated)
    "ttft_s",  # llm_serving prefill: time to first token (= final_s)
    "tpot_s",  # llm_serving decode: time per output token (= final_s)
    "e2e_latency_s",  # llm_serving decode: output_len x TPOT
    "speculative_tokens_per_s",  # [speculative]: tokens/s of the system
    "speculative_time_per_token_s",  # [speculative]: (K x T_draft + T_verify) / E
    "speculative_speedup",  # [speculative]: plain TPOT / speculative time per token
    "stages",  # stages: pipeline stages; partition: pipeline partitions
    "slowest_stage_s",  # stages: T_max per micro-batch; partition: the slowest's latency
)


def format_bytes(x: float) -> str:
    """Bytes with a decimal prefix: ``format_bytes(1.4e12) == '1.4 TB'``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}B"
    return f"{x:.4g} B"


#: constraint -> (what is needed, the spec field that holds the capacity, unit)
_CONSTRAINTS = {
    "sram": ("SRAM of a configuration", "system.accelerator.sram_bytes", "bytes"),
    "dram": ("DRAM per chip (weights, training state, kept and live activations)", "system.memory.dram_bytes", "bytes"),
    "dram_fixed": ("DRAM per chip before any live activation (weights, training state, kept activations, fixed data)", "system.memory.dram_bytes", "bytes"),
    "cores": ("cores of a configuration", "system.accelerator.cores", "cores"),
    "divisibility": ("global batch / (micro-batch x DP)", "workload.global_batch_size", ""),
    "shape": ("network sizes", "system.num_chip", "chips"),
    "config": ("configuration rules (FWD/BWD split, pinned configs, num_input)", "", ""),
    "order": ("configuration order of an edge", "", ""),
    "latency": ("step latency (TTFT or TPOT)", "search.latency_bound_ms", "ns"),
    "schedule": ("interleaved 1F1B (PP > 1, micro-batches per pipeline divisible by PP, layers per stage divisible by training.interleave)", "training.interleave", ""),
    "partition": ("pipeline partitions of the graph (one kernel at least each, the forward/backward rule, pinned configs)", "", ""),
}


@dataclass(frozen=True, slots=True)
class Violation:
    """The smallest violation of one constraint seen by the search, with where it occurred.

    ``needed`` and ``capacity`` are in ``unit``; ``detail`` names the configuration or
    kernels involved where the search knows them.
    """

    constraint: str  #: "sram", "dram", "dram_fixed", "cores", "divisibility", "shape", "config", "order", "latency", "schedule"
    needed: float
    capacity: float
    unit: str
    shape: tuple[int, ...]
    num_tile: int
    num_config: int
    detail: str = ""

    @property
    def excess(self) -> float:
        return self.needed - self.capacity

    @staticmethod
    def of(spec: Spec, constraint: str, excess: float, shape: tuple[int, ...], num_tile: int,
           num_config: int, detail: str = "") -> Violation:  # fmt: skip
        """A violation from the excess the evaluator reports and the spec's capacity (DRAM:
        both tiers, except under the v2 equations, which ignore the second)."""
        dram = spec.dram_capacity
        capacity = {
            "sram": spec.system.accelerator.sram_bytes,
            "dram": dram,
            "dram_fixed": dram,
            "cores": float(spec.system.accelerator.cores),
            "latency": spec.search.latency_bound_ms * 1e6,
        }.get(constraint, 0.0)
        unit = _CONSTRAINTS.get(constraint, ("", "", ""))[2]
        return Violation(constraint, capacity + excess, capacity, unit, shape, num_tile,
                         num_config, detail)  # fmt: skip

    def message(self) -> str:
        what, field, unit = _CONSTRAINTS.get(self.constraint, (self.constraint, "", ""))
        where = f"shape {'x'.join(map(str, self.shape))}, {self.num_tile} tile(s)"
        if self.num_config:
            where += f", {self.num_config} configuration(s)"
        if unit == "bytes":
            amount = (f"needs {format_bytes(self.needed)}, {field} holds "
                      f"{format_bytes(self.capacity)} ({format_bytes(self.excess)} too much)")  # fmt: skip
        elif unit == "ns":
            amount = (f"needs {self.needed / 1e6:.6g} ms, {field} is {self.capacity / 1e6:.6g} ms "
                      f"({self.excess / 1e6:.6g} ms too slow)")  # fmt: skip
        elif unit == "cores":
            amount = f"needs {self.needed:.0f} cores, {field} is {self.capacity:.0f}"
        elif self.constraint == "divisibility":
            amount = f"leaves a remainder of {self.excess:.6g} sequences"
        elif self.constraint == "schedule":
            amount = f"is off by {self.excess:.6g}"
        elif self.constraint == "shape":
            amount = f"off by a factor {self.excess:.6g}" if self.excess else "cannot be met"
        else:
            amount = "cannot be met"
        text = f"{what} {amount} (closest: {where})"
        return text + (f": {self.detail}" if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "constraint": self.constraint,
            "needed": self.needed,
            "capacity": self.capacity,
            "excess": self.excess,
            "unit": self.unit,
            "shape": list(self.shape),
            "num_tile": self.num_tile,
            "num_config": self.num_config,
            "detail": self.detail,
            "message": self.message(),
        }


@dataclass(frozen=True, slots=True)
class SearchStats:
    """How the result was found and what the search can certify about it."""

    method: str
    seconds: float
    evaluations: int
    seed: int
    status: RunStatus
    lower_bound_s: float | None  #: no mapping can be faster than this (None: unknown)
    candidates: int  #: outer choices (shape x tiles x configuration count) in the space
    solved: int = 0  #: outer choices whose configuration assignment was searched
    pruned: int = 0  #: outer choices ruled out by a lower bound or by outer infeasibility
    stopped_by: str = ""  #: why the search stopped early ("" if it did not)
    notes: tuple[str, ...] = ()
    objective: ObjectiveKind = ObjectiveKind.TIME  #: what the search minimised
    lower_bound: float | None = None  #: lower bound of the objective, in its unit

    @property
    def optimal(self) -> bool:
        return self.status is RunStatus.OPTIMAL


class PlanSection:
    """What a plan kind adds to its result's report and JSON (``dfsearch/plan/``): a kind's
    section subclasses this one, whose parts add nothing (a plain single-phase run). The
    report and the JSON call these parts and never ask which kind ran."""

    __slots__ = ()

    def names(self) -> tuple[str, ...] | None:
        """The kernels the evaluation's decision maps (None: the spec's graph)."""
        return None

    def mapping(self, spec: Spec) -> dict[str, Any]:
        """The parts of a mapping file beside the decision (``docs/mapping.md``)."""
        return {}

    def headline(self) -> dict[str, Any]:
        """The kind's own figures among ``HEADLINE``."""
        return {}

    def to_json(self) -> dict[str, Any]:
        """The kind's own top-level keys of the JSON."""
        return {}

    def timing(self) -> str | None:
        """The report's timing after ``final_s`` (None: the single-phase one)."""
        return None

    def evaluation_lines(self) -> list[str]:
        """The report's lines after the mapping's configurations and figures."""
        return []

    def closing_lines(self) -> list[str]:
        """The report's lines after the search's status and notes."""
        return []


#: the section of a result that adds nothing
NO_SECTION = PlanSection()


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One phase of a plan (``dfsearch/plan/``): its name, its role, how often it repeats
    per unit of the plan's figure, and its full single-phase result."""

    name: str
    role: str
    result: RunResult
    repeats: float = 1.0

    def to_json(self) -> dict[str, Any]:
        """Its name, role, repeats and its result's status and figures (the phase's full
        result is ``result``)."""
        ev, lb = self.result.evaluation, self.result.search.lower_bound_s
        return {"name": self.name, "role": self.role, "repeats": self.repeats,
                "status": self.result.status.label, "final_s": ev.final_s if ev else None,
                "lower_bound_s": lb}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RunResult:
    spec: Spec
    evaluation: Evaluation | None  #: None when no feasible mapping was found
    search: SearchStats
    violations: tuple[Violation, ...] = ()  #: when infeasible: the binding constraints
    #: with ``[speculative]``: the speculative-decoding search (``plan/speculative.py``)
    speculative: SpeculativeResult | None = None
    #: a whole model in pipeline pieces (``cost/stages.py``): the stages and the pieces
    stages: StagePlan | None = None
    #: DFModel's pipeline partitioning (``cost/partition.py``): the partitions and which
    #: one the evaluation maps (its kernels: ``partition.names``)
    partition: PartitionPlan | None = None
    #: the kind of plan that ran (``dfsearch/plan/``: ``single``, ``stages``, ``partition``,
    #: ``speculative``); "" for a single-phase search not run through a plan
    plan: str = ""
    #: the plan's phases, each with its full single-phase result (empty: a single-phase
    #: search not run through a plan)
    phases: tuple[PhaseResult, ...] = ()
    #: what the plan kind adds to the report and the JSON (``PlanSection``)
    section: PlanSection = NO_SECTION

    @property
    def status(self) -> RunStatus:
        return self.search.status

    def headline(self) -> dict[str, Any]:
        """The run's headline figures (every name of ``HEADLINE``, None where it does not
        apply): the one definition behind the JSON's ``headline`` and a sweep's row."""
        out: dict[str, Any] = dict.fromkeys(HEADLINE)
        out["plan"] = self.plan or None
        if self.evaluation is None:
            return out
        return out | _serving_headline(self.evaluation) | self.section.headline()

    def infeasible_message(self) -> str:
        """Why there is no mapping: the binding constraints with their true amounts."""
        s = self.search
        n = s.candidates
        if self.status is RunStatus.INTERRUPTED:
            head = f"Interrupted before a feasible mapping was found ({s.solved + s.pruned} of {n} outer choices done)."
        elif self.status is RunStatus.STOPPED_BY_LIMIT:
            head = (f"No feasible mapping found before the search stopped ({s.stopped_by}); "
                    "not proven infeasible.")  # fmt: skip
        elif n == 0:
            head = "No feasible mapping: no network shape fits the chip count."
        else:
            head = f"No feasible mapping: every one of the {n} outer choices violates a constraint."
            head += "".join(f" ({note})" for note in s.notes if note.startswith("not proven"))
        return "\n".join([head] + [f"  - {v.message()}" for v in self.violations])

    def to_json(self) -> dict[str, Any]:
        """The result as one JSON-ready object (names mirror DFModel's log)."""
        out: dict[str, Any] = {"status": self.status.label}
        ev = self.evaluation
        lb = self.search.lower_bound_s
        if ev is not None:
            out |= _evaluation_json(self.spec, ev, self.section.names())
            out |= self.section.mapping(self.spec)  # the plan's parts of a mapping file
        else:
            out["final_s"] = None
            out["violations"] = [v.to_json() for v in self.violations]
            out["message"] = self.infeasible_message()
        gap = None
        if lb is not None and lb > 0 and ev is not None:
            gap = max(0.0, ev.final_s / lb - 1.0)
        out["lower_bound_s"] = lb
        out["search"] = {
            "status": self.status.label,
            "objective": self.search.objective.label,
            "objective_lower_bound": self.search.lower_bound,
            "method": self.search.method,
            "seconds": self.search.seconds,
            "evaluations": self.search.evaluations,
            "seed": self.search.seed,
            "optimal": self.search.optimal,
            "lower_bound_s": lb,
            "gap": gap,
            "candidates": self.search.candidates,
            "solved": self.search.solved,
            "pruned": self.search.pruned,
            "stopped_by": self.search.stopped_by or None,
            "notes": list(self.search.notes),
        }
        out["warnings"] = [{"path": w.path, "message": w.message} for w in spec_warnings(self.spec)]
        out["headline"] = self.headline()
        t = self.spec.training
        if t.searched and self.spec.graph.is_training:  # training choices the search made
            out["training_choices"] = {
                "recompute": t.recompute.label, "sequence_parallel": t.sequence_parallel,
                "zero_stage": t.zero_stage, "interleave": t.interleave,
                "searched": list(t.searched),
            }  # fmt: skip
        if self.plan:
            out["plan"] = {"kind": self.plan, "phases": [p.to_json() for p in self.phases]}
        return out | self.section.to_json()


def _memory_json(spec: Spec, ev: Evaluation) -> dict[str, Any]:
    """DRAM per chip by purpose (bytes), the model that counted it and the capacity."""
    u = ev.dram_use
    return {
        "model": ev.memory_model.label,
        "weights": u.weights, "gradients": u.gradients, "optimizer": u.optimizer,
        "activations": u.activations, "data": u.data,
        "workspace": max(0.0, ev.dram_bytes - u.fixed),
        "total": ev.dram_bytes,
        "capacity": spec.dram_capacity,
    }  # fmt: skip


def _evaluation_json(spec: Spec, ev: Evaluation, names: tuple[str, ...] | None = None
                     ) -> dict[str, Any]:
    """The evaluation's figures and mapping; ``names``: the kernels its decision maps (default
    the spec's graph; a whole model in pieces: the layer graph's)."""
    d = ev.decision
    names = names if names is not None else tuple(k.name for k in spec.graph.kernels)
    return {
        "final_s": ev.final_s,
        "ns_per_batch": ev.ns_per_batch,
        "utilization": ev.utilization,
        "workload_flop": ev.workload_flop,
        "system_cost": ev.price.system_cost,
        "system_power": ev.price.system_power,
        "tp": ev.tp,
        "pp": ev.pp,
        "dp": ev.dp,
        "shape": list(d.shape),
        "placement": placement_texts(spec.system, d.shape, d.placement),
        "num_tile": d.num_tile,
        "num_config": len(ev.configs),
        "micro_batch_size": d.micro_batch_size,
        "num_micro_batch": ev.num_micro_batch,
        "p2p_ns": ev.p2p_ns,
        "dram_bytes": ev.dram_bytes,
        "dram_bw_GBps": ev.dram_bw_GBps,
        "memory": _memory_json(spec, ev),
        "peak_gflops": ev.peak_gflops,
        "num_chip": ev.num_chip,
        "configs": [
            {
                "kernels": list(c.kernels),
                "compute_ns": c.compute_ns,
                "memory_ns": c.memory_ns,
                "network_ns": c.network_ns,
                "ii_ns": c.ii_ns,
                "sram_bytes": c.sram_bytes,
                "bottleneck": c.bottleneck,
            }
            for c in ev.configs
        ],
        "sharding": {n: s.label for n, s in zip(names, d.sharding)},
        "config": {n: c for n, c in zip(names, d.config)},
        "cores": {
            n: {"par_lane": pl, "par_stage": ps}
            for n, pl, ps in zip(names, ev.par_lane, ev.par_stage)
        },
        "weight_tiling": {n: t for n, t in zip(names, ev.weight_tiling) if t > 1},
        **_serving_json(ev),
        **({} if ev.final_latency_ns is None else {"final_latency_ns": ev.final_latency_ns}),
    }


def _serving_headline(ev: Evaluation) -> dict[str, Any]:
    """The serving part of ``RunResult.headline`` (nothing for other workloads)."""
    m = serving_metrics(ev)
    if m is None:
        return {}
    return {"batch": m.batch, "tokens_per_s": m.tokens_per_s,
            f"{m.latency_name}_s": m.step_ns / 1e9,
            "e2e_latency_s": None if m.e2e_ns is None else m.e2e_ns / 1e9}  # fmt: skip


def _serving_json(ev: Evaluation) -> dict[str, Any]:
    """``"serving"``: TTFT / TPOT, tokens/s, KV bytes of an llm_serving evaluation
    (``workloads.serving.ServingMetrics``); nothing for other workloads."""
    m = serving_metrics(ev)
    return {} if m is None else {"serving": m.to_json()}
