"""Pinned configurations (a kernel's ``config``) that no mapping can honour, found before any
search (docs/spec.md, "Validation rules").

A pin is honoured by every search path (the evaluator rejects an assignment that moves a
pinned kernel); pins that contradict the rules of the assignment would leave nothing to
search, so they are refused here with the rule they break:

* one configuration per kernel (``kernel_by_kernel``, ``num_config`` 0 or the kernel count):
  kernel i runs in configuration i;
* the order rule: a kernel runs in the same or a later configuration than every kernel it
  reads from, so a pin may not precede a pin upstream of it;
* the FWD/BWD rule (dataflow, training graph, fewer configurations than kernels): forward
  kernels in configurations 0..f, backward kernels in b..C-1 (``fwd_bwd_bounds``, defined
  here and read by lowering);
* the configuration count: a pin below C.

Each kernel gets an interval of configurations (its pin, its half under the FWD/BWD rule,
else 0..C-1); lower ends are carried down the edges and upper ends up them. The pins can all
hold exactly when no interval ends up empty (then every kernel at its lower end is an
assignment that keeps them). With ``num_config = "auto"`` the pins must fit one of the
counts the search tries (``search.outer.config_counts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dfsearch.codes import ExecutionStyle, Phase
from dfsearch.errors import Issue
from dfsearch.spec import AUTO, Execution, Graph

__all__ = ["pin_issues", "fwd_bwd_bounds"]


def fwd_bwd_bounds(num_config: int) -> tuple[int, int]:
    """(f, b): FWD kernels in configurations <= f, BWD kernels in >= b (FWD/BWD rule)."""
    if num_config % 2 == 0:
        return num_config // 2 - 1, num_config // 2
    return num_config // 2, num_config // 2


@dataclass(frozen=True, slots=True)
class _End:
    """One end of a kernel's interval and where it comes from."""

    value: int
    kernel: int
    why: str  #: "pin", "bwd", "fwd", "count" or "" (configuration 0)


def pin_issues(graph: Graph, execution: Execution) -> list[Issue]:
    """The issue of pins that no assignment can honour (empty when they can, or when no
    kernel is pinned). The graph must be valid (known names, no cycle)."""
    n = len(graph.kernels)
    if not any(k.config >= 0 for k in graph.kernels):
        return []
    c = execution.num_config
    if c > 0 and any(k.config >= c for k in graph.kernels):
        return []  # "must be < execution.num_config" is said by the execution checks
    counts = sorted(set(range(1, min(n, 12) + 1)) | {n}) if c == AUTO else [c or n]
    note = ""
    if c == AUTO:
        tries = f"1 to {n}" if n <= 12 else f"1 to 12 and {n}"
        note = (f"num_config = 'auto' tries {tries} configurations; none holds the pins (shown: "
                f"{max([x for x in counts if x < n] or [n])}). ")
    adj = _Adjacency(graph)
    found = []
    for count in reversed(counts):
        issue = _issue(graph, execution, count, adj, note)
        if issue is None:
            return []
        found.append((count < n, issue))
    return [next((i for partial, i in found if partial), found[0][1])]


class _Adjacency:
    """Successors and predecessors of every kernel and one topological order (None when
    the graph has a cycle)."""

    def __init__(self, graph: Graph) -> None:
        idx = graph.index()
        n = len(graph.kernels)
        self.succ: list[list[int]] = [[] for _ in range(n)]
        self.pred: list[list[int]] = [[] for _ in range(n)]
        for c in graph.connections:
            s, d = idx[c.src], idx[c.dst]
            self.succ[s].append(d)
            self.pred[d].append(s)
        indeg = [len(p) for p in self.pred]
        ready = [k for k in range(n) if indeg[k] == 0]
        order: list[int] = []
        while ready:
            k = ready.pop()
            order.append(k)
            for d in self.succ[k]:
                indeg[d] -= 1
                if indeg[d] == 0:
                    ready.append(d)
        self.order = order if len(order) == n else None


def _issue(graph: Graph, execution: Execution, count: int, adj: _Adjacency, note: str
           ) -> Issue | None:
    """Why the pins cannot hold with ``count`` configurations, or None."""
    n = len(graph.kernels)
    kernels = graph.kernels
    if execution.style is ExecutionStyle.KERNEL_BY_KERNEL or count == n:
        why = ("execution.style = 'kernel_by_kernel'" if execution.style is ExecutionStyle.KERNEL_BY_KERNEL
               else f"{count} configurations for {n} kernels")  # fmt: skip
        for i, k in enumerate(kernels):
            if k.config >= 0 and k.config != i:
                return Issue(_path(i, k.name), (
                    f"must be {i} or -1 (free): with one configuration per kernel ({why}) kernel "
                    f"{i} runs in configuration {i}, in file order. {note}Got {k.config} instead."))
        return None
    if adj.order is None:
        return None  # a cycle: said elsewhere
    fb = execution.style is ExecutionStyle.DATAFLOW and graph.is_training
    f_cap, b_min = fwd_bwd_bounds(count)
    lo, hi = [], []
    for i, k in enumerate(kernels):
        low = _End(b_min, i, "bwd") if fb and k.phase is Phase.BWD else _End(0, i, "")
        high = _End(f_cap, i, "fwd") if fb and k.phase is Phase.FWD else _End(count - 1, i, "count")
        pin = _End(k.config, i, "pin")
        lo.append(low if k.config < 0 or low.value > pin.value else pin)
        hi.append(high if k.config < 0 or high.value < pin.value else pin)
    for k in adj.order:  # lower ends down the edges, upper ends up them
        for d in adj.succ[k]:
            if lo[k].value > lo[d].value:
                lo[d] = lo[k]
    for k in reversed(adj.order):
        for s in adj.pred[k]:
            if hi[k].value < hi[s].value:
                hi[s] = hi[k]
    for k in adj.order:
        if lo[k].value > hi[k].value and "pin" in (lo[k].why, hi[k].why):
            return _conflict(graph, count, lo[k], hi[k], (f_cap, b_min), note)
    return None


def _conflict(graph: Graph, count: int, a: _End, z: _End, bounds: tuple[int, int], note: str
              ) -> Issue:
    """The issue of a lower end ``a`` above an upper end ``z`` (``a`` upstream of ``z``)."""
    f_cap, b_min = bounds
    name = [k.name for k in graph.kernels]
    said = {
        "pin": lambda e: f"{name[e.kernel]!r} is pinned to configuration {e.value}",
        "bwd": lambda e: (f"{name[e.kernel]!r} is a backward kernel, in configurations "
                          f"{b_min}..{count - 1} (FWD/BWD rule with {count} configurations)"),
        "fwd": lambda e: (f"{name[e.kernel]!r} is a forward kernel, in configurations 0..{f_cap} "
                          f"(FWD/BWD rule with {count} configurations)"),
        "count": lambda e: f"there are {count} configurations, 0..{count - 1}",
    }  # fmt: skip
    rule = ""
    if a.kernel != z.kernel and z.why != "count":
        rule = (f"; {name[z.kernel]!r} reads, directly or through other kernels, from "
                f"{name[a.kernel]!r}, and a kernel runs in the same or a later configuration "
                "than every kernel it reads from")
    pinned = z if z.why == "pin" else a
    return Issue(_path(pinned.kernel, name[pinned.kernel]), (
        f"cannot be honoured: {said[a.why](a)} and {said[z.why](z)}{rule}. Free one of them "
        f"(config = -1) or pin consistently. {note}Got {pinned.value} instead."))


def _path(i: int, name: str) -> str:
    return f'graph.kernels[{i}] ("{name}").config'
