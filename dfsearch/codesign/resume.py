"""Resuming a co-design study: ``trials.csv`` is written row by row; run again on the same
folder, the sampler replays the same trials (it is seeded) and each trial whose row is in the
table with the same variable values is read back instead of searched. Every row carries the
digest of the study file, its workloads' spec files and the technology catalogue; a table
written for another study is refused (``--fresh`` starts anew)."""

from __future__ import annotations

import csv
import hashlib
import io
import os
from pathlib import Path
from typing import Any

from dfsearch.codesign.study import CodesignStudy
from dfsearch.errors import Issue, SpecError

__all__ = ["DIGEST", "study_digest", "csv_text", "read_previous", "TrialWriter"]

#: the digest column of trials.csv
DIGEST = "study_digest"


def study_digest(study: CodesignStudy) -> str:
    """A short digest of what the trials' rows depend on: the study file, the workloads'
    spec files and the technology catalogue."""
    h = hashlib.sha256()
    for path in (study.file, *(str(w.spec) for w in study.workloads), study.tech.file):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:16]


def _text(value: Any) -> Any:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else value


def csv_text(header: list[str], rows: list[dict[str, Any]]) -> str:
    """Rows as CSV (floats written exactly, ``None`` as an empty cell)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([_text(r.get(c)) for c in header])
    return buf.getvalue()


def _value(text: str) -> Any:
    """A cell read back: empty -> None, an integer, a float, else the text."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_previous(path: Path, header: list[str], digest: str, fresh: bool, file: str) -> dict[int, dict[str, Any]]:
    """The rows of an earlier run of the same study (trial number -> row); {} when none or
    ``fresh``. Raises SpecError for a table of another study or with other columns."""
    if fresh or not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))
    if not lines:
        return {}
    if lines[0] != header:
        raise SpecError(Issue("", f"{path} has the columns of another study. Use --fresh to start anew, or another output folder."), file=file)
    rows = {}
    for cells in lines[1:]:
        if len(cells) != len(header):  # a line cut short by an interrupt
            continue
        row = {c: _value(v) for c, v in zip(header, cells)}
        if str(row[DIGEST]) != digest:
            raise SpecError(Issue("", f"{path} was written for another version of the study, its workloads or the "
                                      "technology catalogue. Use --fresh to start anew, or another output folder."), file=file)  # fmt: skip
        row[DIGEST] = digest
        rows[int(row["trial"])] = row
    return rows


class TrialWriter:
    """Appends rows to a fresh ``trials.csv`` one at a time (flushed and synced)."""

    def __init__(self, path: Path, header: list[str]) -> None:
        self.header = header
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", newline="", encoding="utf-8")
        except OSError as e:
            raise SpecError(Issue("", f"{path}: cannot write: {e.strerror or e}.")) from None
        self._csv = csv.writer(self._file, lineterminator="\n")
        self._csv.writerow(header)

    def write(self, row: dict[str, Any]) -> None:
        self._csv.writerow([_text(row.get(c)) for c in self.header])
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()
