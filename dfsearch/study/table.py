"""The results table of a sweep: one CSV row per point, appended and flushed as each point
finishes, read back with typed values.

Columns: ``point`` (index in the study's full product), one column per axis (named as the
axis), then :data:`METRICS`. ``digest`` identifies the point's spec and seed: a resumed sweep
checks that every row already in the table still describes the same point.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dfsearch.codes import RunStatus
from dfsearch.errors import Issue, SpecError
from dfsearch.result import HEADLINE

__all__ = ["METRICS", "SERVE_METRICS", "FLOAT_COLUMNS", "INT_COLUMNS", "columns", "TableWriter", "TableReader", "read_table", "table_path"]

#: metric columns, in order (units in docs/studies.md)
METRICS = (
    "status", "final_s", "throughput_per_s", "utilization", "system_cost", "system_power",
    "cost_efficiency", "power_efficiency", "tp", "pp", "dp", "num_config", "compute_ns",
    "memory_ns", "network_ns", "all_config_ii_ns", "flop_per_chip", "dram_bytes_per_chip",
    "network_bytes_per_chip", "peak_gflops", "dram_bw_GBps", "link_bw_GBps", "lower_bound_s",
    "gap", "evaluations", "seconds", "seed", "digest", "message",
    *HEADLINE,
)  # fmt: skip
#: the columns of a serving-capacity study (its base spec has a ``[serve]`` table), after
#: :data:`METRICS`: the deployment's figures under the names of ``dfsearch serve --json``
#: (its ``tp`` and ``pp`` in the columns of METRICS), then the SLO nearest its limit and the
#: search's work (docs/studies.md, "Serving-capacity studies")
SERVE_METRICS = (
    "mode", "chips", "dollars_per_hour", "prefill_chip", "prefill_tp", "prefill_pp", "prefill_replicas",
    "chip", "replicas", "batch_cap", "chunk_tokens", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
    "e2e_p99_s", "goodput_per_s", "slo_attainment", "output_tokens_per_s", "dollars_per_mtok",
    "kv_utilisation", "joules_per_token", "preemptions", "ttft_excess", "tpot_excess", "meets_slos", "note", "binding", "simulations", "step_searches",
)  # fmt: skip
#: the plan's headline figures (``dfsearch.result.HEADLINE``, last so that the columns before
#: them keep their places); a table written before them reads without them
OPTIONAL = frozenset(HEADLINE)
FLOAT_COLUMNS = frozenset({
    "final_s", "throughput_per_s", "utilization", "system_cost", "system_power",
    "cost_efficiency", "power_efficiency", "compute_ns", "memory_ns", "network_ns",
    "all_config_ii_ns", "flop_per_chip", "dram_bytes_per_chip", "network_bytes_per_chip",
    "peak_gflops", "dram_bw_GBps", "link_bw_GBps", "lower_bound_s", "gap", "seconds",
    "tokens_per_s", "ttft_s", "tpot_s", "e2e_latency_s", "speculative_tokens_per_s",
    "speculative_time_per_token_s", "speculative_speedup", "slowest_stage_s",
    "dollars_per_hour", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s", "goodput_per_s",
    "slo_attainment", "output_tokens_per_s", "dollars_per_mtok", "ttft_excess", "tpot_excess",
    "kv_utilisation", "joules_per_token",
})  # fmt: skip
INT_COLUMNS = frozenset({"point", "tp", "pp", "dp", "num_config", "evaluations", "seed", "batch", "stages",
                         "chips", "prefill_tp", "prefill_pp", "prefill_replicas", "replicas", "batch_cap",
                         "chunk_tokens", "preemptions", "simulations", "step_searches"})

CSV_NAME = "results.csv"
_METRIC_SET = frozenset(METRICS) | frozenset(SERVE_METRICS) | {"point"}


def table_path(folder: str | Path) -> Path:
    return Path(folder) / CSV_NAME


def columns(axis_names: Iterable[str], serve: bool = False) -> list[str]:
    """The header of a study's table (``serve``: a serving-capacity study's, with
    :data:`SERVE_METRICS` last)."""
    return ["point", *axis_names, *METRICS, *(SERVE_METRICS if serve else ())]


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


class TableWriter:
    """Appends rows to ``results.csv`` (header first if the file is new), handing each row to
    the operating system at once (a killed sweep loses at most the row being written) and
    syncing it to disk, or with ``sync_every_s`` > 0 syncing when that many seconds have
    passed since the last sync, and on close (a crash of the machine loses at most the rows
    of the last ``sync_every_s`` seconds; what is written never depends on the clock). A
    failed write (disk full, file system gone read-only) is a :class:`SpecError` naming the
    file; the rows before it stay (a resumed sweep drops a partly written last row)."""

    def __init__(self, path: Path, header: list[str], *, sync_every_s: float = 0.0) -> None:
        self.path = path
        self.header = header
        self.sync_every_s = sync_every_s
        self._synced = -math.inf  # time.monotonic() of the last sync
        self._failed = False  # a write or sync failed (said once, not again on close)
        try:
            new = not path.exists() or path.stat().st_size == 0
            self._file = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise self._error(e) from None
        self._csv = csv.writer(self._file, lineterminator="\n")
        if new:
            self._put(header)

    def _error(self, e: OSError) -> SpecError:
        return SpecError(Issue("", f"cannot write: {e.strerror or e}. The rows written before stay; run the same command again to resume once it can be written."), file=str(self.path))

    def write(self, row: Mapping[str, Any]) -> None:
        self._put([cell_text(row.get(c)) for c in self.header])

    def _put(self, cells: list[str]) -> None:
        try:
            self._csv.writerow(cells)
            self._file.flush()
            if time.monotonic() - self._synced >= self.sync_every_s:
                self._sync()
        except OSError as e:
            self._failed = True
            raise self._error(e) from None

    def _sync(self) -> None:
        os.fsync(self._file.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        """Sync the rows not yet on disk and close; a failed sync is a :class:`SpecError`
        (unless a write already failed and said why)."""
        try:
            if not self._failed:
                self._file.flush()
                self._sync()
        except OSError as e:
            self._failed = True
            raise self._error(e) from None
        finally:
            with contextlib.suppress(OSError):
                self._file.close()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(SpecError):  # the error on its way says what went wrong
            self.close()


def drop_partial_line(path: Path) -> None:
    """Cut a last line without its newline (a row interrupted mid-write), reading only the
    file's end (a table may be large)."""
    with open(path, "r+b") as f:
        end = f.seek(0, os.SEEK_END)
        pos = end
        while pos > 0:
            step = min(pos, 65536)
            f.seek(pos - step)
            chunk = f.read(step)
            if pos == end and chunk.endswith(b"\n"):
                return
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                f.truncate(pos - step + cut + 1)
                return
            pos -= step
        f.truncate(0)  # no complete line at all


# ----------------------------------------------------------------------------- reading
#: statuses a row may carry (``RunStatus`` labels)
_STATUSES = RunStatus.labels()
#: columns a feasible row (``final_s`` set) always has
_FEASIBLE_NEEDS = ("system_cost", "system_power")
_NOT_A_TABLE = "Expected a results table written by 'dfsearch sweep' (docs/studies.md, results table)."


class TableReader:
    """A results table read row by row, each row checked: the header has ``point`` first,
    distinct non-empty names and every metric column; a row has one cell per column; point
    ids are distinct integers >= 0; integer, number and status columns hold what they
    should; the file is UTF-8. Any problem is a :class:`SpecError` (exit 2) naming the file,
    the line and the column. A last line without its line end (a row cut by a killed sweep)
    is not a row: :attr:`cut_line` gives its number once the rows are read.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.csv"
    >>> _ = p.write_text("point,a\\n")
    >>> TableReader(p).header  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dfsearch.errors.SpecError: .../results.csv: line 1 lacks the columns status, final_s, ...
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.cut_line: int | None = None
        self._line = 0
        try:
            self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise SpecError(Issue("", f"cannot be read: {e.strerror or e}."), file=str(self.path)) from None
        self._csv = csv.reader(self._lines(), strict=True)
        try:
            self.header = self._next() or []
        except BaseException:
            self.close()
            raise
        if self.header:
            self._check_header()

    def _fail(self, where: str, message: str, line: int | None = None) -> SpecError:
        return SpecError(Issue(f"line {line or self._line}{where}", message), file=str(self.path))

    def _lines(self) -> Iterator[str]:
        for n, raw in enumerate(self._file, 1):
            if not raw.endswith(b"\n"):
                self.cut_line = n
                return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                msg = f"is not UTF-8 text (byte {raw[e.start]:#04x} at character {e.start + 1}). {_NOT_A_TABLE}"
                raise self._fail("", msg, n) from None
            yield text[1:] if n == 1 and text.startswith("\ufeff") else text

    def _next(self) -> list[str] | None:
        start = self._csv.line_num + 1
        try:
            cells = next(self._csv, None)
        except csv.Error as e:
            raise self._fail("", f"is not valid CSV ({e}). {_NOT_A_TABLE}", start) from None
        self._line = start
        return cells

    def _check_header(self) -> None:
        h = self.header
        if h[0] != "point":
            raise self._fail(", column 1", f"must be 'point'. Got {h[0]!r} instead. {_NOT_A_TABLE}")
        for i, name in enumerate(h):
            if not name.strip() or name in h[:i]:
                what = "is empty" if not name.strip() else f"repeats the column {name!r}"
                raise self._fail(f", column {i + 1}", f"{what}: every column needs its own name. {_NOT_A_TABLE}")
        missing = [m for m in METRICS if m not in h and m not in OPTIONAL]
        if missing:
            raise self._fail("", f"lacks the columns {', '.join(missing)}: not a table of this version of 'dfsearch sweep'. {_NOT_A_TABLE}")
        self._converters = [(name, _converter(name) if name in _METRIC_SET else _memo(axis_value)) for name in h]
        self._absent = [m for m in METRICS if m not in h]  # read as empty cells

    def rows(self, seen: set[int] | None = None, keep: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """The rows in file order, typed (``None`` for an empty cell); each checked. ``seen``
        (filled with the point ids read) may be given to keep them after the reading; ``keep``
        names the columns each row holds (default all: a long table takes less memory with
        only the columns a command uses; every cell is checked either way)."""
        seen = set() if seen is None else seen
        wanted = None if keep is None else {"point", *keep}
        while (cells := self._next()) is not None:
            if cells == []:
                continue  # a blank line
            row = self._row(cells)
            if wanted is not None:
                row = {k: v for k, v in row.items() if k in wanted}
            if row["point"] in seen:
                first = self._first_line(row["point"])
                raise self._fail(", column 'point'", f"repeats point {row['point']} (already on line {first}): each point has one row.")
            seen.add(row["point"])
            yield row

    def _row(self, cells: list[str]) -> dict[str, Any]:
        if len(cells) != len(self.header):
            raise self._fail("", f"has {len(cells)} cells; the header has {len(self.header)} columns.")
        row = {}
        for (name, convert), text in zip(self._converters, cells):
            try:
                row[name] = convert(text)
            except ValueError as e:
                raise self._fail(f", column {name!r}", f"{e}. Got {text!r} instead.") from None
        row |= dict.fromkeys(self._absent)
        if row["final_s"] is not None:
            for name in _FEASIBLE_NEEDS:
                if row[name] is None:
                    raise self._fail(f", column {name!r}", "is empty, but final_s is set: a feasible row has its cost and power.")
        return row

    def _first_line(self, point: int) -> int:
        with TableReader(self.path) as again:
            for r in again.rows():
                if r["point"] == point:
                    return again._line
        return 0

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TableReader:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(SpecError):  # the error on its way says what went wrong
            self.close()


def _int_cell(text: str) -> int | None:
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()):
        raise ValueError("must be an integer >= 0")
    return int(text)


def _point_cell(text: str) -> int:
    if text == "":
        raise ValueError("must not be empty")
    return int(_int_cell(text))  # type: ignore[arg-type]


def _float_cell(text: str, positive: bool = False) -> float | None:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (positive and value <= 0):
        raise ValueError("must be a finite number" + (" > 0" if positive else "") + " or empty")
    return value


def _status_cell(text: str) -> str:
    if text not in _STATUSES:
        raise ValueError("must not be empty" if text == "" else f"must be one of {', '.join(_STATUSES)}")
    return text


def _plan_cell(text: str) -> str | None:
    """A plan kind's name (``dfsearch.plan.PLAN_KINDS``; the registry is open, so any word)."""
    if text and not (text.isascii() and text.replace("_", "").replace("-", "").isalnum()):
        raise ValueError("must be a plan kind's name (single, stages, partition, speculative) or empty")
    return text or None


def _bool_cell(text: str) -> bool | None:
    if text not in ("", "true", "false"):
        raise ValueError("must be true, false or empty")
    return None if text == "" else text == "true"


def _text_cell(text: str) -> str | None:
    return text if text != "" else None


def _memo(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """``convert`` remembering its first 4,096 values (an axis column of a long table repeats
    a few texts; the memory belongs to one reader's column and stays bounded)."""
    seen: dict[str, Any] = {}

    def cached(text: str) -> Any:
        if text in seen:
            return seen[text]
        value = convert(text)
        if len(seen) < 4096:
            seen[text] = value
        return value

    return cached


def _converter(column: str) -> Callable[[str], Any]:
    """How a cell of ``column`` is read (and checked)."""
    if column == "point":
        return _point_cell
    if column == "status":
        return _status_cell
    if column == "final_s":
        return lambda text: _float_cell(text, positive=True)
    if column == "plan":
        return _plan_cell
    if column == "meets_slos":
        return _bool_cell
    if column in INT_COLUMNS:
        return _int_cell
    if column in FLOAT_COLUMNS:
        return _float_cell
    return _text_cell if column in _METRIC_SET else axis_value


def axis_value(text: str) -> Any:
    """An axis cell back as a number where it reads as one (not nan or inf), else the word."""
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if math.isfinite(value):
            return value
    return {"true": True, "false": False}.get(text, text)


def read_table(path: str | Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The header and every complete row of a results table (checked: :class:`TableReader`;
    an empty file has no header and no rows).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "results.csv"
    >>> with TableWriter(p, columns(["accelerator"])) as w:
    ...     w.write({"point": 0, "accelerator": "h100", "status": "optimal", "final_s": 1.5,
    ...              "system_cost": 1.0, "system_power": 2.0})
    >>> header, rows = read_table(p)
    >>> rows[0]["accelerator"], rows[0]["final_s"], rows[0]["tp"]
    ('h100', 1.5, None)
    """
    with TableReader(path) as reader:
        return reader.header, list(reader.rows())
