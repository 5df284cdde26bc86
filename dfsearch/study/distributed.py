"""Running a study's points on an existing Dask distributed cluster (optional extra
``dfsearch[distributed]``): ``dfsearch sweep study.toml -o results/ --dask tcp://host:8786``.

Each point is one task (``point.run_point``), submitted a window ahead; results are taken in submission order, so the
table is written in point order as with a local pool. Every worker process compiles (or
loads from its Numba cache) once. The workers need dfsearch installed, same version.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator
from typing import Any

from dfsearch.errors import SolverUnavailableError
from dfsearch.study.point import run_point

__all__ = ["dask_results"]


#: tasks submitted ahead of the one whose result is awaited (bounds the memory of a long study)
WINDOW = 256


def dask_results(items: Iterable[tuple[Any, Any, Any]], address: str) -> Iterator[tuple[tuple[Any, Any], dict[str, Any]]]:
    """Each (point, digest, task) item's (point, digest) and metrics, in item order, computed
    on the scheduler at ``address``; at most :data:`WINDOW` tasks are submitted ahead.

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
        pending: collections.deque = collections.deque()
        try:
            for p, d, task in items:
                pending.append(((p, d), client.submit(run_point, task, pure=False)))
                if len(pending) >= WINDOW:
                    key, future = pending.popleft()
                    yield key, future.result()
            while pending:
                key, future = pending.popleft()
                yield key, future.result()
        finally:
            client.cancel([f for _, f in pending])
