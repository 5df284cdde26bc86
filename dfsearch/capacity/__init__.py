"""Serving capacity: a request-level simulation of LLM serving on replicas whose step
times come from a table or a closed form (docs/serving.md, "Request-level simulation").

Modules: ``traffic`` (arrivals and lengths) and ``trace`` (CSV trace files), ``steps``
(step times of one iteration), ``scheduler`` (one replica: continuous batching, chunked
prefill, paged KV cache, preemption), ``simulate`` (replicas behind a router), ``metrics``
(latency percentiles, throughput, goodput, KV utilisation, cost and energy). The names
below are the public ones.

``dfsearch serve`` (docs/serving.md, "Capacity search"): ``serve_spec`` (the ``[serve]``
table), ``mapped_steps`` (step times from dfsearch's own mappings, each point searched once),
``spec_measure`` (one step searched by ``dfsearch.api.run``), ``deployments`` (co-located
and disaggregated deployments simulated), ``search`` (the cheapest deployment meeting the
SLOs) and ``command`` (the report, ``--json``, ``--csv``).

This package's own names import only numpy, the standard library, ``dfsearch.errors`` and
``dfsearch.codes``; ``spec_measure`` and ``command`` also import the search (not imported
here). ``import dfsearch`` does not import this package.
"""

from dfsearch.capacity.metrics import Percentiles, Price, Slo, Summary, per_request, summarize
from dfsearch.capacity.scheduler import Scheduler
from dfsearch.capacity.simulate import Deployment, SimResult, kv_blocks, simulate
from dfsearch.capacity.steps import AffineSteps, StepTimes, TabulatedSteps
from dfsearch.capacity.trace import Trace, read_trace
from dfsearch.capacity.traffic import (
    Fixed,
    FromTrace,
    LogNormal,
    Poisson,
    Requests,
    TraceArrivals,
    Traffic,
    Uniform,
    requests,
)
from dfsearch.codes import Router

__all__ = [
    "Poisson", "TraceArrivals", "Fixed", "Uniform", "LogNormal", "FromTrace", "Traffic",
    "Requests", "requests", "Trace", "read_trace",
    "StepTimes", "AffineSteps", "TabulatedSteps",
    "Scheduler", "Deployment", "Router", "SimResult", "simulate", "kv_blocks",
    "Slo", "Price", "Percentiles", "Summary", "summarize", "per_request",
]
