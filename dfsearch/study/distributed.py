"""Running a study's points on an existing Dask distributed cluster (optional extra
``dfsearch[distributed]``): ``dfsearch sweep study.toml -o results/ --dask tcp://host:8786``.

Each point is one task (``runner.run_point``); results are taken in submission order, so the
table is written in point order as with a local pool. Every worker process compiles (or
loads from its Numba cache) once. The workers need dfsearch installed, same version.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dfsearch.errors import SolverUnavailableError

__all__ = ["dask_results"]


def dask_results(tasks: list[Any], address: str) -> Iterator[dict[str, Any]]:
    """Each task's metrics, in task order, computed on the scheduler at ``address``.

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
    from dfsearch.study.runner import run_point

    with Client(address, set_as_default=False) as client:
        futures = client.map(run_point, tasks, pure=False)
        try:
            for future in futures:
                yield future.result()
        finally:
            client.cancel(futures)
