"""Running a study's points on an existing Dask distributed cluster (optional extra
``dfsearch[distributed]``): ``dfsearch sweep study.toml -o results/ --dask tcp://host:8786``.

The study is sent to every worker once; each task is a chunk of consecutive points
(``point.run_chunk``: the worker builds, digests and searches them), submitted a window
ahead; results are taken in submission order, so the table is written in point order as
with a local pool. Every worker process compiles (or loads from its Numba cache) once and
serves many chunks. The workers need dfsearch installed, same version (docs/studies.md
shows a cluster started with dask-jobqueue on SLURM).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import Any

from dfsearch.errors import SolverUnavailableError
from dfsearch.study.point import chunk_size, chunks, run_chunk

__all__ = ["dask_results"]


#: chunks submitted ahead per worker thread of the cluster (at least ``MIN_WINDOW`` in all)
AHEAD_PER_THREAD = 2
MIN_WINDOW = 8


def dask_results(study: Any, points: Iterable[Any], total: int, address: str) -> Iterator[tuple[tuple[Any, ...], list]]:
    """Each chunk of ``points`` (about ``total`` of them) with its results
    (``point.run_chunk``), in order, computed on the scheduler at ``address``; chunks are
    sized for the cluster's worker threads and a bounded window of them is in flight.

    Raises
    ------
    SolverUnavailableError
        dask.distributed is not installed.
    """
    try:
        from distributed import Client
    except ImportError:
        raise SolverUnavailableError(
            "--dask needs dask.distributed: pip install \"dfsearch[distributed]\"."
        ) from None

    with Client(address, set_as_default=False) as client:
        threads = max(sum(client.nthreads().values()), 1)
        window = max(MIN_WINDOW, AHEAD_PER_THREAD * threads)
        shared = client.scatter(study, broadcast=True, hash=False)
        pending: collections.deque = collections.deque()
        try:
            for part in chunks(points, chunk_size(total, threads)):
                pending.append((part, client.submit(run_chunk, shared, part, pure=False)))
                if len(pending) >= window:
                    part, future = pending.popleft()
                    yield part, future.result()
            while pending:
                part, future = pending.popleft()
                yield part, future.result()
        finally:
            client.cancel([f for _, f in pending])
