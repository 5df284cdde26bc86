"""Workload generators: the dataflow graphs DFModel's generator scripts write.

Each generator returns a :class:`~dfsearch.spec.Graph` identical, kernel by kernel, to the graph
DFModel's importer would read from the corresponding script's output: same names, ids 1..n,
variants, dimensions, tiling, forward/backward marks, communication presets, ``memory_size``
and connections in the same order. Byte sizes are rounded to float32 (:func:`f32`) because
DFModel stores them in protobuf ``float`` fields.

The registry :data:`GENERATORS` and :func:`generate` serve the CLI and the TOML loader
(``generator = "llm"`` plus integer parameters).

>>> g = llm_fwdbwd(hidden=2048, num_head=16, head_dim=128, seq=1024, word=2)
>>> len(g.kernels), len(g.connections)
(41, 53)
>>> g.kernels[2].name, g.kernels[2].outer, g.kernels[2].m, g.kernels[2].weight_bytes
('Q', 16, 128, 8388608.0)
>>> generate("hpl", {"n": 4096, "b": 1024, "word": 8}).kernels[-1].m
1024
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
def _issues_positive(values: Mapping[str, object], path: str) -> list[Issue]:
    """Each value must be an integer > 0."""
    issues = []
    for key, v in values.items():
        if isinstance(v, bool) or not isinstance(v, Integral):
            issues.append(Issue(f"{path}.{key}", f"must be an integer. Got {v!r} instead."))
        elif v <= 0:
            issues.append(Issue(f"{path}.{key}", f"must be > 0. Got {v!r} instead."))
        elif v > MAX_PARAM:
            issues.append(Issue(f"{path}.{key}",
                                f"must be <= 2^40 = {MAX_PARAM}. Got {v!r} instead."))
    return issues


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
    present = {k: v for k, v in values.items() if v is not None}
    issues = _issues_positive(present, path)
    if issues:
        return issues
    v = values
    if name in ("llm", "llm-fwd", "llm-decode"):
        issues += _issues_heads(v["hidden"], v["num_head"], v["head_dim"], path)
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

#: Edges of the LLM training layer, as (startIdx, endIdx); the first 21 are
#: the forward half (``generate_LLM_fwd.py``).
_LLM_EDGES = [
    (1, 2), (2, 3), (2, 4), (2, 5), (3, 6), (4, 6), (6, 7), (7, 8), (5, 9), (8, 9), (9, 10),
    (10, 11), (11, 12), (1, 12), (12, 13), (13, 14), (14, 15), (15, 16), (16, 17), (17, 18),
    (12, 18), (19, 20), (20, 21), (21, 22), (22, 23), (23, 24), (24, 25), (25, 26), (26, 27),
    (5, 27), (26, 28), (8, 28), (27, 30), (28, 29), (30, 31), (31, 32), (31, 33), (4, 32),
    (3, 33), (32, 34), (33, 35), (20, 36), (15, 36), (22, 37), (13, 37), (25, 38), (9, 38),
    (28, 39), (2, 39), (33, 40), (2, 40), (32, 41), (2, 41),
]
_LLM_FWD_KERNELS = 18
_LLM_FWD_EDGES = 21


def _llm_kernels(h: int, a: int, d: int, s: int, w: int) -> tuple[Kernel, ...]:
    """The 41 kernels of one LLM training layer."""
    hs, ss, wt = h * s * w, a * s * s * w, h * h * w  # activation, score, weight bytes
    rows = [
        # name, phase, type, kind, (outer, M, K, N), in1, in2 or weight, out
        ("Add_Prev_Layer", _F, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("LayerNorm_1", _F, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("Q", _F, _SYS, _GW, (a, d, h, s), hs, wt, hs),
        ("K", _F, _SYS, _GW, (a, d, h, s), hs, wt, hs),
        ("V", _F, _SYS, _GW, (a, d, h, s), hs, wt, hs),
        ("MHA_GEMM_1", _F, _SYS, _GII, (a, s, d, s), hs, hs, ss),
        ("SOFTMAX", _F, _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("DropOut_1", _F, _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("MHA_GEMM_2", _F, _SYS, _GII, (a, d, s, s), hs, ss, hs),
        ("PROJ_GEMM", _F, _SYS, _GW, (1, h, h, s), hs, wt, hs),
        ("DropOut_2", _F, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("Add_1", _F, _SIMD, _EW2, (1, h, 1, s), hs, hs, hs),
        ("LayerNorm_2", _F, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("FFN0", _F, _SYS, _GW, (1, 4 * h, h, s), hs, 4 * wt, 4 * hs),
        ("GeLU", _F, _SIMD, _EW1, (1, 4 * h, 1, s), 4 * hs, None, 4 * hs),
        ("FFN1", _F, _SYS, _GW, (1, h, 4 * h, s), 4 * hs, 4 * wt, hs),
        ("DropOut_3", _F, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("Add_2", _F, _SIMD, _EW2, (1, h, 1, s), hs, hs, hs),
        ("Loss_bwd", _B, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("DropOut_3_bwd", _B, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("FFN1_bwd", _B, _SYS, _GW, (1, 4 * h, h, s), hs, 4 * wt, 4 * hs),
        ("GeLU_bwd", _B, _SIMD, _EW1, (1, 4 * h, 1, s), 4 * hs, None, 4 * hs),
        ("FFN0_bwd", _B, _SYS, _GW, (1, h, 4 * h, s), 4 * hs, 4 * wt, hs),
        ("LayerNorm_2_bwd", _B, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("DropOut_2_bwd", _B, _SIMD, _EW1, (1, h, 1, s), hs, None, hs),
        ("PROJ_GEMM_bwd", _B, _SYS, _GW, (1, h, h, s), hs, wt, hs),
        ("MHA_GEMM_2_bwd1", _B, _SYS, _GII, (a, s, d, s), hs, hs, ss),
        ("MHA_GEMM_2_bwd2", _B, _SYS, _GII, (a, d, s, s), hs, ss, hs),
        ("V_bwd", _B, _SYS, _GW, (1, h, h, s), hs, wt, hs),  # outer 1, M h (as DFModel)
        ("DropOut_1_bwd", _B, _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("SOFTMAX_bwd", _B, _SIMD, _EW1, (a, s, 1, s), ss, None, ss),
        ("MHA_GEMM_1_bwd1", _B, _SYS, _GII, (a, d, s, s), ss, hs, hs),
        ("MHA_GEMM_1_bwd2", _B, _SYS, _GII, (a, d, s, s), ss, hs, hs),
        ("Q_bwd", _B, _SYS, _GW, (a, d, h, s), hs, wt, hs),
        ("K_bwd", _B, _SYS, _GW, (a, d, h, s), hs, wt, hs),
    ]
    kernels = []
    for kid, (name, phase, ctype, kind, dims, in1, second, out) in enumerate(rows, start=1):
        extra = {"weight_bytes": second} if kind is _GW else {"input2_bytes": second}
        kernels.append(_kernel(kid, name, kind, ctype, phase, dims, Dim.N,
                               input_bytes=in1, output_bytes=out, **extra))
    # Weight-gradient kernels: GEMM of two activations over the sequence (K tiled), whose
    # output is the weight gradient, all-reduced across data-parallel replicas.
    updates = [
        ("FFN1_bwd_weight_update", (1, 4 * h, s, h), hs, 4 * hs, 4 * wt),
        ("FFN0_bwd_weight_update", (1, h, s, 4 * h), 4 * hs, hs, 4 * wt),
        ("PROJ_GEMM_bwd_weight_update", (1, h, s, h), hs, hs, wt),
        ("V_bwd_weight_update", (1, h, s, h), hs, hs, wt),
        ("K_bwd_weight_update", (1, h, s, h), hs, hs, wt),
        ("Q_bwd_weight_update", (1, h, s, h), hs, hs, wt),
    ]
    for kid, (name, dims, in1, in2, out) in enumerate(updates, start=len(rows) + 1):
        kernels.append(_kernel(
            kid, name, _GII, _SYS, _B, dims, Dim.K,
            input_bytes=in1, input2_bytes=in2, output_bytes=out,
            communication=Collective.ALL_REDUCE_PERIODIC, communication_bytes=out,
        ))
    return tuple(kernels)


def llm_fwdbwd(*, hidden: int, num_head: int, head_dim: int, seq: int, word: int) -> Graph:
    """One transformer layer, forward and backward, one sequence.

    41 kernels (18 forward, 17 backward, 6 weight-gradient kernels with a periodic
    all-reduce of the weight bytes) and 53 connections; the loss kernel has no incoming edge.

    Parameters
    ----------
    hidden, num_head, head_dim : int
        Model width h, heads a and head size d; a * d must equal h.
    seq : int
        Sequence length s (the tiled N dimension).
    word : int
        Bytes per element.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        If a parameter is not a positive integer or ``num_head * head_dim != hidden``.
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, seq=seq, word=word)
    _check(_validate("llm", params, "graph"))
    kernels = _llm_kernels(hidden, num_head, head_dim, seq, word)
    return Graph(kernels=kernels, connections=_connect(kernels, _LLM_EDGES))


def llm_fwd(*, hidden: int, num_head: int, head_dim: int, seq: int, word: int) -> Graph:
    """The forward half of :func:`llm_fwdbwd`: its first 18 kernels and 21 connections.

    Raises
    ------
    SpecError
        As :func:`llm_fwdbwd`.
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, seq=seq, word=word)
    _check(_validate("llm-fwd", params, "graph"))
    kernels = _llm_kernels(hidden, num_head, head_dim, seq, word)[:_LLM_FWD_KERNELS]
    return Graph(kernels=kernels, connections=_connect(kernels, _LLM_EDGES[:_LLM_FWD_EDGES]))


_DECODE_EDGES = [
    (1, 2), (2, 3), (2, 4), (2, 5), (4, 6), (5, 7), (3, 8), (6, 8), (8, 9), (9, 10), (10, 11),
    (7, 11), (11, 12), (12, 13), (13, 14), (14, 15), (1, 14), (15, 16), (16, 17), (17, 18),
    (18, 19), (19, 20), (14, 20),
]
#: Connection ids 8 (K_cache -> MHA_GEMM_1) and 12 (V_cache -> MHA_GEMM_2): KV-cache buffers.
_DECODE_ZERO_OUT = frozenset({8, 12})


def llm_decode(*, hidden: int, num_head: int, head_dim: int, word: int, seq_window: int,
               tp: int, mlp_dim: int) -> Graph:
    """One transformer layer generating one token against a KV cache.

    20 forward kernels, 23 connections, N tiling. Weights and the KV cache are streamed from
    DRAM (``memory_bytes`` per chip of a ``tp``-way tensor-parallel group); the KV-cache
    edges K_cache -> MHA_GEMM_1 and V_cache -> MHA_GEMM_2 are ``zero_out``. K_cache and
    V_cache are elementwise kernels of SYSTOLIC type, as in DFModel.

    Parameters
    ----------
    hidden, num_head, head_dim : int
        Model width h, heads a and head size d; a * d must equal h.
    word : int
        Bytes per element.
    seq_window : int
        Tokens already in the KV cache; attention spans L = seq_window + 1.
    tp : int
        Tensor-parallel degree dividing the streamed bytes.
    mlp_dim : int
        FFN inner width.

    Returns
    -------
    Graph

    Raises
    ------
    SpecError
        If a parameter is not a positive integer or ``num_head * head_dim != hidden``.
    """
    params = dict(hidden=hidden, num_head=num_head, head_dim=head_dim, word=word,
                  seq_window=seq_window, tp=tp, mlp_dim=mlp_dim)
    _check(_validate("llm-decode", params, "graph"))
    h, a, d, w, f = hidden, num_head, head_dim, word, mlp_dim
    L = seq_window + 1
    hw, hl, la, fw = h * w, h * L * w, L * a * w, f * w
    w_mem, f_mem, kv_mem = h * h * w / tp, f * h * w / tp, w * h * seq_window / tp
    rows = [
        # name, type, kind, (outer, M, K, N), in1, in2 or weight, out, memory
        ("Add_Prev_Layer", _SIMD, _EW1, (1, h, 1, 1), hw, None, hw, 0.0),
        ("LayerNorm_1", _SIMD, _EW1, (1, h, 1, 1), hw, None, hw, 0.0),
        ("Q", _SYS, _GW, (a, d, h, 1), hw, h * h * w, hw, w_mem),
        ("K", _SYS, _GW, (a, d, h, 1), hw, h * h * w, hw, w_mem),
        ("V", _SYS, _GW, (a, d, h, 1), hw, h * h * w, hw, w_mem),
        ("K_cache", _SYS, _EW1, (a, d, 1, L), hw, None, hl, kv_mem),
        ("V_cache", _SYS, _EW1, (a, d, 1, L), hw, None, hl, kv_mem),
        ("MHA_GEMM_1", _SYS, _GII, (a, 1, d, L), hw, hl, la, 0.0),
        ("SOFTMAX", _SIMD, _EW1, (a, 1, 1, L), la, None, la, 0.0),
        ("DropOut_1", _SIMD, _EW1, (a, 1, 1, L), la, None, la, 0.0),
        ("MHA_GEMM_2", _SYS, _GII, (a, d, L, 1), hl, la, hw, 0.0),
        ("PROJ_GEMM", _SYS, _GW, (1, h, h, 1), hw, h * h * w, hw, w_mem),
        ("DropOut_2", _SIMD, _EW1, (1, h, 1, 1), hw, None, hw, 0.0),
        ("Add_1", _SIMD, _EW2, (1, h, 1, 1), hw, hw, hw, 0.0),
        ("LayerNorm_2", _SIMD, _EW1, (1, h, 1, 1), hw, None, hw, 0.0),
        ("FFN0", _SYS, _GW, (1, f, h, 1), hw, f * h * w, fw, f_mem),
        ("GeLU", _SIMD, _EW1, (1, f, 1, 1), fw, None, fw, 0.0),
        ("FFN1", _SYS, _GW, (1, h, f, 1), fw, f * h * w, hw, f_mem),
        ("DropOut_3", _SIMD, _EW1, (1, h, 1, 1), hw, None, hw, 0.0),
        ("Add_2", _SIMD, _EW2, (1, h, 1, 1), hw, hw, hw, 0.0),
    ]
    kernels = []
    for kid, (name, ctype, kind, dims, in1, second, out, mem) in enumerate(rows, start=1):
        extra = {"weight_bytes": second} if kind is _GW else {"input2_bytes": second}
        kernels.append(_kernel(kid, name, kind, ctype, _F, dims, Dim.N, memory_bytes=mem,
                               input_bytes=in1, output_bytes=out, **extra))
    kernels_t = tuple(kernels)
    return Graph(kernels=kernels_t,
                 connections=_connect(kernels_t, _DECODE_EDGES, _DECODE_ZERO_OUT))


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
    """One integer parameter of a generator.

    ``default`` is ``None`` when the generator supplies no constant default; ``required``
    says whether the caller must give it (HPL's ``iteration`` is optional yet has no
    constant default: it is ``n // b``).
    """

    name: str
    type: type
    help: str
    default: int | None = None
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
_LLM_PARAMS = (*_HEADS, _p("seq", "sequence length s"), _WORD)

#: name -> generator; read-only.
GENERATORS: Mapping[str, Generator] = MappingProxyType({
    "llm": Generator("llm", llm_fwdbwd, _LLM_PARAMS,
                     "one transformer layer, forward + backward (41 kernels)"),
    "llm-fwd": Generator("llm-fwd", llm_fwd, _LLM_PARAMS,
                         "one transformer layer, forward only (18 kernels)"),
    "llm-decode": Generator("llm-decode", llm_decode, (
        *_HEADS, _WORD,
        _p("seq_window", "tokens already in the KV cache"),
        _p("tp", "tensor-parallel degree dividing the streamed weight / KV bytes"),
        _p("mlp_dim", "FFN inner width"),
    ), "one transformer layer decoding one token (20 kernels)"),
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
        issues += _issues_positive({k: v for k, v in values.items() if v is not None}, path)
    if issues:
        raise SpecError(issues)
    return gen.function(**values)
