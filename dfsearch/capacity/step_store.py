"""A file that keeps searched step points between ``dfsearch serve`` runs
(``--step-cache PATH``; docs/serving.md, "Capacity search").

JSON: ``{"format": "dfsearch-step-cache", "version": 1, "specs": {digest: [point, ...]}}``,
each point ``[phase, tp, pp, chip, batch, prompt_len, result]`` with ``result`` either
``[seconds, weight_bytes_per_chip, kv_bytes_per_chip]`` or the reason no mapping fits. The
digest covers the base spec, the chips and the scale-out bandwidth (``command.answer``), so
a changed spec finds none of its old points. Written whole to a temporary file, then
renamed over the old one.

>>> import tempfile, pathlib
>>> from dfsearch.codes import ServingPhase
>>> f = pathlib.Path(tempfile.mkdtemp()) / "steps.json"
>>> p = StepPoint(ServingPhase.DECODE, Shape(2, 1), 8, 1023)
>>> save(f, "abc", {p: Measured(0.01, 1e9, 2e6)})
>>> load(f, "abc") == {p: Measured(0.01, 1e9, 2e6)}, load(f, "other")
(True, {})
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dfsearch.capacity.mapped_steps import Measured, Shape, StepPoint
from dfsearch.codes import ServingPhase
from dfsearch.errors import SpecError

__all__ = ["load", "save"]

_FORMAT = "dfsearch-step-cache"


def _read(path: Path) -> dict:
    if not path.exists():
        return {"format": _FORMAT, "version": 1, "specs": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SpecError(f"is not a step cache of dfsearch serve ({e}).", file=str(path)) from None
    if not (isinstance(data, dict) and data.get("format") == _FORMAT and data.get("version") == 1
            and isinstance(data.get("specs"), dict)):
        raise SpecError(f'is not a step cache of dfsearch serve (no "format": "{_FORMAT}", version 1).',
                        file=str(path))
    return data


def load(path: Path, digest: str) -> dict[StepPoint, Measured | str]:
    """The points of the spec ``digest`` in the file (none if it does not exist)."""
    out = {}
    for phase, tp, pp, chip, batch, prompt, result in _read(path)["specs"].get(digest, []):
        point = StepPoint(ServingPhase.from_label(phase), Shape(tp, pp, chip), batch, prompt)
        out[point] = result if isinstance(result, str) else Measured(*result)
    return out


def save(path: Path, digest: str, entries: dict[StepPoint, Measured | str]) -> None:
    """Put the points of ``digest`` in the file, keeping other specs' points."""
    data = _read(path)
    data["specs"][digest] = [
        [p.phase.label, p.shape.tp, p.shape.pp, p.shape.chip, p.batch, p.prompt_len,
         m if isinstance(m, str) else [m.seconds, m.weight_bytes_per_chip, m.kv_bytes_per_chip]]
        for p, m in sorted(entries.items(), key=lambda e: (e[0].phase, e[0].shape, e[0].batch, e[0].prompt_len))]
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        raise SpecError(f"cannot write: {e.strerror or e}.", file=str(path)) from None
