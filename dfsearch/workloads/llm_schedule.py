"""The training schedule choices of an LLM (docs/model.md, "Training schedule choices"):
interleaved 1F1B and the ZeRO stages' data-parallel collectives.

* **Interleaved 1F1B.** With v virtual stages per device (``training.interleave``) each
  device holds v model chunks of ceil(E / PP) / v graph executions; the pipeline's bubble
  shrinks to 1 / v of plain 1F1B's, (PP - 1) / (v nmb) of the ideal time, and a micro-batch
  crosses v PP - 1 stage boundaries instead of PP - 1 (the p2p time grows by that ratio).
  Megatron-LM's schedule needs nmb divisible by PP and the layers per stage divisible by v.
  The realistic execution model charges the textbook 1F1B bubble (PP - 1) / (v nmb);
  DFModel's equations keep their bubble rule (``Quirks.bubble_over_layers_per_stage``),
  divided by v.
* **ZeRO.** Stage 0 all-reduces each weight's gradient once per batch. Stage 1 runs it as a
  reduce-scatter + all-gather (the same ring volume, no tree form); stage 2 reduce-scatters
  every micro-batch's gradients (they are kept sharded) and all-gathers the updated weights
  once per batch; stage 3 all-gathers every weight in the forward and again in the backward
  pass and reduce-scatters its gradient, every micro-batch. Under the realistic model the
  traffic is spread over the kernels of the pass it overlaps in proportion to their FLOP
  (the stacks bucket gradients during the backward pass and prefetch weights a layer
  ahead), so it hides behind that pass's compute as ``execution.overlap`` says. Under
  DFModel's equations, which have no reduce-scatter, each is charged as the equivalent
  fraction of the DP all-reduce on the weight-gradient kernel.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from dfsearch.codes import Collective, ExecutionModel, NetworkTerm, Parallelism, Phase
from dfsearch.cost.training import zero_stage
from dfsearch.system.collectives import CollectiveNeed
from dfsearch.workloads.base import pipeline_factors

if TYPE_CHECKING:
    from dfsearch.spec import Spec
    from dfsearch.workloads.base import Batch, Lowering

__all__ = ["pipeline_with_interleave", "p2p_crossings", "gradient_needs", "interleave_issue",
           "ZERO_PASSES"]

#: per ZeRO stage: (all-reduce equivalents per micro-batch, per batch) of one weight's DP
#: traffic; a reduce-scatter or an all-gather is half an all-reduce
ZERO_PASSES: dict[int, tuple[float, float]] = {
    0: (0.0, 1.0), 1: (0.0, 1.0), 2: (0.5, 0.5), 3: (1.5, 0.0),
}


def pipeline_with_interleave(ctx: Lowering) -> tuple[float, float]:
    """(pipeline factor, batch multiplier) of an LLM (module docstring): DFModel's rule
    unchanged for v = 1 under DFModel's equations."""
    spec, b = ctx.spec, ctx.batch
    v = max(spec.training.interleave, 1)
    realistic = spec.execution.model is ExecutionModel.REALISTIC
    if v == 1 and not realistic:
        return pipeline_factors(b, ctx.quirks)
    quirks = replace(ctx.quirks, bubble_over_layers_per_stage=False) if realistic else ctx.quirks
    plain, _ = pipeline_factors(b, quirks)
    pf = 1.0 + (plain - 1.0) / v
    return pf, pf * b.layers_per_stage * b.global_batch / b.dp


def p2p_crossings(spec: Spec, pp: int) -> float:
    """Stage boundaries a micro-batch crosses relative to plain 1F1B: (v PP - 1) / (PP - 1);
    1 for v = 1 or no pipeline."""
    v = spec.training.interleave
    if v <= 1 or pp <= 1:
        return 1.0
    return (v * pp - 1) / (pp - 1)


def gradient_needs(ctx: Lowering, index: int, nbytes: float, nmb: int) -> list[CollectiveNeed]:
    """The DP traffic of the weight whose gradient kernel ``index`` produces ``nbytes`` per
    chip, under the ZeRO stage in effect (module docstring). A graph execution's time is per
    sequence, so traffic per micro-batch is spread over its m sequences and traffic per batch
    over the nmb m sequences of a replica (DFModel's equations: over nmb, their rule)."""
    dp = Parallelism.DP
    zero = zero_stage(ctx.spec)
    m = ctx.batch.micro_batch
    if ctx.fabric.alpha_beta is not None:
        return _realistic_gradient_needs(ctx, index, nbytes, zero, (m, nmb * m))
    once = NetworkTerm.KERNEL_ONCE
    if zero == 0:
        return [CollectiveNeed(Collective.ALL_REDUCE_PERIODIC, nbytes, dp, once, index, per=nmb)]
    per_micro, per_batch = ZERO_PASSES[zero]
    op = Collective.ALL_REDUCE_PERIODIC  # DFModel's equations have no reduce-scatter
    out = []
    if per_micro > 0:
        out.append(CollectiveNeed(op, nbytes, dp, once, index, count=per_micro, per=m))
    if per_batch > 0:
        out.append(CollectiveNeed(op, nbytes, dp, once, index, count=per_batch, per=nmb))
    return out


def _realistic_gradient_needs(ctx: Lowering, index: int, nbytes: float, zero: int,
                              spread: tuple[int, int]) -> list[CollectiveNeed]:
    """Realistic model: the traffic overlaps the compute of the pass it belongs to (the
    stacks bucket gradients during the backward pass and prefetch weights a layer ahead), so
    it is charged on that pass's kernels in proportion to their FLOP: stage 0 an all-reduce
    (ring or tree), stages 1-3 reduce-scatters and all-gathers (ring), per batch on the
    backward pass; stage 3's forward all-gather on the forward pass. ``spread``: the
    sequences of a micro-batch and of a replica's batch. A graph without phases charges it
    all on the gradient kernel ``index``."""
    dp, once = Parallelism.DP, NetworkTerm.KERNEL_ONCE
    m, sequences = spread
    bwd = _flop_shares(ctx, Phase.BWD) or [(index, 1.0)]
    fwd = _flop_shares(ctx, Phase.FWD) or bwd
    ag = Collective.ALL_GATHER
    if zero == 0:
        parts = [(Collective.ALL_REDUCE_PERIODIC, 1.0, sequences, bwd)]
    elif zero == 1:
        parts = [(ag, 2.0, sequences, bwd)]
    elif zero == 2:
        parts = [(ag, 1.0, m, bwd), (ag, 1.0, sequences, bwd)]
    else:
        parts = [(ag, 1.0, m, fwd), (ag, 2.0, m, bwd)]
    return [CollectiveNeed(op, nbytes, dp, once, j, count=count * share, per=per)
            for op, count, per, shares in parts for j, share in shares]


def _flop_shares(ctx: Lowering, phase: Phase) -> list[tuple[int, float]]:
    """(kernel, its share of the FLOP) of the graph's kernels of ``phase``."""
    kernels = ctx.spec.graph.kernels
    flop = [(i, k.flop) for i, k in enumerate(kernels) if k.phase is phase and k.flop > 0]
    total = sum(f for _, f in flop)
    return [(i, f / total) for i, f in flop] if total > 0 else []


def interleave_issue(spec: Spec, b: Batch) -> float:
    """0 when ``training.interleave`` = v fits the batch structure ``b``, else how far it is
    off: v > 1 needs a pipeline (PP > 1), micro-batches per pipeline divisible by PP and
    layers per stage divisible by v (Megatron-LM's interleaved schedule)."""
    v = spec.training.interleave
    if v <= 1:
        return 0.0
    if b.pp <= 1:
        return float(v - 1)
    return float(b.num_micro_batch % b.pp + b.layers_per_stage % v)
