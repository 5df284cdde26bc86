"""Configuration assignment for graphs too large for the exact search (docs/mapping.md,
"Large graphs").

The exact search (``_dp.ideal_search``) handles graphs of at most 62 kernels. A larger graph
is split into *blocks* that it solves exactly, and the pieces are put back together:

1. **Blocks.** A graph of N stacked layers (kernel names ending in ``_L{i}``, the ``llm``
   generators' ``layers = N``) has one block per layer; since the layers are identical, only
   layer 1 is solved (*template*) and its answer serves them all. Any other graph is cut
   into consecutive pieces of its topological order of at most ``CHUNK`` kernels, each
   solved on its own.
2. **Solve.** A block is a problem of its own (its kernels, the edges between them, a share
   of the configurations in proportion to its kernels) solved by ``assign_configs``; its
   configurations, in order, give an order of its kernels.
3. **Compose.** One topological order of the whole graph that runs the blocks in the order
   the graph lists them and, inside each, follows the block's solved order.
4. **Refine.** ``_window.window_dp`` splits that order into configurations where it pays:
   a configuration may span a layer boundary (the last forward kernels of layer i with the
   first of layer i+1), and blocks' configurations may merge or split. The default
   topological order is split the same way and the better answer kept.

The result is not proven optimal by construction; ``search/graph_bound.py`` gives lower
bounds of the summed IIs of *every* assignment, so the search states how far from optimal
it can be, and when the answer meets a bound it is proven optimal after all.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from dfsearch.codes import Phase
from dfsearch.cost.evaluate import set_cost
from dfsearch.cost.layout import NUM_SET, EdgeTable, KernelTable, SetSlot, Stat
from dfsearch.cost.lower import Problem, fwd_bwd_bounds
from dfsearch.kernels.graph import priority_topological_order
from dfsearch.search import _dp, _window

__all__ = ["composed_order", "layered_split", "layer_of", "repeated_layer", "sub_problem", "CHUNK"]

#: kernels per block of a graph without stacked layers
CHUNK = 40
#: most kernels in one configuration that the refinement considers
MAX_BLOCK = 96
#: price rounds when the split needs more configurations than the problem has, and
#: bisections of the price once a split fits
PRICE_ROUNDS = 12
BISECTIONS = 3
#: states of the exact search per block (beyond: its best answer so far, or the block's
#: topological order); its evaluations count against the work budget
BLOCK_STATES = 5_000

_LAYER = re.compile(r"^(.*)_L(\d+)$")


def layer_of(names: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """(layer index per kernel, 0 outside stacked layers; name without its layer suffix)."""
    layer = np.zeros(len(names), np.int64)
    stems = []
    for k, name in enumerate(names):
        m = _LAYER.match(name)
        if m:
            layer[k] = int(m.group(2))
            stems.append(m.group(1))
        else:
            stems.append(name)
    return layer, tuple(stems)


# --------------------------------------------------------------------------- blocks
def sub_problem(problem: Problem, members: np.ndarray, num_config: int) -> Problem:
    """The problem of the kernels ``members`` alone (the edges between them) with
    ``num_config`` configurations; every other constant as in ``problem``."""
    index = np.full(problem.num_kernels, -1, np.int64)
    index[members] = np.arange(len(members))
    et = problem.edges
    inner = (index[et.src] >= 0) & (index[et.dst] >= 0)

    def rows(a: np.ndarray, keep: np.ndarray) -> np.ndarray:
        out = np.ascontiguousarray(a[keep])
        out.setflags(write=a.flags.writeable)
        return out

    kt = KernelTable(*(rows(col, members) for col in problem.kernels))
    edges = EdgeTable(*(rows(col, inner) for col in et))
    remapped = {"src": index[et.src[inner]], "dst": index[et.dst[inner]]}
    for name, col in remapped.items():
        col.setflags(write=getattr(et, name).flags.writeable)
    edges = edges._replace(**remapped)
    cn = problem.constants
    f, b = fwd_bwd_bounds(num_config)
    fb_rule = bool(cn.fb_rule and num_config < len(members))
    cn = cn._replace(num_config=int(num_config), fb_last_fwd=int(f), fb_first_bwd=int(b),
                     fb_rule=fb_rule)  # fmt: skip
    names = tuple(problem.names[k] for k in members)
    return replace(problem, kernels=kt, edges=edges, constants=cn, names=names,
                   shard_m=(), shard_k=(), shard_n=())  # fmt: skip


def _block_order(problem: Problem, members: np.ndarray, control: np.ndarray,
                 stats: np.ndarray | None, assign: Callable) -> list[int]:
    """``members`` (global indices) in the order of their configurations when solved as a
    problem of their own by the exact search within ``BLOCK_STATES`` states (``assign``, the
    caller's ``search.assign.assign_configs``, with ``method="ideal-dp"``), never by this
    module again (ties and unsolved blocks: the block's topological order). Its evaluations
    (and whether ``control`` stopped it) are added to ``stats``."""
    n, nc = problem.num_kernels, problem.num_config
    share = max(2 if problem.constants.fb_rule else 1, math.ceil(nc * len(members) / n))
    sub = sub_problem(problem, members, min(share, len(members)))
    topo = [int(k) for k in _dp.topological_order(sub.kernels, sub.edges)]
    rank = {k: i for i, k in enumerate(topo)}
    if len(members) > 1 and sub.num_config > 1:
        a = assign(sub, method="ideal-dp", max_states=BLOCK_STATES, control=control)
        if stats is not None:
            stats[Stat.EVALS] += a.evaluations
            stats[Stat.STOPPED] = max(stats[Stat.STOPPED], float(a.stopped))
        if a.config is not None:
            topo.sort(key=lambda k: (a.config[k], rank[k]))
    return [int(members[k]) for k in topo]


def _blocks(problem: Problem, topo: np.ndarray) -> list[np.ndarray]:
    """The blocks of the graph, in the order of their first kernel in ``topo``: one per
    stacked layer, else consecutive pieces of ``topo`` of at most ``CHUNK`` kernels."""
    layer, _ = layer_of(problem.names)
    if layer.max(initial=0) >= 2:
        first = {}
        for pos, k in enumerate(topo):
            first.setdefault(int(layer[k]), pos)
        return [np.flatnonzero(layer == i) for i in sorted(first, key=first.get)]
    return [np.sort(topo[i:i + CHUNK]) for i in range(0, len(topo), CHUNK)]


def composed_order(problem: Problem, topo: np.ndarray, control: np.ndarray,
                   stats: np.ndarray | None = None, *, assign: Callable) -> np.ndarray:
    """A topological order that runs the blocks as ``topo`` does and, inside each, follows
    its solved order (stacked layers: layer 1's order, matched by kernel name); the blocks'
    evaluations are added to ``stats``. ``assign`` solves one block: the caller passes
    ``search.assign.assign_configs`` (this module does not import it: the assignment search
    calls this one)."""
    layer, stems = layer_of(problem.names)
    n = problem.num_kernels
    local = np.zeros(n, np.int64)
    blocks = _blocks(problem, topo)
    if layer.max(initial=0) >= 2:
        template = next(b for b in blocks if layer[b[0]] == 1) if (layer == 1).any() else blocks[0]
        rank = {stems[k]: i for i, k in enumerate(_block_order(problem, template, control, stats, assign))}
        for k in range(n):
            local[k] = rank.get(stems[k], n)
    else:
        for b in blocks:
            for i, k in enumerate(_block_order(problem, b, control, stats, assign)):
                local[k] = i
    pos = np.empty(n, np.int64)
    pos[topo] = np.arange(n)
    phase = problem.kernels.phase
    group: dict[tuple[int, int], int] = {}
    start = np.empty(n, np.int64)  # position in topo of the first kernel of k's (block, phase)
    for k in topo:
        key = (int(layer[k]), int(phase[k])) if layer[k] > 0 else (-1 - int(k), 0)
        start[k] = group.setdefault(key, int(pos[k]))
    return _priority_topological(problem, [(int(start[k]), int(local[k]), int(pos[k])) for k in range(n)])


def _priority_topological(problem: Problem, key: list[tuple[int, int, int]]) -> np.ndarray:
    """The topological order that always takes the ready kernel of smallest ``key``."""
    n = problem.num_kernels
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, np.int64)
    for s, d in zip(problem.edges.src, problem.edges.dst):
        succ[int(s)].append(int(d))
        indeg[int(d)] += 1
    return np.asarray(priority_topological_order(succ, indeg.tolist(), key.__getitem__), np.int64)


# --------------------------------------------------------------------------- refine
def _configs(problem: Problem, block: np.ndarray, allowed: np.ndarray) -> np.ndarray | None:
    """Configuration of each kernel from its block index (blocks in order; backward blocks
    moved up to the first backward configuration), or None when they do not fit."""
    cn = problem.constants
    bwd = block[problem.kernels.phase == Phase.BWD]
    shift = 0
    if cn.fb_rule and bwd.size:
        shift = max(0, cn.fb_first_bwd - int(bwd.min()))
    cfg = np.where(block >= (bwd.min() if bwd.size else np.inf), block + shift, block)
    if cfg.max(initial=0) >= problem.num_config:
        return None
    if not allowed[np.arange(len(cfg)), cfg].all():
        return None
    return cfg.astype(np.int64)


def _split_once(problem, order, bw, live_cap, relax, price, stats, control, cache=None):
    """One ``window_dp`` split of ``order`` at ``price`` per block; ``cache``: the block IIs
    of earlier splits of the same order (``_new_cache``)."""
    block = np.full(problem.num_kernels, -1, np.int64)
    p = problem
    if cache is None:
        cache = _new_cache(problem)
    value = _window.window_dp(p.kernels, p.edges, p.constants, order, bw, live_cap, relax, price,
                              MAX_BLOCK, cache, block, stats, control)  # fmt: skip
    return float(value), block


def _new_cache(problem: Problem) -> np.ndarray:
    """Block IIs of ``window_dp`` by (first position, length - 1), NaN = not costed yet."""
    return np.full((problem.num_kernels, MAX_BLOCK), np.nan)


def layered_split(problem, order, allowed, bw, live_cap, relax, stats, control, tick=None):
    """Split ``order`` into configurations (``window_dp``). When the cheapest split needs more
    configurations than the problem has, two repairs, the better kept: merging adjacent
    blocks, cheapest increase first (``_merge_down``), and raising a price per block until
    the split fits, then bisecting it (``_priced``). Returns (summed II, assignment) or
    (inf, None). ``tick`` (progress display only) is called between the jitted splits."""
    cache = _new_cache(problem)  # the splits below share their block IIs
    value, block = _split_once(problem, order, bw, live_cap, relax, 0.0, stats, control, cache)
    if not math.isfinite(value):
        return math.inf, None
    cfg = _configs(problem, block, allowed)
    if cfg is not None:
        return value, cfg
    merged = _merge_down(problem, order, block, allowed, bw, live_cap, relax, stats)
    priced = _priced(problem, order, allowed, bw, live_cap, relax, value, block, stats, control,
                     cache, tick)  # fmt: skip
    return min(merged, priced, key=lambda r: r[0])


def _merge_down(problem, order, block, allowed, bw, live_cap, relax, stats):
    """Merge adjacent blocks of a split, the pair whose merge adds the least II first, until
    the blocks fit the configurations (merging two blocks changes no other block's II).
    Under the FWD/BWD rule forward and backward blocks never merge."""
    kt, et, cn = problem.kernels, problem.edges, problem.constants
    n = problem.num_kernels
    along = block[order]
    cuts = [0, *[int(i) for i in np.flatnonzero(np.diff(along)) + 1], n]
    spans = list(itertools.pairwise(cuts))
    phase = kt.phase[order]
    out = np.zeros(NUM_SET)
    cache: dict[tuple[int, int], float] = {}

    def cost(i: int, j: int) -> float:
        if (i, j) not in cache:
            where = np.zeros(n, np.int8)
            where[order[:i]] = 2
            where[order[i:j]] = 1
            set_cost(kt, et, cn, where, bw, live_cap, relax, np.zeros(n, np.int64),
                     np.ones(n, np.int64), np.ones(n, np.int64), np.zeros(n, np.int64), out)  # fmt: skip
            stats[Stat.EVALS] += 1
            cache[(i, j)] = float(out[SetSlot.II])
        return cache[(i, j)]

    def mixed(i: int, j: int) -> bool:
        p = phase[i:j]
        return bool(cn.fb_rule and (p == Phase.FWD).any() and (p == Phase.BWD).any())

    def blocks_of(sp: list[tuple[int, int]]) -> np.ndarray:
        out_b = np.empty(n, np.int64)
        for b, (i, j) in enumerate(sp):
            out_b[order[i:j]] = b
        return out_b

    while (cfg := _configs(problem, blocks_of(spans), allowed)) is None:
        best, at = math.inf, -1
        for b in range(len(spans) - 1):
            (i, _), (_, j) = spans[b], spans[b + 1]
            if mixed(i, j):
                continue
            extra = cost(i, j) - cost(*spans[b]) - cost(*spans[b + 1])
            if extra < best:
                best, at = extra, b
        if at < 0:
            return math.inf, None
        spans[at:at + 2] = [(spans[at][0], spans[at + 1][1])]
    return float(sum(cost(i, j) for i, j in spans)), cfg


def _priced(problem, order, allowed, bw, live_cap, relax, value, block, stats, control, cache,
            tick=None):  # fmt: skip
    """The split with a price per block: grown x4 until the split fits, then bisected."""
    lo, hi, best = 0.0, value / max(problem.num_config, 1), (math.inf, None)
    blocks = int(block.max()) + 1
    for _ in range(PRICE_ROUNDS):
        if stats[Stat.STOPPED] > 0:
            return math.inf, None
        v, blk = _split_once(problem, order, bw, live_cap, relax, hi, stats, control, cache)
        if tick is not None:
            tick()
        if not math.isfinite(v):
            return math.inf, None
        cfg = _configs(problem, blk, allowed)
        if cfg is not None:
            best = (v, cfg)
            break
        if int(blk.max()) + 1 >= blocks:  # the price no longer merges blocks: they cannot fit
            return math.inf, None
        blocks = int(blk.max()) + 1
        lo, hi = hi, hi * 4
    if best[1] is None:
        return math.inf, None
    for _ in range(BISECTIONS):
        if best[0] <= value * (1 + 1e-12) or stats[Stat.STOPPED] > 0:
            break  # as good as the unconstrained split
        mid = 0.5 * (lo + hi)
        v, blk = _split_once(problem, order, bw, live_cap, relax, mid, stats, control, cache)
        if tick is not None:
            tick()
        cfg = _configs(problem, blk, allowed) if math.isfinite(v) else None
        if cfg is not None:
            hi = mid
            if v < best[0]:
                best = (v, cfg)
        else:
            lo = mid
    return best


# --------------------------------------------------------------------------- repeated layer
def repeated_layer(problem, topo, allowed, bw, live_cap, stats, control, *, assign):
    """The one-layer mapping repeated (docs/design.md, "The repeated-layer incumbent"): layer 1
    of a stacked graph solved as a problem of its own with its share of the configurations
    (``assign``, the exact search within ``BLOCK_STATES`` states), every layer's forward and
    backward kernels given that solution's configurations in the same relative order, layer
    after layer in the order ``topo`` meets them; a kernel outside the layers (embedding,
    head) gets a block of its own. When that needs more configurations than the problem has,
    adjacent blocks are merged, the cheapest first (``_merge_down``). Returns (summed II in
    this DRAM regime, assignment) or (inf, None) when the layers are not identical, the
    blocks break an edge's order, or nothing fits."""
    layer, stems = layer_of(problem.names)
    n = problem.num_kernels
    members = np.flatnonzero(layer == 1)
    if layer.max(initial=0) < 2 or len(members) < 2:
        return math.inf, None
    template = _template_configs(problem, members, control, stats, assign)
    if template is None:
        return math.inf, None
    by_stem = {stems[k]: int(c) for k, c in zip(members, template)}
    if any(layer[k] > 0 and stems[k] not in by_stem for k in range(n)):
        return math.inf, None  # the layers are not copies of layer 1
    block = _repeated_blocks(problem, topo, layer, stems, by_stem)
    if bool((block[problem.edges.src] > block[problem.edges.dst]).any()):
        return math.inf, None
    pos = np.empty(n, np.int64)
    pos[topo] = np.arange(n)
    order = np.lexsort((pos, block)).astype(np.int64)
    return _merge_down(problem, order, block, allowed, bw, live_cap, 0, stats)


def _template_configs(problem, members, control, stats, assign) -> tuple[int, ...] | None:
    """Layer 1 (``members``) solved alone with its share of the configurations, as
    ``_block_order`` solves it, but with each edge's SRAM bytes and buffer depth the largest
    that edge has in any layer (depths follow the whole graph's pipeline and the sharding of
    a layer's last kernels may differ, so the layers' buffers differ; the SRAM footprint
    only grows with them, so a configuration that fits the template's buffers fits every
    layer's); its evaluations are added to ``stats``."""
    n, nc = problem.num_kernels, problem.num_config
    share = max(2 if problem.constants.fb_rule else 1, math.ceil(nc * len(members) / n))
    sub = sub_problem(problem, members, min(share, len(members)))
    layer, stems = layer_of(problem.names)
    et, se = problem.edges, sub.edges
    most: dict[tuple[str, str], tuple[float, int]] = {}
    for s_, d_, b, depth in zip(et.src, et.dst, et.sram_bytes, et.sram_depth):
        if layer[s_] > 0 and layer[s_] == layer[d_]:
            key = (stems[s_], stems[d_])
            b0, d0 = most.get(key, (0.0, 0))
            most[key] = (max(b0, float(b)), max(d0, int(depth)))
    keys = [(stems[members[s_]], stems[members[d_]]) for s_, d_ in zip(se.src, se.dst)]
    cols = {}
    for name, j in (("sram_bytes", 0), ("sram_depth", 1)):
        old = getattr(se, name)
        col = np.array([max(most.get(key, (0.0, 0))[j], v) for key, v in zip(keys, old)], old.dtype)
        col.setflags(write=old.flags.writeable)
        cols[name] = col
    sub = replace(sub, edges=se._replace(**cols))
    a = assign(sub, method="ideal-dp", max_states=BLOCK_STATES, control=control)
    stats[Stat.EVALS] += a.evaluations
    stats[Stat.STOPPED] = max(stats[Stat.STOPPED], float(a.stopped))
    return a.config


def _repeated_blocks(problem, topo, layer, stems, by_stem) -> np.ndarray:
    """Block index per kernel: groups (a layer's forward kernels, its backward kernels, its
    other kernels; a kernel outside the layers alone) in the order of their first kernel in
    ``topo``, each split by the template configuration of its members (dense rank)."""
    n = problem.num_kernels
    phase = problem.kernels.phase
    groups: dict[tuple[int, int], list[int]] = {}
    for k in topo:
        k = int(k)
        key = (int(layer[k]), int(phase[k])) if layer[k] > 0 else (-1 - k, 0)
        groups.setdefault(key, []).append(k)
    block = np.empty(n, np.int64)
    offset = 0
    for ks in groups.values():  # dicts keep insertion order: first kernel in topo
        local = [by_stem.get(stems[k], 0) for k in ks]
        rank = {c: i for i, c in enumerate(sorted(set(local)))}
        for k, c in zip(ks, local):
            block[k] = offset + rank[c]
        offset += len(rank)
    return block
