"""Serving capacity: a request-level simulation of LLM serving on replicas whose step
times come from a table or a closed form (docs/serving.md, "Request-level simulation").

Modules: ``traffic`` (arrivals and lengths) and ``trace`` (CSV trace files), ``steps``
(step times of one iteration), ``scheduler`` (one replica: continuous batching, chunked
prefill, paged KV cache, preemption), ``simulate`` (replicas behind a router), ``metrics``
(latency percentiles, throughput, goodput, KV utilisation, cost and energy).

Imports only numpy, the standard library, ``dfsearch.errors`` and ``dfsearch.codes``.
"""
