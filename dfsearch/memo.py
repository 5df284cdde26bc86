"""Bounded memos of pure functions of immutable values, for the work a process repeats
across the points of a study (issue 25): a sweep worker searches many points whose specs
share a generated graph, and what depends on the graph alone is computed once.

``by_identity(size)`` keys on the argument's identity and keeps a reference to it, so an
id is never reused while its entry lives; it suits frozen objects that are shared rather
than rebuilt (a generated graph, see ``kernels.generators.generate``). A memo changes only
how often the function runs, never its result: the function must be pure and its argument
immutable. At most ``size`` entries are kept, the least recently used dropped first.

``by_identity_and_key(size)`` keys on the identity of a first argument (kept, as above) and a
hashable key; further arguments are passed through unkeyed, so the key must name every
number they contribute to the result (the caller's contract, stated where it is used).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["by_identity", "by_identity_and_key"]

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


def by_identity_and_key(size: int) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorator: memoise ``func(arg, key, *rest)`` on the identity of ``arg`` and the value
    of ``key`` (hashable); ``rest`` is not part of the key and must not change the result
    beyond what ``key`` names."""

    def wrap(func: Callable[..., R]) -> Callable[..., R]:
        kept: collections.OrderedDict[tuple[int, Any], tuple[Any, R]] = collections.OrderedDict()

        @functools.wraps(func)
        def memo(arg: Any, key: Any, *rest: Any) -> R:
            full = (id(arg), key)
            hit = kept.get(full)
            if hit is not None and hit[0] is arg:
                with contextlib.suppress(KeyError):  # another thread may have dropped it
                    kept.move_to_end(full)
                return hit[1]
            value = func(arg, key, *rest)
            kept[full] = (arg, value)
            if len(kept) > size:
                kept.popitem(last=False)
            return value

        return memo

    return wrap
