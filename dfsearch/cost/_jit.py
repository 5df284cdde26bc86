"""The one jit configuration of dfsearch: every jitted function is decorated with ``jit``.

Compiled code is cached on disk (reused across processes) where Numba finds a writable
folder: ``NUMBA_CACHE_DIR`` if set, else the package's ``__pycache__``, else the user's cache
folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``). When none is writable (a read-only
install and no writable home), the function is compiled in every process instead: slower to
start, same results. No eager signatures, no fastmath (infeasibility is signalled with inf,
which fastmath may assume away). The GIL is kept: the long searches step into object mode
now and then to read the clock and let a pending Ctrl-C handler run. Importing this module imports numba: only jitted modules
import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

__all__ = ["jit"]


def jit(func: Callable[..., Any]) -> Any:
    """Compile ``func`` in nopython mode, cached on disk when possible."""
    try:
        return numba.njit(cache=True)(func)
    except RuntimeError as exc:  # raised while decorating: no writable cache folder
        if "cannot cache" not in str(exc):
            raise
        return numba.njit(cache=False)(func)
