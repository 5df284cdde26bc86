"""Issues and the helpers that word them: the vocabulary every check shares (the spec
checks in ``dfsearch.validate``, the workload kinds' rules in ``dfsearch.workloads``).

Plain Python on top of ``dfsearch.errors``: any layer may import it.

>>> s = IssueSink()
>>> s.gt("system.num_chip", 0)
>>> s.in_range("workload.n", 2**50, (1, 2**40, "elements"))
>>> [i.render() for i in s.issues]  # doctest: +NORMALIZE_WHITESPACE
['system.num_chip must be > 0. Got 0 instead.',
 'workload.n must be between 1 and 2^40 = 1099511627776 elements. Got 1125899906842624 instead.']
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dfsearch.errors import Issue

__all__ = ["IssueSink", "Range", "show", "quote_list", "bound_text", "out_of_range"]


# --------------------------------------------------------------------------- wording
def show(value: object) -> str:
    """Render a value the way messages quote it: strings quoted, whole floats without '.0'.

    >>> show(-25.0), show(2.5), show("full"), show(True), show([1, 2])
    ('-25', '2.5', "'full'", 'true', 'an array')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list | tuple):
        return "an array"
    if hasattr(value, "label"):
        return repr(value.label)
    return str(value)


def quote_list(words: Iterable[str]) -> str:
    """``'a', 'b', 'c'`` — how allowed words are listed in messages."""
    return ", ".join(repr(w) for w in words)


def bound_text(x: float) -> str:
    """``2^24 = 16777216`` for large powers of two, else as :func:`show` writes numbers."""
    if isinstance(x, int) and x >= 1024:
        e = (x + 1).bit_length() - 1
        if x == 2**e:
            return f"2^{e} = {x}"
        if x == 2**e - 1:
            return f"2^{e} - 1 = {x}"
    return show(x)


# --------------------------------------------------------------------------- ranges
@dataclass(frozen=True, slots=True)
class Range:
    """Accepted values of one numeric field: ``lo <= value <= hi`` (in ``unit``).

    The sign rules (``> 0``, ``>= 0``, ``>= 1``, -1 = free, 0 = unlimited / off) are checked
    separately and own every value <= 0; a range only rejects values above ``hi`` or in
    ``(0, lo)``, so each bad value gets exactly one message.
    """

    lo: float
    hi: float
    unit: str = ""
    why: str = ""


def out_of_range(path: str, value: float | None, r: Range) -> Issue | None:
    """The issue of ``value`` at ``path`` when it is outside ``r`` (values <= 0 belong to the
    sign rules and are never reported here), else ``None``."""
    if value is None or isinstance(value, bool) or not value > 0:
        return None
    if r.lo <= value <= r.hi:
        return None
    unit = f" {r.unit}" if r.unit else ""
    why = f" ({r.why})" if r.why else ""
    return Issue(
        path,
        f"must be between {bound_text(r.lo)} and {bound_text(r.hi)}{unit}{why}. "
        f"Got {show(value)} instead.",
    )


# --------------------------------------------------------------------------- the sink
class IssueSink:
    """Collects issues; small comparison helpers produce the standard wording."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def add(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))

    def gt(self, path: str, value: float, bound: float = 0) -> None:
        if not value > bound:
            self.add(path, f"must be > {show(bound)}. Got {show(value)} instead.")

    def ge(self, path: str, value: float, bound: float = 0) -> None:
        if not value >= bound:
            self.add(path, f"must be >= {show(bound)}. Got {show(value)} instead.")

    def ge_opt(self, path: str, value: float | None) -> None:
        if value is not None:
            self.ge(path, value)

    def in_range(self, path: str, value: float | None, rng: tuple[float, float, str]) -> None:
        """The range rule ``rng`` = (lo, hi, unit), e.g. a workload field's."""
        issue = out_of_range(path, value, Range(*rng))
        if issue is not None:
            self.issues.append(issue)
