"""The one jit configuration of dfsearch: every jitted function is decorated with ``jit``.

``cache=True`` (compiled code is reused across processes), no eager signatures, no
fastmath (infeasibility is signalled with inf, which fastmath may assume away).
Importing this module imports numba: only jitted modules import it.
"""

from __future__ import annotations

import functools

import numba

__all__ = ["jit"]

jit = functools.partial(numba.njit, cache=True, nogil=True)
