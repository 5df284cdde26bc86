"""Stage boundaries inside a layer (docs/model.md, "Stage cuts inside a layer").

With ``search.stage_cuts`` a whole model's pipeline stages (``cost/stages.py``) may also end
between two kernels of a layer-graph execution. A *cut point* splits the layer graph into a
first part (which runs in the earlier stage) and a second part:

* the first part's forward kernels are the first j forward kernels of a topological order
  of the layer graph's forward kernels (graph order among ready kernels);
* a backward kernel named after a forward one (``X_bwd...`` for ``X``, same layer suffix)
  goes with it; another goes with the second part when it reads one of its forward tensors
  or feeds one of its backward kernels; then every backward kernel before one of the second
  part's joins it (the gradient flows from the later stage to the earlier).

So each part is a valid program of its own stage: the forward tensors it needs come from
itself or an earlier stage, the gradients from itself or a later one. The edges between
the two parts (either direction) are sent over the PP link: ``cut_bytes`` x the pp
dimension's p2p ns per byte, added to the batch's p2p once per cut, as the pipeline p2p.
``cut_points`` keeps a few positions that send the fewest bytes, with distinct FLOP shares.

A split with cuts gives stage s: the second part of a layer cut at the boundary before it
(b_s: a cut point, or 0 for none), k_s whole executions, the first part of a layer cut at
the boundary after it (a_s), besides the ends; every boundary chooses its own cut point.
``cut_split`` finds the split that minimises the batch time (nmb - beta) x T_max + the sum
of its cuts' deltas + const over every such split (delta: what one cut adds, beta x
(T_first + T_second - T_layer) + its p2p), exactly (its docstring says how).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from dfsearch.codes import Phase
from dfsearch.spec import Spec

__all__ = ["Cut", "CutSplit", "cut_points", "cut_split", "MAX_CUT_POINTS"]

#: how many cut points inside the layer graph the search tries (the cheapest in bytes)
MAX_CUT_POINTS = 6
#: a part does at least this share of the layer's FLOP; kept cut points differ by as much
SHARE_MIN = 0.01


@dataclass(frozen=True, slots=True)
class Cut:
    """One cut point of the layer graph."""

    position: int  #: forward kernels in the first part
    after: str  #: the last forward kernel of the first part (its name)
    first: tuple[int, ...]  #: kernel indices (graph order) of the first part
    second: tuple[int, ...]  #: of the second part
    cut_bytes: float  #: bytes of the edges between the parts (per sample, both directions)
    first_flop: float  #: FLOP share of the first part (0..1)


@dataclass(frozen=True, slots=True)
class CutSplit:
    """A split with cuts: executions per stage and what every boundary cuts."""

    runs: tuple[int, ...]
    #: PP - 1 entries: 0, the boundary after stage s falls between two executions; i, it
    #: cuts a layer at cut point i (1-based)
    cuts: tuple[int, ...]
    t_max: float
    objective: float  #: slope x T_max + the cuts' deltas (the split-dependent part)


def _out_bytes(spec: Spec, i: int) -> float:
    k = spec.graph.kernels[i]
    if k.output_bytes is not None and k.output_bytes >= 0:
        return float(k.output_bytes)
    return float(k.rows) * k.n * spec.execution.word_bytes


def _forward_order(spec: Spec, fwd: list[int], edges: list[tuple[int, int]]) -> list[int]:
    """A topological order of the forward kernels (graph order among the ready ones)."""
    inside = set(fwd)
    indeg = {k: 0 for k in fwd}
    succ: dict[int, list[int]] = {k: [] for k in fwd}
    for s, d in edges:
        if s in inside and d in inside:
            indeg[d] += 1
            succ[s].append(d)
    ready = [k for k in fwd if indeg[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        k = heapq.heappop(ready)
        out.append(k)
        for d in succ[k]:
            indeg[d] -= 1
            if indeg[d] == 0:
                heapq.heappush(ready, d)
    return out


def _second_backward(spec: Spec, bwd: list[int], second_fwd: set[int],
                     edges: list[tuple[int, int]]) -> set[int]:
    """The backward kernels of the second part: a backward kernel named after a forward one
    (``X_bwd...`` for ``X``, same layer suffix) goes with it; another goes with the second
    part when it reads one of its forward tensors or feeds one of its backward kernels;
    then every backward kernel before one of them joins (the gradient flows backwards)."""
    g = spec.graph
    by_name = {g.kernels[k].name: k for k in second_fwd}
    fwd_name = {}
    for k in bwd:
        m = re.match(r"(.*?)_bwd.*?(_L\d+)?$", g.kernels[k].name)
        fwd_name[k] = (m.group(1) + (m.group(2) or "")) if m else None
    succ: dict[int, list[int]] = {k: [] for k in bwd}
    pred: dict[int, list[int]] = {k: [] for k in bwd}
    reads: dict[int, set[int]] = {k: set() for k in bwd}
    for s, d in edges:
        if s in succ and d in succ:
            succ[s].append(d)
            pred[d].append(s)
        elif d in reads:
            reads[d].add(s)
    fwd_names = {g.kernels[k].name for k in range(len(g.kernels))}
    second: set[int] = set()
    for k in reversed(bwd):  # graph order: the successors are decided first
        if fwd_name[k] in fwd_names:
            if fwd_name[k] in by_name:
                second.add(k)
        elif reads[k] & second_fwd or any(d in second for d in succ[k]):
            second.add(k)
    todo = list(second)
    while todo:
        for q in pred[todo.pop()]:
            if q not in second:
                second.add(q)
                todo.append(q)
    return second


def cut_points(spec: Spec, layers: tuple[int, ...], limit: int = MAX_CUT_POINTS) -> tuple[Cut, ...]:
    """At most ``limit`` cut points of the layer graph ``layers`` (kernel indices of
    ``spec.graph``), in order: the positions whose first part does between 1 % and 99 % of
    the layer's FLOP, the fewest bytes first (ties: the earlier), each kept unless its FLOP
    share is within 1 % of one kept before."""
    g = spec.graph
    index = g.index()
    inside = set(layers)
    edges = [(index[c.src], index[c.dst]) for c in g.connections]
    edges = [(s, d) for s, d in edges if s in inside and d in inside]
    fwd = [k for k in layers if g.kernels[k].phase is not Phase.BWD]
    bwd = [k for k in layers if g.kernels[k].phase is Phase.BWD]
    order = _forward_order(spec, fwd, edges)
    total = g.flop_of(layers) or 1.0
    found = []
    for j in range(1, len(order)):
        second = set(order[j:])
        second |= _second_backward(spec, bwd, second, edges)
        first = tuple(k for k in layers if k not in second)
        sent = sum(_out_bytes(spec, s) for s, d in edges if (s in second) != (d in second))
        found.append(Cut(j, g.kernels[order[j - 1]].name, first,
                         tuple(k for k in layers if k in second), sent, g.flop_of(first) / total))
    kept: list[Cut] = []  # the fewest bytes first; one per FLOP share (within 1 %)
    for c in sorted(found, key=lambda c: (c.cut_bytes, c.position)):
        if SHARE_MIN <= c.first_flop <= 1 - SHARE_MIN and len(kept) < limit and all(
                abs(c.first_flop - k.first_flop) >= SHARE_MIN for k in kept):
            kept.append(c)
    return tuple(sorted(kept, key=lambda c: c.position))


# --------------------------------------------------------------------------- the split
#: max_runs(s, b, a): the most executions stage s holds within its DRAM after the second part
#: of a layer cut at cut point b and before the first part of one cut at a (0: no part);
#: -1: not even the least
MaxRuns = Callable[[int, int, int], int]


@dataclass(frozen=True, slots=True)
class _Problem:
    pp: int
    executions: int
    ends_ns: tuple[float, ...]  #: the ends' time in stage s
    layer_ns: float
    first_ns: tuple[float, ...]  #: [0] = 0 (no part), [i]: the first part of cut point i
    second_ns: tuple[float, ...]
    delta: tuple[float, ...]  #: [0] = 0, [i]: what a cut at cut point i adds
    max_runs: tuple[tuple[int, ...], ...]  #: [s][b x n + a]
    has_ends: tuple[bool, ...]

    @property
    def n(self) -> int:
        return len(self.first_ns)

    def least(self, s: int, b: int, a: int) -> int:
        return 0 if (b or a or self.has_ends[s]) else 1

    def most(self, s: int, b: int, a: int, tau: float) -> int:
        """Most executions of stage s within tau and its DRAM (-1: none fits)."""
        base = self.ends_ns[s] + self.second_ns[b] + self.first_ns[a]
        cap = min(self.max_runs[s][b * self.n + a], self.executions)
        if base > tau:
            return -1
        if self.layer_ns <= 0:
            k = cap
        else:
            k = min(cap, math.floor((tau - base) / self.layer_ns))
            while k < cap and base + (k + 1) * self.layer_ns <= tau:
                k += 1
            while k >= 0 and base + k * self.layer_ns > tau:
                k -= 1
        return k if k >= self.least(s, b, a) else -1

    def time(self, s: int, b: int, k: int, a: int) -> float:
        return self.ends_ns[s] + self.second_ns[b] + k * self.layer_ns + self.first_ns[a]

    def options(self, s: int) -> range:
        return range(self.n if s < self.pp - 1 else 1)


def _feasible(p: _Problem, tau: float) -> bool:
    """Whether some split has every stage within tau: a DP over the boundaries (state: what
    the boundary cuts; value: the most layers covered; a cut covers the layer it cuts)."""
    best = {0: 0}
    for s in range(p.pp):
        nxt: dict[int, int] = {}
        for b, cov in best.items():
            for a in p.options(s):
                k = p.most(s, b, a, tau)
                if k >= 0:
                    nxt[a] = max(nxt.get(a, -1), cov + k + (a > 0))
        best = nxt
    return best.get(0, -1) >= p.executions


def _front(states: dict[tuple[int, int], tuple[float, int]]) -> dict[tuple[int, int], tuple[float, int]]:
    """The states no other with the same boundary dominates (as many layers covered or more
    at no higher cost): covering more never restricts the stages after."""
    out: dict[tuple[int, int], tuple[float, int]] = {}
    best: dict[int, tuple[float, int]] = {}
    for (b, cov), val in sorted(states.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        if b not in best or val < best[b]:
            out[b, cov], best[b] = val, val
    return out


def _cheapest(p: _Problem, tau: float) -> tuple[float, list[int]] | None:
    """The boundary pattern with every stage within tau and the least sum of the cuts'
    deltas (ties: fewer cuts, then the first found): a DP over (boundary, layers covered up
    to E) with back pointers, dominated states dropped (``_front``)."""
    e = p.executions
    states: dict[tuple[int, int], tuple[float, int]] = {(0, 0): (0.0, 0)}
    back: list[dict[tuple[int, int], tuple[int, int]]] = []
    for s in range(p.pp):
        nxt: dict[tuple[int, int], tuple[float, int]] = {}
        ptr: dict[tuple[int, int], tuple[int, int]] = {}
        for (b, cov), (cost, count) in sorted(states.items()):
            for a in p.options(s):
                k = p.most(s, b, a, tau)
                if k < 0:
                    continue
                key = (a, min(e, cov + k + (a > 0)))
                val = (cost + p.delta[a], count + (a > 0))
                if key not in nxt or val < nxt[key]:
                    nxt[key], ptr[key] = val, (b, cov)
        back.append(ptr)
        states = _front(nxt)
    if (0, e) not in states:
        return None
    pattern, key = [], (0, e)
    for s in range(p.pp - 1, 0, -1):
        key = back[s][key]
        pattern.append(key[0])
    return states[0, e][0], pattern[::-1]


def cut_split(executions: int, ends_ns: list[float], layer_ns: float,
              parts: list[tuple[float, float, float]], max_runs: MaxRuns, has_ends: list[bool],
              slope: float) -> CutSplit | None:
    """The split that minimises slope x T_max + the sum of its cuts' deltas (slope = nmb -
    beta > 0) over every split of ``executions`` layer-graph executions (``layer_ns`` each)
    over the stages: stage s holds its ends (``ends_ns[s]``), the second part of a layer cut
    at the boundary before it if that one cuts, whole executions, the first part of a layer
    cut at the boundary after it if that one cuts; every boundary between two executions
    or at one of the cut points ``parts`` (first part's time, second part's time, delta),
    within ``max_runs``; a stage with neither ends nor parts holds >= 1 execution. None when
    no split fits.

    Exact: T_max is one of the finitely many stage times; whether some split reaches a tau
    is monotone in tau (``_feasible``), so bisection finds the least tau*. At tau >= tau* the
    objective is >= slope x tau + min(0, least delta) x (PP - 1): the candidates from tau*
    up are scanned (``_cheapest``: the least deltas within tau) until that bound reaches the
    best. Ties: the smaller T_max.
    """
    pp = len(ends_ns)
    if pp == 0 or executions < pp:
        return None
    n = len(parts) + 1
    p = _Problem(pp, executions, tuple(ends_ns), layer_ns, (0.0, *(x[0] for x in parts)),
                 (0.0, *(x[1] for x in parts)), (0.0, *(x[2] for x in parts)),
                 tuple(tuple(max_runs(s, b, a) for b in range(n) for a in range(n))
                       for s in range(pp)), tuple(has_ends))  # fmt: skip
    cands = sorted({p.time(s, b, k, a) for s in range(pp) for b in range(n) for a in range(n)
                    for k in range(executions + 1)})  # fmt: skip
    lo, hi = 0, len(cands) - 1
    if not _feasible(p, cands[hi]):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if _feasible(p, cands[mid]):
            hi = mid
        else:
            lo = mid + 1
    least = min(0.0, *p.delta) * (pp - 1)
    best: tuple[float, float, list[int]] | None = None
    for tau in cands[lo:]:
        if best is not None and slope * tau + least >= best[0]:
            break
        found = _cheapest(p, tau)
        if found is not None and (best is None or slope * tau + found[0] < best[0]):
            best = (slope * tau + found[0], tau, found[1])
    assert best is not None
    return _distribute(p, best[1], best[2], best[0])


def _distribute(p: _Problem, tau: float, pattern: list[int], value: float) -> CutSplit:
    """Executions per stage for a boundary pattern that reaches tau: each stage as many as
    tau allows, then the excess taken from the slowest stages first (ties: the later)."""
    bounds = [0, *pattern, 0]
    ba = [(bounds[s], bounds[s + 1]) for s in range(p.pp)]
    runs = [p.most(s, b, a, tau) for s, (b, a) in enumerate(ba)]
    excess = sum(runs) + sum(x > 0 for x in pattern) - p.executions
    heap = [(-p.time(s, b, runs[s], a), -s) for s, (b, a) in enumerate(ba) if runs[s] > p.least(s, b, a)]
    heapq.heapify(heap)
    while excess > 0:
        _, neg = heapq.heappop(heap)
        s = -neg
        runs[s] -= 1
        excess -= 1
        b, a = ba[s]
        if runs[s] > p.least(s, b, a):
            heapq.heappush(heap, (-p.time(s, b, runs[s], a), -s))
    t_max = max(p.time(s, b, runs[s], a) for s, (b, a) in enumerate(ba))
    return CutSplit(tuple(runs), tuple(pattern), t_max, value)
