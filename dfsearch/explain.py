"""Why an evaluated mapping is infeasible, in words: the rule or capacity it breaks, the
kernel, edge or configuration that breaks it, and the amounts with their units
(``dfsearch eval``; docs/mapping.md, "Infeasible mappings").

The jitted evaluator (``cost/evaluate.py``) only returns a status and the size of the
violation. This module finds where: the assignment rules and the order rule are re-checked
in the evaluator's order, capacities per configuration with ``evaluate.set_cost`` (the same
equations restricted to one configuration), the DRAM total from the evaluation itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dfsearch.codes import Phase, Status
from dfsearch.cost.layout import NUM_SET, SetSlot
from dfsearch.cost.lower import Outer, Problem, lower
from dfsearch.cost.model import Evaluation, evaluate
from dfsearch.cost.stages import is_staged, members_of, piece_spec
from dfsearch.result import format_bytes
from dfsearch.spec import Spec

__all__ = ["violation_text", "UNITS"]

#: the unit of ``Evaluation.violation`` per status
UNITS = {
    Status.SRAM: "bytes", Status.DRAM: "bytes", Status.CORES: "cores",
    Status.DIVISIBILITY: "sequences", Status.SHAPE: "chips", Status.ORDER: "configurations",
    Status.CONFIG: "configurations", Status.LATENCY: "ns", Status.SCHEDULE: "",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Where:
    """The spec the evaluation belongs to (a piece of a whole model, or the spec itself) and
    the whole spec, whose field paths the text uses."""

    spec: Spec
    whole: Spec
    piece: str = ""  #: "embedding", "layer graph", "LM head" for a whole model in pieces

    def kernel(self, k: int) -> str:
        name = self.spec.graph.kernels[k].name
        i = next(i for i, x in enumerate(self.whole.graph.kernels) if x.name == name)
        return f"kernel {name!r} (graph.kernels[{i}])"


def violation_text(spec: Spec, ev: Evaluation) -> str:
    """What ``ev`` (infeasible) breaks, where, and by how much with units; '' if feasible."""
    if ev.feasible:
        return ""
    generic = f"{ev.status.message} (by {ev.violation:.6g} {UNITS.get(ev.status, '')})".rstrip()
    if ev.status is Status.DRAM:
        generic = f"DRAM per chip: capacity exceeded by {format_bytes(ev.violation)} ({ev.violation:.6g} bytes)"
    d = ev.decision
    if ev.status is Status.SHAPE:
        chips = spec.system.num_chip // spec.num_copy
        return (f"the network shape {' x '.join(map(str, d.shape))} has {math.prod(d.shape)} "
                f"chips, the system {chips} per copy")  # fmt: skip
    if ev.status is Status.DIVISIBILITY:
        return _divisibility(spec, ev)
    where = _piece_of(spec, ev) if is_staged(spec) else _Where(spec, spec)
    if where is None:  # a whole model whose pieces fit alone: no one problem to point at
        return generic
    outer = Outer(d.shape, d.sharding, d.micro_batch_size, d.num_tile, len(ev.configs),
                  d.placement)  # fmt: skip
    problem = lower(where.spec, outer)
    explain = {Status.CONFIG: _config_rule, Status.ORDER: _order_rule,
               Status.SRAM: _capacity, Status.CORES: _capacity, Status.DRAM: _dram}.get(ev.status)  # fmt: skip
    text = explain(where, problem, ev) if explain is not None else ""
    if text and where.piece:
        text = f"in the {where.piece} piece: {text}"
    return text or generic


def _piece_of(spec: Spec, ev: Evaluation) -> _Where | None:
    """The piece of a whole model whose own evaluation is ``ev`` (``cost.stages.evaluate_staged``
    returns the failing piece's), or None."""
    names = {"before": "embedding", "layers": "layer graph", "after": "LM head"}
    mbs = ev.decision.micro_batch_size
    for name, members in members_of(spec).items():
        if len(members) != len(ev.decision.config):
            continue
        piece = piece_spec(spec, members, mbs, end=name != "layers")
        try:
            again = evaluate(piece, ev.decision)
        except ValueError:
            continue
        if again.status is ev.status and again.violation == ev.violation:
            return _Where(piece, spec, names[name])
    return None


def _divisibility(spec: Spec, ev: Evaluation) -> str:
    gb = getattr(spec.workload, "global_batch_size", None)
    unit = ev.decision.micro_batch_size * ev.dp
    if gb is None:
        return f"{ev.status.message} (remainder {ev.violation:.6g} sequences)"
    return (f"workload.global_batch_size = {gb} sequences is not a multiple of micro-batch "
            f"{ev.decision.micro_batch_size} x DP {ev.dp} = {unit} sequences (remainder "
            f"{gb % max(unit, 1)} sequences)")  # fmt: skip


def _config_rule(w: _Where, problem: Problem, ev: Evaluation) -> str:
    """The first kernel (in the evaluator's order) whose configuration breaks a rule, or
    the first configuration mixing kernels with and without num_input."""
    cn, kt = problem.constants, problem.kernels
    nc = cn.num_config
    for k, c in enumerate(ev.decision.config):
        where = f"{w.kernel(k)} is in configuration {c}"
        if c < 0 or c >= nc:
            return f"{where}, outside 0..{nc - 1} ({nc} configurations)"
        if cn.fixed_config and c != k:
            return (f"{where}; with one configuration per kernel kernel {k} runs in "
                    f"configuration {k} (by {abs(c - k)} configurations)")  # fmt: skip
        if kt.pin[k] >= 0 and c != kt.pin[k]:
            return (f"{where} but its config field pins it to configuration "
                    f"{kt.pin[k]} (by {abs(c - kt.pin[k])} configurations)")  # fmt: skip
        if cn.fb_rule and kt.phase[k] == Phase.FWD and c > cn.fb_last_fwd:
            return (f"{where}; a forward kernel runs in configurations 0..{cn.fb_last_fwd} with "
                    f"{nc} configurations (FWD/BWD rule; by {c - cn.fb_last_fwd} configurations)")
        if cn.fb_rule and kt.phase[k] == Phase.BWD and c < cn.fb_first_bwd:
            return (f"{where}; a backward kernel runs in configurations {cn.fb_first_bwd}.."
                    f"{nc - 1} with {nc} configurations (FWD/BWD rule; by "
                    f"{cn.fb_first_bwd - c} configurations)")  # fmt: skip
    for c in range(nc):
        members = [k for k, ck in enumerate(ev.decision.config) if ck == c]
        with_n = [w.spec.graph.kernels[k].name for k in members if kt.num_input[k] > 0]
        without = [w.spec.graph.kernels[k].name for k in members if kt.num_input[k] <= 0]
        if cn.num_input_mixed and with_n and without:
            return (f"configuration {c} mixes kernels with num_input ({with_n[0]!r}) and without "
                    f"({without[0]!r}); such kernels never share a configuration")  # fmt: skip
    return ""


def _order_rule(w: _Where, problem: Problem, ev: Evaluation) -> str:
    cfg = ev.decision.config
    for s, t in zip(problem.edges.src, problem.edges.dst):
        if cfg[s] > cfg[t]:
            a, b = w.spec.graph.kernels[s].name, w.spec.graph.kernels[t].name
            j = next((i for i, c in enumerate(w.whole.graph.connections) if (c.src, c.dst) == (a, b)), None)
            edge = f"edge {a!r} -> {b!r}" + (f" (graph.connections[{j}])" if j is not None else "")
            return (f"{edge} runs from configuration {cfg[s]} back to "
                    f"configuration {cfg[t]} (by {cfg[s] - cfg[t]} configurations): a kernel "
                    "runs in the same or a later configuration than every kernel it reads from")
    return ""


def _capacity(w: _Where, problem: Problem, ev: Evaluation) -> str:
    """SRAM or cores: every configuration that breaks the capacity on its own, costed by
    ``set_cost`` (earlier configurations marked as such, lone weight kernels exactly)."""
    from dfsearch.cost.evaluate import set_cost
    n = problem.num_kernels
    cfg = np.asarray(ev.decision.config, np.int64)
    counts = np.bincount(cfg, minlength=problem.num_config)
    out = np.zeros(NUM_SET)
    found = []
    for c in range(problem.num_config):
        if counts[c] == 0:
            continue
        where = np.where(cfg == c, 1, np.where(cfg < c, 2, 0)).astype(np.int8)
        lone = (cfg < c) & (problem.kernels.is_weight == 1) & (counts[cfg] == 1)
        where[lone] = 3
        set_cost(problem.kernels, problem.edges, problem.constants, where, problem.constants.dram_bw,
                 math.inf, 2, np.zeros(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64),
                 np.zeros(n, np.int64), out)  # fmt: skip
        if int(out[SetSlot.STATUS]) == ev.status.value:
            found.append((c, float(out[SetSlot.VIOLATION])))
    if not found:
        return ""
    # the evaluator reports the largest SRAM excess, and the first configuration short of cores
    c, excess = max(found, key=lambda f: f[1]) if ev.status is Status.SRAM else found[0]
    members = np.flatnonzero(cfg == c)
    names = [w.spec.graph.kernels[k].name for k in members]
    shown = ", ".join(repr(x) for x in names[:6]) + (f", ... ({len(names)})" if len(names) > 6 else "")
    others = f"; {len(found) - 1} other configuration(s) overflow too" if len(found) > 1 else ""
    if ev.status is Status.SRAM:
        cap = problem.constants.sram_cap
        w = problem.kernels.weight_sram[members]
        top = (f"; largest weights: kernel {names[int(np.argmax(w))]!r}, "
               f"{format_bytes(float(w.max()))}") if w.size and w.max() > 0 else ""  # fmt: skip
        return (f"configuration {c} (kernels {shown}) needs {format_bytes(cap + excess)} of SRAM "
                f"per chip ({cap + excess:.6g} bytes), the chip has {format_bytes(cap)} "
                f"({cap:.6g} bytes): {format_bytes(excess)} too much{top}{others}")  # fmt: skip
    cores = problem.constants.cores
    return (f"configuration {c} (kernels {shown}) needs {cores + excess:.0f} cores, the chip "
            f"has {cores} cores ({excess:.0f} cores short){others}")  # fmt: skip


def _dram(w: _Where, problem: Problem, ev: Evaluation) -> str:
    """The DRAM per chip: fixed part (weights, extra data) + live activations vs capacity."""
    cn, use = problem.constants, ev.dram_use
    cap = cn.dram_cap + cn.dram2_cap
    live = max(0.0, ev.dram_bytes - use.fixed)
    weights = [(k.weight_bytes or 0.0, k.name) for k in w.spec.graph.kernels]
    biggest = max(weights) if weights else (0.0, "")
    top = f"; largest weight: kernel {biggest[1]!r}, {format_bytes(biggest[0])}" if biggest[0] > 0 else ""
    return (f"DRAM per chip needs {format_bytes(ev.dram_bytes)} ({ev.dram_bytes:.6g} bytes: "
            f"weights {format_bytes(use.weights)}, other fixed data "
            f"{format_bytes(use.fixed - use.weights)}, live activations {format_bytes(live)}), "
            f"the chip has {format_bytes(cap)} ({cap:.6g} bytes): {format_bytes(ev.violation)} "
            f"too much{top}")  # fmt: skip
