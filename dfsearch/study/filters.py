"""The filter language of a study: comparisons joined by ``and``, nothing else.

A condition is ``NAME OP VALUE``: NAME an axis name (``accelerator``) or a spec field path
(``system.num_chip``, ``system.network[0].size``); OP one of ``< <= > >= == !=``; VALUE a
number, ``true``/``false``, a quoted string or a bare word (``accelerator != wse2``). No
Python is evaluated.

>>> c = parse_filter("system.num_chip <= 1024 and accelerator != 'wse2'", "study.filter")
>>> [(x.name, x.op, x.value) for x in c]
[('system.num_chip', '<=', 1024), ('accelerator', '!=', 'wse2')]
>>> c[0].holds(512), c[1].holds("wse2")
(True, False)
>>> parse_filter("num_chip = 4", "study.filter")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dfsearch.errors.SpecError: study.filter must be comparisons NAME OP VALUE joined by 'and' ...
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dfsearch.errors import Issue, SpecError

__all__ = ["Condition", "parse_filter"]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, ">": operator.gt,
}  # fmt: skip
_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.\[\]]*)\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$")
_FORM = (
    "must be comparisons NAME OP VALUE joined by 'and' (NAME an axis or a field path, OP one "
    "of < <= > >= == !=, VALUE a number, true/false or a word; e.g. "
    "\"system.num_chip <= 1024 and accelerator != 'wse2'\")"
)


@dataclass(frozen=True, slots=True)
class Condition:
    """One comparison of a filter."""

    name: str
    op: str
    value: Any
    text: str

    def holds(self, actual: Any) -> bool:
        """Whether ``actual`` (the point's value of ``name``) satisfies the comparison.

        Raises
        ------
        TypeError
            A number compared with a word by < <= > >=.
        """
        if self.op in ("==", "!="):
            return _OPS[self.op](_norm(actual), _norm(self.value))
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            raise TypeError(f"{self.name} is {actual!r}, not a number")
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise TypeError(f"{self.value!r} is not a number")
        return _OPS[self.op](actual, self.value)


def _norm(x: Any) -> Any:
    """Numbers compare by value (1 == 1.0), words as they are."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return int(x)
    return x


def _value(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if re.fullmatch(r"[\w.\-]+", text):
        return text
    raise ValueError(text)


def parse_filter(text: object, path: str) -> tuple[Condition, ...]:
    """The conditions of one filter string (``path`` names it in errors).

    Raises
    ------
    SpecError
        Not a string, or a part that is not ``NAME OP VALUE``.
    """
    if not isinstance(text, str) or not text.strip():
        raise SpecError(Issue(path, f"{_FORM}. Got {text!r} instead."))
    out = []
    for part in re.split(r"\s+and\s+", text.strip()):
        m = _CONDITION.match(part)
        try:
            if m is None:
                raise ValueError(part)
            out.append(Condition(m.group(1), m.group(2), _value(m.group(3)), part.strip()))
        except ValueError:
            raise SpecError(Issue(path, f"{_FORM}. Got {part.strip()!r} in {text!r}.")) from None
    return tuple(out)
