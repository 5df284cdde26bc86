"""The result of a run: the best mapping, its evaluation, and what the search can certify."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dfsearch.cost.model import Evaluation
from dfsearch.spec import Spec

__all__ = ["SearchStats", "RunResult"]


@dataclass(frozen=True, slots=True)
class SearchStats:
    """How the result was found (DESIGN.md §6 ``search``)."""

    method: str
    seconds: float
    evaluations: int
    seed: int
    optimal: bool | None  #: proven optimal over the whole decision space; None if unknown
    lower_bound_s: float | None
    candidates: int  #: outer choices (shape, tiles, configs) in the space
    candidates_done: int  #: of which solved or pruned by their bound
    stopped_by_time: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunResult:
    spec: Spec
    evaluation: Evaluation
    search: SearchStats

    def to_json(self) -> dict[str, Any]:
        """The object of DESIGN.md §6 (names mirror DFModel's log)."""
        ev = self.evaluation
        d = ev.decision
        names = [k.name for k in self.spec.graph.kernels]
        lb = self.search.lower_bound_s
        gap = None
        if lb is not None and lb > 0 and ev.feasible:
            gap = max(0.0, ev.final_s / lb - 1.0)
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
            "num_tile": d.num_tile,
            "micro_batch_size": d.micro_batch_size,
            "num_micro_batch": ev.num_micro_batch,
            "p2p_ns": ev.p2p_ns,
            "dram_bytes": ev.dram_bytes,
            "dram_bw_GBps": ev.dram_bw_GBps,
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
            "search": {
                "method": self.search.method,
                "seconds": self.search.seconds,
                "evaluations": self.search.evaluations,
                "seed": self.search.seed,
                "optimal": self.search.optimal,
                "lower_bound_s": lb,
                "gap": gap,
                "candidates": self.search.candidates,
                "candidates_done": self.search.candidates_done,
                "stopped_by_time": self.search.stopped_by_time,
                "notes": list(self.search.notes),
            },
        }
