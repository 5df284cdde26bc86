"""Presets: a catalogue of chips, fabrics and model shapes with a cited source for every
number, and their expansion into a spec's ordinary keys (docs/presets.md).

A spec may name them (``[system] preset``, ``[[system.network]] fabric``,
``[workload] model``); :func:`expand_presets` turns the names into the keys of
docs/spec.md before the spec is read. Imports only the standard library,
``dfsearch.errors`` and ``dfsearch.codes``.
"""

from __future__ import annotations

from dfsearch.presets.chips import CHIPS, ChipPreset, chip_named
from dfsearch.presets.expand import expand_presets
from dfsearch.presets.fabrics import FABRICS, FabricPreset, fabric_named
from dfsearch.presets.models import MODELS, ModelPreset, model_named
from dfsearch.presets.sourced import Source, Sourced

__all__ = [
    "CHIPS", "ChipPreset", "chip_named", "FABRICS", "FabricPreset", "fabric_named",
    "MODELS", "ModelPreset", "model_named", "Source", "Sourced", "expand_presets",
]
