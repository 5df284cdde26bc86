"""The capacity search by sampling: ``[serve] sampler = "tpe"`` or ``"nsga2"`` (docs/serving.md,
"Capacity search"), for a space too large to enumerate within ``max_simulations``.

Optuna's TPE or NSGA-II sampler (seeded with ``serve.seed``) proposes ``serve.trials``
deployments (the work: a fixed number of trials, not seconds) over the deployment variables:
the mode, the replica shape (chip x TP x PP) and replica count of each pool, the batch cap
and the chunk size. Each proposal gets the exact inner search of the exhaustive one: its
step-time tables (``mapped_steps``) and a simulation of its requests; a deployment proposed
again is not simulated again. The trial's value, minimised:

    dollars per hour                                   meets both SLOs
    C x (2 + min(worst P99 / SLO - 1, 10))             simulated, breaks an SLO
    C x 20                                             cannot run: > max_chips, no room

with C = max_chips x the dearest chip's price (more than any deployment costs), so every
deployment meeting the SLOs beats every one that does not, and a nearer miss beats a
farther one. NSGA-II has a second objective, the goodput (maximised; 0 for one that cannot
run), so its population spreads along the cost vs goodput front. The answer is the best
proposal by the exhaustive search's order (``search.rank``): sampled, not exhaustive --
nothing proves it the cheapest.

``sampler = "auto"`` (the default) samples with TPE when the space holds more than
``exhaustive_limit`` deployments (``search.space_size``); ``why`` says so in the report.
"""

from __future__ import annotations

from typing import Any

from dfsearch.capacity.deployments import (
    Candidate,
    Outcome,
    Slos,
    deployment_watts,
    fits_kv,
    outcome,
    run_colocated,
    run_decode_pool,
    run_prefill_pool,
    transfer_s,
)
from dfsearch.capacity.mapped_steps import ReplicaModel, Shape
from dfsearch.capacity.search import (
    ModelOf,
    SearchResult,
    limits,
    load,
    pareto,
    rank,
    replica_models,
)
from dfsearch.capacity.serve_spec import ServeSpec
from dfsearch.capacity.traffic import Requests
from dfsearch.codes import ServeMode

__all__ = ["sample"]


def sample(serve: ServeSpec, reqs: Requests, model_of: ModelOf, sampler: str = "",
           why: str = "") -> SearchResult:
    """The best of ``serve.trials`` sampled deployments (module docstring); ``sampler``:
    "tpe" or "nsga2" (default: ``serve.sampler``), ``why``: how it was chosen, for the report."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = sampler or serve.sampler
    models, unfit = replica_models(serve, model_of)
    shapes = sorted(models, key=lambda s: (s.chip, s.tp, s.pp))
    slos = Slos(serve.ttft_p99_s, serve.tpot_p99_s, serve.rate_per_s)
    worst = serve.max_chips * max(c.dollars_per_chip_hour for c in serve.chips)
    nsga = name == "nsga2"
    study = (optuna.create_study(directions=["minimize", "maximize"],
                                 sampler=optuna.samplers.NSGAIISampler(seed=serve.seed)) if nsga
             else optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=serve.seed)))
    seen: dict[Candidate, Outcome | None] = {}
    for _ in range(serve.trials if shapes else 0):
        trial = study.ask()
        c = _propose(trial, serve, shapes)
        if c not in seen:
            seen[c] = _simulate(c, serve, reqs, models, slos)
        o = seen[c]
        value = worst * 20 if o is None else o.dollars_per_hour if o.feasible else worst * (
            2 + min(max(o.ttft_excess, o.tpot_excess), 10.0))
        study.tell(trial, [value, 0.0 if o is None else o.goodput_per_s] if nsga else value)
    sims = [o for o in seen.values() if o is not None]
    best = min((o for o in sims if o.feasible), key=rank, default=None)
    how = (why + "; " if why else "") + f"{'NSGA-II' if nsga else 'TPE'}, seed {serve.seed}, {serve.trials} trials"
    return SearchResult(best, tuple(sims), pareto(sims), len(sims), tuple(unfit),
                        load(best.candidate, models, reqs, serve.rate_per_s) if best else (), sampled=how,
                        limits=limits(best, models, reqs, serve) if best else ())


def _propose(trial: Any, serve: ServeSpec, shapes: list[Shape]) -> Candidate:
    """One deployment from the trial's choices (indices into the lists: categorical)."""
    def pick(name: str, values: tuple | list) -> Any:
        return values[trial.suggest_categorical(name, list(range(len(values))))]

    mode = pick("mode", serve.modes)
    shape, cap, chunk = pick("shape", shapes), pick("batch_cap", serve.batch_caps), pick("chunk", serve.chunk_tokens)
    replicas = trial.suggest_int("replicas", 1, serve.max_chips)
    if mode is ServeMode.COLOCATED:
        return Candidate(mode, shape, replicas, cap, chunk)
    return Candidate(mode, shape, replicas, cap, chunk, pick("prefill_shape", shapes),
                     trial.suggest_int("prefill_replicas", 1, serve.max_chips))


def _simulate(c: Candidate, serve: ServeSpec, reqs: Requests, models: dict[Shape, ReplicaModel],
              slos: Slos) -> Outcome | None:
    """The outcome of ``c``, or None when it cannot run (chips, batch, prefill or KV room)."""
    m, block = models[c.shape], serve.block_tokens
    budget = max(c.chunk_tokens, c.batch_cap) if c.mode is ServeMode.COLOCATED else c.chunk_tokens
    pm = models[c.prefill_shape] if c.prefill_shape else m
    if (c.chips > serve.max_chips or c.batch_cap > m.max_batch or budget > pm.max_prefill_tokens
            or not fits_kv(m, reqs, block) or not fits_kv(pm, reqs, block, prompt_only=True)):
        return None
    if c.mode is ServeMode.COLOCATED:
        first, finish, pre, kv = run_colocated(reqs, m, c, block)
        return outcome(c, reqs, first, finish, pre, slos, kv, deployment_watts(c, models))
    first, pre = run_prefill_pool(reqs, pm, c.prefill_replicas, c.chunk_tokens, block)
    moved = transfer_s(pm, m, reqs.prompt_tokens, serve.scale_out_bw_GBps, serve.scale_out_latency_s)
    finish, pre_d, kv = run_decode_pool(reqs, first, moved, m, c.replicas, c.batch_cap, block)
    return outcome(c, reqs, first, finish, pre + pre_d, slos, kv, deployment_watts(c, models))
