"""The cost of a whole model in pipeline pieces (docs/model.md, "Pipeline stages of a whole
model").

A stacked LLM graph with ends (the embedding before its layers, the final norm and LM head
after them: ``kernels/pieces.py``) whose layers run E = num_layer / num_layer_in_graph > 1
times per micro-batch is a pipeline whose stages do not all run the same program: stage 1
runs the ends before the layers and n_1 executions of the layer graph, the last stage n_PP
executions and the ends after, the stages between only layers (every n_s >= 1, sum n_s = E).
Each piece is evaluated as a spec of its own (``piece_spec``: its kernels and its role in the
stage, ``Spec.piece``, which lowering reads: executions in the stage, the other pieces' fixed
DRAM beside it). A piece's time per micro-batch and execution is T_p = II_p x micro-batch
size; stage s takes T_s = sum of its pieces' T_p x runs. The batch time is

    nmb x T_max + beta x (sum_s T_s - T_max) + p2p,

with beta = 1, or under the bubble quirk (``Quirks.bubble_over_layers_per_stage``)
1 / max(N x ceil(E / PP) - 1, 1); for equal stages it is (nmb + beta (PP - 1)) x T + p2p, the
uniform pipeline's formula. The sum of the T_s does not depend on the split and the batch
time grows with T_max (nmb >= 1 >= beta), so ``best_split``, which minimises T_max within
every stage's DRAM, minimises the batch time for given pieces.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dfsearch.codes import Collective, ExecutionModel, Parallelism, Status
from dfsearch.cost.lower import Outer, lower
from dfsearch.cost.model import Evaluation, evaluate, evaluate_problem
from dfsearch.cost.stage_cuts import cut_split
from dfsearch.decision import Decision
from dfsearch.kernels.pieces import split_pieces, subgraph
from dfsearch.spec import AUTO, Spec, StagePiece
from dfsearch.system.fabric import Fabric

__all__ = [
    "PIECES",
    "Stage",
    "StagePlan",
    "StageModel",
    "is_staged",
    "members_of",
    "piece_spec",
    "batch_ns",
    "best_split",
    "bubble",
    "evaluate_staged",
]

#: the pieces of a stage, in the order a micro-batch runs them (with ``search.stage_cuts``
#: also "second<i>" before the layers and "first<i>" after them: the two parts of a layer cut
#: at cut point i, ``cost/stage_cuts.py``)
PIECES = ("before", "layers", "after")
#: their names in reports, JSON and mapping files
LABELS = {"before": "embedding", "layers": "layer graph", "after": "lm_head"}


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage of a mapping."""

    runs: int  #: executions of the layer graph per micro-batch
    layers: int  #: model layers (runs x layers in the graph)
    before: bool  #: runs the ends before the layers (the embedding)
    after: bool  #: runs the ends after the layers (final norm, LM head)
    time_ns: float  #: per micro-batch
    dram_bytes: float  #: per chip: every piece's fixed bytes and the largest working set
    #: the stage starts inside a layer, after this kernel (its second part; None: it does not)
    starts_after: str | None = None
    #: the stage ends inside a layer, after this kernel (its first part; None: it does not)
    ends_after: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"layers": self.layers, "graph_executions": self.runs, "embedding": self.before,
                "lm_head": self.after, "starts_inside_layer_after": self.starts_after,
                "ends_inside_layer_after": self.ends_after,
                "time_per_micro_batch_s": self.time_ns / 1e9,
                "dram_bytes": self.dram_bytes}  # fmt: skip


@dataclass(frozen=True, slots=True)
class StagePlan:
    """How a whole model runs: its stages and every piece's mapping (evaluated alone)."""

    stages: tuple[Stage, ...]
    #: piece ("before", "layers", "after", "first<i>", "second<i>") -> its kernel names and
    #: its evaluation alone
    names: dict[str, tuple[str, ...]]
    pieces: dict[str, Evaluation]
    micro_batches: int  #: per pipeline
    bubble: float  #: beta of the batch time (module docstring)
    p2p_ns: float
    batch_ns: float
    #: every piece kept its time in its stage: the split is optimal for these pieces
    split_exact: bool = True
    #: the space the split was chosen over (the report's note)
    space: str = "whole layer-graph executions per stage"
    #: bytes sent across a cut after each kernel a boundary cuts after (per sample)
    cut_bytes: dict[str, float] = field(default_factory=dict)

    @property
    def slowest_ns(self) -> float:
        """The slowest stage's time per micro-batch (T_max: it sets the pace)."""
        return max(st.time_ns for st in self.stages)

    @property
    def has_cuts(self) -> bool:
        return any(s.ends_after for s in self.stages)

    def mapping(self) -> dict[str, Any]:
        """The ends' parts of a mapping file (``docs/mapping.md``): ``stage_layers`` and one
        table per end (tile count, configurations, sharding). A plan with cuts inside a
        layer adds ``stage_cuts`` (the JSON shows it; the mapping format cannot express it,
        so the CLI refuses to write such a mapping file)."""
        out: dict[str, Any] = {"stage_layers": [s.runs for s in self.stages]}
        if self.has_cuts:
            out["stage_cuts"] = [s.ends_after or "" for s in self.stages[:-1]]
        for name in ("before", "after"):
            if name in self.pieces:
                d, names = self.pieces[name].decision, self.names[name]
                out[LABELS[name]] = {
                    "num_tile": d.num_tile, "num_config": d.num_config,
                    "config": dict(zip(names, d.config)),
                    "sharding": {n: s.label for n, s in zip(names, d.sharding)},
                }  # fmt: skip
        return out

    def to_json(self) -> dict[str, Any]:
        def piece(name: str) -> dict[str, Any] | None:
            ev = self.pieces.get(name)
            if ev is None:
                return None
            return {"kernels": len(self.names[name]), "all_config_ii_s": ev.all_config_ii_ns / 1e9,
                    "num_tile": ev.decision.num_tile,
                    "configs": [list(c.kernels) for c in ev.configs if c.kernels]}  # fmt: skip

        used = sorted({st.ends_after for st in self.stages if st.ends_after})
        cuts = [{"after": k, "cut_bytes": self.cut_bytes[k],
                 "first_part": piece("first:" + k), "second_part": piece("second:" + k)}
                for k in used]  # fmt: skip
        return {
            "stages": [s.to_json() for s in self.stages],
            "micro_batches": self.micro_batches, "bubble": self.bubble,
            "p2p_s": self.p2p_ns / 1e9, "batch_s": self.batch_ns / 1e9,
            "batch_formula": "nmb x T_max + bubble x (sum T_s - T_max) + p2p",
            "split_exact": self.split_exact, "split_space": self.space,
            "pieces": {LABELS[n].replace(" ", "_"): piece(n) for n in PIECES},
            "cuts_inside_layers": cuts,
        }  # fmt: skip


def is_staged(spec: Spec) -> bool:
    """True when ``spec`` is a whole model run as pipeline pieces: an LLM graph with ends
    whose layers run more than once per micro-batch, not itself a piece."""
    if spec.piece is not None or spec.workload.kind.label != "llm":
        return False
    wl = spec.workload
    if wl.num_layer <= wl.num_layer_in_graph:
        return False
    return split_pieces(spec.graph).has_ends


def members_of(spec: Spec) -> dict[str, tuple[int, ...]]:
    """Piece -> kernel indices in the spec's graph (empty for an absent end)."""
    p = split_pieces(spec.graph)
    return {"before": p.before, "layers": p.layers, "after": p.after}


def piece_spec(spec: Spec, members: tuple[int, ...], micro_batch: int, runs: int = 1,
               resident_bytes: float = 0.0, *, end: bool = False, configs: int | None = None
               ) -> Spec:
    """The spec of one piece: its kernels, the micro-batch size pinned, its stage role. An
    ``end`` of the model (embedding, LM head) gets its configuration count searched
    (``num_config = "auto"``): the spec's count is the layer graph's. ``configs`` pins the
    count (a part of the layer graph cut by a stage boundary: ``plan/stages.py``)."""
    ex = spec.execution
    if end:
        ex = replace(ex, num_config=AUTO)
    elif configs is not None:
        ex = replace(ex, num_config=configs)
    return replace(
        spec, graph=subgraph(spec.graph, members),
        workload=replace(spec.workload, micro_batch_size=micro_batch), execution=ex,
        piece=StagePiece(runs=runs, resident_bytes=resident_bytes),
    )  # fmt: skip


# --------------------------------------------------------------------------- the split
def batch_ns(times: list[float], micro_batches: int, beta: float, p2p_ns: float) -> float:
    """nmb x T_max + beta x (sum T_s - T_max) + p2p (module docstring)."""
    t_max = max(times)
    return micro_batches * t_max + beta * (sum(times) - t_max) + p2p_ns


def bubble(spec: Spec, per_stage: int, pp: int) -> float:
    """beta: 1, or under the bubble quirk 1 / max(model layers per stage - 1, 1) (not under
    the realistic execution model); divided by v under interleaved 1F1B with v virtual
    stages (``workloads/llm_schedule.py``)."""
    v = max(spec.training.interleave, 1)
    realistic = spec.execution.model is ExecutionModel.REALISTIC
    if pp <= 1 or realistic or not spec.quirks.bubble_over_layers_per_stage:
        return 1.0 / v if pp > 1 else 1.0
    return 1.0 / max(per_stage * spec.workload.num_layer_in_graph - 1, 1) / v


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


# --------------------------------------------------------------------------- the model
#: what to do when a piece's mapping changes time (or no longer fits) in its stage: given
#: (piece, its spec in the stage, its evaluation there), the evaluation to use (None: none)
Restage = Callable[[str, Spec, Evaluation], "Evaluation | None"]


class StageModel:
    """A whole model's pieces on one (shape, placement, micro-batch size), each evaluated
    alone (one execution, nothing beside it): their times, fixed DRAM and working sets, the
    split, and the pieces again in their stages (``compose``)."""

    def __init__(self, spec: Spec, members: dict[str, tuple[int, ...]], micro_batch: int,
                 alone: dict[str, Evaluation]) -> None:
        self.spec, self.members, self.mbs, self.alone = spec, members, micro_batch, alone
        lay = alone["layers"]
        self.lay = lay
        self.executions = spec.workload.num_layer // spec.workload.num_layer_in_graph
        self.pp = lay.pp
        self.ii = {n: ev.all_config_ii_ns for n, ev in alone.items()}
        self.work = {n: ev.dram_bytes - ev.dram_use.fixed for n, ev in alone.items()}
        self.fixed = {n: self._lowered(n, 1).dram.fixed for n in alone}
        two = self._lowered("layers", 2)
        self.slope = two.dram.fixed - self.fixed["layers"]
        #: DRAM per chip in effect (inf: unlimited; a second tier counts only where the
        #: equations use it)
        self.cap = two.constants.dram_cap + two.constants.dram2_cap
        self.failed: Evaluation | None = None  #: a piece that does not fit in its stage
        #: the cut points whose parts are pieces ("first:<kernel>", "second:<kernel>")
        self.cut_points: tuple[Any, ...] = ()
        self.space = "whole layer-graph executions per stage"

    def spec_of(self, name: str, runs: int = 1, beside: float = 0.0) -> Spec:
        part = ":" in name  # "first:<kernel>", "second:<kernel>": their searched count
        return piece_spec(self.spec, self.members[name], self.mbs, runs, beside,
                          end=name != "layers" and not part,
                          configs=self.alone[name].decision.num_config if part else None)  # fmt: skip

    def _lowered(self, name: str, runs: int) -> Any:
        """The lowered problem of a piece's mapping when it runs ``runs`` times in its stage."""
        return lower(self.spec_of(name, runs), _outer(self.alone[name].decision))

    def holds(self, s: int, runs: tuple[int, ...] | None = None, cuts: tuple[int, ...] = ()
              ) -> list[str]:
        """The pieces stage s runs, in order (``runs``: its executions, None: >= 1;
        ``cuts``: per boundary 0 or the 1-based cut point it cuts at)."""
        last = self.pp - 1
        b = cuts[s - 1] if cuts and s > 0 else 0
        a = cuts[s] if cuts and s < last else 0
        out = ["before"] if s == 0 and "before" in self.alone else []
        out += [self.part("second", b)] if b else []
        out += ["layers"] if runs is None or runs[s] > 0 else []
        out += [self.part("first", a)] if a else []
        return out + (["after"] if s == last and "after" in self.alone else [])

    def part(self, which: str, i: int) -> str:
        """The piece name of the first or second part of cut point i (1-based)."""
        return f"{which}:{self.cut_points[i - 1].after}"

    def layer_fixed(self, runs: int) -> float:
        """Fixed DRAM of ``runs`` executions of the layer graph (affine in them)."""
        return self.fixed["layers"] + (runs - 1) * self.slope

    def _ends(self, s: int, what: dict[str, float]) -> float:
        return sum(what[n] for n in self.holds(s) if n != "layers")

    def _base(self, s: int) -> float:
        """DRAM of stage s but its layers' fixed bytes beyond one execution."""
        return self.fixed["layers"] + self._ends(s, self.fixed) + max(self.work[n] for n in self.holds(s))

    def split(self) -> tuple[int, ...] | None:
        """``best_split`` within every stage's DRAM (None: no split fits)."""
        cap = self.cap
        max_runs = []
        for s in range(self.pp):
            room = cap - self._base(s)
            if math.isinf(cap) or (self.slope <= 0 and room >= 0):
                max_runs.append(self.executions)
            elif room < 0:
                max_runs.append(0)
            else:
                max_runs.append(min(self.executions, math.floor(room / self.slope) + 1))
        extra = [self._ends(s, self.ii) * self.mbs for s in range(self.pp)]
        return best_split(self.executions, extra, self.ii["layers"] * self.mbs, max_runs)

    def cut_p2p_ns(self, i: int) -> float:
        """What a cut at cut point i (1-based; 0: none) adds to the batch's p2p: its bytes
        over the pp dimension's link, priced as the pipeline's own p2p term (the fabric)."""
        if i == 0 or self.pp <= 1:
            return 0.0
        d = self.lay.decision
        fabric = Fabric.of(self.spec, d.shape, d.placement)
        return fabric.collective_time_ns(Collective.POINT_TO_POINT,
                                         self.cut_points[i - 1].cut_bytes, Parallelism.PP)

    def _max_runs(self, s: int, b: int, a: int) -> int:
        """Most executions stage s holds within its DRAM after the second part of a layer cut
        at cut point b and before the first part of one cut at a (-1: not even none)."""
        if math.isinf(self.cap):
            return self.executions
        cuts = tuple(b if x == s - 1 else a if x == s else 0 for x in range(self.pp - 1))
        names = self.holds(s, (0,) * self.pp, cuts)
        fixed = sum(self.fixed[n] for n in names)
        work = max((self.work[n] for n in names), default=0.0)
        none = 0 if fixed + work <= self.cap else -1
        room = self.cap - fixed - self.fixed["layers"] - max(work, self.work["layers"])
        if room < 0:
            return none
        if self.slope <= 0:
            return self.executions
        return min(self.executions, math.floor(room / self.slope) + 1)

    def cut_split(self) -> Any:
        """The best split over this model's space (``stage_cuts.cut_split``): stages may
        hold no whole execution where they hold an end or a part, and every boundary may cut
        a layer at one of ``self.cut_points``. None: none fits."""
        beta = bubble(self.spec, -(-self.executions // self.pp), self.pp)
        extra = [self._ends(s, self.ii) * self.mbs for s in range(self.pp)]
        has_ends = [bool(self._ends(s, {n: 1.0 for n in self.alone})) for s in range(self.pp)]
        t_layer = self.ii["layers"] * self.mbs
        parts = []
        for i in range(1, len(self.cut_points) + 1):
            first = self.ii[self.part("first", i)] * self.mbs
            second = self.ii[self.part("second", i)] * self.mbs
            parts.append((first, second, beta * (first + second - t_layer) + self.cut_p2p_ns(i)))
        return cut_split(self.executions, extra, t_layer, parts, self._max_runs, has_ends,
                         self.lay.num_micro_batch - beta)

    def least_dram(self) -> float:
        """DRAM per chip of the fullest stage under the split that minimises it (what the
        capacity would need for some split to fit)."""
        base = [self._base(s) - self.slope for s in range(self.pp)]
        split = best_split(self.executions, base, self.slope, [self.executions] * self.pp)
        assert split is not None  # PP <= E: every stage can hold one execution
        return max(b + n * self.slope for b, n in zip(base, split))

    def compose(self, split: tuple[int, ...], restage: Restage | None = None,
                cuts: tuple[int, ...] = ()) -> tuple[Evaluation, StagePlan] | None:
        """Every piece evaluated in its stage (``restage`` decides what happens when one
        changes time there; without it the stage's own evaluation counts), then the whole
        model's evaluation (decision: the layer graph's) and its plan. None when a piece
        does not fit in its stage (``self.failed`` says why)."""
        exact = True
        times, drams, uses = [], [], []
        cache: dict[tuple[str, int, float], Evaluation | None] = {}
        for s in range(self.pp):
            t, d, use = 0.0, 0.0, self.lay.dram_use
            held = self.holds(s, split, cuts)
            for n in held:
                runs = split[s] if n == "layers" else 1
                beside = sum(self.fixed[m] for m in held if m not in ("layers", n))
                beside += self.layer_fixed(split[s]) if n != "layers" and "layers" in held else 0.0
                if (n, runs, beside) not in cache:
                    cache[n, runs, beside], same = self._in_stage(n, runs, beside, restage)
                    exact &= same
                ev = cache[n, runs, beside]
                if ev is None:
                    return None
                t += ev.all_config_ii_ns * runs * self.mbs
                d = max(d, ev.dram_bytes)
                use = ev.dram_use if n == "layers" else use
            times.append(t)
            drams.append(d)
            uses.append(use)
        return self._whole(split, times, drams, uses, exact, cuts)

    def _in_stage(self, name: str, runs: int, beside: float, restage: Restage | None
                  ) -> tuple[Evaluation | None, bool]:
        """(the piece in its stage, whether it kept its time alone)."""
        role = self.spec_of(name, runs, beside)
        d = self.alone[name].decision
        ev = evaluate_problem(role, lower(role, _outer(d)), d)
        if ev.feasible and ev.all_config_ii_ns == self.alone[name].all_config_ii_ns:
            return ev, True
        if restage is not None:
            again = restage(name, role, ev)
            if again is None:
                self.failed = ev
            return again, False
        if not ev.feasible:
            self.failed = ev
            return None, False
        return ev, False

    def _whole(self, split: tuple[int, ...], times: list[float], drams: list[float],
               uses: list[Any], exact: bool, cuts: tuple[int, ...] = ()
               ) -> tuple[Evaluation, StagePlan]:
        spec, lay, pp = self.spec, self.lay, self.pp
        beta = bubble(spec, -(-self.executions // pp), pp)
        p2p = lay.p2p_ns + sum(self.cut_p2p_ns(i) for i in cuts)
        total = batch_ns(times, lay.num_micro_batch, beta, p2p)
        flops = {n: spec.graph.flop_of(self.members[n]) for n in self.alone if n in PIECES}
        flop = self.executions * flops["layers"] + flops.get("before", 0.0) + flops.get("after", 0.0)
        worst = max(range(pp), key=lambda s: (drams[s], -s))
        slow = lay.num_micro_batch * max(times)
        whole = replace(
            lay, final_ns=total / spec.num_copy, ns_per_batch=total,
            workload_flop=flop * spec.workload.global_batch_size, dram_bytes=drams[worst],
            dram_use=uses[worst], layers_per_stage=max(split),
            pipeline_factor=(total - p2p) / slow if slow > 0 else 1.0, p2p_ns=p2p,
        )  # fmt: skip
        n_in = spec.workload.num_layer_in_graph
        held = [self.holds(s, split, cuts) for s in range(pp)]
        names = {n: tuple(spec.graph.kernels[k].name for k in self.members[n]) for n in self.alone}
        plan = StagePlan(
            stages=tuple(Stage(runs=split[s], layers=split[s] * n_in, before="before" in held[s],
                               after="after" in held[s], time_ns=times[s], dram_bytes=drams[s],
                               starts_after=self._cut_name(cuts, s - 1),
                               ends_after=self._cut_name(cuts, s))
                         for s in range(pp)),
            names=names, pieces=dict(self.alone), micro_batches=lay.num_micro_batch,
            bubble=beta, p2p_ns=p2p, batch_ns=total, split_exact=exact,
            space=self.space, cut_bytes={c.after: c.cut_bytes for c in self.cut_points},
        )  # fmt: skip
        return whole, plan

    def _cut_name(self, cuts: tuple[int, ...], boundary: int) -> str | None:
        """The kernel the boundary after stage ``boundary`` cuts after (None: no cut)."""
        if not cuts or not 0 <= boundary < len(cuts) or cuts[boundary] == 0:
            return None
        return self.cut_points[cuts[boundary] - 1].after


def _outer(d: Decision) -> Any:
    return Outer(d.shape, d.sharding, d.micro_batch_size, d.num_tile, d.num_config, d.placement)


def evaluate_staged(spec: Spec, decisions: dict[str, Decision], stage_layers: tuple[int, ...] | None
                    ) -> tuple[Evaluation, StagePlan | None]:
    """A given mapping of a whole model in pieces (``dfsearch eval``): every piece's decision
    evaluated alone and in its stage, with ``stage_layers`` executions per stage (None: the
    best split). An infeasible mapping gives the failing piece's evaluation and no plan."""
    members = members_of(spec)
    mbs = decisions["layers"].micro_batch_size
    alone = {}
    for name, d in decisions.items():
        ev = evaluate(piece_spec(spec, members[name], mbs, end=name != "layers"), d)
        if not ev.feasible:
            return ev, None
        alone[name] = ev
    model = StageModel(spec, members, mbs, alone)
    split = stage_layers if stage_layers is not None else model.split()
    if split is None:
        over = model.least_dram() - model.cap
        return replace(model.lay, status=Status.DRAM, violation=max(over, 0.0)), None
    found = model.compose(split)
    if found is None:
        assert model.failed is not None
        return model.failed, None
    return found
