"""One serving step searched by dfsearch: the :data:`~dfsearch.capacity.mapped_steps.Measure`
that ``dfsearch serve`` uses (docs/serving.md, "Capacity search").

The base spec's data (a parsed ``llm_serving`` TOML without ``[serve]``) is copied with the
step's phase, batch and prompt length, ``output_len = 1`` (so a decode step reads the KV
cache at ``prompt_len + 1`` tokens per sequence), the search objective of the phase, and
the network pinned to the replica shape: the spec's first network dimension (the scale-up
fabric) with ``size = TP`` carrying ``tp``, then a switch of ``size = PP`` at the scale-out
bandwidth carrying ``pp``; and the DRAM capacity unlimited: one step at a fixed batch would
hold every sequence's whole context, where the simulation pages the KV cache into what the
weights leave (``mapped_steps.replica_model``). Then ``dfsearch.api.run`` searches its
optimised mapping.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsearch.api import run
from dfsearch.capacity.mapped_steps import Measured, StepPoint
from dfsearch.capacity.serve_spec import ChipOption
from dfsearch.codes import ServingPhase
from dfsearch.errors import InfeasibleError, SpecError
from dfsearch.loader import spec_from_data

__all__ = ["SpecMeasure", "chip_data"]


def chip_data(data: dict[str, Any], chip: ChipOption) -> dict[str, Any]:
    """The base spec's data with ``chip``'s accelerator and memory keys put in; a chip naming
    a preset takes the preset's chip in place of the spec's (its own keys still win)."""
    d = copy.deepcopy(data)
    system = d.setdefault("system", {})
    if chip.preset:
        system["preset"] = chip.preset
        system["accelerator"], system["memory"] = {}, {}
    for table in ("accelerator", "memory"):
        system.setdefault(table, {}).update(getattr(chip, table))
    return d


@dataclass(frozen=True)
class SpecMeasure:
    """Searches one step point on the base spec ``data`` with the point's chip (one of
    ``chips``; ``file`` names the spec in errors)."""

    data: dict[str, Any]
    file: str
    scale_out_bw_GBps: float
    chips: tuple[ChipOption, ...]

    def spec_data(self, point: StepPoint) -> dict[str, Any]:
        chip = next(c for c in self.chips if c.name == point.shape.chip)
        d = chip_data(self.data, chip)
        prefill = point.phase is ServingPhase.PREFILL
        d["workload"].update(phase=point.phase.label, batch_size=point.batch, prompt_len=point.prompt_len,
                             output_len=1)
        d.setdefault("search", {})["objective"] = "ttft" if prefill else "tpot"
        system = d["system"]
        first = dict(system["network"][0])
        first.update(size=point.shape.tp, parallelism="tp")
        system["network"] = [first, {"topology": "switch", "size": point.shape.pp,
                                     "link_bw_GBps": self.scale_out_bw_GBps, "parallelism": "pp"}]
        system["num_chip"] = point.shape.chips
        system["memory"]["dram_bytes"] = 0  # the KV cache's room is the simulation's (ReplicaModel)
        return d

    def __call__(self, point: StepPoint) -> Measured | str:
        try:
            spec = spec_from_data(self.spec_data(point), file=self.file, base_dir=Path(self.file).parent)
        except SpecError as e:  # e.g. more TP than heads: this shape cannot run the model
            return "; ".join(i.render() for i in e.issues)
        try:
            result = run(spec)
        except InfeasibleError as e:
            return str(e).splitlines()[1].strip(" -") if "\n" in str(e) else str(e)
        m = result.to_json()["serving"]  # the documented --json figures (docs/serving.md, "Metrics")
        return Measured(m["step_latency_s"], m["weight_bytes_per_chip"], m["kv_bytes_per_chip"])
