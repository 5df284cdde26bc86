"""The capacity search of ``dfsearch serve``: the cheapest deployment meeting the SLOs at a
request rate (docs/serving.md, "Capacity search").

The space: every mode, replica shape (TP x PP from the lists, at most ``max_chips``), batch
cap and chunk size, and every replica count (co-located) or prefill and decode replica
counts (disaggregated) within ``max_chips``. It is searched exhaustively, with three prunes
that drop nothing cheaper than the answer:

1. **Unloaded latency.** A replica shape and limits whose measured requests, each alone on
   an idle replica, already have a P99 TTFT (its chunks' prefill times) or a P99 TPOT (one decode
   at batch 1) above the SLO fail at any replica count: not simulated.
2. **Throughput bound.** Each replica is busy at least ``prompt tokens x min_n t(n) / n``
   per request prefilling and ``(output - 1) x min_b t_b / b`` decoding (``t(n)``: a prefill
   iteration of n <= budget tokens; ``t_b``: a decode iteration of b sequences at the
   shortest context, b up to the cap and to what the KV cache holds at that context), so
   replicas >= rate x the larger of the two means (co-located; their sum with step times
   that add a prefill's and the decodes' times, as ``MappedSteps``; each pool its own term
   when split). Counts below it are not simulated: they are overloaded,
   their queues grow without limit, even where a finite run's P99 stays within the SLOs
   (a rule, not only a prune).
3. **Cost bound.** Candidates go cheapest first (dollars per hour, then chips), each shape
   and limits from its bound up one replica at a time until it meets the SLOs; once one
   does, nothing dearer is simulated.

Assumed: more replicas never break an SLO that fewer met (round robin over more replicas
gives each a thinner stream). Disaggregated: the prefill pool alone decides the TTFT, so
each prefill shape and chunk takes its fewest replicas meeting the TTFT SLO; the decode
pool is then searched on the output stream of each such prefill pool, cheapest first.

The front: the cost vs goodput Pareto front of the simulated deployments -- below the
answer, the cheaper ones the cost order simulated; above it, when the answer serves fewer
than all measured requests within both SLOs, the co-located deployments dearer than it,
cheapest first, until one serves them all (``_front_above``).

Budget: at most ``max_simulations`` simulations (work, not seconds); a search that reaches
it stops and says so (``SearchResult.stopped``): its answer is the cheapest found, not
proven the cheapest.

The answer: the lowest cost (replicas x chips x the chip's price per chip-hour, summed over
the pools), then the fewest chips, then the higher goodput, then the more headroom (the
smaller of the two P99 / SLO ratios' larger), then co-located before disaggregated, then the
order of enumeration. With ``[serve.chips]`` every shape is tried on
every chip, and the two pools of a split deployment may use different chips.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dfsearch.capacity.deployments import (
    Candidate,
    Outcome,
    Slos,
    deployment_watts,
    fits_kv,
    outcome,
    pruned,
    run_colocated,
    run_decode_pool,
    run_prefill_pool,
    transfer_s,
)
from dfsearch.capacity.mapped_steps import ReplicaModel, Shape, batch_grid, prefill_grid
from dfsearch.capacity.serve_spec import WARMUP_FRACTION, ServeSpec
from dfsearch.capacity.traffic import Requests
from dfsearch.codes import ServeMode

__all__ = ["SearchResult", "search", "pareto", "replica_models", "rank", "load", "space_size", "shapes_of",
           "limits"]

ModelOf = Callable[[Shape], "ReplicaModel | str"]


@dataclass(frozen=True, slots=True)
class SearchResult:
    best: Outcome | None
    outcomes: tuple[Outcome, ...]  #: every deployment looked at, in the order looked at
    front: tuple[Outcome, ...]  #: cost vs goodput Pareto front of the simulated ones
    simulations: int
    unfit: tuple[tuple[Shape, str], ...]  #: replica shapes that cannot serve, and why
    load: tuple[tuple[str, float, float], ...] = ()  #: the best's pools: (pool, prefill, decode) busy fractions
    stopped: bool = False  #: the simulation budget ran out: the answer is the cheapest found, not proven
    sampled: str = ""  #: "" (exhaustive with bounds) or the sampler that chose the deployments (``sampled.py``)
    limits: tuple[str, ...] = ()  #: what limits the best's batch: KV cache, batch cap, the largest cap searched

    @property
    def runner_up(self) -> Outcome | None:
        """Of the simulated deployments failing the SLOs that cost less than the best (else as
        much), the one nearest the SLOs (smallest worst excess), then the dearest."""
        if self.best is None:
            return None
        top = _cost(self.best.candidate)
        fails = [o for o in self.outcomes if not o.feasible and not o.note and _cost(o.candidate) <= top]
        return min(fails, key=lambda o: (_cost(o.candidate) == top, max(o.ttft_excess, o.tpot_excess),
                                         -o.dollars_per_hour), default=None)

    @property
    def closest(self) -> Outcome | None:
        """With no answer: the looked-at deployment nearest the SLOs (smallest worst excess)."""
        return min(self.outcomes, key=lambda o: (max(o.ttft_excess, o.tpot_excess), _cost(o.candidate)),
                   default=None)


@dataclass
class _Ledger:
    """What the search has seen (local to one search)."""

    serve: ServeSpec
    reqs: Requests
    slos: Slos
    outcomes: list[Outcome] = field(default_factory=list)
    best: Outcome | None = None
    simulations: int = 0
    stopped: bool = False

    def record(self, o: Outcome) -> Outcome:
        self.outcomes.append(o)
        if o.feasible and not o.note and (self.best is None or _rank(o) < _rank(self.best)):
            self.best = o
        return o

    def beaten(self, cost: tuple[float, int]) -> bool:
        """Whether a deployment of ``cost`` (dollars per hour, chips) costs more than the best."""
        return self.best is not None and cost > _cost(self.best.candidate)


def _cost(c: Candidate) -> tuple[float, int]:
    """Dollars per hour (rounded to a micro-dollar: sums of prices compare equal), then chips."""
    return (round(c.dollars_per_hour, 6), c.chips)


def _rank(o: Outcome) -> tuple:
    """Cost, chips, then the higher goodput, then the more headroom (the smaller worst SLO
    excess), then co-located."""
    return (*_cost(o.candidate), -o.goodput_per_s, max(o.ttft_excess, o.tpot_excess), o.candidate.mode)


def search(serve: ServeSpec, reqs: Requests, model_of: ModelOf) -> SearchResult:
    """The cheapest deployment of ``serve``'s space meeting its SLOs on ``reqs``."""
    slos = Slos(serve.ttft_p99_s, serve.tpot_p99_s, serve.rate_per_s)
    led = _Ledger(serve, reqs, slos)
    models, unfit = replica_models(serve, model_of)
    families = []
    if ServeMode.COLOCATED in serve.modes:
        families = _colocated(led, models)
    if ServeMode.DISAGGREGATED in serve.modes:
        _disaggregated(led, models)
    _front_above(led, models, families)
    sims = [o for o in led.outcomes if not o.note]
    load = _load(led.best.candidate, models, reqs, serve.rate_per_s) if led.best else ()
    return SearchResult(led.best, tuple(led.outcomes), pareto(sims), led.simulations, tuple(unfit), load,
                        led.stopped, limits=limits(led.best, models, reqs, serve) if led.best else ())


def shapes_of(serve: ServeSpec) -> list[Shape]:
    """Every replica shape of ``serve``: chip x TP x PP within ``max_chips``."""
    return [Shape(tp, pp, chip.name, chip.dollars_per_chip_hour) for chip in serve.chips
            for tp in serve.tp for pp in serve.pp if tp * pp <= serve.max_chips]


def space_size(serve: ServeSpec) -> int:
    """The deployments of ``serve``'s space, counted before any step is searched (every shape,
    whether or not it can serve): co-located, shape x batch cap x chunk x replica counts R
    with R x chips <= ``max_chips``; disaggregated, prefill shape x chunk x decode shape x
    batch cap x pool sizes P, D >= 1 with P x prefill chips + D x decode chips <= ``max_chips``.

    >>> from dfsearch.capacity.serve_spec import serve_table
    >>> s = serve_table({"rate_per_s": 1, "ttft_p99_s": 1, "tpot_p99_s": 0.05, "dollars_per_chip_hour": 3,
    ...                  "prompt": {"dist": "fixed", "tokens": 8}, "output": {"dist": "fixed", "tokens": 8},
    ...                  "tp": [1], "max_chips": 3, "batch_caps": [8], "chunk_tokens": [8]}, "s.toml", 50.0)
    >>> space_size(s)  # co-located R = 1, 2, 3; split (P, D) = (1, 1), (1, 2), (2, 1)
    6
    """
    chips, m = [s.chips for s in shapes_of(serve)], serve.max_chips
    limits = len(serve.batch_caps) * len(serve.chunk_tokens)
    total = 0
    if ServeMode.COLOCATED in serve.modes:
        total += limits * sum(m // c for c in chips)
    if ServeMode.DISAGGREGATED in serve.modes:
        total += limits * sum(_pool_pairs(a, b, m) for a in chips for b in chips)
    return total


def _pool_pairs(a: int, b: int, m: int) -> int:
    """Pairs P, D >= 1 with P x a + D x b <= m."""
    return sum((m - p * a) // b for p in range(1, (m - b) // a + 1)) if m >= a + b else 0


def replica_models(serve: ServeSpec, model_of: ModelOf) -> tuple[dict[Shape, ReplicaModel], list]:
    """The replica shapes of ``serve`` (every chip x TP x PP within ``max_chips``) that can
    serve, with their models, and those that cannot, with why."""
    models, unfit = {}, []
    for s in shapes_of(serve):
        m = model_of(s)
        if isinstance(m, str):
            unfit.append((s, m))
        else:
            models[s] = m
    return models, unfit


def rank(o: Outcome) -> tuple:
    """The answer's order (module docstring): cost, chips, goodput, headroom, mode."""
    return _rank(o)


def load(c: Candidate, models: dict[Shape, ReplicaModel], reqs: Requests, rate: float) -> tuple:
    """The throughput bound's busy fractions of each pool of ``c`` (``SearchResult.load``)."""
    return _load(c, models, reqs, rate)


def _load(c: Candidate, models: dict[Shape, ReplicaModel], reqs: Requests, rate: float) -> tuple:
    """The throughput bound's busy fractions of each pool of ``c``: the rate x the least
    prefill and decode work of a request (bound 2 of the module docstring) over its replicas."""
    mean_p, mean_o = float(reqs.prompt_tokens.mean()), float((reqs.output_tokens - 1).mean())
    ctx_lo = int(reqs.prompt_tokens.min()) + 1
    m = models[c.shape]
    decode = rate * mean_o * _per_decode_token_s(m, m.steps, c.batch_cap, ctx_lo) / c.replicas
    if c.mode is ServeMode.COLOCATED:
        budget = max(c.chunk_tokens, c.batch_cap)
        return (("replicas", rate * mean_p * _per_prefill_token_s(m.steps, budget) / c.replicas, decode),)
    pm = models[c.prefill_shape]
    prefill = rate * mean_p * _per_prefill_token_s(pm.steps, c.chunk_tokens) / c.prefill_replicas
    return (("prefill pool", prefill, 0.0), ("decode pool", 0.0, decode))


def limits(best: Outcome, models: dict[Shape, ReplicaModel], reqs: Requests, serve: ServeSpec) -> tuple[str, ...]:
    """What limits the batch of ``best``'s decoding replicas: the sequences its KV cache holds
    at the requests' mean context (mean prompt + half the mean output) against the batch cap;
    the largest cap of ``serve.batch_caps`` when the answer uses it; preemptions."""
    c, out = best.candidate, []
    m = models[c.shape]
    context = float(reqs.prompt_tokens.mean() + reqs.output_tokens.mean() / 2)
    held = int(m.kv_capacity_bytes / (m.steps.kv_bytes_per_token * context))
    if held < c.batch_cap:
        out.append(f"KV cache: a {c.shape} replica holds about {held} sequences at the mean context of "
                   f"{context:,.0f} tokens, below the batch cap {c.batch_cap}: its KV capacity limits the batch")
    else:
        out.append(f"batch cap {c.batch_cap}: a {c.shape} replica's KV cache would hold about {held} sequences "
                   f"at the mean context of {context:,.0f} tokens: the cap, not the KV cache, limits the batch")
        if c.batch_cap == max(serve.batch_caps):
            out.append(f"batch cap {c.batch_cap} is the largest searched (serve.batch_caps): larger caps "
                       "were not tried")
    if best.preemptions:
        out.append(f"{best.preemptions} preemptions: the KV cache ran out under load")
    return tuple(out)


def pareto(outcomes: list[Outcome]) -> tuple[Outcome, ...]:
    """The outcomes no other beats on both cost (lower) and goodput (higher), by cost; a
    goodput of 0 is on no front."""
    front, top = [], 0.0
    for o in sorted(outcomes, key=lambda o: (o.dollars_per_hour, -o.goodput_per_s)):
        if o.goodput_per_s > top:
            front.append(o)
            top = o.goodput_per_s
    return tuple(front)


# ---- bounds -------------------------------------------------------------------------------------
def _prefill_alone_s(steps, prompt: np.ndarray, budget: int) -> np.ndarray:
    """Each prompt's prefill alone, in chunks of ``budget`` (a lower bound: each chunk's
    context taken as its own tokens)."""
    full, rest = np.divmod(prompt, budget)
    t_rest = np.array([float(steps.step_s(int(r), 0, int(r))) if r else 0.0 for r in rest.tolist()])
    return full * float(steps.step_s(budget, 0, budget)) + t_rest


def _per_prefill_token_s(steps, budget: int) -> float:
    return min(float(steps.step_s(n, 0, n)) / n for n in (*prefill_grid([budget]), budget) if n <= budget)


def _per_decode_token_s(model: ReplicaModel, steps, cap: int, context: int) -> float:
    """The least decode time per token: batches up to the cap and to what the KV cache holds
    at the shortest context."""
    held = max(1, int(model.kv_capacity_bytes / (steps.kv_bytes_per_token * context)))
    top = min(cap, held)
    return min(float(steps.step_s(0, b, b * context)) / b for b in (*batch_grid([top]), top) if b <= top)


def _measured(reqs: Requests) -> Requests:
    """The requests the metrics measure (after the warm-up): the unloaded bounds take their
    P99 over the same requests as the simulations' P99, so they stay bounds."""
    w = int(WARMUP_FRACTION * len(reqs))
    return Requests(reqs.arrival_s[w:], reqs.prompt_tokens[w:], reqs.output_tokens[w:])


def _unloaded_tpot_s(steps, reqs: Requests) -> float:
    t = [float(steps.step_s(0, 1, p + 1)) for p in np.unique(reqs.prompt_tokens).tolist()]
    lookup = dict(zip(np.unique(reqs.prompt_tokens).tolist(), t, strict=True))
    go = reqs.output_tokens > 1
    return float(np.percentile([lookup[p] for p in reqs.prompt_tokens[go].tolist()], 99)) if go.any() else 0.0


def _overloaded(c: Candidate, slos: Slos, busy: float) -> Outcome:
    """The largest deployment of a shape and limits below the throughput bound (within
    ``max_chips``): not simulated."""
    return pruned(c, slos, f"overloaded: at least {busy:.0%} busy (throughput bound)")


def _fewest(rate: float, seconds_per_request: float) -> int:
    return max(1, math.ceil(rate * seconds_per_request - 1e-12))


# ---- co-located ---------------------------------------------------------------------------------
def _colocated(led: _Ledger, models: dict[Shape, ReplicaModel]) -> list[tuple]:
    """Search the co-located deployments; returns each shape and limits not ruled out, with
    the replica count its throughput bound starts at."""
    serve, reqs = led.serve, led.reqs
    todo = []
    mean_p, mean_o = float(reqs.prompt_tokens.mean()), float((reqs.output_tokens - 1).mean())
    ctx_lo = int(reqs.prompt_tokens.min()) + 1
    for shape, m in models.items():
        tpot0 = _unloaded_tpot_s(m.steps, _measured(reqs))
        for cap in serve.batch_caps:
            for chunk in serve.chunk_tokens:
                c = Candidate(ServeMode.COLOCATED, shape, 1, cap, chunk)
                budget = max(chunk, cap)
                if cap > m.max_batch or budget > m.max_prefill_tokens:
                    led.record(pruned(c, led.slos, f"no mapping of {shape} fits a batch above {m.max_batch} "
                                      f"or a prefill above {m.max_prefill_tokens} tokens"))
                    continue
                if not fits_kv(m, reqs, serve.block_tokens):
                    led.record(pruned(c, led.slos, "KV cache smaller than the longest request"))
                    continue
                ttft0 = float(np.percentile(_prefill_alone_s(m.steps, _measured(reqs).prompt_tokens, budget), 99))
                if ttft0 > serve.ttft_p99_s or tpot0 > serve.tpot_p99_s:
                    led.record(pruned(c, led.slos, f"unloaded P99 TTFT {ttft0:.4g} s, TPOT {tpot0:.4g} s",
                                      ttft0 / serve.ttft_p99_s - 1, tpot0 / serve.tpot_p99_s - 1))
                    continue
                works = (mean_p * _per_prefill_token_s(m.steps, budget),
                         mean_o * _per_decode_token_s(m, m.steps, cap, ctx_lo))
                work = sum(works) if getattr(m.steps, "additive", False) else max(works)
                r = _fewest(serve.rate_per_s, work)
                below = min(r - 1, serve.max_chips // shape.chips)  # the most replicas the bound rules out
                if below >= 1:
                    led.record(_overloaded(Candidate(ServeMode.COLOCATED, shape, below, cap, chunk), led.slos,
                                           serve.rate_per_s * work / below))
                todo.append((shape, cap, chunk, r))
    def simulate_one(item) -> bool:
        shape, cap, chunk, r = item
        c = Candidate(ServeMode.COLOCATED, shape, r, cap, chunk)
        led.simulations += 1
        first, finish, pre, kv = run_colocated(reqs, models[shape], c, serve.block_tokens)
        return led.record(outcome(c, reqs, first, finish, pre, led.slos, kv, deployment_watts(c, models))).feasible

    _best_first(led, todo, simulate_one)
    return todo


def _best_first(led: _Ledger, todo: list[tuple], simulate_one: Callable[[tuple], bool],
                extra: tuple[float, int] = (0.0, 0)) -> None:
    """Simulate the items ``(shape, ..., count)`` cheapest first (each with the dollars and
    chips ``extra`` added: another pool, or a lower bound on it); an item that fails comes
    back with one more replica while it fits ``max_chips``; stop once the cheapest left costs
    more than the best."""
    def cost(item) -> tuple[float, int]:
        return (round(item[-1] * item[0].dollars_per_hour + extra[0], 6), item[-1] * item[0].chips + extra[1])

    heap = [(cost(item), i, list(item)) for i, item in enumerate(todo) if cost(item)[1] <= led.serve.max_chips]
    heapq.heapify(heap)
    while heap:
        key, i, item = heapq.heappop(heap)
        if led.beaten(key):
            return
        if led.simulations >= led.serve.max_simulations:
            led.stopped = True
            return
        if simulate_one(tuple(item)):
            continue
        item = [*item[:-1], item[-1] + 1]
        if cost(item)[1] <= led.serve.max_chips:
            heapq.heappush(heap, (cost(item), i, item))


def _front_above(led: _Ledger, models: dict[Shape, ReplicaModel], families: list[tuple]) -> None:
    """When the answer serves fewer than all measured requests within both SLOs: the
    co-located deployments dearer than it, cheapest first (each shape and limits from its
    fewest replicas costing more, one more at a time), until one serves them all or
    ``max_simulations`` is spent: the cost vs goodput front above the answer."""
    b, rate = led.best, led.serve.rate_per_s
    if b is None or b.goodput_per_s >= rate or led.stopped:
        return
    top, heap = _cost(b.candidate), []
    for i, (shape, cap, chunk, r) in enumerate(families):
        while r * shape.chips <= led.serve.max_chips and (round(r * shape.dollars_per_hour, 6), r * shape.chips) <= top:
            r += 1
        if r * shape.chips <= led.serve.max_chips:
            heap.append(((round(r * shape.dollars_per_hour, 6), r * shape.chips), i, shape, cap, chunk, r))
    heapq.heapify(heap)
    while heap and led.simulations < led.serve.max_simulations:
        _, i, shape, cap, chunk, r = heapq.heappop(heap)
        c = Candidate(ServeMode.COLOCATED, shape, r, cap, chunk)
        led.simulations += 1
        first, finish, pre, kv = run_colocated(led.reqs, models[shape], c, led.serve.block_tokens)
        if led.record(outcome(c, led.reqs, first, finish, pre, led.slos, kv,
                              deployment_watts(c, models))).goodput_per_s >= rate:
            return
        if (r + 1) * shape.chips <= led.serve.max_chips:
            heapq.heappush(heap, ((round((r + 1) * shape.dollars_per_hour, 6), (r + 1) * shape.chips), i, shape,
                                  cap, chunk, r + 1))


# ---- disaggregated ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _PrefillPool:
    shape: Shape
    chunk: int
    replicas: int
    first_token_s: np.ndarray
    preemptions: np.ndarray
    ttft_p99_s: float

    @property
    def cost(self) -> tuple[float, int]:
        return (round(self.replicas * self.shape.dollars_per_hour, 6), self.replicas * self.shape.chips)


def _prefill_pools(led: _Ledger, models: dict[Shape, ReplicaModel], decode: tuple[float, int]
                   ) -> list[_PrefillPool]:
    """Each prefill shape and chunk with its fewest replicas meeting the TTFT SLO, cheapest
    first (``decode``: lower bounds on a decode pool's dollars and chips, added to each)."""
    serve, reqs = led.serve, led.reqs
    w = int(WARMUP_FRACTION * len(reqs))
    todo, out = [], []
    for shape, m in models.items():
        for chunk in serve.chunk_tokens:
            c = Candidate(ServeMode.DISAGGREGATED, shape, 0, 0, chunk, shape, 1)
            if chunk > m.max_prefill_tokens:
                led.record(pruned(c, led.slos, f"no mapping of {shape} fits a prefill above "
                                  f"{m.max_prefill_tokens} tokens"))
                continue
            if not fits_kv(m, reqs, serve.block_tokens, prompt_only=True):
                led.record(pruned(c, led.slos, "prefill pool: KV cache smaller than the longest prompt"))
                continue
            ttft0 = float(np.percentile(_prefill_alone_s(m.steps, _measured(reqs).prompt_tokens, chunk), 99))
            if ttft0 > serve.ttft_p99_s:
                led.record(pruned(c, led.slos, f"prefill pool: unloaded P99 TTFT {ttft0:.4g} s",
                                  ttft0 / serve.ttft_p99_s - 1, -math.inf))
                continue
            work = float(reqs.prompt_tokens.mean()) * _per_prefill_token_s(m.steps, chunk)
            r0 = _fewest(serve.rate_per_s, work)
            below = min(r0 - 1, serve.max_chips // shape.chips)
            if below >= 1:
                led.record(_overloaded(Candidate(ServeMode.DISAGGREGATED, shape, 0, 0, chunk, shape, below),
                                       led.slos, serve.rate_per_s * work / below))
            todo.append((shape, chunk, r0))

    def simulate_one(item) -> bool:
        shape, chunk, r = item
        led.simulations += 1
        first, pre = run_prefill_pool(reqs, models[shape], r, chunk, serve.block_tokens)
        p99 = float(np.percentile(first[w:] - reqs.arrival_s[w:], 99))
        if p99 <= serve.ttft_p99_s:
            out.append(_PrefillPool(shape, chunk, r, first, pre, p99))
            return True
        led.record(pruned(Candidate(ServeMode.DISAGGREGATED, shape, 0, 0, chunk, shape, r), led.slos,
                          f"prefill pool alone: P99 TTFT {p99:.4g} s", p99 / serve.ttft_p99_s - 1, -math.inf))
        return False

    _best_first(led, todo, simulate_one, extra=decode)
    return sorted(out, key=lambda p: (p.cost, p.ttft_p99_s))


def _disaggregated(led: _Ledger, models: dict[Shape, ReplicaModel]) -> None:
    serve, reqs = led.serve, led.reqs
    if not models:
        return
    ctx_lo = int(reqs.prompt_tokens.min()) + 1
    mean_o = float((reqs.output_tokens - 1).mean())
    decodes = []
    for shape, m in models.items():
        if not fits_kv(m, reqs, serve.block_tokens):
            continue
        if _unloaded_tpot_s(m.decode_only, _measured(reqs)) > serve.tpot_p99_s:
            continue
        for cap in (c for c in serve.batch_caps if c <= m.max_batch):
            d0 = _fewest(serve.rate_per_s, mean_o * _per_decode_token_s(m, m.decode_only, cap, ctx_lo))
            decodes.append((shape, cap, d0))
    if not decodes:
        return
    low = (min(d[-1] * d[0].dollars_per_hour for d in decodes), min(d[-1] * d[0].chips for d in decodes))
    pools = _prefill_pools(led, models, low)
    for pool in pools:
        if led.beaten((round(pool.cost[0] + low[0], 6), pool.cost[1] + low[1])):
            break
        _decode_search(led, models, pool, decodes)


def _decode_search(led: _Ledger, models: dict[Shape, ReplicaModel], pool: _PrefillPool,
                   decodes: list[tuple]) -> None:
    """The decode pools after ``pool``, cheapest first (``_best_first``)."""
    serve, reqs = led.serve, led.reqs

    def simulate_one(item) -> bool:
        shape, cap, d = item
        pm, dm = models[pool.shape], models[shape]
        moved = transfer_s(pm, dm, reqs.prompt_tokens, serve.scale_out_bw_GBps, serve.scale_out_latency_s)
        c = Candidate(ServeMode.DISAGGREGATED, shape, d, cap, pool.chunk, pool.shape, pool.replicas)
        led.simulations += 1
        finish, pre, kv = run_decode_pool(reqs, pool.first_token_s, moved, dm, d, cap, serve.block_tokens)
        return led.record(outcome(c, reqs, pool.first_token_s, finish, pool.preemptions + pre, led.slos, kv,
                                  deployment_watts(c, models))).feasible

    _best_first(led, decodes, simulate_one, extra=pool.cost)
