"""Small random specs for search tests (built directly from the dataclasses)."""

from __future__ import annotations

import random

from dfsearch.codes import (
    ComputeType,
    Dim,
    Equations,
    ExecutionStyle,
    KernelKind,
    Overlap,
    Parallelism,
    Phase,
    Topology,
)
from dfsearch.spec import (
    Accelerator,
    Connection,
    Cost,
    Execution,
    Graph,
    Kernel,
    LLMWorkload,
    Memory,
    NetworkDim,
    SearchSettings,
    Spec,
    System,
)


def random_graph(rng: random.Random, n: int, *, training: bool) -> Graph:
    """A random DAG in topological file order; N tiled (seq = 64), half FWD / half BWD."""
    kernels = []
    conns = []
    half = n // 2 if training else n
    for i in range(n):
        kind = rng.choice(list(KernelKind))
        m = rng.choice([32, 64, 128])
        k = rng.choice([32, 64, 128]) if kind.has_k else 1
        outer = rng.choice([1, 1, 2])
        typ = ComputeType.SIMD if kind in (KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2) else ComputeType.SYSTOLIC
        out_b = float(outer * m * 64 * 2)
        kernels.append(
            Kernel(
                name=f"k{i}", kind=kind, type=typ, outer=outer, m=m, k=k, n=64,
                tiling=Dim.N, phase=(Phase.FWD if i < half else Phase.BWD) if training else Phase.NONE,
                input_bytes=float(rng.choice([1, 2]) * 4096),
                input2_bytes=float(8192) if kind.num_inputs == 2 else None,
                weight_bytes=float(m * k * 2) if kind is KernelKind.GEMM_WEIGHT else None,
                output_bytes=out_b,
            )
        )  # fmt: skip
    for i in range(1, n):
        lo = half if (training and i >= half) else 0
        if i == half and training:
            continue
        for j in rng.sample(range(lo, i), k=min(i - lo, rng.choice([1, 1, 2]))):
            conns.append(Connection(src=f"k{j}", dst=f"k{i}"))
    return Graph(kernels=tuple(kernels), connections=tuple(conns))


def random_spec(seed: int, n: int = 6, *, num_config: int = 3, cycle: bool = False,
                sram: float = 2e5, training: bool = True) -> Spec:  # fmt: skip
    rng = random.Random(seed)
    g = random_graph(rng, n, training=training)
    return Spec(
        graph=g,
        system=System(
            num_chip=4,
            accelerator=Accelerator(cores=8, systolic_width=4, systolic_height=4,
                                    sram_bytes=sram, freq_GHz=1.0),  # fmt: skip
            memory=Memory(dram_bw_GBps=rng.choice([10.0, 100.0]), dram_bytes=0.0),
            network=(NetworkDim(topology=Topology.RING, link_bw_GBps=50.0, size=4,
                                parallelism=Parallelism.TP),),  # fmt: skip
        ),
        cost=Cost(),
        execution=Execution(
            style=ExecutionStyle.DATAFLOW, num_config=num_config, overlap=rng.choice(list(Overlap)),
            compute_util=0.0 if cycle else 0.8, word_bytes=2, equations=Equations.V1,
        ),  # fmt: skip
        workload=LLMWorkload(hidden_dim=64, head_dim=16, num_head=4, seq_len=64, num_layer=2,
                             global_batch_size=8),  # fmt: skip
        search=SearchSettings(seed=0, time_limit_s=30.0),
    )
