"""Pipeline partitioning of a kernel DAG (docs/model.md, "Pipeline partitioning").

The problem (priced by ``cost/partition.py``): assign every kernel k of a
DAG to a partition p(k) in 0..P-1 with p(src) <= p(dst) on every edge, every partition
non-empty and p(k) within [lo_k, hi_k] (pins, DFModel's forward/backward rule), minimising
the slowest partition

    cost(c) = sum of w_k over the kernels of c  +  beta x (bytes of the edges alive across c),

where an edge e is alive across c when p(src) <= c < p(dst) (its tensor is sent on to a later
partition), then, among the partitionings that reach that minimum, the total bytes sent
(sum over edges of bytes x (p(dst) - p(src))).

A partitioning with p(src) <= p(dst) is a chain of order ideals (down-sets) I_0 c I_1 c ... c
I_{P-1} = V, partition c being I_c minus I_{c-1}; the bytes alive across c are the cut of
I_c (edges leaving it), so cost(c) = W(I_c) - W(I_{c-1}) + beta x cut(I_c) with W additive.

Exact method, when the graph has at most ``IDEAL_LIMIT`` order ideals (a forward graph of N
stacked layers has about 25 N; DFModel's multi-layer inputs are forward graphs):

1. *Feasibility of a bound tau.* R_c = the ideals that can end partition c with every
   partition so far <= tau. The best predecessor of I is the member I' of R_{c-1} strictly
   inside I with the largest W (cost(c) falls as W(I') grows), and
   max{W(I') : I' in R_{c-1}, I' strictly inside I} is a maximum over the ideals I minus x
   (x a maximal element of I) of the same maximum taken non-strictly: one pass over the
   lattice, level by level, per position c.
2. *The minimum* tau* is found by bisection over the float64 values themselves (their bit
   patterns are ordered like the values), so it is the exact smallest float for which step 1
   succeeds: about 62 passes.
3. *Ties*: among chains whose every partition is <= tau*, the fewest bytes sent, by a DP over
   pairs of ideals (when there are at most ``PAIR_LIMIT`` of them; else the chain of step 1,
   whose predecessors have the largest W).

Larger graphs (training graphs of several layers: their weight-gradient kernels multiply the
ideals) are solved by the same procedure on the prefixes of a few topological orders only (a
prefix of a topological order is an ideal): exact for those orders, with an admissible lower
bound (the heaviest kernel, the average partition, each phase's average under the
forward/backward rule), and labelled not proven.
"""

from __future__ import annotations

import math
import struct
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dfsearch.cost.partition import PartitionProblem
from dfsearch.kernels.graph import priority_topological_order

__all__ = ["PartitionProblem", "PartitionSolution", "PartitionInfeasible", "solve_partition",
           "brute_force", "search_partitioned", "IDEAL_LIMIT",
           "PAIR_LIMIT"]

#: exact search over every order ideal up to this many ideals
IDEAL_LIMIT = 50_000
#: cut-byte tie-break by the exact pair DP up to this many ideals
PAIR_LIMIT = 1_500


@dataclass(frozen=True)
class PartitionSolution:
    part: tuple[int, ...]  #: partition of every kernel
    cost_ns: tuple[float, ...]  #: every partition's cost
    alive_bytes: tuple[float, ...]  #: bytes alive across every partition (its p2p)
    slowest_ns: float
    sent_bytes: float  #: total bytes sent: sum over edges of bytes x partitions crossed
    exact: bool  #: every ideal searched (else: prefixes of a few topological orders)
    lower_bound_ns: float  #: no partitioning has a faster slowest partition
    ideals: int  #: ideals searched


class PartitionInfeasible(ValueError):
    """No partitioning meets the pins, the forward/backward rule and non-empty partitions."""


# --------------------------------------------------------------------------- ideals
def _masks(pr: PartitionProblem) -> tuple[list[int], list[int]]:
    preds, succs = [0] * pr.n, [0] * pr.n
    for s, d in pr.edges:
        preds[d] |= 1 << s
        succs[s] |= 1 << d
    return preds, succs


def _all_ideals(pr: PartitionProblem, preds: list[int], limit: int) -> list[int] | None:
    """Every order ideal as a bit mask, by size (None above ``limit``)."""
    seen = {0}
    level = [0]
    out = [0]
    while level:
        nxt = []
        for ideal in level:
            free = [k for k in range(pr.n) if not (ideal >> k) & 1 and not preds[k] & ~ideal]
            for k in free:
                j = ideal | (1 << k)
                if j not in seen:
                    seen.add(j)
                    nxt.append(j)
        nxt.sort()
        out += nxt
        if len(out) > limit:
            return None
        level = nxt
    return out


def _orders(pr: PartitionProblem, preds: list[int]) -> list[list[int]]:
    """A few topological orders (every kernel by its lowest allowed partition first): file
    order, earliest-first (Kahn) and latest-first (kernels as late as their successors let
    them)."""
    n = pr.n
    succ = [[] for _ in range(n)]
    for s, d in pr.edges:
        succ[s].append(d)

    def topo(key) -> list[int]:
        return priority_topological_order(succ, [bin(preds[k]).count("1") for k in range(n)], key)

    depth = [0] * n  # longest path from a source
    for k in topo(lambda k: k):
        for d in succ[k]:
            depth[d] = max(depth[d], depth[k] + 1)
    height = [0] * n  # longest path to a sink
    for k in reversed(topo(lambda k: k)):
        for d in succ[k]:
            height[k] = max(height[k], height[d] + 1)
    top = max(depth, default=0)
    return [topo(lambda k: (pr.lo[k], pr.hi[k], k)), topo(lambda k: (pr.lo[k], pr.hi[k], depth[k], k)),
            topo(lambda k: (pr.lo[k], pr.hi[k], top - height[k], k))]  # fmt: skip


def _prefix_ideals(orders: list[list[int]]) -> list[int]:
    found = set()
    for order in orders:
        m = 0
        found.add(0)
        for k in order:
            m |= 1 << k
            found.add(m)
    return sorted(found, key=lambda m: (bin(m).count("1"), m))


# --------------------------------------------------------------------------- the lattice
class _Lattice:
    """A family of ideals with, for each, its W, cut, allowed positions and children (the
    members of the family that are it minus one maximal element)."""

    def __init__(self, pr: PartitionProblem, ideals: list[int], succs: list[int]) -> None:
        n, m = pr.n, len(ideals)
        self.masks = ideals
        self.index = {mask: j for j, mask in enumerate(ideals)}
        nbytes = (n + 7) // 8
        raw = b"".join(mask.to_bytes(nbytes, "little") for mask in ideals)
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(m, nbytes), axis=1,
                             bitorder="little")[:, :n].astype(bool)  # fmt: skip
        self.member = bits
        w = np.asarray(pr.weight, dtype=np.float64)
        self.W = bits.astype(np.float64) @ w
        cut = np.zeros(m)
        if pr.edges:
            src = np.array([s for s, _ in pr.edges])
            dst = np.array([d for _, d in pr.edges])
            crossing = bits[:, src] & ~bits[:, dst]
            cut = crossing.astype(np.float64) @ np.asarray(pr.edge_bytes, dtype=np.float64)
        self.cut = cut
        self.pcost = pr.beta * cut  #: the p2p part of a partition ending here
        lo = np.asarray(pr.lo)
        hi = np.asarray(pr.hi)
        # allowed at position c iff max lo over members <= c <= min hi over non-members - 1
        self.first = np.where(bits, lo[None, :], 0).max(axis=1) if n else np.zeros(m, int)
        self.last = np.where(~bits, hi[None, :] - 1, pr.parts - 1).min(axis=1) if n else \
            np.full(m, pr.parts - 1)  # fmt: skip
        self.size = bits.sum(axis=1)
        children: list[list[int]] = []
        for mask in ideals:
            kids = []
            rest = mask
            while rest:
                low = rest & -rest
                k = low.bit_length() - 1
                rest ^= low
                if not succs[k] & mask:  # k is a maximal element
                    j = self.index.get(mask ^ low)
                    if j is not None:
                        kids.append(j)
            children.append(kids)
        # levels by size, children padded with the sentinel index m (value -inf)
        self.levels = []
        order = np.argsort(self.size, kind="stable")
        sizes = self.size[order]
        for s in np.unique(sizes):
            rows = order[sizes == s]
            width = max((len(children[j]) for j in rows), default=0)
            pad = np.full((len(rows), max(width, 1)), m, dtype=np.int64)
            for r, j in enumerate(rows):
                pad[r, : len(children[j])] = children[j]
            self.levels.append((rows, pad))
        self.full = self.index[(1 << n) - 1]

    def step(self, reach: np.ndarray | None, c: int, tau: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """R_c for R_{c-1} = ``reach`` (None: c = 0, the predecessor is the empty ideal):
        (R_c, the best predecessor's W, its index)."""
        m = len(self.masks)
        best = np.full(m + 1, -np.inf)
        arg = np.full(m + 1, -1, dtype=np.int64)
        if reach is None:
            best[: m][self.size > 0] = 0.0
            arg[: m][self.size > 0] = 0  # the empty ideal is index 0
        else:
            own = np.where(reach, self.W, -np.inf)
            top = np.full(m + 1, -np.inf)  # max W over reachable ideals inside, non-strict
            targ = np.full(m + 1, -1, dtype=np.int64)
            for rows, kids in self.levels:
                vals = top[kids]
                pick = vals.argmax(axis=1)
                b = vals[np.arange(len(rows)), pick]
                best[rows] = b
                arg[rows] = targ[kids[np.arange(len(rows)), pick]]
                mine = own[rows]
                take = mine >= b
                top[rows] = np.where(take, mine, b)
                targ[rows] = np.where(take, rows, arg[rows])
        b = best[:m]
        ok = (self.first <= c) & (c <= self.last) & np.isfinite(b)
        cost = self.W - np.where(np.isfinite(b), b, 0.0) + self.pcost
        return ok & (cost <= tau), b, arg[:m]

    def feasible(self, tau: float, parts: int) -> bool:
        reach = None
        for c in range(parts):
            reach, _, _ = self.step(reach, c, tau)
            if not reach.any():
                return False
        return bool(reach[self.full])


def _float_key(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _key_float(i: int) -> float:
    return struct.unpack("<d", struct.pack("<q", i))[0]


def _min_tau(lat: _Lattice, parts: int, hi: float) -> float:
    """The smallest float tau for which ``lat.feasible`` holds (it holds at ``hi``)."""
    lo_k, hi_k = 0, _float_key(hi)
    while lo_k < hi_k:
        mid = (lo_k + hi_k) // 2
        if lat.feasible(_key_float(mid), parts):
            hi_k = mid
        else:
            lo_k = mid + 1
    return _key_float(hi_k)


def _chain_widest(lat: _Lattice, parts: int, tau: float) -> list[int]:
    """A chain of ideal indices at ``tau``: predecessors with the largest W."""
    reach, args = None, []
    for c in range(parts):
        reach, _, arg = lat.step(reach, c, tau)
        args.append((reach, arg))
    chain = [lat.full]
    for c in range(parts - 1, 0, -1):
        chain.append(int(args[c][1][chain[-1]]))
    return chain[::-1]


def _chain_fewest_bytes(lat: _Lattice, parts: int, tau: float) -> list[int]:
    """A chain at ``tau`` sending the fewest bytes (the pair DP)."""
    m = len(lat.masks)
    nbytes = (lat.member.shape[1] + 7) // 8
    packed = np.packbits(lat.member, axis=1, bitorder="little") if nbytes else \
        np.zeros((m, 0), np.uint8)  # fmt: skip
    inside = np.zeros((m, m), dtype=bool)  # inside[i, j]: ideal i strictly inside ideal j
    for j in range(m):
        inside[:, j] = ~((packed & ~packed[j]).any(axis=1))
    inside[np.arange(m), np.arange(m)] = False
    allowed = [(lat.first <= c) & (c <= lat.last) for c in range(parts)]
    sent = np.where(allowed[0] & (lat.W + lat.pcost <= tau) & (lat.size > 0), lat.cut, np.inf)
    back = []
    for c in range(1, parts):
        # cost of partition c from ideal i to ideal j: W[j] - W[i] + pcost[j]
        cost = lat.W[None, :] - lat.W[:, None] + lat.pcost[None, :]
        ok = inside & (cost <= tau) & allowed[c][None, :] & np.isfinite(sent)[:, None]
        cand = np.where(ok, sent[:, None], np.inf)
        pick = cand.argmin(axis=0)
        best = cand[pick, np.arange(m)]
        back.append(pick)
        sent = best + lat.cut
    chain = [lat.full]
    for c in range(parts - 1, 0, -1):
        chain.append(int(back[c - 1][chain[-1]]))
    return chain[::-1]


# --------------------------------------------------------------------------- solving
def solve_partition(pr: PartitionProblem, *, ideal_limit: int = IDEAL_LIMIT,
                    pair_limit: int = PAIR_LIMIT) -> PartitionSolution:
    """The partitioning of ``pr`` (module docstring).

    Raises
    ------
    PartitionInfeasible
        If no assignment meets the kernels' ranges with every partition non-empty.
    """
    if pr.parts < 1 or pr.n < pr.parts:
        raise PartitionInfeasible(f"{pr.parts} partitions need at least as many kernels; the "
                                  f"graph has {pr.n}")  # fmt: skip
    bad = [k for k in range(pr.n) if pr.lo[k] > pr.hi[k]]
    if bad:
        raise PartitionInfeasible(f"kernel {bad[0]} has no allowed partition")
    preds, succs = _masks(pr)
    ideals = _all_ideals(pr, preds, ideal_limit)
    exact = ideals is not None
    if ideals is None:
        ideals = _prefix_ideals(_orders(pr, preds))
    lat = _Lattice(pr, ideals, succs)
    hi = max(float(lat.W[lat.full] + lat.pcost.max()), 1.0)  # any chain's slowest partition
    if not lat.feasible(hi, pr.parts):
        raise PartitionInfeasible("no assignment keeps every partition non-empty within the "
                                  "pinned partitions and the forward/backward rule")
    tau = _min_tau(lat, pr.parts, hi)
    if len(ideals) <= pair_limit:
        chain = _chain_fewest_bytes(lat, pr.parts, tau)
    else:
        chain = _chain_widest(lat, pr.parts, tau)
    part = [0] * pr.n
    prev = 0
    for c, j in enumerate(chain):
        new = lat.masks[j] & ~prev
        for k in range(pr.n):
            if (new >> k) & 1:
                part[k] = c
        prev = lat.masks[j]
    costs, alive = pr.cost(tuple(part))
    sent = sum(b * (part[d] - part[s]) for (s, d), b in zip(pr.edges, pr.edge_bytes))
    bound = max(costs) if exact else _lower_bound(pr)
    return PartitionSolution(part=tuple(part), cost_ns=tuple(costs), alive_bytes=tuple(alive),
                             slowest_ns=max(costs), sent_bytes=float(sent), exact=exact,
                             lower_bound_ns=min(bound, max(costs)), ideals=len(ideals))  # fmt: skip


def _lower_bound(pr: PartitionProblem) -> float:
    """No partitioning's slowest partition is below: the heaviest kernel, the average of the
    partitions, and the average of the partitions each kernel class may use."""
    if not pr.n:
        return 0.0
    bound = max(max(pr.weight), sum(pr.weight) / pr.parts)
    ranges: dict[tuple[int, int], float] = {}
    for k in range(pr.n):
        ranges[pr.lo[k], pr.hi[k]] = ranges.get((pr.lo[k], pr.hi[k]), 0.0) + pr.weight[k]
    for (a, b), w in ranges.items():  # kernels confined to [a, b] spread over b - a + 1 parts
        inside = sum(v for (a2, b2), v in ranges.items() if a <= a2 and b2 <= b)
        bound = max(bound, inside / (b - a + 1), w / (b - a + 1))
    return bound


def brute_force(pr: PartitionProblem) -> tuple[float, float] | None:
    """(slowest partition, fewest bytes sent among the partitionings reaching it) over every
    assignment: a reference for tests on small graphs; None when none is feasible."""
    import itertools

    best: tuple[float, float] | None = None
    for part in itertools.product(range(pr.parts), repeat=pr.n):
        if any(not pr.lo[k] <= p <= pr.hi[k] for k, p in enumerate(part)):
            continue
        if len(set(part)) != pr.parts or any(part[s] > part[d] for s, d in pr.edges):
            continue
        costs, _ = pr.cost(part)
        sent = sum(b * (part[d] - part[s]) for (s, d), b in zip(pr.edges, pr.edge_bytes))
        key = (max(costs), sent)
        if best is None or key < best:
            best = key
    return best


# --------------------------------------------------------------------------- the run
@dataclass
class _Run:
    """What the partitioned search has learnt (mutable, private to one call)."""

    budget: int
    deadline: float
    best: tuple[float, Any, Any, Any] | None = None  #: (objective, evaluation, plan, result)
    used: int = 0
    solved: int = 0
    pruned: int = 0
    open_bound: float = math.inf
    proven: bool = True
    exact_cuts: bool = True
    exact_price: bool = True  #: DFModel's partition price reproduced (the FLOP model)
    stop: str = ""
    violations: dict = field(default_factory=dict)
    methods: set = field(default_factory=set)


def search_partitioned(spec: Any, *, seed: int | None = None, time_limit_s: float | None = None,
                       max_evaluations: int | None = None, progress: Any = None) -> Any:
    """DFModel's two passes on a ``workload.partition_graph`` spec (``cost/partition.py``): on
    every (network shape, placement), the graph cut into PP partitions (``solve_partition``),
    the slowest kept and searched as one pipeline stage of PP (``engine.search`` pinned to
    the shape); shapes best lower bound first, pruned once the incumbent beats their bound.

    Proven optimal when every partitioning was exact, every intra-chip search was, and every
    other shape was pruned by its bound: optimal for DFModel's model, in which the slowest
    partition of its inter-chip price is the one every stage runs.
    """
    from dfsearch.search.objective import objective_of
    from dfsearch.search.warmup import warm_up

    limit = spec.search.time_limit_s if time_limit_s is None else time_limit_s
    if limit:
        warm_up()  # compilation never counts against the time limit
    t0 = time.perf_counter()
    budget = spec.search.max_evaluations if max_evaluations is None else max_evaluations
    run = _Run(budget, t0 + limit if limit else math.inf)
    objective = objective_of(spec)
    choices: list = []
    try:  # Ctrl-C between the sub-searches (inside one, it ends that one): the best so far
        choices = _choices(spec, run, objective)
        _explore(spec, run, choices, objective, seed, progress)
    except KeyboardInterrupt:
        run.stop, run.open_bound, run.proven = "interrupted", 0.0, False
    return _result(spec, run, len(choices), time.perf_counter() - t0, objective, seed)


def _choices(spec: Any, run: _Run, objective: Any) -> list:
    """Every (bound, shape, placement, plan, kept partition's spec), best bound first."""
    from dfsearch.cost.network import groups
    from dfsearch.cost.partition import kept_spec, partition_problem, plan_of
    from dfsearch.result import Violation
    from dfsearch.search import outer as outer_mod
    from dfsearch.search.engine import full_sharding

    out = []
    for shape in outer_mod.shapes(spec):
        for pl in outer_mod.placements(spec, shape):
            pp = groups(spec.system, shape, pl).pp
            sharding = full_sharding(spec, shape, pl)
            problem, info = partition_problem(spec, shape, pl, sharding)
            try:
                sol = solve_partition(problem)
            except PartitionInfeasible as exc:
                v = Violation.of(spec, "partition", 1.0, shape, 0, pp)
                run.violations.setdefault("partition", replace(v, detail=str(exc)))
                continue
            run.exact_cuts &= sol.exact
            run.exact_price &= info["exact_price"]
            plan = plan_of(spec, problem, info, sharding, sol.part, exact=sol.exact,
                           lower_bound_ns=sol.lower_bound_ns)  # fmt: skip
            sub = kept_spec(spec, plan, pp)
            out.append((_bound(sub, shape, pl, objective), shape, pl, plan, sub))
    order = sorted(range(len(out)), key=lambda i: (out[i][0], i))
    return [out[i] for i in order]


def _explore(spec: Any, run: _Run, choices: list, objective: Any, seed: int | None,
             progress: Any) -> None:
    """Search the kept partition of every choice, best bound first, until a bound reaches the
    incumbent."""
    from dfsearch.codes import RunStatus
    from dfsearch.search.engine import search

    for i, (bound, shape, pl, plan, sub) in enumerate(choices):
        if run.best is not None and bound >= run.best[0]:
            run.pruned += len(choices) - i
            break
        if run.used >= run.budget or time.perf_counter() > run.deadline:
            run.stop = (f"work budget of {run.budget:,} evaluations used up"
                        if run.used >= run.budget else "time limit reached")  # fmt: skip
            run.open_bound = min(run.open_bound, bound)
            break
        run.solved += 1
        left = max(1e-3, run.deadline - time.perf_counter()) if math.isfinite(run.deadline) else 0
        r = search(sub, seed=seed, time_limit_s=left, max_evaluations=max(1, run.budget - run.used),
                   pinned=(shape, pl))  # fmt: skip
        run.used += r.search.evaluations
        run.methods.update(m for part in r.search.method.split("+")[1:] for m in part.split("/")
                           if m != "none")  # fmt: skip
        if r.search.stopped_by:
            run.stop = r.search.stopped_by
        if r.status not in (RunStatus.OPTIMAL, RunStatus.INFEASIBLE) or r.search.notes:
            run.proven = False
            run.open_bound = min(run.open_bound, bound)
        if r.evaluation is None:
            for v in r.violations:
                run.violations.setdefault(v.constraint, v)
        else:
            value = objective.value(r.evaluation)
            if run.best is None or value < run.best[0]:
                run.best = (value, r.evaluation, plan, r)
        if progress is not None:
            progress(i + 1, len(choices), run.best[0] if run.best else None)


def _result(spec: Any, run: _Run, total: int, seconds: float, objective: Any,
            seed: int | None) -> Any:
    from dfsearch.codes import RunStatus
    from dfsearch.result import PhaseResult, RunResult, SearchStats
    from dfsearch.search.engine import PROOF_REL_TOL

    best = run.best
    value = best[0] if best else math.inf
    bound = min(run.open_bound, value)
    met = best is not None and not run.stop and bound >= value - PROOF_REL_TOL * abs(value)
    proven = met and run.proven and run.exact_cuts and run.exact_price
    status = RunStatus.of_search(found=best is not None, proven=proven,
                                 interrupted=run.stop == "interrupted", stopped=bool(run.stop))
    notes = []
    if not run.exact_cuts:
        notes.append("the graph has too many order ideals for the exact partitioning: the "
                     "partitions were cut along a few topological orders (not proven)")
    if not run.exact_price:
        notes.append("cycle model: each partition priced with its kernels on all the cores one "
                     "after another (DFModel shares the cores among them): the cut is not proven")
    if run.stop and run.stop != "interrupted":
        notes.append(f"{run.stop} after {run.solved + run.pruned} of {total} outer choices")
    has_bound = best is not None and bound > 0
    stats = SearchStats(
        method="partition+" + ("/".join(sorted(run.methods)) or "none"), seconds=seconds,
        evaluations=run.used, seed=spec.search.seed if seed is None else seed, status=status,
        objective=objective.kind, lower_bound=bound if has_bound else None,
        lower_bound_s=bound / 1e9 if has_bound and objective.kind.minimises_time else None,
        candidates=total, solved=run.solved, pruned=run.pruned, stopped_by=run.stop,
        notes=tuple(notes),
    )  # fmt: skip
    viol = tuple(run.violations[k] for k in sorted(run.violations)) if best is None else ()
    phases = (PhaseResult("kept partition", "partition", best[3]),) if best else ()
    return RunResult(spec=spec, evaluation=best[1] if best else None, search=stats,
                     violations=viol, partition=best[2] if best else None,
                     phases=phases)  # fmt: skip


def _bound(sub: Any, shape: tuple[int, ...], pl: Any, objective: Any) -> float:
    """A lower bound of the kept partition's objective on ``shape`` over its tile counts and
    micro-batch sizes (inf when no outer choice is feasible)."""
    from dfsearch.codes import Status
    from dfsearch.cost.lower import Outer, lower
    from dfsearch.cost.model import outer_status
    from dfsearch.search import outer as outer_mod

    sharding = tuple(k.sharding for k in sub.graph.kernels)
    c_max = max(outer_mod.config_counts(sub))
    best = math.inf
    for mbs in outer_mod.micro_batch_sizes(sub, shape, pl):
        for t in outer_mod.tile_counts(sub):
            outer = Outer(shape, sharding, mbs, t, c_max, pl)
            if outer_status(sub, outer)[0] is not Status.OK:
                continue
            problem = lower(sub, outer)
            best = min(best, objective.bound(problem, outer_mod.lower_bound_ns(problem)))
    return best
