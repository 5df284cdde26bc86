"""Bounded memos of pure functions of immutable values, for the work a process repeats
across the points of a study (issue 25): a sweep worker searches many points whose specs
share a generated graph, and what depends on the graph alone is computed once.

``by_identity(size)`` keys on the argument's identity and keeps a reference to it, so an
id is never reused while its entry lives; it suits frozen objects that are shared rather
than rebuilt (a generated graph, see ``kernels.generators.generate``). A memo changes only
how often the function runs, never its result: the function must be pure and its argument
immutable. At most ``size`` entries are kept, the least recently used dropped first.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["by_identity"]

A = TypeVar("A")
R = TypeVar("R")


def by_identity(size: int) -> Callable[[Callable[[A], R]], Callable[[A], R]]:
    """Decorator: memoise a one-argument pure function on the identity of its argument."""

    def wrap(func: Callable[[A], R]) -> Callable[[A], R]:
        kept: collections.OrderedDict[int, tuple[Any, R]] = collections.OrderedDict()

        @functools.wraps(func)
        def memo(arg: A) -> R:
            hit = kept.get(id(arg))
            if hit is not None and hit[0] is arg:
                kept.move_to_end(id(arg))
                return hit[1]
            value = func(arg)
            kept[id(arg)] = (arg, value)
            if len(kept) > size:
                kept.popitem(last=False)
            return value

        return memo

    return wrap
