"""The training memory model and activation recomputation (docs/model.md, "Training memory").

DFModel's DRAM check counts the weights of a pipeline stage's layers and the live activations
of one layer. A training step needs more: per chip,

* **weights**: the forward weight GEMMs' shards, ``word_bytes`` per parameter, for the
  stage's layers;
* **gradients**: ``training.grad_bytes`` per parameter (fp32 accumulation: 4);
* **optimizer state**: ``training.optimizer_bytes`` per parameter (Adam with an fp32 master
  copy: 4 + 4 + 4 = 12), divided over the DP replicas from ZeRO stage 1 on
  (``zero_stage``, or ``optimizer_sharding``); the gradients too from stage 2, the weights
  from stage 3, which then also holds one graph execution's weights gathered in full;
* **activations kept for the backward pass**: each forward kernel's ``saved_bytes`` per
  sequence, divided by TP where its sharding splits them (elementwise kernels also under
  sequence parallelism), for the stage's layers and the micro-batches in flight. With the
  1F1B schedule the first stage holds min(PP, micro-batches) of them, times
  1 + (PP - 1) / (PP v) with v > 1 virtual stages (interleaved 1F1B). Selective
  recomputation keeps nothing of the attention core; full recomputation keeps only each
  layer's input and rebuilds one layer's activations for one micro-batch at a time.

Recomputed kernels run twice per training step (their compute and collectives are
doubled); the model FLOP count (``workload_flop``, utilisation) does not include the rerun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsearch.codes import Dim, KernelKind, Phase, Recompute
from dfsearch.cost.dram import DramUse  # re-exported
from dfsearch.system.ratios import experts_per_chip

if TYPE_CHECKING:
    from dfsearch.spec import Graph, Kernel, Spec
    from dfsearch.workloads.base import Lowering

__all__ = [
    "DramUse",
    "recomputed",
    "sequence_split",
    "forward_weight_bytes",
    "training_dram",
    "zero_stage",
    "in_flight_factor",
]


def zero_stage(spec: Spec) -> int:
    """The ZeRO stage in effect: ``training.zero_stage``, at least 1 with
    ``optimizer_sharding``."""
    tr = spec.training
    return max(tr.zero_stage, 1 if tr.optimizer_sharding else 0)


def in_flight_factor(pp: int, interleave: int) -> float:
    """The first stage's kept activations under interleaved 1F1B relative to plain 1F1B:
    1 + (PP - 1) / (PP v) for v > 1 virtual stages per device (each device holds v model
    chunks and runs ahead by PP - 1 chunk-micro-batches), 1 for v = 1.

    >>> in_flight_factor(4, 2)
    1.375
    """
    if interleave <= 1 or pp <= 1:
        return 1.0
    return 1.0 + (pp - 1) / (pp * interleave)


def recomputed(spec: Spec) -> tuple[bool, ...]:
    """Per kernel: whether activation recomputation runs it a second time (a forward kernel
    of a training graph; selective: only those marked ``selective_recompute``)."""
    mode = spec.training.recompute
    g = spec.graph
    if mode is Recompute.NONE or not g.is_training:
        return tuple(False for _ in g.kernels)
    full = mode is Recompute.FULL
    return tuple(
        k.phase is Phase.FWD and (full or k.selective_recompute) for k in g.kernels
    )


def sequence_split(spec: Spec, kernel: Kernel, choice: Dim) -> bool:
    """Whether sequence parallelism splits this replicated elementwise kernel over TP."""
    return (
        spec.training.sequence_parallel
        and choice is Dim.NO
        and not kernel.kind.has_k
        and spec.graph.is_training
    )


def forward_weight_bytes(ctx: Lowering) -> float:
    """Per-chip bytes of one layer's parameters: the forward weight GEMMs' shards (every
    weight GEMM when the graph has no forward phase)."""
    kernels = ctx.spec.graph.kernels
    fwd = any(k.phase is Phase.FWD for k in kernels)
    total = 0.0
    for i, k in enumerate(kernels):
        if k.kind is KernelKind.GEMM_WEIGHT and (k.phase is Phase.FWD or not fwd):
            sm, sk, _ = ctx.dims[i]
            experts = experts_per_chip(k.num_expert, ctx.groups.dp)  # MoE: E / EP
            total += float(sm) * sk * ctx.word * experts
    return total


def _default_saved(k: Kernel) -> float:
    """A forward kernel without ``saved_bytes`` keeps its activation inputs."""
    first = k.input_bytes or 0.0
    second = 0.0 if k.kind.has_weight else (k.input2_bytes or 0.0)
    return first + second


def _layer_inputs(g: Graph) -> list[int]:
    """Forward kernels fed by no forward kernel: they read the layer's input."""
    fwd = {i for i, k in enumerate(g.kernels) if k.phase is Phase.FWD}
    idx = g.index()
    fed = {idx[c.dst] for c in g.connections if idx[c.src] in fwd}
    return [i for i in sorted(fwd) if i not in fed]


def _kept_per_sequence(ctx: Lowering) -> tuple[float, float]:
    """(kept, all): per chip and sequence, the forward bytes one layer keeps under the
    recomputation mode, and everything it would keep without recomputation."""
    spec, tp = ctx.spec, ctx.groups.tp
    mode = spec.training.recompute
    kept = everything = 0.0
    for i, k in enumerate(spec.graph.kernels):
        if k.phase is not Phase.FWD:
            continue
        saved = k.saved_bytes if k.saved_bytes is not None else _default_saved(k)
        split = ctx.sharding[i] is not Dim.NO or sequence_split(spec, k, ctx.sharding[i])
        per_chip = saved / tp if split else saved
        everything += per_chip
        if not (mode is Recompute.SELECTIVE and k.selective_recompute):
            kept += per_chip
    if mode is Recompute.FULL:
        g = spec.graph
        inputs = sum((g.kernels[i].input_bytes or 0.0) for i in _layer_inputs(g))
        kept = inputs / tp if spec.training.sequence_parallel else inputs
    return kept, everything


def training_dram(ctx: Lowering, extra_bytes: float) -> DramUse:
    """The training memory of one chip of the first pipeline stage (module docstring)."""
    spec, b = ctx.spec, ctx.batch
    tr = spec.training
    lps, m = b.layers_per_stage, b.micro_batch
    one = forward_weight_bytes(ctx)
    weights = lps * one
    params = weights / ctx.word
    optimizer = params * tr.optimizer_bytes
    gradients = params * tr.grad_bytes
    zero = zero_stage(spec)
    if zero >= 1:
        optimizer /= b.dp
    if zero >= 2:
        gradients /= b.dp
    if zero >= 3:
        weights = weights / b.dp + one  # one execution's weights gathered for its kernels
    kept, everything = _kept_per_sequence(ctx)
    in_flight = min(b.pp, max(b.num_micro_batch, 1))
    activations = lps * in_flight * m * kept
    if tr.interleave > 1:
        activations *= in_flight_factor(b.pp, tr.interleave)
    if tr.recompute is Recompute.FULL:
        activations += m * everything  # one layer rebuilt for its backward pass
    return DramUse(
        weights=weights, gradients=gradients, optimizer=optimizer,
        activations=activations, data=lps * extra_bytes, act_mult=float(m),
    )  # fmt: skip
