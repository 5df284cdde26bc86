"""What a results folder was swept from: the study's name, file, description, workload and
axes, kept as ``DIR/study.json`` by ``dfsearch sweep`` so that ``dfsearch plot`` and
``dfsearch report`` can title their figures with the workload and list the axes without the
study file. A folder without it (written by an older version, or by ``runner.sweep`` called
from Python) still plots and reports; the titles then name the folder instead.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dfsearch.errors import Issue, SpecError
from dfsearch.loader import parse_toml, read_text
from dfsearch.study.names import workload_name
from dfsearch.workloads import model_of

__all__ = ["INFO_NAME", "StudyInfo", "info_of", "write_info", "read_info"]

INFO_NAME = "study.json"


@dataclass(frozen=True, slots=True)
class StudyInfo:
    """A study as its figures and report name it."""

    name: str
    file: str
    description: str
    workload: str  #: short: ``LLM training, 1.0T parameters``
    workload_detail: str  #: the run report's line: ``LLM: hidden 25600, ...``
    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    combine: str
    filters: tuple[str, ...]
    points: int  #: before filters

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["axes"] = [{"name": n, "values": list(v)} for n, v in self.axes]
        data["filters"] = list(self.filters)
        return data


def info_of(study: Any) -> StudyInfo:
    """The info of a loaded study (``dfsearch.study.study.Study``): the workload is its first
    kept point's (only its kind when an axis changes the workload)."""
    first = next(iter(study.iter_points()), None)
    spec = study.point_spec(first) if first is not None else None
    wl = spec.workload if spec is not None else None
    varies = any(a.name.startswith("workload.") for a in study.axes)
    short = workload_name(wl) if wl is not None else "workload"
    if varies and wl is not None:
        short = short.split(",", 1)[0]
    detail = f"{wl.kind.label.upper()}: {model_of(wl).describe(wl)}" if wl is not None else ""
    try:
        head = parse_toml(read_text(Path(study.file)), study.file).get("study", {})
    except (SpecError, OSError):
        head = {}
    description = head.get("description") if isinstance(head.get("description"), str) else ""
    return StudyInfo(
        name=study.name, file=str(study.file), description=description, workload=short, workload_detail=detail,
        axes=tuple((a.name, tuple(a.values)) for a in study.axes), combine=study.combine,
        filters=tuple(c.text for c in study.filters), points=study.size(),
    )  # fmt: skip


def write_info(folder: str | Path, info: StudyInfo) -> None:
    """Write ``DIR/study.json`` (sorted keys: the same study writes the same file).

    Raises
    ------
    SpecError
        The file cannot be written (exit 2).
    """
    path = Path(folder) / INFO_NAME
    try:
        path.write_text(json.dumps(info.to_json(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as e:
        raise SpecError(Issue("-o", f"{path}: cannot write: {e.strerror or e}.")) from None


def read_info(folder: str | Path) -> StudyInfo | None:
    """The info in ``DIR/study.json``, or None when there is none or it cannot be read (the
    figures then do without it)."""
    path = Path(folder) / INFO_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return StudyInfo(
            name=str(data["name"]), file=str(data["file"]), description=str(data.get("description", "")),
            workload=str(data["workload"]), workload_detail=str(data.get("workload_detail", "")),
            axes=tuple((str(a["name"]), tuple(a["values"])) for a in data["axes"]),
            combine=str(data.get("combine", "cross")), filters=tuple(str(f) for f in data.get("filters", [])),
            points=int(data.get("points", 0)),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None
