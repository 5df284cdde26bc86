"""Workload generators: the dataflow graphs DFModel's generator scripts write.

Each generator returns a :class:`~dfsearch.spec.Graph` identical, kernel by kernel, to the graph
DFModel's importer would read from the corresponding script's output: same names, ids 1..n,
variants, dimensions, tiling, forward/backward marks, communication presets, ``memory_size``
and connections in the same order. Byte sizes are rounded to float32 (:func:`f32`) because
DFModel stores them in protobuf ``float`` fields.

The LLM generators also take optional parameters DFModel's scripts do not have, for current
models: ``num_kv_head`` (grouped-query attention), ``ffn_dim`` (FFN width), ``gated_ffn``
(SwiGLU FFN) and ``num_expert`` / ``top_k`` (``llm``, ``llm-fwd``: a mixture-of-experts layer
instead of the FFN); left out, the graph is DFModel's. ``layers`` stacks N layers in one
graph, and ``embedding`` / ``lm_head`` (with ``vocab_size``) add the model's two ends
(docs/model.md, "Several layers in one graph").

The registry :data:`GENERATORS` and :func:`generate` serve the CLI and the TOML loader
(``generator = "llm"`` plus integer parameters).

>>> g = llm_fwdbwd(hidden=2048, num_head=16, head_dim=128, seq=1024, word=2)
>>> len(g.kernels), len(g.connections)
(41, 53)
>>> g.kernels[2].name, g.kernels[2].outer, g.kernels[2].m, g.kernels[2].weight_bytes
('Q', 16, 128, 8388608.0)
>>> g = llm_fwdbwd(hidden=4096, num_head=32, head_dim=128, seq=8192, word=2,
...                num_kv_head=8, ffn_dim=14336, gated_ffn=1)
>>> len(g.kernels), len(g.connections), g.kernels[3].name, g.kernels[3].outer
(45, 63, 'K', 8)
>>> generate("hpl", {"n": 4096, "b": 1024, "word": 8}).kernels[-1].m
1024
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from numbers import Integral
from types import MappingProxyType

from dfsearch.codes import Collective, ComputeType, Dim, KernelKind, Phase
from dfsearch.errors import Issue, SpecError
from dfsearch.spec import Connection, Graph, Kernel

__all__ = [
    "f32",
    "llm_fwdbwd",
    "llm_fwd",
    "llm_decode",
    "llm_serving",
    "serving_context",
    "dlrm",
    "hpl",
    "fft",
    "GeneratorParam",
    "Generator",
    "GENERATORS",
    "generate",
]


def f32(x: float) -> float:
    """Round ``x`` to the nearest float32 and widen it back to a Python float.

    DFModel's generators assign byte counts to protobuf ``float`` fields, so the value its
    importer reads is the float32 nearest to the (double) product, e.g. ``2048*2048*160*2``
    (1342177280, exactly representable) prints as ``1342177300.0`` but reads back exactly.

    >>> f32(1342177280), f32(528482304), f32(0.1) == 0.1
    (1342177280.0, 528482304.0, False)
    """
    import numpy as np  # light; kept local so importing this module stays cheap

    with np.errstate(over="ignore"):  # beyond float32: inf, which validation reports
        return float(np.float32(float(x)))


# --------------------------------------------------------------------------- kernel builders
_SIZE_FIELDS = ("input_bytes", "input2_bytes", "weight_bytes", "output_bytes")


def _kernel(
    kid: int,
    name: str,
    kind: KernelKind,
    ctype: ComputeType,
    phase: Phase,
    dims: tuple[int, int, int, int],
    tiling: Dim,
    *,
    communication: Collective = Collective.NONE,
    communication_bytes: float = 0.0,
    communication2: Collective = Collective.NONE,
    communication2_bytes: float = 0.0,
    memory_bytes: float = 0.0,
    **sizes: float | None,
) -> Kernel:
    """One kernel; ``dims`` is (outer, M, K, N) with K = 1 for elementwise kinds.

    Every byte size is rounded to float32; sizes left ``None`` stay ``None``.
    """
    outer, m, k, n = dims
    rounded = {f: (None if sizes.get(f) is None else f32(sizes[f])) for f in _SIZE_FIELDS}
    return Kernel(
        id=kid,
        name=name,
        kind=kind,
        type=ctype,
        phase=phase,
        outer=outer,
        m=m,
        k=k,
        n=n,
        tiling=tiling,
        config=-1,
        communication=communication,
        communication_bytes=f32(communication_bytes),
        communication2=communication2,
        communication2_bytes=f32(communication2_bytes),
        memory_bytes=f32(memory_bytes),
        **rounded,
    )


def _connect(kernels: tuple[Kernel, ...], edges: list[tuple[int, int]],
             zero_out: frozenset[int] = frozenset()) -> tuple[Connection, ...]:
    """Connections with ids 1..len(edges) from (startIdx, endIdx) kernel-id pairs.

    ``zero_out`` holds the connection ids whose buffer counts 0 bytes.
    """
    by_id = {k.id: k.name for k in kernels}
    return tuple(
        Connection(src=by_id[s], dst=by_id[d], id=i, zero_out=i in zero_out)
        for i, (s, d) in enumerate(edges, start=1)
    )


# --------------------------------------------------------------------------- validation
#: Parameters that are 0/1 switches rather than sizes.
_FLAGS = frozenset({"gated_ffn", "decode"})
#: Parameters that are booleans (TOML ``true`` / ``false``; 0 / 1 accepted, as the CLI gives).
_BOOLS = frozenset({"embedding", "lm_head", "fused_attention", "kv_per_query_head"})


def _issues_positive(values: Mapping[str, object], path: str) -> list[Issue]:
    """Each value must be an integer > 0 (a flag of :data:`_FLAGS`: 0 or 1; one of
    :data:`_BOOLS`: a bool, 0 or 1); ``None`` stands for an optional parameter left out and
    is skipped."""
    issues = []
    for key, v in values.items():
        if v is None:
            continue
        if key in _BOOLS:
            if not (isinstance(v, bool) or (isinstance(v, Integral) and v in (0, 1))):
                issues.append(Issue(f"{path}.{key}",
                                    f"must be true or false. Got {v!r} instead."))
        elif isinstance(v, bool) or not isinstance(v, Integral):
            issues.append(Issue(f"{path}.{key}", f"must be an integer. Got {v!r} instead."))
        elif key in _FLAGS:
            if v not in (0, 1):
                issues.append(Issue(f"{path}.{key}", f"must be 0 or 1. Got {v!r} instead."))
        elif v <= 0:
            issues.append(Issue(f"{path}.{key}", f"must be > 0. Got {v!r} instead."))
        elif v > MAX_PARAM:
            issues.append(Issue(f"{path}.{key}",
                                f"must be <= 2^40 = {MAX_PARAM}. Got {v!r} instead."))
    return issues


#: Most layers one generated graph holds (``graph.layers``).
MAX_LAYERS = 1024

#: Upper bound of every generator parameter (sizes stay far below 2^63 in any product the
#: model forms; see dfsearch.validate.RANGES) and of the number of kernels a generator makes.
MAX_PARAM = 2**40
MAX_KERNELS = 2**16


def _issues_count(count: int, what: str, path: str) -> list[Issue]:
    if count > MAX_KERNELS:
        return [Issue(path, f"would generate {count} kernels ({what}); at most 2^16 = "
                            f"{MAX_KERNELS} are supported.")]
    return []


def _issues_heads(hidden: int, num_head: int, head_dim: int, path: str) -> list[Issue]:
    if num_head * head_dim != hidden:
        return [Issue(
            f"{path}.hidden",
            f"must equal num_head * head_dim ({num_head} * {head_dim} = "
            f"{num_head * head_dim}). Got {hidden} instead.",
        )]
    return []


def _issues_kv_heads(num_head: int, num_kv_head: int | None, path: str) -> list[Issue]:
    if num_kv_head is not None and num_head % num_kv_head:
        return [Issue(
            f"{path}.num_kv_head",
            f"must divide num_head ({num_head}): each key/value head serves the same number "
            f"of query heads. Got {num_kv_head} instead.",
        )]
    return []


#: Experts per token when ``top_k`` is left out (at most ``num_expert``): Mixtral, GShard.
DEFAULT_TOP_K = 2
#: Most experts of a MoE layer (``validate.RANGES["graph.kernels[].num_expert"]``).
MAX_EXPERTS = 2**20


def _issues_moe(num_expert: int | None, top_k: int | None, path: str) -> list[Issue]:
    if num_expert is not None and num_expert > MAX_EXPERTS:
        return [Issue(f"{path}.num_expert", f"must be <= 2^20 = {MAX_EXPERTS} (the range of a "
                                            f"kernel's num_expert). Got {num_expert} instead.")]
    if top_k is None:
        return []
    if num_expert is None:
        return [Issue(f"{path}.top_k", "is only allowed with num_expert (a mixture-of-experts "
                                       f"layer). Got {top_k} instead.")]
    if top_k > num_expert:
        return [Issue(f"{path}.top_k", f"must be <= num_expert ({num_expert}): each token "
                                       f"goes to top_k distinct experts. Got {top_k} instead.")]
    return []


def _issues_ends(v: Mapping[str, object], path: str) -> list[Issue]:
    """``vocab_size`` is required when an embedding or an LM head is asked for."""
    if (v.get("embedding") or v.get("lm_head")) and v.get("vocab_size") is None:
        asked = " and ".join(f"{path}.{k}" for k in ("embedding", "lm_head") if v.get(k))
        return [Issue(f"{path}.vocab_size",
                      f"is required with {asked} = true (the embedding table and the LM head "
                      "are vocab_size x hidden): expected an integer > 0. Got none instead.")]
    return []


def _issues_hpl(n: int, b: int, iteration: int | None, path: str) -> list[Issue]:
    if b > n:
        return [Issue(f"{path}.b", f"must be <= n ({n}). Got {b} instead.")]
    limit = -(-n // b)  # ceil(n / b): the last iteration must still have a positive side
    if iteration is not None and iteration > limit:
        return [Issue(
            f"{path}.iteration",
            f"must be <= ceil(n / b) = {limit} (side n - (i-1)*b must stay > 0). "
            f"Got {iteration} instead.",
        )]
    return []


def _issues_fft(length: int, r: int, path: str) -> list[Issue]:
    issues = []
    if length < 4:
        issues.append(Issue(f"{path}.length",
                            f"must be >= 4 (two points per FFT dimension). Got {length} instead."))
    if r < 2:
        issues.append(Issue(f"{path}.r", f"must be >= 2. Got {r} instead."))
    return issues


def _check(issues: list[Issue]) -> None:
    if issues:
        raise SpecError(issues)


def _validate(name: str, values: Mapping[str, object], path: str) -> list[Issue]:
    """All problems of one generator's (complete) parameter set."""
    issues = _issues_positive(values, path)
    if issues:
        return issues
    v = values
    if name in ("llm", "llm-fwd", "llm-decode", "llm-serving"):
        issues += _issues_heads(v["hidden"], v["num_head"], v["head_dim"], path)
        issues += _issues_kv_heads(v["num_head"], v.get("num_kv_head"), path)  # type: ignore[arg-type]
        issues += _issues_moe(v.get("num_expert"), v.get("top_k"), path)  # type: ignore[arg-type]
        if v.get("layers", 1) > MAX_LAYERS:  # type: ignore[operator]
            issues.append(Issue(f"{path}.layers", f"must be <= {MAX_LAYERS} (layers in one "
                                                  f"graph). Got {v['layers']} instead."))
        issues += _issues_ends(v, path)
    elif name == "hpl":
        issues += _issues_hpl(v["n"], v["b"], v.get("iteration"), path)
        it = v.get("iteration") or v["n"] // v["b"]  # type: ignore[operator]
        issues += _issues_count(it, "one per iteration", f"{path}.iteration")  # type: ignore[arg-type]
    elif name == "dlrm":
        layers = v["bottom_num_mlp"] + v["top_num_mlp"]  # type: ignore[operator]
        issues += _issues_count(3 * layers, "3 per MLP layer", f"{path}.bottom_num_mlp")
    elif name == "fft":
        issues += _issues_fft(v["length"], v["r"], path)
    return issues


# --------------------------------------------------------------------------- LLM
_F, _B = Phase.FWD, Phase.BWD
_SYS, _SIMD = ComputeType.SYSTOLIC, ComputeType.SIMD
_GW, _GII = KernelKind.GEMM_WEIGHT, KernelKind.GEMM
_EW1, _EW2 = KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2

#: One kernel row: name, type, kind, (outer, M, K, N), input bytes, input2 or weight bytes,
#: output bytes.
_Row = tuple[str, ComputeType, KernelKind, tuple[int, int, int, int], float, float | None, float]
#: One weight-gradient row: name, (outer, M, K, N), input, input2, output (= weight) bytes.
_Update = tuple[str, tuple[int, int, int, int], float, float, float]
_Edge = tuple[str, str]


@dataclass(frozen=True)
class _Layer:
    """Sizes of one transformer layer: width h, query heads a, key/value heads g, head size d
    (a * d = h), FFN width f, tokens s, bytes per element w, SwiGLU (gated) or GeLU FFN;
    e experts of which each token uses ``topk`` (e = 0: a dense FFN)."""

    h: int
    a: int
    g: int
    d: int
    f: int
    s: int
    w: int
    gated: bool
    e: int = 0
    topk: int = 0

    @property
    def hs(self) -> int:  # one activation, h x s
        return self.h * self.s * self.w

    @property
    def kvs(self) -> int:  # K or V activation, g*d x s
        return self.g * self.d * self.s * self.w

    @property
    def fs(self) -> int:  # FFN inner activation, f x s
        return self.f * self.s * self.w

    @property
    def ss(self) -> int:  # attention scores, a x s x s
        return self.a * self.s * self.s * self.w


def _ffn_fwd_rows(h: int, f: int, n: int, act: float, inner: float, wt: float,
                  gated: bool) -> list[_Row]:
    """The forward FFN on ``n`` tokens: GeLU (FFN0, GeLU, FFN1) or SwiGLU
    (FFN_gate, FFN_up, SwiGLU = SiLU(gate) x up, FFN_down); ``act``/``inner`` are the h x n
    and f x n activation bytes, ``wt`` the bytes of one f x h weight."""
    if not gated:
        return [
            ("FFN0", _SYS, _GW, (1, f, h, n), act, wt, inner),
            ("GeLU", _SIMD, _EW1, (1, f, 1, n), inner, None, inner),
            ("FFN1", _SYS, _GW, (1, h, f, n), inner, wt, act),
        ]
    return [
        ("FFN_gate", _SYS, _GW, (1, f, h, n), act, wt, inner),
        ("FFN_up", _SYS, _GW, (1, f, h, n), act, wt, inner),
        ("SwiGLU", _SIMD, _EW2, (1, f, 1, n), inner, inner, inner),
        ("FFN_down", _SYS, _GW, (1, h, f, n), inner, wt, act),
    ]


def _llm_fwd_rows(x: _Layer) -> list[_Row]:
    """The forward kernels of one training layer (DFModel's order, FFN per :func:`_ffn_fwd_rows`)."""
    h, a, g, d, s = x.h, x.a, x.g, x.d, x.s
    hs, kv, ss, wt, kvwt = x.hs, x.kvs, x.ss, h * h * x.w, h * g * d * x.w
    return [
        ("Add_Prev_Layer", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("LayerNorm_1", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("Q", _SYS, _GW, (a, d, h, s), hs, wt, hs),
        ("K", _SYS, _GW, (g, d, h, s), hs, kvwt, kv),
        ("V", _SYS, _GW, (g, d, h, s), hs, kvwt, kv),
        ("MHA_GEMM_1", _SYS, _GII, (a, s, d, s), hs, kv, ss),  # each K head serves a/g heads
        ("SOFTMAX", _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("DropOut_1", _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("MHA_GEMM_2", _SYS, _GII, (a, d, s, s), kv, ss, hs),
        ("PROJ_GEMM", _SYS, _GW, (1, h, h, s), hs, wt, hs),
        ("DropOut_2", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("Add_1", _SIMD, _EW2, (1, h, 1, s), hs, hs, hs),
        ("LayerNorm_2", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        *(_moe_fwd_rows(x) if x.e
          else _ffn_fwd_rows(h, x.f, s, hs, x.fs, x.f * h * x.w, x.gated)),
        ("DropOut_3", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("Add_2", _SIMD, _EW2, (1, h, 1, s), hs, hs, hs),
    ]


def _ffn_bwd_rows(h: int, f: int, n: int, act: float, inner: float, wt: float,
                  gated: bool) -> list[_Row]:
    """The data-gradient kernels of :func:`_ffn_fwd_rows`' FFN (same arguments)."""
    if gated:  # dA = W_down dY; dG, dU from SwiGLU's derivative; dX = W_gate dG + W_up dU
        return [
            ("FFN_down_bwd", _SYS, _GW, (1, f, h, n), act, wt, inner),
            ("SwiGLU_bwd_gate", _SIMD, _EW2, (1, f, 1, n), inner, inner, inner),
            ("SwiGLU_bwd_up", _SIMD, _EW2, (1, f, 1, n), inner, inner, inner),
            ("FFN_gate_bwd", _SYS, _GW, (1, h, f, n), inner, wt, act),
            ("FFN_up_bwd", _SYS, _GW, (1, h, f, n), inner, wt, act),
        ]
    return [
        ("FFN1_bwd", _SYS, _GW, (1, f, h, n), act, wt, inner),
        ("GeLU_bwd", _SIMD, _EW1, (1, f, 1, n), inner, None, inner),
        ("FFN0_bwd", _SYS, _GW, (1, h, f, n), inner, wt, act),
    ]


def _llm_bwd_rows(x: _Layer) -> list[_Row]:
    """The backward (data-gradient) kernels, in DFModel's order (the FFN's, or the MoE
    layer's: :func:`_moe_bwd_rows`)."""
    h, a, g, d, f, s = x.h, x.a, x.g, x.d, x.f, x.s
    hs, kv, ss = x.hs, x.kvs, x.ss
    wt, kvwt = h * h * x.w, h * g * d * x.w
    if x.e:
        ffn = _moe_bwd_rows(x)
    else:
        ffn = _ffn_bwd_rows(h, f, s, hs, x.fs, f * h * x.w, x.gated)
    return [
        ("Loss_bwd", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("DropOut_3_bwd", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        *ffn,
        ("LayerNorm_2_bwd", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("DropOut_2_bwd", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("PROJ_GEMM_bwd", _SYS, _GW, (1, h, h, s), hs, wt, hs),
        ("MHA_GEMM_2_bwd1", _SYS, _GII, (a, s, d, s), hs, kv, ss),  # dP = dO V^T
        ("MHA_GEMM_2_bwd2", _SYS, _GII, (a, d, s, s), hs, ss, kv),  # dV = P^T dO, per KV head
        ("V_bwd", _SYS, _GW, (1, h, g * d, s), kv, kvwt, hs),  # outer 1, M h (as DFModel)
        ("DropOut_1_bwd", _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("SOFTMAX_bwd", _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("MHA_GEMM_1_bwd1", _SYS, _GII, (a, d, s, s), ss, kv, hs),  # dQ = dS K
        ("MHA_GEMM_1_bwd2", _SYS, _GII, (a, d, s, s), ss, hs, kv),  # dK = dS^T Q, per KV head
        ("Q_bwd", _SYS, _GW, (a, d, h, s), hs, wt, hs),
        ("K_bwd", _SYS, _GW, (g, d, h, s), kv, kvwt, hs),
    ]


def _ffn_update_rows(h: int, f: int, n: int, act: float, inner: float, wt: float,
                     gated: bool) -> list[_Update]:
    """The weight-gradient GEMMs of :func:`_ffn_fwd_rows`' FFN (same arguments)."""
    if gated:
        return [
            ("FFN_down_bwd_weight_update", (1, f, n, h), act, inner, wt),
            ("FFN_gate_bwd_weight_update", (1, h, n, f), inner, act, wt),
            ("FFN_up_bwd_weight_update", (1, h, n, f), inner, act, wt),
        ]
    return [
        ("FFN1_bwd_weight_update", (1, f, n, h), act, inner, wt),
        ("FFN0_bwd_weight_update", (1, h, n, f), inner, act, wt),
    ]


def _llm_update_rows(x: _Layer) -> list[_Update]:
    """Weight-gradient GEMMs over the sequence (K tiled): input 1 the incoming gradient,
    input 2 the forward activation, output the weight gradient."""
    h, g, d, f, s = x.h, x.g, x.d, x.f, x.s
    hs, kv = x.hs, x.kvs
    wt, kvwt = h * h * x.w, h * g * d * x.w
    if x.e:
        ffn = _moe_update_rows(x)
    else:
        ffn = _ffn_update_rows(h, f, s, hs, x.fs, f * h * x.w, x.gated)
    return [
        *ffn,
        ("PROJ_GEMM_bwd_weight_update", (1, h, s, h), hs, hs, wt),
        ("V_bwd_weight_update", (1, h, s, g * d), kv, hs, kvwt),
        ("K_bwd_weight_update", (1, h, s, g * d), kv, hs, kvwt),
        ("Q_bwd_weight_update", (1, h, s, h), hs, hs, wt),
    ]


def _ffn_fwd_edges(gated: bool) -> list[_Edge]:
    if not gated:
        return [("LayerNorm_2", "FFN0"), ("FFN0", "GeLU"), ("GeLU", "FFN1"), ("FFN1", "DropOut_3")]
    return [("LayerNorm_2", "FFN_gate"), ("LayerNorm_2", "FFN_up"), ("FFN_gate", "SwiGLU"),
            ("FFN_up", "SwiGLU"), ("SwiGLU", "FFN_down"), ("FFN_down", "DropOut_3")]


def _llm_fwd_edges(gated: bool, moe: bool = False) -> list[_Edge]:
    """Forward connections in DFModel's order (``generate_LLM_fwd.py``); ``moe``: the MoE
    layer's (:func:`_moe_fwd_edges`) instead of the FFN's."""
    return [
        ("Add_Prev_Layer", "LayerNorm_1"), ("LayerNorm_1", "Q"), ("LayerNorm_1", "K"),
        ("LayerNorm_1", "V"), ("Q", "MHA_GEMM_1"), ("K", "MHA_GEMM_1"),
        ("MHA_GEMM_1", "SOFTMAX"), ("SOFTMAX", "DropOut_1"), ("V", "MHA_GEMM_2"),
        ("DropOut_1", "MHA_GEMM_2"), ("MHA_GEMM_2", "PROJ_GEMM"), ("PROJ_GEMM", "DropOut_2"),
        ("DropOut_2", "Add_1"), ("Add_Prev_Layer", "Add_1"), ("Add_1", "LayerNorm_2"),
        *(_moe_fwd_edges(gated) if moe else _ffn_fwd_edges(gated)),
        ("DropOut_3", "Add_2"), ("Add_1", "Add_2"),
    ]


def _ffn_bwd_edges(gated: bool) -> tuple[list[_Edge], list[_Edge]]:
    """The FFN's backward connections and its weight gradients' connections."""
    if gated:
        ffn = [("DropOut_3_bwd", "FFN_down_bwd"),
               ("FFN_down_bwd", "SwiGLU_bwd_gate"), ("FFN_gate", "SwiGLU_bwd_gate"),
               ("FFN_up", "SwiGLU_bwd_gate"),
               ("FFN_down_bwd", "SwiGLU_bwd_up"), ("FFN_gate", "SwiGLU_bwd_up"),
               ("SwiGLU_bwd_gate", "FFN_gate_bwd"), ("SwiGLU_bwd_up", "FFN_up_bwd"),
               ("FFN_gate_bwd", "LayerNorm_2_bwd"), ("FFN_up_bwd", "LayerNorm_2_bwd")]
        ffn_updates = [
            ("DropOut_3_bwd", "FFN_down_bwd_weight_update"),
            ("SwiGLU", "FFN_down_bwd_weight_update"),
            ("SwiGLU_bwd_gate", "FFN_gate_bwd_weight_update"),
            ("LayerNorm_2", "FFN_gate_bwd_weight_update"),
            ("SwiGLU_bwd_up", "FFN_up_bwd_weight_update"),
            ("LayerNorm_2", "FFN_up_bwd_weight_update"),
        ]
    else:
        ffn = [("DropOut_3_bwd", "FFN1_bwd"), ("FFN1_bwd", "GeLU_bwd"), ("GeLU_bwd", "FFN0_bwd"),
               ("FFN0_bwd", "LayerNorm_2_bwd")]
        ffn_updates = [
            ("DropOut_3_bwd", "FFN1_bwd_weight_update"), ("GeLU", "FFN1_bwd_weight_update"),
            ("GeLU_bwd", "FFN0_bwd_weight_update"), ("LayerNorm_2", "FFN0_bwd_weight_update"),
        ]
    return ffn, ffn_updates


def _llm_bwd_edges(gated: bool, moe: bool = False) -> list[_Edge]:
    """Backward and weight-gradient connections in DFModel's order. A backward kernel reads
    the stored forward tensors it needs (V, DropOut_1, K, Q; for SwiGLU, the gate and up
    projections); each weight gradient reads its incoming gradient and forward input.
    ``moe``: the MoE layer's (:func:`_moe_bwd_edges`) instead of the FFN's."""
    ffn, ffn_updates = _moe_bwd_edges(gated) if moe else _ffn_bwd_edges(gated)
    return [
        ("Loss_bwd", "DropOut_3_bwd"), *ffn,
        ("LayerNorm_2_bwd", "DropOut_2_bwd"), ("DropOut_2_bwd", "PROJ_GEMM_bwd"),
        ("PROJ_GEMM_bwd", "MHA_GEMM_2_bwd1"), ("V", "MHA_GEMM_2_bwd1"),
        ("PROJ_GEMM_bwd", "MHA_GEMM_2_bwd2"), ("DropOut_1", "MHA_GEMM_2_bwd2"),
        ("MHA_GEMM_2_bwd1", "DropOut_1_bwd"), ("MHA_GEMM_2_bwd2", "V_bwd"),
        ("DropOut_1_bwd", "SOFTMAX_bwd"), ("SOFTMAX_bwd", "MHA_GEMM_1_bwd1"),
        ("SOFTMAX_bwd", "MHA_GEMM_1_bwd2"), ("K", "MHA_GEMM_1_bwd1"), ("Q", "MHA_GEMM_1_bwd2"),
        ("MHA_GEMM_1_bwd1", "Q_bwd"), ("MHA_GEMM_1_bwd2", "K_bwd"),
        *ffn_updates,
        ("DropOut_2_bwd", "PROJ_GEMM_bwd_weight_update"),
        ("MHA_GEMM_2", "PROJ_GEMM_bwd_weight_update"),
        ("MHA_GEMM_2_bwd2", "V_bwd_weight_update"), ("LayerNorm_1", "V_bwd_weight_update"),
        ("MHA_GEMM_1_bwd2", "K_bwd_weight_update"), ("LayerNorm_1", "K_bwd_weight_update"),
        ("MHA_GEMM_1_bwd1", "Q_bwd_weight_update"), ("LayerNorm_1", "Q_bwd_weight_update"),
    ]


# --------------------------------------------------------------------------- mixture of experts
#: Prefix of the expert FFN's kernels (the dense FFN's names otherwise).
_EXPERT = "Expert_"
#: The MoE layer's stand-ins for the dense FFN's neighbours in the FFN's connections.
_MOE_NEIGHBOURS = MappingProxyType({
    "LayerNorm_2": "MoE_dispatch", "DropOut_3": "MoE_combine",
    "DropOut_3_bwd": "MoE_combine_bwd", "LayerNorm_2_bwd": "MoE_dispatch_bwd",
})
#: Kernels that exchange token rows over the expert-parallel group.
_MOE_ALL_TO_ALL = ("MoE_dispatch", "MoE_combine", "MoE_combine_bwd", "MoE_dispatch_bwd")


def _moe_sizes(x: _Layer) -> tuple[int, int, int, int, int]:
    """(k s, E s w, h k s w, f k s w, E f h w): routed token rows, router output, dispatched
    activations, expert inner activations, the weights of one FFN matrix for all experts."""
    ks = x.topk * x.s
    return ks, x.e * x.s * x.w, x.h * ks * x.w, x.f * ks * x.w, x.e * x.f * x.h * x.w


def _experts(rows: list) -> list:
    """Rows (or connections) of the dense FFN renamed to the expert FFN's."""
    return [(_EXPERT + r[0], *r[1:]) for r in rows]


def _moe_fwd_rows(x: _Layer) -> list[_Row]:
    """The forward MoE layer in place of the FFN (docs/model.md, "Mixture of experts"):
    router h -> E, top-k gating, dispatch of the k s token rows to their experts
    (all-to-all), the expert FFN on k s rows, the combine (all-to-all back) and the gated
    sum of each token's k rows."""
    h, e, s = x.h, x.e, x.s
    ks, es, hks, fks, ewt = _moe_sizes(x)
    return [
        ("Router", _SYS, _GW, (1, e, h, s), x.hs, e * h * x.w, es),
        ("TopK_gate", _SIMD, _EW1, (1, e, 1, s), es, None, es),
        ("MoE_dispatch", _SIMD, _EW2, (1, h, 1, ks), x.hs, es, hks),
        *_experts(_ffn_fwd_rows(h, x.f, ks, hks, fks, ewt, x.gated)),
        ("MoE_combine", _SIMD, _EW1, (1, h, 1, ks), hks, None, hks),
        ("MoE_weighted_sum", _SIMD, _EW2, (1, h, 1, s), hks, es, x.hs),
    ]


def _moe_bwd_rows(x: _Layer) -> list[_Row]:
    """The MoE layer's data gradients: each routed row's gradient (gate x incoming), the
    all-to-all to the experts, the expert FFN's backward on k s rows, the all-to-all back,
    the router's gradient (top-k gating, then the router GEMM h <- E), and the sum of each
    token's k rows with the router's contribution."""
    h, e, s = x.h, x.e, x.s
    ks, es, hks, fks, ewt = _moe_sizes(x)
    back = (_EW2, hks) if x.gated else (_EW1, None)  # SwiGLU: gate and up gradients summed
    return [
        ("MoE_weighted_sum_bwd", _SIMD, _EW2, (1, h, 1, ks), x.hs, es, hks),
        ("MoE_combine_bwd", _SIMD, _EW1, (1, h, 1, ks), hks, None, hks),
        *_experts(_ffn_bwd_rows(h, x.f, ks, hks, fks, ewt, x.gated)),
        ("MoE_dispatch_bwd", _SIMD, back[0], (1, h, 1, ks), hks, back[1], hks),
        ("TopK_gate_bwd", _SIMD, _EW2, (1, e, 1, s), hks, x.hs, es),
        ("Router_bwd", _SYS, _GW, (1, h, e, s), es, e * h * x.w, x.hs),
        ("MoE_token_sum_bwd", _SIMD, _EW2, (1, h, 1, s), hks, x.hs, x.hs),
    ]


def _moe_update_rows(x: _Layer) -> list[_Update]:
    """The expert FFN's weight gradients over k s rows, and the router's over s tokens."""
    ks, es, hks, fks, ewt = _moe_sizes(x)
    return [
        *_experts(_ffn_update_rows(x.h, x.f, ks, hks, fks, ewt, x.gated)),
        ("Router_bwd_weight_update", (1, x.h, x.s, x.e), es, x.hs, x.e * x.h * x.w),
    ]


def _moe_rename(edges: list[_Edge]) -> list[_Edge]:
    """The dense FFN's connections as the expert FFN's (its neighbours: the MoE kernels)."""
    def name(n: str) -> str:
        return _MOE_NEIGHBOURS.get(n, _EXPERT + n)

    return [(name(a), name(b)) for a, b in edges]


def _moe_fwd_edges(gated: bool) -> list[_Edge]:
    return [
        ("LayerNorm_2", "Router"), ("Router", "TopK_gate"), ("LayerNorm_2", "MoE_dispatch"),
        ("TopK_gate", "MoE_dispatch"), *_moe_rename(_ffn_fwd_edges(gated)),
        ("MoE_combine", "MoE_weighted_sum"), ("TopK_gate", "MoE_weighted_sum"),
        ("MoE_weighted_sum", "DropOut_3"),
    ]


def _moe_bwd_edges(gated: bool) -> tuple[list[_Edge], list[_Edge]]:
    """The MoE layer's backward connections and its weight gradients' connections. The
    gate gradient reads the experts' combined outputs; the router's weight gradient reads
    the router's input (LayerNorm_2)."""
    ffn, updates = _ffn_bwd_edges(gated)
    bwd = [
        ("DropOut_3_bwd", "MoE_weighted_sum_bwd"), ("TopK_gate", "MoE_weighted_sum_bwd"),
        ("MoE_weighted_sum_bwd", "MoE_combine_bwd"), *_moe_rename(ffn),
        ("MoE_combine", "TopK_gate_bwd"), ("DropOut_3_bwd", "TopK_gate_bwd"),
        ("TopK_gate_bwd", "Router_bwd"), ("MoE_dispatch_bwd", "MoE_token_sum_bwd"),
        ("Router_bwd", "MoE_token_sum_bwd"), ("MoE_token_sum_bwd", "LayerNorm_2_bwd"),
    ]
    return bwd, [*_moe_rename(updates), ("TopK_gate_bwd", "Router_bwd_weight_update"),
                 ("LayerNorm_2", "Router_bwd_weight_update")]


def _moe_saved_bytes(x: _Layer) -> dict[str, float]:
    """Bytes the MoE forward kernels keep for the backward pass (one sequence): the gating
    probabilities (E s w), the dispatched rows (the expert FFN's input, h k s w), the expert
    activation's input and output (2 f k s w; SwiGLU 3 f k s w) and the combined expert
    outputs (h k s w, read by the gate gradient). The router keeps nothing: its input is
    LayerNorm_2's kept output."""
    _, es, hks, fks, _ = _moe_sizes(x)
    act = {_EXPERT + "SwiGLU": 3.0 * fks} if x.gated else {_EXPERT + "GeLU": 2.0 * fks}
    return {"TopK_gate": es, "MoE_dispatch": hks, **act, "MoE_combine": hks}


def _moe_marks(kernels: list[Kernel], x: _Layer) -> list[Kernel]:
    """``num_expert`` on the expert kernels and the four all-to-alls; the all-to-alls'
    ``expert_all_to_all`` of their output (the routed token rows)."""
    if not x.e:
        return kernels
    out = []
    for k in kernels:
        if k.name in _MOE_ALL_TO_ALL:
            k = replace(k, num_expert=x.e, communication=Collective.EXPERT_ALL_TO_ALL,
                        communication_bytes=k.output_bytes)
        elif k.name.startswith(_EXPERT):
            k = replace(k, num_expert=x.e)
        out.append(k)
    return out


def _row_kernels(rows: list[_Row], phase: Phase, first_id: int, tiling: Dim,
                 memory: Mapping[str, float] | None = None,
                 saved: Mapping[str, float] | None = None) -> list[Kernel]:
    """Kernels from rows, ids from ``first_id``; ``memory`` maps names to ``memory_bytes``,
    ``saved`` to ``saved_bytes`` (a kernel in ``saved`` keeps exactly those bytes, one not
    in it keeps none; the attention core, :data:`_ATTENTION_CORE`, is marked for selective
    recomputation)."""
    kernels = []
    for kid, (name, ctype, kind, dims, in1, second, out) in enumerate(rows, start=first_id):
        extra = {"weight_bytes": second} if kind is _GW else {"input2_bytes": second}
        mem = (memory or {}).get(name, 0.0)
        k = _kernel(kid, name, kind, ctype, phase, dims, tiling, memory_bytes=mem,
                    input_bytes=in1, output_bytes=out, **extra)
        if saved is not None:
            k = replace(k, saved_bytes=f32(saved.get(name, 0.0)),
                        selective_recompute=name in _ATTENTION_CORE)
        kernels.append(k)
    return kernels


#: The attention core: what selective recomputation runs again in the backward pass.
_ATTENTION_CORE = frozenset({"MHA_GEMM_1", "SOFTMAX", "DropOut_1", "MHA_GEMM_2"})


def _llm_saved_bytes(x: _Layer) -> dict[str, float]:
    """Bytes each forward kernel of one layer keeps for the backward pass (one sequence).

    Every stored tensor is counted once, at the kernel whose sharding splits it across the
    tensor-parallel group: a norm keeps its input and output (2hs), Q, K and V their outputs
    (hs, 2 g d s w), the softmax its output (a s^2 w), the attention dropout its output and a
    one-byte mask (a s^2 (w + 1)), the projection its input (hs), the FFN activation its input
    and output (2 f s w; SwiGLU: gate, up and product, 3 f s w), the two residual dropouts a
    one-byte mask (h s). With w = 2, g = a and f = 4h that is 34 s h + 5 a s^2 bytes per
    sequence, the per-layer activation memory of Korthikanti et al., "Reducing Activation
    Recomputation in Large Transformer Models" (2022), eq. (1) with b = 1.
    """
    h, a, s = x.h, x.a, x.s
    hs, kv, ss, fs = x.hs, x.kvs, x.ss, x.fs
    ffn = {"SwiGLU": 3.0 * fs} if x.gated else {"GeLU": 2.0 * fs}
    if x.e:
        ffn = _moe_saved_bytes(x)
    return {
        "LayerNorm_1": 2.0 * hs, "Q": hs, "K": kv, "V": kv,
        "SOFTMAX": ss, "DropOut_1": ss + a * s * s,
        "PROJ_GEMM": hs, "DropOut_2": h * s, "LayerNorm_2": 2.0 * hs,
        **ffn, "DropOut_3": h * s,
    }  # fmt: skip


def _llm_kernels(x: _Layer) -> tuple[Kernel, ...]:
    """All kernels of one training layer: forward, backward, then weight gradients."""
    fwd, bwd = _llm_fwd_rows(x), _llm_bwd_rows(x)
    kernels = _row_kernels(fwd, _F, 1, Dim.N, saved=_llm_saved_bytes(x))
    kernels += _row_kernels(bwd, _B, len(fwd) + 1, Dim.N)
    # Weight-gradient kernels: GEMM of two activations over the sequence (K tiled), whose
    # output is the weight gradient, all-reduced across data-parallel replicas.
    for name, dims, in1, in2, out in _llm_update_rows(x):
        kernels.append(_kernel(
            len(kernels) + 1, name, _GII, _SYS, _B, dims, Dim.K,
            input_bytes=in1, input2_bytes=in2, output_bytes=out,
            communication=Collective.ALL_REDUCE_PERIODIC, communication_bytes=out,
        ))
    return tuple(_moe_marks(kernels, x))


def _connect_names(kernels: tuple[Kernel, ...], edges: list[_Edge],
                   zero_out: frozenset[_Edge] = frozenset()) -> tuple[Connection, ...]:
    """Connections with ids 1..len(edges) from (src, dst) kernel names; the edges listed in
    ``zero_out`` have a buffer of 0 bytes."""
    ids = {k.name: k.id for k in kernels}
    pairs = [(ids[s], ids[d]) for s, d in edges]
    zero = frozenset(i for i, e in enumerate(edges, start=1) if e in zero_out)
    return _connect(kernels, pairs, zero)  # type: ignore[arg-type]


def _layer(name: str, params: dict[str, int | None], seq: int) -> _Layer:
    """Validate ``params`` of generator ``name`` and resolve its defaults."""
    _check(_validate(name, params, "graph"))
    h, a = params["hidden"], params["num_head"]
    f = params.get("ffn_dim") or params.get("mlp_dim") or 4 * h  # type: ignore[operator]
    e = params.get("num_expert") or 0
    topk = params.get("top_k") or min(DEFAULT_TOP_K, e)  # type: ignore[type-var]
    return _Layer(h=h, a=a, g=params["num_kv_head"] or a, d=params["head_dim"],  # type: ignore[arg-type]
                  f=f, s=seq, w=params["word"], gated=params["gated_ffn"] == 1,  # type: ignore[arg-type]
                  e=e, topk=topk)  # type: ignore[arg-type]


def llm_fwdbwd(*, hidden: int, num_head: int, head_dim: int, seq: int, word: int,
               num_kv_head: int | None = None, ffn_dim: int | None = None,
               gated_ffn: int = 0, num_expert: int | None = None,
               top_k: int | None = None, layers: int = 1, vocab_size: int | None = None,
               embedding: bool = False, lm_head: bool = False) -> Graph:
    """One transformer layer, forward and backward, one sequence.

    With the defaults, DFModel's layer: 41 kernels (18 forward, 17 backward, 6
    weight-gradient kernels with a periodic all-reduce of the weight bytes) and 53
    connections; the loss kernel has no incoming edge. ``gated_ffn = 1`` gives a SwiGLU FFN:
    45 kernels (19 forward, 19 backward, 7 weight-gradient) and 63 connections.
    ``num_expert = E`` replaces the FFN by a mixture-of-experts layer (docs/model.md,
    "Mixture of experts"): 53 kernels (23 forward, 23 backward, 7 weight-gradient) and 71
    connections; gated, 57 kernels (24, 25, 8) and 81 connections.

    Parameters
    ----------
    hidden, num_head, head_dim : int
        Model width h, query heads a and head size d; a * d must equal h.
    seq : int
        Sequence length s (the tiled N dimension).
    word : int
        Bytes per element.
    num_kv_head : int, optional
        Key/value heads g (grouped-query attention; default a): K and V produce g*d
        columns from h x g*d weights, each shared by a/g query heads. g must divide a.
    ffn_dim : int, optional
        FFN inner width f; default 4h.
    gated_ffn : int, default 0
        1: SwiGLU FFN (FFN_gate and FFN_up h -> f, SwiGLU = SiLU(gate) x up, FFN_down
        f -> h), each GEMM with its data-gradient and weight-gradient GEMM; 0: GeLU FFN
        (FFN0 h -> f, GeLU, FFN1 f -> h).
    num_expert : int, optional
        E experts (default: none, a dense FFN): the FFN becomes a router GEMM (h -> E), a
        top-k gating kernel, a dispatch all-to-all of k x s token rows, the FFN above as
        the expert FFN (``Expert_`` + its kernel names) on k x s rows with E experts'
        weights, a combine all-to-all and the gated sum of each token's k rows.
    top_k : int, optional
        k experts per token, 1 <= k <= E (default min(2, E)); only with ``num_expert``.
    layers : int, default 1
        N > 1: N such layers chained in one graph (:func:`_stack`; docs/model.md, "Several
        layers in one graph"), every kernel name suffixed ``_L{i}``, i = 1..N.
    vocab_size : int, optional
        Vocabulary V of the embedding and the LM head; required with either.
    embedding, lm_head : bool, default False
        An embedding lookup before layer 1, a final norm, LM head and loss after layer N, each
        with its backward kernels (:func:`_ends`; docs/model.md, "Embedding and LM head");
        with either, the layers' names are suffixed even for N = 1.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        If a parameter is not a positive integer, ``num_head * head_dim != hidden``,
        ``num_kv_head`` does not divide ``num_head``, ``gated_ffn`` is not 0 or 1,
        ``top_k`` is given without ``num_expert`` or exceeds it, or ``embedding`` or
        ``lm_head`` is asked for without ``vocab_size``.
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, seq=seq, word=word,
                  num_kv_head=num_kv_head, ffn_dim=ffn_dim, gated_ffn=gated_ffn,
                  num_expert=num_expert, top_k=top_k, layers=layers, vocab_size=vocab_size,
                  embedding=embedding, lm_head=lm_head)
    x = _layer("llm", params, seq)
    kernels = _llm_kernels(x)
    edges = _llm_fwd_edges(x.gated, x.e > 0) + _llm_bwd_edges(x.gated, x.e > 0)
    if layers == 1 and not (embedding or lm_head):
        return Graph(kernels=kernels, connections=_connect_names(kernels, edges))
    ends = _ends(x, layers, vocab_size, embedding=bool(embedding), lm_head=bool(lm_head),
                 training=True)
    return _stack(kernels, edges, layers, training=True, ends=ends)


def llm_fwd(*, hidden: int, num_head: int, head_dim: int, seq: int, word: int,
            num_kv_head: int | None = None, ffn_dim: int | None = None,
            gated_ffn: int = 0, num_expert: int | None = None,
            top_k: int | None = None, layers: int = 1, vocab_size: int | None = None,
            embedding: bool = False, lm_head: bool = False) -> Graph:
    """The forward half of :func:`llm_fwdbwd`: its forward kernels and the connections among
    them (18 and 21 with the defaults, 19 and 23 with ``gated_ffn = 1``; with
    ``num_expert``, 23 and 28, gated 24 and 30). ``layers = N`` chains N forward layers
    (:func:`_stack`); ``embedding`` and ``lm_head`` add the forward kernels of
    :func:`_ends`.

    Raises
    ------
    SpecError
        As :func:`llm_fwdbwd`.
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, seq=seq, word=word,
                  num_kv_head=num_kv_head, ffn_dim=ffn_dim, gated_ffn=gated_ffn,
                  num_expert=num_expert, top_k=top_k, layers=layers, vocab_size=vocab_size,
                  embedding=embedding, lm_head=lm_head)
    x = _layer("llm-fwd", params, seq)
    kernels = tuple(_moe_marks(
        _row_kernels(_llm_fwd_rows(x), _F, 1, Dim.N, saved=_llm_saved_bytes(x)), x))
    edges = _llm_fwd_edges(x.gated, x.e > 0)
    if layers == 1 and not (embedding or lm_head):
        return Graph(kernels=kernels, connections=_connect_names(kernels, edges))
    ends = _ends(x, layers, vocab_size, embedding=bool(embedding), lm_head=bool(lm_head),
                 training=False)
    return _stack(kernels, edges, layers, training=False, ends=ends)


@dataclass(frozen=True)
class _Ends:
    """The kernels around a stack of layers and their connections (docs/model.md, "Embedding
    and LM head"): ``first`` runs before layer 1's forward kernels, ``after_forward`` after
    layer N's (the head, and in training its backward and weight gradient), ``last`` after
    layer 1's backward kernels."""

    first: tuple[Kernel, ...] = ()
    after_forward: tuple[Kernel, ...] = ()
    last: tuple[Kernel, ...] = ()
    edges: tuple[_Edge, ...] = ()


def _stack(layer: tuple[Kernel, ...], edges: list[_Edge], n: int, *,
           training: bool, ends: _Ends = _Ends()) -> Graph:
    """N copies of one layer's kernels and connections in one graph (docs/model.md, "Several
    layers in one graph"); copy i's names end in ``_L{i}``.

    Forward: layer i's ``Add_2`` feeds layer i + 1's ``Add_Prev_Layer``. ``training``: the
    kernels run forward L1..LN, then the backward and weight-gradient kernels of LN down to
    L1, and layer i + 1's last data gradient (``K_bwd``, which ends its gradient chain) feeds
    layer i's ``Loss_bwd``. ``ends``: the embedding and LM head kernels (:func:`_ends`), whose
    names keep no suffix, in their places in that order. Connections: each layer's own in
    layer order, then the links, then those of ``ends``.
    """
    fwd = [k for k in layer if k.phase is not _B]
    bwd = [k for k in layer if k.phase is _B]
    order = [*ends.first]
    order += [replace(k, name=f"{k.name}_L{i}") for i in range(1, n + 1) for k in fwd]
    order += ends.after_forward
    order += [replace(k, name=f"{k.name}_L{i}") for i in range(n, 0, -1) for k in bwd]
    order += ends.last
    kernels = tuple(replace(k, id=j) for j, k in enumerate(order, start=1))
    named = [(f"{s}_L{i}", f"{d}_L{i}") for i in range(1, n + 1) for s, d in edges]
    named += [(f"Add_2_L{i}", f"Add_Prev_Layer_L{i + 1}") for i in range(1, n)]
    if training:
        named += [(f"K_bwd_L{i + 1}", f"Loss_bwd_L{i}") for i in range(1, n)]
    named += ends.edges
    return Graph(kernels=kernels, connections=_connect_names(kernels, named))


def _ends(x: _Layer, n: int, vocab: int | None, *, embedding: bool, lm_head: bool,
          training: bool) -> _Ends:
    """The embedding and the LM head of an n-layer stack, vocabulary V (docs/model.md,
    "Embedding and LM head").

    ``embedding``: ``Embedding`` looks up s rows of the V x h table (elementwise over h x s;
    it reads the rows from DRAM, ``memory_bytes`` h s w, and the table's V h w bytes stay in
    DRAM, ``dram_extra_bytes``) and feeds layer 1's ``Add_Prev_Layer``; in training
    ``Embedding_bwd`` adds layer 1's last data gradient (``K_bwd_L1``) into s rows of the
    table's gradient in DRAM (a scatter-add: reads and writes them, 2 h s w).
    ``lm_head``: layer N's ``Add_2`` -> ``Final_LayerNorm`` -> ``LM_Head`` (the V x h weight
    GEMM, not tied to the table) -> ``LM_Loss`` (softmax and cross entropy over V x s); in
    training ``LM_Loss_bwd`` (the logits' gradient) -> ``LM_Head_bwd`` (data gradient) ->
    ``Final_LayerNorm_bwd`` -> layer N's ``Loss_bwd``, and ``LM_Head_bwd_weight_update``
    (logit gradient x normalised activation, periodic all-reduce of the V h w gradient).
    """
    h, s, w = x.h, x.s, x.w
    hs = x.hs
    first: list[Kernel] = []
    after: list[Kernel] = []
    last: list[Kernel] = []
    edges: list[_Edge] = []
    if embedding:
        lookup = ("Embedding", _SIMD, _EW1, (1, h, 1, s), hs, None, hs)
        first = [replace(k, dram_extra_bytes=f32(vocab * h * w))  # type: ignore[operator]
                 for k in _row_kernels([lookup], _F, 0, Dim.N, {"Embedding": hs}, saved={})]
        edges.append(("Embedding", "Add_Prev_Layer_L1"))
        if training:
            scatter = ("Embedding_bwd", _SIMD, _EW1, (1, h, 1, s), hs, None, hs)
            last = _row_kernels([scatter], _B, 0, Dim.N, {"Embedding_bwd": 2.0 * hs})
            edges.append(("K_bwd_L1", "Embedding_bwd"))
    if lm_head:
        after, head_edges = _head_kernels(x, n, vocab, training)  # type: ignore[arg-type]
        edges += head_edges
    return _Ends(first=tuple(first), after_forward=tuple(after), last=tuple(last),
                 edges=tuple(edges))


def _head_kernels(x: _Layer, n: int, v: int, training: bool
                  ) -> tuple[list[Kernel], list[_Edge]]:
    """The LM head's kernels and connections (:func:`_ends`). Kept for the backward pass:
    the final norm's input and output (2 h s w) and the softmax probabilities (V s w)."""
    h, s, w, hs = x.h, x.s, x.w, x.hs
    vs, table = v * s * w, v * h * w
    fwd: list[_Row] = [
        ("Final_LayerNorm", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("LM_Head", _SYS, _GW, (1, v, h, s), hs, table, vs),
        ("LM_Loss", _SIMD, _EW1, (1, v, 1, s), vs, None, vs),
    ]
    kernels = _row_kernels(fwd, _F, 0, Dim.N, saved={"Final_LayerNorm": 2.0 * hs, "LM_Loss": vs})
    edges = [(f"Add_2_L{n}", "Final_LayerNorm"), ("Final_LayerNorm", "LM_Head"),
             ("LM_Head", "LM_Loss")]
    if not training:
        return kernels, edges
    bwd: list[_Row] = [
        ("LM_Loss_bwd", _SIMD, _EW1, (1, v, 1, s), vs, None, vs),
        ("LM_Head_bwd", _SYS, _GW, (1, h, v, s), vs, table, hs),
        ("Final_LayerNorm_bwd", _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
    ]
    kernels += _row_kernels(bwd, _B, 0, Dim.N)
    kernels.append(_kernel(
        0, "LM_Head_bwd_weight_update", _GII, _SYS, _B, (1, h, s, v), Dim.K,
        input_bytes=vs, input2_bytes=hs, output_bytes=table,
        communication=Collective.ALL_REDUCE_PERIODIC, communication_bytes=table,
    ))
    edges += [("LM_Loss", "LM_Loss_bwd"), ("LM_Loss_bwd", "LM_Head_bwd"),
              ("LM_Head_bwd", "Final_LayerNorm_bwd"), ("Final_LayerNorm_bwd", f"Loss_bwd_L{n}"),
              ("LM_Loss_bwd", "LM_Head_bwd_weight_update"),
              ("Final_LayerNorm", "LM_Head_bwd_weight_update")]
    return kernels, edges


#: Decode connections (DFModel's order) around the FFN; the KV-cache edges are ``zero_out``.
_DECODE_KV_EDGES = (("K_cache", "MHA_GEMM_1"), ("V_cache", "MHA_GEMM_2"))


def _decode_edges(gated: bool) -> list[_Edge]:
    return [
        ("Add_Prev_Layer", "LayerNorm_1"), ("LayerNorm_1", "Q"), ("LayerNorm_1", "K"),
        ("LayerNorm_1", "V"), ("K", "K_cache"), ("V", "V_cache"), ("Q", "MHA_GEMM_1"),
        _DECODE_KV_EDGES[0], ("MHA_GEMM_1", "SOFTMAX"), ("SOFTMAX", "DropOut_1"),
        ("DropOut_1", "MHA_GEMM_2"), _DECODE_KV_EDGES[1], ("MHA_GEMM_2", "PROJ_GEMM"),
        ("PROJ_GEMM", "DropOut_2"), ("DropOut_2", "Add_1"), ("Add_1", "LayerNorm_2"),
        ("Add_Prev_Layer", "Add_1"), *_ffn_fwd_edges(gated),
        ("DropOut_3", "Add_2"), ("Add_1", "Add_2"),
    ]


def _decode_rows(x: _Layer, L: int, t: int = 1) -> list[_Row]:
    """Kernels of one decode step of ``t`` new tokens (N = t; 1 = plain decode, > 1 = a
    speculative verification step) attending over ``L`` cached positions."""
    h, a, g, d, f, w = x.h, x.a, x.g, x.d, x.f, x.w
    hw, kvw, kvl, la, fw = h * w * t, g * d * w * t, g * d * L * w, L * a * w * t, f * w * t
    wt, kvwt = h * h * w, h * g * d * w
    return [
        ("Add_Prev_Layer", _SIMD, _EW1, (1, h, 1, t), hw, None, hw),
        ("LayerNorm_1", _SIMD, _EW1, (1, h, 1, t), hw, None, hw),
        ("Q", _SYS, _GW, (a, d, h, t), hw, wt, hw),
        ("K", _SYS, _GW, (g, d, h, t), hw, kvwt, kvw),
        ("V", _SYS, _GW, (g, d, h, t), hw, kvwt, kvw),
        ("K_cache", _SYS, _EW1, (g, d, 1, L), kvw, None, kvl),
        ("V_cache", _SYS, _EW1, (g, d, 1, L), kvw, None, kvl),
        ("MHA_GEMM_1", _SYS, _GII, (a, t, d, L), hw, kvl, la),
        ("SOFTMAX", _SIMD, _EW1, (a, t, 1, L), la, None, la),
        ("DropOut_1", _SIMD, _EW1, (a, t, 1, L), la, None, la),
        ("MHA_GEMM_2", _SYS, _GII, (a, d, L, t), kvl, la, hw),
        ("PROJ_GEMM", _SYS, _GW, (1, h, h, t), hw, wt, hw),
        ("DropOut_2", _SIMD, _EW1, (1, h, 1, t), hw, None, hw),
        ("Add_1", _SIMD, _EW2, (1, h, 1, t), hw, hw, hw),
        ("LayerNorm_2", _SIMD, _EW1, (1, h, 1, t), hw, None, hw),
        *_ffn_fwd_rows(h, f, t, hw, fw, f * h * w, x.gated),
        ("DropOut_3", _SIMD, _EW1, (1, h, 1, t), hw, None, hw),
        ("Add_2", _SIMD, _EW2, (1, h, 1, t), hw, hw, hw),
    ]


def llm_decode(*, hidden: int, num_head: int, head_dim: int, word: int, seq_window: int,
               tp: int, mlp_dim: int, num_kv_head: int | None = None,
               gated_ffn: int = 0) -> Graph:
    """One transformer layer generating one token against a KV cache.

    20 forward kernels and 23 connections with the defaults (21 and 25 with
    ``gated_ffn = 1``), N tiling. Weights and the KV cache are streamed from DRAM
    (``memory_bytes`` per chip of a ``tp``-way tensor-parallel group); the KV-cache edges
    K_cache -> MHA_GEMM_1 and V_cache -> MHA_GEMM_2 are ``zero_out``. K_cache and V_cache
    are elementwise kernels of SYSTOLIC type, as in DFModel.

    Parameters
    ----------
    hidden, num_head, head_dim : int
        Model width h, query heads a and head size d; a * d must equal h.
    word : int
        Bytes per element.
    seq_window : int
        Tokens already in the KV cache; attention spans L = seq_window + 1.
    tp : int
        Tensor-parallel degree dividing the streamed bytes.
    mlp_dim : int
        FFN inner width f.
    num_kv_head : int, optional
        Key/value heads g (default a; must divide a): K, V weights are h x g*d and the KV
        cache holds g heads.
    gated_ffn : int, default 0
        1: SwiGLU FFN (FFN_gate, FFN_up, SwiGLU, FFN_down); 0: FFN0, GeLU, FFN1.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        As :func:`llm_fwdbwd`.
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, word=word,
                  seq_window=seq_window, tp=tp, mlp_dim=mlp_dim, num_kv_head=num_kv_head,
                  gated_ffn=gated_ffn)
    x = _layer("llm-decode", params, 1)
    h, g, d, f, w = x.h, x.g, x.d, x.f, x.w
    w_mem, kv_w_mem, f_mem = h * h * w / tp, h * g * d * w / tp, f * h * w / tp
    memory = {"Q": w_mem, "K": kv_w_mem, "V": kv_w_mem, "PROJ_GEMM": w_mem,
              "K_cache": w * g * d * seq_window / tp, "V_cache": w * g * d * seq_window / tp,
              **{name: f_mem for name in ("FFN0", "FFN1", "FFN_gate", "FFN_up", "FFN_down")}}
    kernels = tuple(_row_kernels(_decode_rows(x, seq_window + 1), _F, 1, Dim.N, memory))
    return Graph(kernels=kernels, connections=_connect_names(
        kernels, _decode_edges(x.gated), frozenset(_DECODE_KV_EDGES)))



def serving_context(prompt_len: int, output_len: int) -> int:
    """L: the context a decode step attends over, averaged over the generation.

    Step i (0-based) of ``output_len`` attends over prompt_len + i + 1 tokens; the KV bytes a
    step reads are linear in its context, so the mean step time is the time of a step at the
    mean context, rounded up here to prompt_len + ceil(output_len / 2).

    >>> serving_context(4096, 1), serving_context(4096, 128), serving_context(10, 3)
    (4097, 4160, 12)
    """
    return prompt_len + -(-output_len // 2)


def llm_serving(*, hidden: int, num_head: int, head_dim: int, word: int, prompt_len: int,
                decode: int, output_len: int = 1, num_kv_head: int | None = None,
                ffn_dim: int | None = None, gated_ffn: int = 0,
                kv_word: int | None = None, tokens: int = 1,
                fused_attention: bool = False, kv_per_query_head: bool = False) -> Graph:
    """One transformer layer of an LLM serving step for ONE sequence (docs/model.md,
    "LLM serving"); the batch and the tensor parallelism are applied at lowering, never here.

    ``decode = 0`` (prefill): the forward layer of :func:`llm_fwd` over ``prompt_len`` tokens
    (18 kernels, 19 gated). ``decode = 1``: the decode rows of :func:`llm_decode` for one new
    token attending over L = :func:`serving_context` tokens (20 kernels, 21 gated; the
    KV-cache edges are ``zero_out``). Every weight GEMM carries ``memory_bytes`` = its full
    weight bytes (weights are read from DRAM at every step); in decode, K_cache and V_cache
    carry the KV bytes one step reads, L x g x head_dim x ``kv_word`` each. ``tokens = t >
    1`` (decode): a speculative verification step, t new tokens per sequence (every
    activation and attention score x t; the weights and the KV cache read once) attending
    over L + t - 1 positions (docs/model.md, "Speculative decoding"). ``fused_attention``:
    one fused attention kernel (prefill: causal, instead of four; decode: instead of six)
    (:func:`_fused_attention`; decode: :func:`_fused_decode_attention`).

    Parameters
    ----------
    hidden, num_head, head_dim, num_kv_head, ffn_dim, gated_ffn : int
        As :func:`llm_fwdbwd` (ffn_dim defaults to 4 x hidden).
    word : int
        Bytes per element of weights and activations.
    prompt_len : int
        Tokens of the prompt.
    decode : int
        0: the prefill of the prompt; 1: one decode step.
    output_len : int, default 1
        Tokens generated (decode: sets the mean context L).
    kv_word : int, optional
        Bytes per element of the KV cache (default ``word``).
    tokens : int, default 1
        Decode: new tokens per sequence in the step (1: plain decode).
    fused_attention : bool, default False
        Prefill: ``FMHA`` replaces MHA_GEMM_1, SOFTMAX, DropOut_1 and MHA_GEMM_2. Decode:
        ``MMHA`` replaces those four and K_cache, V_cache (its ``memory_bytes``: both
        caches).
    kv_per_query_head : bool, default False
        Decode: the KV-cache kernels (K_cache and V_cache, or MMHA) carry a / g x the KV
        bytes as ``memory_bytes`` (an engine without a grouped-query decode kernel); the KV
        cache held is unchanged.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        As :func:`llm_fwdbwd`.

    >>> g = llm_serving(hidden=4096, num_head=32, head_dim=128, word=2, prompt_len=4096,
    ...                 decode=1, output_len=128, num_kv_head=8, ffn_dim=14336, gated_ffn=1)
    >>> len(g.kernels), g.kernels[5].name, g.kernels[5].memory_bytes == 4160 * 8 * 128 * 2
    (21, 'K_cache', True)
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, word=word,
                  prompt_len=prompt_len, decode=decode, output_len=output_len,
                  num_kv_head=num_kv_head, ffn_dim=ffn_dim, gated_ffn=gated_ffn, kv_word=kv_word,
                  tokens=tokens)
    x = _layer("llm-serving", params, 1 if decode else prompt_len)
    ctx = serving_context(prompt_len, output_len) + tokens - 1 if decode else 0
    if not decode:
        rows = _llm_fwd_rows(x)
        edges, zero = _llm_fwd_edges(x.gated), frozenset()
        if fused_attention:
            rows, edges = _fused_attention(x, rows, edges)
    else:
        rows = _kv_word_rows(_decode_rows(x, ctx, tokens), x.g * x.d * ctx * (kv_word or word))
        edges, zero = _decode_edges(x.gated), frozenset(_DECODE_KV_EDGES)
        if fused_attention:
            rows, edges = _fused_decode_attention(x, rows, edges, ctx, tokens)
            zero = frozenset()
    memory = _serving_memory(x, rows, ctx, kv_word or word, fused_attention, kv_per_query_head)
    kernels = tuple(_row_kernels(rows, _F, 1, Dim.N, memory))
    return Graph(kernels=kernels, connections=_connect_names(kernels, edges, zero))


_UNFUSED_ATTENTION = ("MHA_GEMM_1", "SOFTMAX", "DropOut_1", "MHA_GEMM_2")


def _fused_attention(x: _Layer, rows: list[_Row], edges: list[_Edge]
                     ) -> tuple[list[_Row], list[_Edge]]:
    """A serving engine's fused causal attention (docs/model.md, "Fused attention"): one
    ``FMHA`` kernel in place of the four unfused ones, a GEMM of (a, d, s, s) (MHA_GEMM_2's
    orientation: a d x s output per head): 2 a s^2 d FLOP, half of the unfused pair's
    4 a s^2 d, since a causal kernel skips the masked half of the scores. It reads Q (h s w)
    and K and V (2 g d s w) and writes the h s w output; the a s^2 scores stay on chip."""
    fmha: _Row = ("FMHA", _SYS, _GII, (x.a, x.d, x.s, x.s), x.hs, 2 * x.kvs, x.hs)
    out = [r for r in rows if r[0] not in _UNFUSED_ATTENTION[1:]]
    out = [fmha if r[0] == _UNFUSED_ATTENTION[0] else r for r in out]
    kept = [e for e in edges if not set(e) & set(_UNFUSED_ATTENTION)]
    return out, [*kept, ("Q", "FMHA"), ("K", "FMHA"), ("V", "FMHA"), ("FMHA", "PROJ_GEMM")]


def _serving_memory(x: _Layer, rows: list[_Row], ctx: int, kv_word: int, fused: bool,
                    per_query_head: bool) -> dict[str, float]:
    """``memory_bytes`` of a serving layer: every weight GEMM its weight bytes; in decode
    (``ctx`` > 0 cached positions) K_cache and V_cache ctx x g x d x ``kv_word`` each, or
    ``MMHA`` both (``fused``), x a / g when each query head reads its KV head."""
    memory = {name: float(second or 0.0) for name, _, kind, _, _, second, _ in rows
              if kind is _GW}  # fmt: skip
    if ctx:
        kv = x.g * x.d * ctx * kv_word
        kv *= x.a // x.g if per_query_head else 1
        memory |= {"MMHA": 2.0 * kv} if fused else {"K_cache": float(kv), "V_cache": float(kv)}
    return memory


#: the decode kernels a serving engine's generation attention kernel runs as one
_UNFUSED_DECODE = ("K_cache", "V_cache", "MHA_GEMM_1", "SOFTMAX", "DropOut_1", "MHA_GEMM_2")


def _fused_decode_attention(x: _Layer, rows: list[_Row], edges: list[_Edge], ctx: int,
                            t: int) -> tuple[list[_Row], list[_Edge]]:
    """A serving engine's generation attention kernel (docs/model.md, "Fused attention"):
    one ``MMHA`` kernel in place of K_cache, V_cache and the four attention kernels, a GEMM
    of (a, d, 2 L, t): 4 a t d L FLOP, the two attention GEMMs' sum. It reads the new
    tokens' Q (h t w) and the cached K and V (its ``memory_bytes``) and writes h t w; the
    a t L scores stay on chip."""
    kv = next(r[6] for r in rows if r[0] == "K_cache")  # L g d kv_word
    hw = x.h * x.w * t
    mmha: _Row = ("MMHA", _SYS, _GII, (x.a, x.d, 2 * ctx, t), hw, 2 * kv, hw)
    out = [mmha if r[0] == "MHA_GEMM_2" else r for r in rows if r[0] not in _UNFUSED_DECODE[:5]]
    kept = [e for e in edges if not set(e) & set(_UNFUSED_DECODE)]
    return out, [*kept, ("Q", "MMHA"), ("K", "MMHA"), ("V", "MMHA"), ("MMHA", "PROJ_GEMM")]


def _kv_word_rows(rows: list[_Row], kv_bytes: int) -> list[_Row]:
    """Decode rows whose KV-cache tensors (K_cache / V_cache outputs, the attention GEMMs'
    cache operands) hold ``kv_bytes`` (L x g x head_dim x kv_word)."""
    out = []
    for name, ctype, kind, dims, in1, second, outb in rows:
        if name in ("K_cache", "V_cache"):
            outb = kv_bytes
        elif name == "MHA_GEMM_1":
            second = kv_bytes
        elif name == "MHA_GEMM_2":
            in1 = kv_bytes
        out.append((name, ctype, kind, dims, in1, second, outb))
    return out


# --------------------------------------------------------------------------- DLRM, HPL, FFT
def dlrm(*, mlp_dim: int, bottom_num_mlp: int, top_num_mlp: int, pooled_row: int, row: int,
         num_table: int, emb_dim: int, micro_batch_size: int, word: int) -> Graph:
    """DLRM training step on one micro-batch: n = bottom + top MLP layers.

    Kernels: MLP_1..MLP_n (forward), MLP_n_bwd..MLP_1_bwd, then
    MLP_n_bwd_weight_update..MLP_1_bwd_weight_update (periodic all-reduce of the weights);
    3n kernels, no tiling. The last bottom layer (forward and backward) streams the pooled
    embeddings E = num_table * pooled_row * emb_dim * micro_batch_size * word bytes from
    DRAM and exchanges them all-to-all. 4(n - 1) connections. ``row`` (rows per table) does
    not enter the graph; it is accepted because DFModel's script takes it.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        If a parameter is not a positive integer.
    """
    params = dict(mlp_dim=mlp_dim, bottom_num_mlp=bottom_num_mlp, top_num_mlp=top_num_mlp,
                  pooled_row=pooled_row, row=row, num_table=num_table, emb_dim=emb_dim,
                  micro_batch_size=micro_batch_size, word=word)
    _check(_validate("dlrm", params, "graph"))
    n, m, b, w = bottom_num_mlp + top_num_mlp, mlp_dim, micro_batch_size, word
    emb = num_table * pooled_row * emb_dim * b * w
    act, wt = m * b * w, m * m * w
    kernels: list[Kernel] = []

    def layer(name: str, phase: Phase, i: int) -> None:
        lookup = i == bottom_num_mlp
        kernels.append(_kernel(
            len(kernels) + 1, name, _GW, _SYS, phase, (1, m, m, b), Dim.NO,
            input_bytes=act, weight_bytes=wt, output_bytes=act,
            memory_bytes=emb if lookup else 0.0,
            communication=Collective.ALL_TO_ALL if lookup else Collective.NONE,
            communication_bytes=emb if lookup else 0.0,
        ))

    for i in range(1, n + 1):
        layer(f"MLP_{i}", _F, i)
    for i in range(n, 0, -1):
        layer(f"MLP_{i}_bwd", _B, i)
    for i in range(n, 0, -1):
        kernels.append(_kernel(
            len(kernels) + 1, f"MLP_{i}_bwd_weight_update", _GII, _SYS, _B, (1, m, b, m),
            Dim.NO, input_bytes=act, input2_bytes=act, output_bytes=wt,
            communication=Collective.ALL_REDUCE_PERIODIC, communication_bytes=wt,
        ))
    edges = [(i, i + 1) for i in range(1, n)]  # forward chain
    edges += [(j, j + 1) for j in range(n + 1, 2 * n)]  # backward chain
    edges += [(i, 3 * n - i) for i in range(1, n)]  # activation -> next layer's update
    edges += [(j, j + n + 1) for j in range(n + 1, 2 * n)]  # gradient -> its layer's update
    kernels_t = tuple(kernels)
    return Graph(kernels=kernels_t, connections=_connect(kernels_t, edges))


def hpl(*, n: int, b: int, iteration: int | None = None, word: int) -> Graph:
    """High-Performance Linpack: one GEMM kernel per panel iteration.

    ``Iteration_i`` (i = 1..iteration) updates the trailing matrix of side
    ``n - (i-1)*b``: a SYSTOLIC two-input GEMM (outer 1, M = K = side, N = b), no tiling,
    with a BROADCAST and a POINT_TO_POINT of ``side*b*word`` bytes. Chain connections.
    Kernels carry no phase and config -1 (DFModel writes neither field).

    Parameters
    ----------
    n : int
        Matrix size N.
    b : int
        Panel (block) size B, at most n.
    iteration : int, optional
        Number of iterations; default ``n // b``; at most ceil(n / b).
    word : int
        Bytes per element.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        If a parameter is not a positive integer, ``b > n`` or ``iteration > ceil(n / b)``.
    """
    params = dict(n=n, b=b, iteration=iteration, word=word)
    _check(_validate("hpl", params, "graph"))
    if iteration is None:
        iteration = n // b
    kernels = []
    for i in range(1, iteration + 1):
        side = n - (i - 1) * b
        size = side * b * word
        kernels.append(_kernel(
            i, f"Iteration_{i}", _GII, _SYS, Phase.NONE, (1, side, side, b), Dim.NO,
            input_bytes=size, output_bytes=size,
            communication=Collective.BROADCAST, communication_bytes=size,
            communication2=Collective.POINT_TO_POINT, communication2_bytes=size,
        ))
    kernels_t = tuple(kernels)
    edges = [(i, i + 1) for i in range(1, iteration)]
    return Graph(kernels=kernels_t, connections=_connect(kernels_t, edges))


def fft(*, length: int, r: int = 2, word: int) -> Graph:
    """Two-step (four-step) FFT of ``length`` points as a Nf x Nf matrix.

    Nf = int(sqrt(length)), K = int(4 * log2(Nf) / log2(r) * r). Step_1 and Step_2 are
    SYSTOLIC weight-GEMMs (outer 1, M = Nf, K, N = Nf, no weight size), no tiling, with
    ``Nf*Nf*word`` bytes in and out; Step_2 carries the ALL_TO_ALL transpose of the same
    bytes. One connection Step_1 -> Step_2. No phase, config -1.

    Parameters
    ----------
    length : int
        Number of points, at least 4.
    r : int, default 2
        Butterfly radix, at least 2.
    word : int
        Bytes per element.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        If a parameter is not a positive integer, ``length < 4`` or ``r < 2``.
    """
    params = dict(length=length, r=r, word=word)
    _check(_validate("fft", params, "graph"))
    nf = int(length ** 0.5)  # float square root, as DFModel's script
    k = int(4 * math.log2(nf) / math.log2(r) * r)
    size = nf * nf * word
    steps = []
    for i in (1, 2):
        transpose = i == 2
        steps.append(_kernel(
            i, f"Step_{i}", _GW, _SYS, Phase.NONE, (1, nf, k, nf), Dim.NO,
            input_bytes=size, output_bytes=size,
            communication=Collective.ALL_TO_ALL if transpose else Collective.NONE,
            communication_bytes=size if transpose else 0.0,
        ))
    kernels = tuple(steps)
    return Graph(kernels=kernels, connections=_connect(kernels, [(1, 2)]))


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class GeneratorParam:
    """One integer (``type`` int) or boolean (``type`` bool) parameter of a generator.

    ``default`` is ``None`` when the generator supplies no constant default; ``required``
    says whether the caller must give it (HPL's ``iteration`` is optional yet has no
    constant default: it is ``n // b``).
    """

    name: str
    type: type
    help: str
    default: int | bool | None = None
    required: bool = True


@dataclass(frozen=True)
class Generator:
    """A named workload generator: its function, parameters (in order) and a help line."""

    name: str
    function: Callable[..., Graph]
    params: tuple[GeneratorParam, ...]
    help: str


def _p(name: str, help: str, default: int | None = None, required: bool = True
       ) -> GeneratorParam:
    return GeneratorParam(name=name, type=int, help=help, default=default, required=required)


_WORD = _p("word", "bytes per element")
_HEADS = (
    _p("hidden", "model width h (= num_head * head_dim)"),
    _p("num_head", "attention heads a"),
    _p("head_dim", "size of one head d"),
)
_KV_HEADS = _p("num_kv_head", "key/value heads g (grouped-query attention): K, V weights "
                            "h x g*head_dim; must divide num_head; if not given: num_head",
               None, required=False)
_GATED = _p("gated_ffn", "1: SwiGLU FFN (gate, up, down GEMMs); 0: GeLU FFN (two GEMMs)",
            0, required=False)
_LLM_PARAMS = (
    *_HEADS, _p("seq", "sequence length s"), _WORD, _KV_HEADS,
    _p("ffn_dim", "FFN inner width f; if not given: 4 * hidden", None, required=False), _GATED,
    _p("num_expert", "experts E of a mixture-of-experts layer replacing the FFN (expert FFN "
                     "of width ffn_dim); if not given: a dense FFN", None, required=False),
    _p("top_k", f"experts per token k, <= num_expert; if not given: min({DEFAULT_TOP_K}, "
                "num_expert)", None, required=False),
    _p("layers", "N layers chained in one graph (kernel names suffixed _L1.._LN; must equal "
                 "workload.num_layer_in_graph, its default)", 1, required=False),
    _p("vocab_size", "vocabulary V of the embedding and the LM head (required with either)",
       None, required=False),
    GeneratorParam("embedding", bool, "true (CLI: 1): an embedding lookup before layer 1 (in the "
                                      "first pipeline stage when the layers run more than once "
                                      "per micro-batch)", False, required=False),
    GeneratorParam("lm_head", bool, "true (CLI: 1): a final LayerNorm, the LM head GEMM and the loss "
                                    "after the last layer (in the last pipeline stage when the "
                                    "layers run more than once per micro-batch)", False,
                   required=False),
)

#: name -> generator; read-only.
GENERATORS: Mapping[str, Generator] = MappingProxyType({
    "llm": Generator("llm", llm_fwdbwd, _LLM_PARAMS,
                     "one transformer layer, forward + backward (41 kernels; 45 gated; "
                     "MoE 53, 57)"),
    "llm-fwd": Generator("llm-fwd", llm_fwd, _LLM_PARAMS,
                         "one transformer layer, forward only (18 kernels; 19 gated; "
                         "MoE 23, 24)"),
    "llm-decode": Generator("llm-decode", llm_decode, (
        *_HEADS, _WORD,
        _p("seq_window", "tokens already in the KV cache"),
        _p("tp", "tensor-parallel degree dividing the streamed weight / KV bytes"),
        _p("mlp_dim", "FFN inner width"),
        _KV_HEADS, _GATED,
    ), "one transformer layer decoding one token (20 kernels; 21 gated)"),
    "llm-serving": Generator("llm-serving", llm_serving, (
        *_HEADS, _WORD,
        _p("prompt_len", "tokens of the prompt"),
        _p("decode", "0: the prefill of the prompt; 1: one decode step"),
        _p("output_len", "tokens generated (decode: the mean context is prompt_len + "
                         "ceil(output_len / 2))", 1, required=False),
        _KV_HEADS,
        _p("ffn_dim", "FFN inner width f; if not given: 4 * hidden", None, required=False),
        _GATED,
        _p("kv_word", "bytes per element of the KV cache; if not given: word", None,
           required=False),
        _p("tokens", "decode: new tokens per sequence per step (> 1: a speculative "
                     "verification step)", 1, required=False),
        GeneratorParam("fused_attention", bool, "true (CLI: 1), prefill: one fused causal "
                                                "attention kernel (FMHA) instead of four; "
                                                "decode: one (MMHA) instead of six",
                       False, required=False),
        GeneratorParam("kv_per_query_head", bool, "true (CLI: 1), decode: the attention "
                                                  "kernel reads each KV head once per query "
                                                  "head (no grouped-query decode kernel)",
                       False, required=False),
    ), "one transformer layer of an LLM serving step for one sequence, weights and KV "
       "cache read from DRAM (prefill 18 kernels, decode 20; 19, 21 gated; fused attention: "
       "prefill 15, 16 gated; decode 15, 16 gated)"),
    "dlrm": Generator("dlrm", dlrm, (
        _p("mlp_dim", "width of every MLP layer"),
        _p("bottom_num_mlp", "bottom MLP layers (the last one does the embedding exchange)"),
        _p("top_num_mlp", "top MLP layers"),
        _p("pooled_row", "embedding rows pooled per lookup"),
        _p("row", "rows per embedding table (not used by the graph)"),
        _p("num_table", "embedding tables"),
        _p("emb_dim", "embedding dimension"),
        _p("micro_batch_size", "samples per graph execution"),
        _WORD,
    ), "DLRM training step: MLP layers forward, backward and weight updates"),
    "hpl": Generator("hpl", hpl, (
        _p("n", "matrix size N"),
        _p("b", "panel size B"),
        _p("iteration", "panel iterations (default n // b)", None, required=False),
        _WORD,
    ), "High-Performance Linpack: one trailing-matrix GEMM per iteration"),
    "fft": Generator("fft", fft, (
        _p("length", "number of points"),
        _p("r", "butterfly radix", 2, required=False),
        _WORD,
    ), "two-step FFT: two butterfly GEMMs and an all-to-all transpose"),
})


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; expected one of: {', '.join(choices)}"


def generate(name: str, params: Mapping[str, int], *, path: str = "graph") -> Graph:
    """Build the graph of generator ``name`` from ``params``, validating everything first.

    Parameters
    ----------
    name : str
        A key of :data:`GENERATORS`.
    params : mapping of str to int
        The generator's parameters; optional ones may be omitted.
    path : str, default "graph"
        Field path prefix used in error messages (e.g. ``graph.hidden``).

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        Unknown generator; or, all collected together: unknown or missing parameters,
        non-integer or non-positive values, and inconsistent values (e.g. heads).

    Examples
    --------
    >>> generate("llm", {"hidden": 64, "num_head": 4, "head_dim": 16, "seq": 8, "word": 2}
    ...          ).kernels[-1].name
    'Q_bwd_weight_update'
    >>> generate("llm", {"hiden": 64})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dfsearch.errors.SpecError: 6 problems:
      graph.hiden unknown key 'hiden'; did you mean 'hidden'?
      graph.hidden is missing (required by generator 'llm').
    ...
    """
    gen = GENERATORS.get(name)
    if gen is None:
        hint = _did_you_mean(str(name), list(GENERATORS))
        raise SpecError(Issue(f"{path}.generator", f"unknown generator {name!r}{hint}"))
    names = [p.name for p in gen.params]
    issues = [
        Issue(f"{path}.{key}", f"unknown key {key!r}{_did_you_mean(str(key), names)}")
        for key in params if key not in names
    ]
    values: dict[str, object] = {}
    for p in gen.params:
        if p.name in params:
            values[p.name] = params[p.name]
        elif p.required:
            issues.append(Issue(f"{path}.{p.name}",
                                f"is missing (required by generator {name!r})."))
        elif p.default is not None:
            values[p.name] = p.default
    if not issues:
        issues = _validate(name, values, path)
    else:  # still report bad values next to the name problems
        issues += _issues_positive(values, path)
    if issues:
        raise SpecError(issues)
    key = tuple(sorted(values.items()))
    try:
        hash(key)
    except TypeError:  # a caller's unhashable value: built afresh
        return gen.function(**values)
    return _built(name, key)


@functools.lru_cache(maxsize=32)
def _built(name: str, values: tuple[tuple[str, object], ...]) -> Graph:
    """The graph of generator ``name`` for checked parameter ``values``, built once per
    process for equal values and then shared (a ``Graph`` is frozen): the points of a study
    that differ elsewhere get the same graph object, so what is computed from the graph
    alone is computed once (``dfsearch.memo``)."""
    return GENERATORS[name].function(**dict(values))
