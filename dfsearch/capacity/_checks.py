"""Input checks shared by the serving-capacity modules: one message form for a bad value
(the field path, the value, what was expected; :class:`SpecError`, exit code 2).

>>> require(is_int(3) and 3 >= 1, "x.n", "an integer >= 1", 3)
>>> is_int(True), is_real(float("inf")), is_real(2)
(False, False, True)
"""

from __future__ import annotations

import math

import numpy as np

from dfsearch.errors import Issue, SpecError

__all__ = ["require", "is_int", "is_real"]


def require(ok: bool, path: str, expected: str, value: object) -> None:
    """Raise ``SpecError("<path> must be <expected>. Got <value> instead.")`` unless ``ok``."""
    if not ok:
        raise SpecError(Issue(path, f"must be {expected}. Got {value!r} instead."))


def is_int(x: object) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def is_real(x: object) -> bool:
    """A finite real number (Python or numpy), not a bool."""
    return isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool) and math.isfinite(x)
