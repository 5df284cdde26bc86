"""One replica's iteration-level scheduler: continuous batching with chunked prefill and a
paged KV cache (docs/serving.md, "Request-level simulation").

Each iteration, in this order:

1. **KV for the decodes.** Every generating sequence adds one token to its KV cache; one
   whose blocks are full takes a new block of ``block_tokens`` tokens. When the free
   blocks do not suffice, the most recently admitted running request is preempted (until
   they do): it frees all its blocks and goes back to the front of the waiting queue; when
   admitted again its prompt *and* the tokens it had generated are prefilled anew
   (recompute; the tokens already generated stay generated).
2. **Prefill chunks.** The token budget left after one token per generating sequence goes to
   the requests still prefilling, in admission order, each taking what it still needs or
   what is left (chunked prefill: a prompt longer than the budget takes several
   iterations; the last one emits the first output token).
3. **Admission.** While the batch has fewer than ``max_batch`` requests, budget is left and
   the free blocks hold the head of the waiting queue's whole prompt, that request is
   admitted (first come, first served; its prompt's blocks are taken at once) and gets a
   chunk of the budget.

The iteration then takes ``steps.step_s(prefill tokens, generating sequences, context
tokens)``. Between events a run of iterations whose batch does not change (only
generating sequences, nothing admissible, no preemption due) is computed at once with
numpy; it gives what one iteration at a time gives, up to the rounding of the sums.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass

import numpy as np

from dfsearch.capacity._checks import is_int, require
from dfsearch.capacity.steps import StepTimes

__all__ = ["Scheduler", "ReplicaEngine", "RequestLog"]

#: the fewest unchanged iterations computed as one run: shorter runs go one iteration at a
#: time, which is faster below about 8 (numpy's fixed cost; benchmarks/serving_sim.py)
SHORTEST_RUN = 8


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The scheduler's limits: ``max_batch`` requests in the running batch (prefilling or
    generating), ``token_budget`` tokens computed per iteration (prefill tokens plus one
    per generating sequence; at least ``max_batch``), KV blocks of ``block_tokens``."""

    max_batch: int
    token_budget: int
    block_tokens: int = 16

    def __post_init__(self) -> None:
        for name in ("max_batch", "block_tokens"):
            value = getattr(self, name)
            require(is_int(value) and value >= 1, f"scheduler.{name}", "an integer >= 1", value)
        require(is_int(self.token_budget) and self.token_budget >= self.max_batch, "scheduler.token_budget",
                f"an integer >= max_batch ({self.max_batch})", self.token_budget)


class RequestLog:
    """Per-request inputs and outcomes, shared by the replicas of one simulation (each
    request index belongs to one replica)."""

    def __init__(self, arrival_s, prompt_tokens, output_tokens) -> None:
        self.arrival = arrival_s.tolist()
        self.prompt = prompt_tokens.tolist()
        self.output = output_tokens.tolist()
        n = len(self.arrival)
        self.generated = [0] * n  #: output tokens generated (at the decode start for decoders)
        self.decode_start = [0] * n  #: iteration index of a generating request's first decode
        self.first_token_s = [float("nan")] * n
        self.finish_s = [float("nan")] * n
        self.preemptions = [0] * n
        self.version = [0] * n  #: bumped on preemption: stale finish events are skipped


class ReplicaEngine:
    """The state of one replica; :meth:`submit` requests in arrival order, :meth:`run_until`
    a time. All state is local to the engine and the shared :class:`RequestLog`."""

    def __init__(self, steps: StepTimes, scheduler: Scheduler, kv_blocks: int, log: RequestLog) -> None:
        self.steps, self.log, self.kv_blocks = steps, log, kv_blocks
        self.cap, self.budget, self.block = scheduler.max_batch, scheduler.token_budget, scheduler.block_tokens
        self.pending: deque[int] = deque()  # submitted, not arrived yet at the clock
        self.waiting: deque[int] = deque()  # arrived, not admitted
        self.running: dict[int, None] = {}  # admitted, in admission order
        self.prefilling: dict[int, list[int]] = {}  # rid -> [target tokens, done], admission order
        self.held: dict[int, int] = {}  # blocks of the prefilling requests
        self.phase = [0] * len(log.arrival)  # a decoder needs a block when iteration % block == phase
        self.phase_count = [0] * self.block
        self.finishes: list[tuple[int, int, int]] = []  # heap of (last iteration, rid, version)
        self.free, self.k, self.clock, self.ctx_held = kv_blocks, 0, 0.0, 0
        self.kv_block_s, self.peak_blocks = 0.0, 0
        self.submitted, self.finish_times = 0, []

    # ---- requests in and out ----------------------------------------------------------------
    def submit(self, rid: int) -> None:
        self.pending.append(rid)
        self.submitted += 1

    def unfinished_at(self, t: float) -> int:
        """Requests submitted here and not finished by time ``t`` (call after run_until(t))."""
        return self.submitted - bisect_right(self.finish_times, t)

    def _finish(self, rid: int, blocks: int) -> None:
        self.free += blocks
        del self.running[rid]
        self.log.finish_s[rid] = self.clock
        self.finish_times.append(self.clock)

    def _held_tokens(self, rid: int) -> int:
        """KV tokens of a generating request before iteration ``self.k``."""
        log = self.log
        return log.prompt[rid] + log.generated[rid] - 1 + self.k - log.decode_start[rid]

    # ---- the main loop ----------------------------------------------------------------------
    def run_until(self, t: float) -> None:
        """Simulate every iteration that starts before ``t``."""
        log = self.log
        while True:
            while self.pending and log.arrival[self.pending[0]] <= self.clock:
                self.waiting.append(self.pending.popleft())
            if not self.running and not self.waiting:
                if not self.pending or log.arrival[self.pending[0]] >= t:
                    return
                self.clock = log.arrival[self.pending[0]]
                continue
            if self.clock >= t:
                return
            if not self._run_unchanged(t):
                self._iterate()

    def _iterate(self) -> None:
        """One iteration: KV for the decodes (preempting if short), prefill chunks, admission."""
        need = self.phase_count[self.k % self.block]
        while need > self.free:
            need -= self._preempt_newest()
        self.free -= need
        decoders = len(self.running) - len(self.prefilling)
        budget = self.budget - decoders
        ctx = self.ctx_held + decoders
        prefill = 0
        done = []
        for rid, st in self.prefilling.items():
            if budget == 0:
                break
            chunk = min(st[0] - st[1], budget)
            st[1] += chunk
            budget -= chunk
            prefill += chunk
            ctx += st[1]
            if st[1] == st[0]:
                done.append(rid)
        while self.waiting and budget > 0 and len(self.running) < self.cap:
            rid = self.waiting[0]
            target = self.log.prompt[rid] + self.log.generated[rid]
            blocks = -(-target // self.block)
            if blocks > self.free:
                break
            self.waiting.popleft()
            self.free -= blocks
            self.held[rid] = blocks
            self.running[rid] = None
            chunk = min(target, budget)
            self.prefilling[rid] = [target, chunk]
            budget -= chunk
            prefill += chunk
            ctx += chunk
            if chunk == target:
                done.append(rid)
        self._advance(self.steps.step_s(prefill, decoders, ctx), decoders)
        self._end_decodes()
        for rid in done:
            self._end_prefill(rid)

    def _advance(self, dt: float, decoders: int) -> None:
        used = self.kv_blocks - self.free
        self.kv_block_s += dt * used
        self.peak_blocks = max(self.peak_blocks, used)
        self.clock += dt
        self.k += 1
        self.ctx_held += decoders

    def _end_prefill(self, rid: int) -> None:
        log = self.log
        target, _ = self.prefilling.pop(rid)
        blocks = self.held.pop(rid)
        if log.generated[rid] == 0:
            log.first_token_s[rid] = self.clock
        log.generated[rid] += 1
        if log.generated[rid] == log.output[rid]:
            self._finish(rid, blocks)
            return
        log.decode_start[rid] = self.k
        phase = (self.k - target) % self.block  # held = target tokens at iteration k
        self.phase[rid] = phase
        self.phase_count[phase] += 1
        self.ctx_held += target
        last = self.k + log.output[rid] - log.generated[rid] - 1
        heapq.heappush(self.finishes, (last, rid, log.version[rid]))

    def _end_decodes(self) -> None:
        """Finish the generating requests whose last token came out of iteration k - 1."""
        log = self.log
        while self.finishes and self.finishes[0][0] < self.k:
            _, rid, version = heapq.heappop(self.finishes)
            if version != log.version[rid]:
                continue
            held = self._held_tokens(rid)
            log.generated[rid] = log.output[rid]
            self.phase_count[self.phase[rid]] -= 1
            self.ctx_held -= held
            self._finish(rid, -(-held // self.block))

    def _preempt_newest(self) -> int:
        """Preempt the most recently admitted request; 1 if it needed a block this iteration."""
        log = self.log
        rid = next(reversed(self.running))
        del self.running[rid]
        log.preemptions[rid] += 1
        log.version[rid] += 1
        self.waiting.appendleft(rid)
        if rid in self.prefilling:
            del self.prefilling[rid]
            self.free += self.held.pop(rid)
            return 0
        held = self._held_tokens(rid)
        log.generated[rid] += self.k - log.decode_start[rid]
        self.free += -(-held // self.block)
        self.ctx_held -= held
        self.phase_count[self.phase[rid]] -= 1
        return int(self.phase[rid] == self.k % self.block)

    # ---- runs of unchanged iterations -------------------------------------------------------
    def _run_unchanged(self, t: float) -> bool:
        """Compute the iterations up to the next event at once, when only generating
        sequences run and nothing can be admitted before a request finishes; False if the
        next iteration is to be computed alone (fewer than SHORTEST_RUN would be unchanged)."""
        if self.prefilling:
            return False
        decoders = len(self.running)
        arrival_matters = decoders < self.cap and not self.waiting
        if decoders < self.cap and self.waiting:
            head = self.waiting[0]
            if -(-(self.log.prompt[head] + self.log.generated[head]) // self.block) <= self.free:
                return False
        while self.finishes[0][2] != self.log.version[self.finishes[0][1]]:
            heapq.heappop(self.finishes)
        m = min(self.finishes[0][0] - self.k + 1, self._iterations_with_blocks(self.finishes[0][0] - self.k + 1))
        if m < SHORTEST_RUN:
            return False
        steps = np.arange(m)
        dts = self.steps.step_s(0, decoders, self.ctx_held + decoders * (steps + 1))
        ends = self.clock + np.cumsum(dts)
        # iteration i starts at ends[i - 1] (the first at the clock, before t and any arrival)
        m = 1 + int(ends[: m - 1].searchsorted(t))
        if arrival_matters and self.pending:
            m = min(m, 1 + int(ends[: m - 1].searchsorted(self.log.arrival[self.pending[0]])))
        needs = np.asarray(self.phase_count)[(self.k + steps[:m]) % self.block]
        used = self.kv_blocks - self.free + np.cumsum(needs)
        self.kv_block_s += float(np.dot(dts[:m], used))
        self.peak_blocks = max(self.peak_blocks, int(used[-1]))
        self.free = self.kv_blocks - int(used[-1])
        self.clock = float(ends[m - 1])
        self.k += m
        self.ctx_held += decoders * m
        self._end_decodes()
        return True

    def _iterations_with_blocks(self, limit: int) -> int:
        """How many of the next ``limit`` iterations the free blocks carry without preemption."""
        decoders = sum(self.phase_count)
        cycles = min(self.free // decoders, limit // self.block + 1)
        m, used = cycles * self.block, cycles * decoders
        while m < limit:
            step = self.phase_count[(self.k + m) % self.block]
            if used + step > self.free:
                break
            used += step
            m += 1
        return min(m, limit)
