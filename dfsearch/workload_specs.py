"""The ``[workload]`` table of a spec: one frozen input dataclass per workload kind.

The data the loaders build and the model reads; the rules of each kind (ranges, checks,
how it is lowered and priced) are its ``WorkloadModel`` in ``dfsearch/workloads/``. Adding a
kind adds its dataclass here (and to ``Workload``) and its model there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dfsearch.codes import ServingPhase, WorkloadKind

__all__ = [
    "LLMWorkload",
    "DLRMWorkload",
    "HPLWorkload",
    "FFTWorkload",
    "ServingWorkload",
    "Workload",
    "DEFAULT_MAX_BATCH",
]

#: the largest batch searched when ``batch_size = 0`` and ``max_batch_size`` is not given
DEFAULT_MAX_BATCH = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMWorkload:
    hidden_dim: int
    head_dim: int
    num_head: int
    seq_len: int
    num_layer: int
    global_batch_size: int
    micro_batch_size: int = 0  #: 0 = searched
    tile_size: int = 0  #: 0 = searched
    num_layer_in_graph: int = 1
    vocab_size: int | None = None  #: None: not given (needed by graph.embedding / lm_head)
    #: DFModel's reading of ``num_layer_in_graph`` > 1 (docs/model.md, "Pipeline partitioning"): the graph holds the
    #: layers of the whole pipeline and is cut into PP partitions at kernel granularity; the
    #: slowest partition runs on every stage (docs/model.md, "Pipeline partitioning")
    partition_graph: bool = False
    kind: WorkloadKind = field(default=WorkloadKind.LLM, init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DLRMWorkload:
    num_table: int
    emb_dim: int
    row: int
    global_batch_size: int
    num_copy: int = 1
    kind: WorkloadKind = field(default=WorkloadKind.DLRM, init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class HPLWorkload:
    n: int
    b: int
    num_copy: int = 1
    kind: WorkloadKind = field(default=WorkloadKind.HPL, init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class FFTWorkload:
    length: int
    num_copy: int = 1
    kind: WorkloadKind = field(default=WorkloadKind.FFT, init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingWorkload:
    """``[workload] kind = "llm_serving"`` (docs/spec.md)."""

    phase: ServingPhase
    hidden_dim: int
    num_head: int
    head_dim: int
    num_layer: int
    prompt_len: int
    output_len: int
    batch_size: int = 1  #: sequences served together per replica; 0 = searched
    max_batch_size: int = DEFAULT_MAX_BATCH  #: the largest power of two searched
    num_kv_head: int | None = None  #: None: num_head (no grouped-query attention)
    ffn_dim: int | None = None  #: None: 4 x hidden_dim
    gated_ffn: int = 0  #: 1: SwiGLU FFN
    kv_word_bytes: int | None = None  #: None: execution.word_bytes
    #: decode: new tokens per sequence per step (> 1: a speculative verification step)
    tokens_per_step: int = 1
    kind: WorkloadKind = field(default=WorkloadKind.LLM_SERVING, init=False)

    @property
    def kv_heads(self) -> int:
        """g: key/value heads."""
        return self.num_kv_head or self.num_head

    @property
    def step_tokens(self) -> int:
        """s_step: tokens each sequence processes in one step (prompt_len, or
        tokens_per_step: 1 in plain decode)."""
        return self.prompt_len if self.phase is ServingPhase.PREFILL else self.tokens_per_step


#: the ``[workload]`` table of a spec: one dataclass per registered kind
Workload = LLMWorkload | DLRMWorkload | HPLWorkload | FFTWorkload | ServingWorkload
