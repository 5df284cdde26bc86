"""Request trace files: CSV with a header naming the columns ``arrival_s`` (seconds,
non-decreasing, >= 0), ``prompt_tokens`` and ``output_tokens`` (integers >= 1), one
request per line, in any column order; other columns are ignored, blank lines skipped.

A bad file is refused with the file, the line (the header is line 1) and column, the value
and what was expected (:class:`dfsearch.errors.SpecError`, exit code 2).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dfsearch.errors import Issue, SpecError

__all__ = ["Trace", "read_trace", "TRACE_COLUMNS"]

TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class Trace:
    """The rows of a trace file, as arrays."""

    path: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)


def read_trace(path: str | Path) -> Trace:
    """The trace in ``path``; :class:`SpecError` on a missing file, column or bad value."""
    name = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SpecError(Issue("", f"cannot be read: {e.strerror or e}."), file=name) from None
    rows = [(i, next(csv.reader([line]))) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    header = [h.strip() for h in rows[0][1]] if rows else []
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise SpecError(Issue("header", f"must name the columns {', '.join(TRACE_COLUMNS)}. "
                              f"Missing {', '.join(missing)}; got {header!r} instead."), file=name)
    where = {c: header.index(c) for c in TRACE_COLUMNS}
    values: dict[str, list] = {c: [] for c in TRACE_COLUMNS}
    last = 0.0
    for k, (line, row) in enumerate(rows[1:]):
        for c, j in where.items():
            cell = row[j].strip() if j < len(row) else ""
            values[c].append(_cell(cell, c, line, name, last if k else None))
        last = values["arrival_s"][-1]
    if not values["arrival_s"]:
        raise SpecError(Issue("", "must hold at least one request row. Got none instead."), file=name)
    return Trace(name, np.array(values["arrival_s"], dtype=np.float64),
                 np.array(values["prompt_tokens"], dtype=np.int64),
                 np.array(values["output_tokens"], dtype=np.int64))


def _cell(cell: str, column: str, line: int, file: str, last_arrival: float | None) -> float | int:
    where = f"line {line}, column {column}"
    if column == "arrival_s":
        try:
            x = float(cell)
        except ValueError:
            x = float("nan")
        least = 0.0 if last_arrival is None else last_arrival
        if not (least <= x < float("inf")):
            expected = "a number >= 0" if last_arrival is None else f"a number >= the line before ({least:g})"
            raise SpecError(Issue(where, f"must be {expected}. Got {cell!r} instead."), file=file)
        return x
    try:
        n = int(cell)
    except ValueError:
        n = 0
    if n < 1:
        raise SpecError(Issue(where, f"must be an integer >= 1. Got {cell!r} instead."), file=file)
    return n
