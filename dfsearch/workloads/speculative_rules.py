"""The rules of the ``[speculative]`` table (docs/spec.md): its own fields, and the serving
workload and objective it needs (checked by ``dfsearch.validate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsearch.codes import ObjectiveKind, ServingPhase, WorkloadKind

if TYPE_CHECKING:
    from dfsearch.issues import IssueSink
    from dfsearch.spec import SearchSettings, Speculative, Workload

__all__ = ["speculative_issues", "MAX_WINDOW"]

#: the largest window K accepted (a tree verifies 2^K tokens)
MAX_WINDOW = 16


def speculative_issues(
    sink: IssueSink,
    sp: Speculative,
    workload: Workload | None,
    search: SearchSettings | None = None,
) -> None:
    """Rules of ``[speculative]`` (docs/spec.md): positive dimensions, num_head x head_dim =
    hidden_dim, 1 <= window <= MAX_WINDOW, 0 < acceptance_rate <= 1, an ``llm_serving``
    decode workload with a fixed batch, and a step-latency objective (``tpot`` or ``time``:
    the plain decode it is compared with is the spec's own search)."""
    if search is not None and search.objective not in (ObjectiveKind.TPOT, ObjectiveKind.TIME):
        sink.add("search.objective", "must be 'tpot' or 'time' with [speculative] (the speedup "
                 "compares times per token). Got "
                 f"{search.objective.label!r} instead.")  # fmt: skip

    for f in ("hidden_dim", "num_head", "head_dim", "num_layer", "num_kv_head", "ffn_dim"):
        if getattr(sp, f) is not None:
            sink.ge(f"speculative.{f}", getattr(sp, f), 1)
            sink.in_range(f"speculative.{f}", getattr(sp, f), (1, 2**24, ""))
    if sp.gated_ffn not in (0, 1):
        sink.add("speculative.gated_ffn", f"must be 0 or 1. Got {sp.gated_ffn} instead.")
    if min(sp.num_head, sp.head_dim) >= 1 and sp.num_head * sp.head_dim != sp.hidden_dim:
        sink.add("speculative.hidden_dim",
                 "must equal speculative.num_head * speculative.head_dim = "
                 f"{sp.num_head} * {sp.head_dim} = {sp.num_head * sp.head_dim}. "
                 f"Got {sp.hidden_dim} instead.")  # fmt: skip
    g = sp.num_kv_head
    if g is not None and g >= 1 and sp.num_head >= 1 and sp.num_head % g:
        sink.add(
            "speculative.num_kv_head",
            f"must divide speculative.num_head = {sp.num_head}. Got {g} instead.",
        )
    if not 1 <= sp.window <= MAX_WINDOW:
        sink.add("speculative.window", f"must be in [1, {MAX_WINDOW}] (draft tokens per "
                 f"verification step). Got {sp.window} instead.")  # fmt: skip
    if not 0.0 < sp.acceptance_rate <= 1.0:
        sink.add(
            "speculative.acceptance_rate", f"must be in (0, 1]. Got {sp.acceptance_rate} instead."
        )
    if workload is None:
        return
    if workload.kind is not WorkloadKind.LLM_SERVING or workload.phase is not ServingPhase.DECODE:
        got = workload.kind.label + (
            f" {workload.phase.label}" if workload.kind is WorkloadKind.LLM_SERVING else ""
        )
        sink.add("speculative", "needs an llm_serving workload with phase = 'decode' "
                 f"(speculative decoding speeds up generation). Got {got} instead.")  # fmt: skip
        return
    if workload.batch_size == 0:
        sink.add(
            "workload.batch_size",
            "must be given (>= 1) with [speculative]: the draft "
            "and verification steps serve the same batch. Got 0 (searched) instead.",
        )
    if workload.tokens_per_step != 1:
        sink.add(
            "workload.tokens_per_step",
            "must be 1 with [speculative] (the verification "
            f"step's tokens come from the window). Got {workload.tokens_per_step} instead.",
        )
