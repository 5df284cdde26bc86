"""The results table of a sweep: one CSV row per point, appended and flushed as each point
finishes, read back with typed values.

Columns: ``point`` (index in the study's full product), one column per axis (named as the
axis), then :data:`METRICS`. ``digest`` identifies the point's spec and seed: a resumed sweep
checks that every row already in the table still describes the same point.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["METRICS", "FLOAT_COLUMNS", "INT_COLUMNS", "columns", "TableWriter", "read_table", "table_path"]

#: metric columns, in order (units in docs/studies.md)
METRICS = (
    "status", "final_s", "throughput_per_s", "utilization", "system_cost", "system_power",
    "cost_efficiency", "power_efficiency", "tp", "pp", "dp", "num_config", "compute_ns",
    "memory_ns", "network_ns", "all_config_ii_ns", "flop_per_chip", "dram_bytes_per_chip",
    "network_bytes_per_chip", "peak_gflops", "dram_bw_GBps", "link_bw_GBps", "lower_bound_s",
    "gap", "evaluations", "seconds", "seed", "digest", "message",
)  # fmt: skip
FLOAT_COLUMNS = frozenset({
    "final_s", "throughput_per_s", "utilization", "system_cost", "system_power",
    "cost_efficiency", "power_efficiency", "compute_ns", "memory_ns", "network_ns",
    "all_config_ii_ns", "flop_per_chip", "dram_bytes_per_chip", "network_bytes_per_chip",
    "peak_gflops", "dram_bw_GBps", "link_bw_GBps", "lower_bound_s", "gap", "seconds",
})  # fmt: skip
INT_COLUMNS = frozenset({"point", "tp", "pp", "dp", "num_config", "evaluations", "seed"})

CSV_NAME = "results.csv"


def table_path(folder: str | Path) -> Path:
    return Path(folder) / CSV_NAME


def columns(axis_names: Iterable[str]) -> list[str]:
    return ["point", *axis_names, *METRICS]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


class TableWriter:
    """Appends rows to ``results.csv`` (header first if the file is new), flushing and
    syncing each row so a killed sweep loses at most the row being written."""

    def __init__(self, path: Path, header: list[str]) -> None:
        self.path = path
        self.header = header
        new = not path.exists() or path.stat().st_size == 0
        self._file = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._csv = csv.writer(self._file, lineterminator="\n")
        if new:
            self._csv.writerow(header)
            self._flush()

    def write(self, row: Mapping[str, Any]) -> None:
        self._csv.writerow([_text(row.get(c)) for c in self.header])
        self._flush()

    def _flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _typed(column: str, text: str) -> Any:
    if text == "":
        return None
    if column in INT_COLUMNS:
        return int(text)
    if column in FLOAT_COLUMNS:
        return float(text)
    return text


def _axis_value(text: str) -> Any:
    """An axis cell back as a number where it reads as one, else the word."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def read_table(path: str | Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The header and the complete rows of a results table (a last line cut by a kill,
    without its newline, is dropped; :func:`drop_partial_line` removes it from the file).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.csv"
    >>> with TableWriter(p, columns(["accelerator"])) as w:
    ...     w.write({"point": 0, "accelerator": "h100", "status": "optimal", "final_s": 1.5})
    >>> header, rows = read_table(p)
    >>> rows[0]["accelerator"], rows[0]["final_s"], rows[0]["tp"]
    ('h100', 1.5, None)
    """
    text = Path(path).read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text))
    header = next(reader, [])
    metrics = set(METRICS) | {"point"}
    rows = []
    for cells in reader:
        if len(cells) != len(header):
            continue
        rows.append({c: (_typed(c, t) if c in metrics else _axis_value(t)) for c, t in zip(header, cells)})
    return header, rows


def drop_partial_line(path: Path) -> None:
    """Cut a last line without its newline (a row interrupted mid-write)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
