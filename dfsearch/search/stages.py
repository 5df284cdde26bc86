"""The whole-model pipeline search (docs/model.md, "Pipeline stages of a whole model").

A stacked LLM graph with ends (the embedding before its layers, the final norm and LM head
after them: ``kernels/pieces.py``) that runs E = num_layer / num_layer_in_graph > 1 times per
micro-batch is a pipeline whose stages do not all run the same graph: stage 1 runs the ends
before the layers and n_1 executions of the layers, the last stage n_PP executions and the
ends after, the stages between layers only (every n_s >= 1, sum n_s = E). The search
composes exact sub-searches, like the speculative-decoding search:

1. *Outer choices* are (shape, placement, micro-batch size). Each gets a lower bound from the
   layers alone (``lower_bound_ns`` of the layer graph, its E executions spread as evenly as
   the stages allow, the ends free); they are solved best bound first, and once the next
   bound reaches the incumbent the rest are pruned.
2. *One outer choice*: each piece is searched on the pinned shape (``engine.search(...,
   pinned=...)``: the ordinary search of a small graph) as one execution alone in a stage;
   its time per micro-batch and execution is T_p = II_p x micro-batch size.
3. *The split* n_1..n_PP minimises the slowest stage T_max (``best_split``, exact), within
   each stage's DRAM (its pieces' fixed bytes and the largest working set).
4. *Check*: the pieces' mappings are evaluated again in their stages (``Spec.piece``: runs
   per micro-batch, the other pieces' DRAM beside them). With one DRAM tier a piece's time
   does not depend on its stage, the times agree and the composition is exact. Where they do
   not (two DRAM tiers blend their bandwidth by the stage's total), the piece is searched
   again in its stage and the result is not claimed optimal.

The batch time of stage times T_s (per micro-batch) is

    nmb x T_max + beta x (sum_s T_s - T_max) + p2p,

with beta = 1, or under the bubble quirk (``Quirks.bubble_over_layers_per_stage``) 1 /
max(N x ceil(E / PP) - 1, 1); for equal stages it is (nmb + beta (PP - 1)) x T + p2p, the
uniform pipeline's formula. The sum of the T_s does not depend on the split and the batch
time grows with T_max (nmb >= 1 >= beta), so minimising T_max minimises it.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from dfsearch.codes import RunStatus, Status
from dfsearch.cost.model import Evaluation
from dfsearch.result import RunResult, SearchStats, Violation
from dfsearch.search.strategies.base import Progress
from dfsearch.spec import Spec, StagePiece

__all__ = ["Stage", "StagePlan", "is_staged", "best_split", "batch_ns", "search_stages"]

#: the pieces of a stage, in the order a micro-batch runs them
_PIECES = ("before", "layers", "after")


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage of the best mapping."""

    runs: int  #: executions of the layer graph per micro-batch
    layers: int  #: model layers (runs x layers in the graph)
    before: bool  #: runs the ends before the layers (the embedding)
    after: bool  #: runs the ends after the layers (final norm, LM head)
    time_ns: float  #: per micro-batch
    dram_bytes: float  #: per chip: every piece's fixed bytes and the largest working set

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": self.layers,
            "graph_executions": self.runs,
            "embedding": self.before,
            "lm_head": self.after,
            "time_per_micro_batch_s": self.time_ns / 1e9,
            "dram_bytes": self.dram_bytes,
        }


@dataclass(frozen=True, slots=True)
class StagePlan:
    """How the whole model runs: the stages and each piece's mapping."""

    stages: tuple[Stage, ...]
    layers: RunResult  #: the layer graph's search (its mapping runs in every stage)
    before: RunResult | None  #: the ends before the layers (None: the graph has none)
    after: RunResult | None
    micro_batches: int  #: per pipeline
    bubble: float  #: beta of the batch time (module docstring)
    p2p_ns: float
    batch_ns: float
    #: the pieces' times agree in every stage: the split is optimal for them
    split_exact: bool = True

    def to_json(self) -> dict[str, Any]:
        def piece(r: RunResult | None) -> dict[str, Any] | None:
            if r is None or r.evaluation is None:
                return None
            ev = r.evaluation
            return {
                "kernels": len(r.spec.graph.kernels),
                "status": r.status.label,
                "all_config_ii_s": ev.all_config_ii_ns / 1e9,
                "num_tile": ev.decision.num_tile,
                "configs": [list(c.kernels) for c in ev.configs if c.kernels],
            }

        return {
            "stages": [s.to_json() for s in self.stages],
            "micro_batches": self.micro_batches,
            "bubble": self.bubble,
            "p2p_s": self.p2p_ns / 1e9,
            "batch_s": self.batch_ns / 1e9,
            "batch_formula": "nmb x T_max + bubble x (sum T_s - T_max) + p2p",
            "split_exact": self.split_exact,
            "pieces": {
                "embedding": piece(self.before),
                "layers": piece(self.layers),
                "lm_head": piece(self.after),
            },
        }


def is_staged(spec: Spec) -> bool:
    """True when ``spec`` is a whole model run as pipeline pieces (module docstring): an LLM
    graph with ends that runs more than once per micro-batch, not itself a piece."""
    if spec.piece is not None or spec.workload.kind.label != "llm":
        return False
    wl = spec.workload
    if wl.num_layer <= wl.num_layer_in_graph:
        return False
    from dfsearch.kernels.pieces import split_pieces

    return split_pieces(spec.graph).has_ends


# --------------------------------------------------------------------------- the split
def batch_ns(times: list[float], micro_batches: int, bubble: float, p2p_ns: float) -> float:
    """nmb x T_max + bubble x (sum T_s - T_max) + p2p (module docstring)."""
    t_max = max(times)
    return micro_batches * t_max + bubble * (sum(times) - t_max) + p2p_ns


def best_split(
    executions: int, extra_ns: list[float], layer_ns: float, max_runs: list[int]
) -> tuple[int, ...] | None:
    """Executions per stage, every one >= 1 and <= ``max_runs[s]`` (its DRAM), summing to
    ``executions``, that minimise the slowest stage max_s (extra_ns[s] + n_s x layer_ns);
    None when no split fits. Exact: the optimum T_max is extra_ns[s] + a x layer_ns for
    some stage s and count a, and whether a T_max admits a split is monotone in it, so a
    binary search over a for every stage finds it. Among the splits that reach it, the one
    that lowers the slowest stages first is returned (ties: the earlier stage, which keeps
    more micro-batches in flight).
    """
    pp = len(extra_ns)
    if pp == 0 or executions < pp or any(m < 1 for m in max_runs):
        return None

    def within(tau: float) -> list[int]:
        out = []
        for e, cap in zip(extra_ns, max_runs):
            if layer_ns <= 0:
                a = cap if e <= tau else 0
            else:
                a = min(cap, max(0, math.floor((tau - e) / layer_ns)))
                while a < cap and e + (a + 1) * layer_ns <= tau:
                    a += 1
                while a > 0 and e + a * layer_ns > tau:
                    a -= 1
            out.append(a)
        return out

    def fits(tau: float) -> bool:
        u = within(tau)
        return min(u) >= 1 and sum(u) >= executions

    best = math.inf
    for s in range(pp):
        lo, hi = 1, min(executions, max_runs[s])
        if not fits(extra_ns[s] + hi * layer_ns):
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(extra_ns[s] + mid * layer_ns):
                hi = mid
            else:
                lo = mid + 1
        best = min(best, extra_ns[s] + lo * layer_ns)
    if not math.isfinite(best):
        return None
    runs = within(best)
    heap = [(-(extra_ns[s] + runs[s] * layer_ns), s) for s in range(pp) if runs[s] > 1]
    heapq.heapify(heap)
    excess = sum(runs) - executions
    while excess > 0:
        _, s = heapq.heappop(heap)
        runs[s] -= 1
        excess -= 1
        if runs[s] > 1:
            heapq.heappush(heap, (-(extra_ns[s] + runs[s] * layer_ns), s))
    return tuple(runs)


# --------------------------------------------------------------------------- the search
@dataclass
class _Run:
    """What the stage search has learnt (mutable, private to one ``search_stages`` call)."""

    spec: Spec
    seed: int | None
    budget: int
    deadline: float  #: perf_counter() time of the wall-clock stop (inf: none)
    used: int = 0
    solved: int = 0
    pruned: int = 0
    best: tuple[float, Evaluation, StagePlan] | None = None
    proven: bool = True  #: every solved choice was solved exactly
    open_bound: float = math.inf
    stop: str = ""
    violations: dict[str, Violation] | None = None
    notes: list[str] | None = None

    def remaining_s(self) -> float | None:
        if not math.isfinite(self.deadline):
            return None
        return max(1e-3, self.deadline - time.perf_counter())


def search_stages(
    spec: Spec,
    *,
    seed: int | None = None,
    time_limit_s: float | None = None,
    max_evaluations: int | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """The best whole-model pipeline mapping of ``spec`` (module docstring); the result's
    evaluation is the whole model's (its decision the layer graph's), ``result.stages`` the
    stages and the pieces' own results."""
    from dfsearch.kernels.pieces import split_pieces
    from dfsearch.search.objective import objective_of

    t0 = time.perf_counter()
    limit = spec.search.time_limit_s if time_limit_s is None else time_limit_s
    budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
    run = _Run(spec, seed, budget, t0 + limit if limit else math.inf, violations={}, notes=[])
    pieces = split_pieces(spec.graph)
    members = {"before": pieces.before, "layers": pieces.layers, "after": pieces.after}
    objective = objective_of(spec)
    choices = _choices(spec, members["layers"])
    for i, (bound, shape, pl, mbs) in enumerate(choices):
        if run.best is not None and bound >= run.best[0]:
            run.pruned += len(choices) - i
            break
        if _out_of_budget(run):
            run.open_bound = min(run.open_bound, bound)
            break
        run.solved += 1
        found = _solve_choice(run, members, shape, pl, mbs, bound)
        if found is not None:
            value = objective.value(found[0])
            if run.best is None or value < run.best[0]:
                run.best = (value, *found)
        if progress is not None:
            progress(i + 1, len(choices), run.best[0] if run.best else None)
    return _result(run, len(choices), time.perf_counter() - t0, objective.kind)


def _out_of_budget(run: _Run) -> bool:
    if run.used >= run.budget:
        run.stop = f"work budget of {run.budget:,} evaluations used up"
    elif time.perf_counter() > run.deadline:
        run.stop = "time limit reached"
    return bool(run.stop)


def piece_spec(
    spec: Spec,
    members: tuple[int, ...],
    micro_batch: int,
    runs: int = 1,
    resident_bytes: float = 0.0,
    *,
    end: bool = False,
) -> Spec:
    """The spec of one piece: its kernels, the micro-batch size pinned, its stage role. An
    ``end`` of the model (embedding, LM head) gets its configuration count searched
    (``num_config = "auto"``): the spec's count is the layer graph's."""
    from dfsearch.kernels.pieces import subgraph
    from dfsearch.spec import AUTO

    return replace(
        spec, graph=subgraph(spec.graph, members),
        workload=replace(spec.workload, micro_batch_size=micro_batch),
        execution=replace(spec.execution, num_config=AUTO) if end else spec.execution,
        piece=StagePiece(runs=runs, resident_bytes=resident_bytes),
    )  # fmt: skip


def _choices(spec: Spec, layers: tuple[int, ...]) -> list[tuple[float, tuple, Any, int]]:
    """Every (bound, shape, placement, micro-batch size), best bound first (ties: in
    enumeration order): the bound lets the layers alone run E executions over the stages
    as evenly as they can, the ends free (module docstring)."""
    from dfsearch.cost.lower import Outer, lower
    from dfsearch.cost.model import outer_status
    from dfsearch.search import outer as outer_mod
    from dfsearch.search.engine import outer_sharding

    wl = spec.workload
    executions = wl.num_layer // wl.num_layer_in_graph
    c_max = max(outer_mod.config_counts(spec))
    cache: dict = {}
    out = []
    for shape in outer_mod.shapes(spec):
        for pl in outer_mod.placements(spec, shape):
            for mbs in outer_mod.micro_batch_sizes(spec, shape, pl):
                layer_spec = piece_spec(spec, layers, mbs)
                best = math.inf
                for t in outer_mod.tile_counts(layer_spec):
                    sharding = outer_sharding(layer_spec, shape, t, pl, cache)
                    outer = Outer(shape, sharding, mbs, t, min(c_max, len(layers)), pl)
                    if outer_status(layer_spec, outer)[0] is not Status.OK:
                        continue
                    problem = lower(layer_spec, outer)
                    k = problem.constants
                    ii = (outer_mod.lower_bound_ns(problem) * k.num_copy - k.p2p_ns) / k.batch_mult
                    t_lb = max(ii, 0.0) * mbs  # one execution, per micro-batch
                    per_stage = -(-executions // problem.pp)  # the slowest stage runs >= this
                    beta = _bubble(spec, per_stage, problem.pp)
                    whole = (
                        problem.num_micro_batch * per_stage * t_lb
                        + beta * (executions - per_stage) * t_lb
                        + k.p2p_ns
                    )
                    best = min(best, whole / k.num_copy)
                out.append((best, shape, pl, mbs))
    order = sorted(range(len(out)), key=lambda i: (out[i][0], i))
    return [out[i] for i in order]


def _bubble(spec: Spec, per_stage: int, pp: int) -> float:
    """beta: 1, or under the bubble quirk 1 / max(model layers per stage - 1, 1)."""
    from dfsearch.cost.quirks import Quirks

    if pp <= 1 or not Quirks().bubble_over_layers_per_stage:
        return 1.0
    return 1.0 / max(per_stage * spec.workload.num_layer_in_graph - 1, 1)


def _solve_choice(
    run: _Run,
    members: dict[str, tuple[int, ...]],
    shape: tuple[int, ...],
    pl: Any,
    mbs: int,
    bound: float,
) -> tuple[Evaluation, StagePlan] | None:
    """The best whole-model mapping on one (shape, placement, micro-batch size), or None
    (steps 2-4 of the module docstring)."""
    relaxed: dict[str, RunResult] = {}
    for name in _PIECES:
        if members[name]:
            r = _search_piece(
                run, piece_spec(run.spec, members[name], mbs, end=name != "layers"), name, (shape, pl), bound
            )
            if r is None:
                return None
            relaxed[name] = r
    choice = _Choice(run, members, mbs, (shape, pl), bound, relaxed)
    split = choice.split()
    return None if split is None else choice.compose(split)


class _Choice:
    """One (shape, placement, micro-batch size) whose pieces were searched alone: their
    times, fixed DRAM and working sets, the split, and the pieces again in their stages."""

    def __init__(
        self,
        run: _Run,
        members: dict[str, tuple[int, ...]],
        mbs: int,
        pinned: tuple,
        bound: float,
        relaxed: dict[str, RunResult],
    ) -> None:
        spec = run.spec
        self.run, self.members, self.mbs, self.pinned, self.bound = (
            run,
            members,
            mbs,
            pinned,
            bound,
        )
        self.relaxed = relaxed
        lay = relaxed["layers"].evaluation
        assert lay is not None
        self.lay = lay
        self.executions = spec.workload.num_layer // spec.workload.num_layer_in_graph
        self.pp = lay.pp
        evs = {n: r.evaluation for n, r in relaxed.items()}
        self.ii = {n: ev.all_config_ii_ns for n, ev in evs.items()}  # type: ignore[union-attr]
        self.work = {n: ev.dram_bytes - ev.dram_use.fixed for n, ev in evs.items()}  # type: ignore[union-attr]
        self.fixed = {n: _fixed(spec, n, members[n], mbs, r, 1) for n, r in relaxed.items()}
        two = _fixed(spec, "layers", members["layers"], mbs, relaxed["layers"], 2)
        self.slope = two - self.fixed["layers"]

    def holds(self, s: int) -> list[str]:
        """The pieces stage s runs, in order."""
        last = self.pp - 1
        return [
            n
            for n in _PIECES
            if n in self.relaxed
            and (n == "layers" or (n == "before" and s == 0) or (n == "after" and s == last))
        ]

    def layer_fixed(self, runs: int) -> float:
        """Fixed DRAM of ``runs`` executions of the layer graph (affine in them)."""
        return self.fixed["layers"] + (runs - 1) * self.slope

    def _ends(self, s: int, what: dict[str, float]) -> float:
        return sum(what[n] for n in self.holds(s) if n != "layers")

    def split(self) -> tuple[int, ...] | None:
        """``best_split`` within every stage's DRAM; None (a DRAM violation noted) if none."""
        spec, pp, mbs = self.run.spec, self.pp, self.mbs
        cap = spec.system.memory.dram_bytes + spec.system.memory.second_dram_bytes
        max_runs = []
        for s in range(pp):
            room = (cap - self._ends(s, self.fixed) - max(self.work[n] for n in self.holds(s))
                    - self.fixed["layers"])  # fmt: skip
            if cap <= 0 or (self.slope <= 0 and room >= 0):
                max_runs.append(self.executions)
            else:
                max_runs.append(
                    min(self.executions, math.floor(room / self.slope) + 1) if room >= 0 else 0
                )
        extra = [self._ends(s, self.ii) * mbs for s in range(pp)]
        split = best_split(self.executions, extra, self.ii["layers"] * mbs, max_runs)
        if split is None:
            d = self.lay.decision
            _note(self.run, Violation.of(spec, Status.DRAM.label, max(self.least_dram() - cap, 0.0),
                                         d.shape, d.num_tile, d.num_config))  # fmt: skip
        return split

    def least_dram(self) -> float:
        """The DRAM per chip of the fullest stage under the split that minimises it (what
        the capacity would need for any split to fit)."""
        base = [self.fixed["layers"] - self.slope + self._ends(s, self.fixed)
                + max(self.work[n] for n in self.holds(s)) for s in range(self.pp)]  # fmt: skip
        split = best_split(self.executions, base, self.slope, [self.executions] * self.pp)
        assert split is not None  # PP <= E: every stage can hold one execution
        return max(b + n * self.slope for b, n in zip(base, split))

    def compose(self, split: tuple[int, ...]) -> tuple[Evaluation, StagePlan] | None:
        """Every piece again in its stage (step 4), then the whole model's evaluation."""
        spec, pp, mbs, lay = self.run.spec, self.pp, self.mbs, self.lay
        exact = True
        times, drams, uses = [], [], []
        cache: dict[tuple[str, int, float], Evaluation | None] = {}
        for s in range(pp):
            t, d, use = 0.0, 0.0, lay.dram_use
            for n in self.holds(s):
                runs = split[s] if n == "layers" else 1
                beside = sum(self.fixed[m] for m in self.holds(s) if m not in ("layers", n))
                beside += self.layer_fixed(split[s]) if n != "layers" else 0.0
                if (n, runs, beside) not in cache:
                    cache[n, runs, beside], same = self._in_stage(n, runs, beside)
                    exact &= same
                ev = cache[n, runs, beside]
                if ev is None:
                    return None
                t += ev.all_config_ii_ns * runs * mbs
                d = max(d, ev.dram_bytes)
                use = ev.dram_use if n == "layers" else use
            times.append(t)
            drams.append(d)
            uses.append(use)
        beta = _bubble(spec, -(-self.executions // pp), pp)
        total = batch_ns(times, lay.num_micro_batch, beta, lay.p2p_ns)
        flops = {n: r.spec.graph.flop for n, r in self.relaxed.items()}
        flop = (
            self.executions * flops["layers"] + flops.get("before", 0.0) + flops.get("after", 0.0)
        )
        worst = max(range(pp), key=lambda s: (drams[s], -s))
        slow = lay.num_micro_batch * max(times)
        whole = replace(
            lay, final_ns=total / spec.num_copy, ns_per_batch=total,
            workload_flop=flop * spec.workload.global_batch_size, dram_bytes=drams[worst],
            dram_use=uses[worst], layers_per_stage=max(split),
            pipeline_factor=(total - lay.p2p_ns) / slow if slow > 0 else 1.0,
        )  # fmt: skip
        n_in = spec.workload.num_layer_in_graph
        plan = StagePlan(
            stages=tuple(Stage(runs=split[s], layers=split[s] * n_in, before="before" in self.holds(s),
                               after="after" in self.holds(s), time_ns=times[s], dram_bytes=drams[s])
                         for s in range(pp)),
            layers=self.relaxed["layers"], before=self.relaxed.get("before"),
            after=self.relaxed.get("after"), micro_batches=lay.num_micro_batch, bubble=beta,
            p2p_ns=lay.p2p_ns, batch_ns=total, split_exact=exact,
        )  # fmt: skip
        if not exact:
            self.run.proven = False
            self.run.open_bound = min(self.run.open_bound, self.bound)
            self.run.notes.append(  # type: ignore[union-attr]
                f"shape {self.pinned[0]}, micro-batch {mbs}: a piece is slower in its stage than "
                "alone (two DRAM tiers); the split is not proven optimal")  # fmt: skip
        return whole, plan

    def _in_stage(self, name: str, runs: int, beside: float) -> tuple[Evaluation | None, bool]:
        """A piece's mapping evaluated in its stage, and whether it kept its time; when it
        did not (or no longer fits), the piece searched again in its stage."""
        from dfsearch.cost.lower import lower
        from dfsearch.cost.model import evaluate_problem

        role = piece_spec(self.run.spec, self.members[name], self.mbs, runs, beside,
                          end=name != "layers")  # fmt: skip
        alone = self.relaxed[name].evaluation
        assert alone is not None
        d = alone.decision
        ev = evaluate_problem(role, lower(role, _outer(d)), d)
        self.run.used += 1
        if ev.feasible and ev.all_config_ii_ns == alone.all_config_ii_ns:
            return ev, True
        again = _search_piece(self.run, role, name, self.pinned, self.bound)
        return (again.evaluation if again is not None else None), False


def _search_piece(
    run: _Run, piece: Spec, name: str, pinned: tuple, bound: float
) -> RunResult | None:
    """One piece's pinned search; None (and its violations noted) when it finds nothing."""
    from dfsearch.search.engine import search

    r = search(piece, seed=run.seed, time_limit_s=run.remaining_s() or 0,
               max_evaluations=max(1, run.budget - run.used), pinned=pinned)  # fmt: skip
    run.used += r.search.evaluations
    if r.search.stopped_by:
        run.stop = r.search.stopped_by
    exact = r.status in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE)
    if not exact or any(n.startswith("not proven") for n in r.search.notes):
        run.proven = False
        run.open_bound = min(run.open_bound, bound)
    if r.evaluation is None:
        for v in r.violations:
            _note(
                run, replace(v, detail=f"{_LABEL[name]}: {v.detail}" if v.detail else _LABEL[name])
            )
        return None
    return r


_LABEL = {"before": "embedding piece", "layers": "layer graph", "after": "LM head piece"}


def _note(run: _Run, v: Violation) -> None:
    assert run.violations is not None
    old = run.violations.get(v.constraint)
    if old is None or v.excess < old.excess:
        run.violations[v.constraint] = v


def _outer(d: Any) -> Any:
    from dfsearch.cost.lower import Outer

    return Outer(d.shape, d.sharding, d.micro_batch_size, d.num_tile, d.num_config, d.placement)


def _fixed(spec: Spec, name: str, members: tuple[int, ...], mbs: int, r: RunResult, runs: int) -> float:
    """Fixed DRAM bytes of a piece's mapping when it runs ``runs`` times in its stage."""
    from dfsearch.cost.lower import lower

    assert r.evaluation is not None
    piece = piece_spec(spec, members, mbs, runs, end=name != "layers")
    return lower(piece, _outer(r.evaluation.decision)).dram.fixed


def _result(run: _Run, total: int, seconds: float, kind: Any) -> RunResult:
    from dfsearch.search.engine import PROOF_REL_TOL

    best = run.best
    value = best[0] if best else math.inf
    bound = min(run.open_bound, value)
    met = best is not None and not run.stop and (bound >= value - PROOF_REL_TOL * abs(value))
    if met and run.proven:
        status = RunStatus.OPTIMAL
    elif run.stop == "interrupted":
        status = RunStatus.INTERRUPTED
    elif run.stop:
        status = RunStatus.STOPPED_BY_LIMIT
    elif best is None:
        status = RunStatus.INFEASIBLE
    else:
        status = RunStatus.FEASIBLE_NOT_PROVEN
    notes = list(dict.fromkeys(run.notes or []))
    if run.stop and run.stop != "interrupted":
        notes.append(f"{run.stop} after {run.solved + run.pruned} of {total} outer choices")
    if best is None and not run.proven and status is RunStatus.INFEASIBLE:
        notes.append("not proven infeasible: some pieces were searched heuristically")
    seed = run.spec.search.seed if run.seed is None else run.seed
    stats = SearchStats(
        method="stages+" + "/".join(sorted({
            m for r in _piece_results(best) for part in r.search.method.split("+")[1:]
            for m in part.split("/")})),
        seconds=seconds, evaluations=run.used, seed=seed, status=status, objective=kind,
        lower_bound=bound if (best is not None and bound > 0) else None,
        lower_bound_s=bound / 1e9 if (best is not None and bound > 0 and kind.minimises_time) else None,
        candidates=total, solved=run.solved, pruned=run.pruned, stopped_by=run.stop,
        notes=tuple(notes),
    )  # fmt: skip
    viol = tuple(run.violations[k] for k in sorted(run.violations)) if best is None else ()  # type: ignore[index]
    return RunResult(spec=run.spec, evaluation=best[1] if best else None, search=stats,
                     violations=viol, stages=best[2] if best else None)  # fmt: skip


def _piece_results(best: tuple[float, Evaluation, StagePlan] | None) -> list[RunResult]:
    if best is None:
        return []
    plan = best[2]
    return [r for r in (plan.before, plan.layers, plan.after) if r is not None]
