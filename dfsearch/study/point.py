"""One point of a study: what a worker gets (``Task``), the search it runs and the metric
cells of its row (``run_point``), and the digest that ties a row to its point's spec and
seed. Shared by every way a sweep runs its points (``runner``: in process or a pool;
``distributed``: Dask; ``nsga``)."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from dfsearch.errors import SpecError
from dfsearch.loader import spec_to_data
from dfsearch.memo import by_identity
from dfsearch.plan import run
from dfsearch.spec import Graph, Spec
from dfsearch.study.serve_point import serve_cells
from dfsearch.study.study import Point, ServePoint, Study
from dfsearch.workloads.serving import serving_metrics

__all__ = ["Task", "CTRL_C", "run_point", "run_chunk", "chunks", "chunk_size", "task_of", "point_digest",
           "is_feasible", "roofline_cells"]

#: key of a point's metrics (not a column) set when Ctrl-C came while it was searched
CTRL_C = "ctrl_c"


@dataclass(frozen=True, slots=True)
class Task:
    """What a worker needs for one point."""

    point: int
    spec: Spec
    seed: int
    #: a serving-capacity point (the study's base spec has a [serve] table), else None
    serve: ServePoint | None = None


def point_digest(spec: Spec, seed: int, serve: ServePoint | None = None) -> str:
    """A short digest of a point's spec (every field but ``search.jobs``, the graph too), seed
    and, for a serving-capacity point, its ``[serve]`` table: the SHA-256 of
    ``[spec_to_data(spec), seed]`` (+ the table) as sorted JSON, with the graph's data computed
    once per graph object (the points of a study share their generated graph)."""
    data = spec_to_data(replace(spec, graph=_NO_GRAPH))
    data["search"].pop("jobs", None)  # the processes a point's search uses change no result
    data["graph"] = _GRAPH_MARK
    parts = [data, seed] + ([serve.data["serve"]] if serve is not None else [])
    text = json.dumps(parts, sort_keys=True, default=str)
    mark = json.dumps(_GRAPH_MARK)
    if text.count(mark) == 1:  # the graph's text, encoded once per graph object, in its place
        text = text.replace(mark, _graph_text(spec.graph))
    else:  # the mark's words in the spec itself: encode the whole
        data["graph"] = _graph_data(spec.graph)
        text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: a stand-in for the graph's data in ``point_digest``'s text (JSON text of a value does
#: not depend on where the value sits, so the graph's own text can take its place)
_GRAPH_MARK = "dfsearch point digest: the graph's data goes here"


#: a stand-in graph while the rest of a spec is turned into data (``point_digest``)
_NO_GRAPH = Graph(kernels=(), connections=())


@by_identity(64)
def _graph_data(graph: Graph) -> dict[str, Any]:
    """``spec_to_data(spec)["graph"]`` of a spec holding ``graph`` (read only)."""
    return {k: v for k, v in spec_to_data(graph).items() if v != []}


@by_identity(64)
def _graph_text(graph: Graph) -> str:
    """``_graph_data(graph)`` as sorted JSON text."""
    return json.dumps(_graph_data(graph), sort_keys=True, default=str)


def task_of(study: Study, point: Point) -> tuple[str, Task]:
    """The digest and the task of one point: its validated spec and seed (the study's seed,
    else the spec's).

    Raises
    ------
    SpecError
        The point's spec breaks a rule.
    """
    spec = study.point_spec(point)
    seed = study.seed if study.seed is not None else spec.search.seed
    serve = study.point_serve(point)
    return point_digest(spec, seed, serve), Task(point.index, spec, seed, serve)


#: what a worker returns per point of a chunk: (digest, metrics), or None when the point's
#: spec breaks a rule (the sweep builds it again where it writes the table, to raise there)
ChunkResult = tuple[str, dict[str, Any]] | None


#: the most points of one chunk, and the chunks each worker should get at least (so that
#: the last chunks do not leave workers idle for long)
CHUNK_MAX = 32
CHUNKS_PER_WORKER = 8


def chunk_size(points: int, workers: int) -> int:
    """Points per chunk for ``points`` points on ``workers`` workers: 1 to ``CHUNK_MAX``,
    about ``CHUNKS_PER_WORKER`` chunks per worker. The table does not depend on it."""
    return max(1, min(CHUNK_MAX, points // (CHUNKS_PER_WORKER * max(workers, 1))))


def chunks(points: Iterable[Point], size: int) -> Iterator[tuple[Point, ...]]:
    """``points`` in consecutive tuples of ``size`` (the last one shorter), lazily."""
    it = iter(points)
    while chunk := tuple(itertools.islice(it, size)):
        yield chunk


def run_chunk(study: Study, points: tuple[Point, ...]) -> list[ChunkResult]:
    """Build and search the points of a chunk, in order (the worker function of a process
    pool or a Dask cluster: the worker builds the specs, so the process writing the table
    only writes). Stops after a point that Ctrl-C interrupted (the sweep stops there)."""
    out: list[ChunkResult] = []
    for point in points:
        try:
            digest, task = task_of(study, point)
        except SpecError:
            out.append(None)
            continue
        metrics = run_point(task)
        out.append((digest, metrics))
        if metrics["status"] == "interrupted" or metrics.get(CTRL_C):
            break
    return out


def run_point(task: Task) -> dict[str, Any]:
    """Search one point and return its metric cells (the worker function)."""
    if task.serve is not None:
        return serve_cells(task.serve, task.seed)
    result = run(task.spec, seed=task.seed)
    row = _metrics(result)
    if result.search.stopped_by == "interrupted":
        row[CTRL_C] = True  # Ctrl-C came during this point (the row may still be complete)
    if result.evaluation is not None:
        row |= roofline_cells(result.evaluation, task.spec.system.network[0].link_bw_GBps)
    return row


def is_feasible(row: dict[str, Any]) -> bool:
    """Whether a row has an answer: a mapping (``final_s``) or, for a serving-capacity
    point, a deployment meeting the SLOs (``meets_slos``)."""
    return row.get("final_s") is not None or row.get("meets_slos") is True


def roofline_cells(ev: Any, link_bw_GBps: float) -> dict[str, float]:
    """One chip during one execution of the graph (its configurations in turn, without the
    pipeline bubble and the once-per-batch p2p): the time T (``all_config_ii_ns``), the FLOP
    done, the DRAM bytes moved (memory time x DRAM bandwidth) and the network time as bytes
    over one link of the first dimension (network time x its bandwidth). The FLOP are the
    chip's share of the batch divided by the graph executions per batch,
    E = (ns_per_batch - p2p) / (T x pipeline factor). Since T sums max(compute, memory,
    network) per configuration, FLOP / T <= min(peak, FLOP / bytes x bandwidth): the point of
    a hierarchical roofline lies under both roofs."""
    t = ev.all_config_ii_ns
    executions = (ev.ns_per_batch - ev.p2p_ns) / (t * ev.pipeline_factor) if t > 0 else 0.0
    flop = ev.workload_flop / ev.num_chip / executions if executions > 0 else 0.0
    return {
        "all_config_ii_ns": t, "flop_per_chip": flop,
        "dram_bytes_per_chip": sum(c.memory_ns for c in ev.configs) * ev.dram_bw_GBps,
        "network_bytes_per_chip": sum(c.network_ns for c in ev.configs) * link_bw_GBps,
        "peak_gflops": ev.peak_gflops, "dram_bw_GBps": ev.dram_bw_GBps, "link_bw_GBps": link_bw_GBps,
    }  # fmt: skip


def _metrics(result: Any) -> dict[str, Any]:
    s = result.search
    row: dict[str, Any] = {
        "status": result.status.label, "lower_bound_s": s.lower_bound_s,
        "evaluations": s.evaluations, "seconds": s.seconds, "seed": s.seed,
        **result.headline(),  # the plan's own figures (result.HEADLINE), as in the JSON
    }  # fmt: skip
    ev = result.evaluation
    if ev is None:
        row["message"] = result.violations[0].message() if result.violations else result.infeasible_message().splitlines()[0]
        return row
    gflops = ev.workload_flop / ev.final_s / 1e9
    row |= {
        "final_s": ev.final_s, "throughput_per_s": _throughput_per_s(ev), "utilization": ev.utilization,
        "system_cost": ev.price.system_cost, "system_power": ev.price.system_power,
        "cost_efficiency": gflops / ev.price.system_cost if ev.price.system_cost > 0 else None,
        "power_efficiency": gflops / ev.price.system_power if ev.price.system_power > 0 else None,
        "tp": ev.tp, "pp": ev.pp, "dp": ev.dp, "num_config": len(ev.configs),
        "compute_ns": sum(c.compute_ns for c in ev.configs),
        "memory_ns": sum(c.memory_ns for c in ev.configs),
        "network_ns": sum(c.network_ns for c in ev.configs),
    }  # fmt: skip
    lb = s.lower_bound_s
    row["gap"] = max(0.0, ev.final_s / lb - 1.0) if lb else None
    return row


def _throughput_per_s(ev: Any) -> float:
    """Batches per second: 1 / final_s, except for an ``llm_serving`` step, whose final_s is
    a latency (TTFT or TPOT): there the system's steps of B sequences per second, DP / the
    stage time (PP steps in flight), = tokens_per_s / (B x tokens per step)."""
    m = serving_metrics(ev)
    if m is None or not m.stage_ns > 0:
        return 1.0 / ev.final_s
    return m.dp * 1e9 / m.stage_ns
