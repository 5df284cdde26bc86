"""A number with the public source it was read from (the presets' one unit of data).

>>> hbm = Sourced(3350, "GB/s", HOPPER_BLOG, "3.35 TB/s")
>>> hbm.value, hbm.in_base()
(3350, 3350.0)
>>> Sourced(95, "GiB", HOPPER_BLOG, "95").in_base()
102005473280.0
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["Source", "Sourced", "UNIT_SCALE", "HOPPER_BLOG", "DERIVED"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a number was read: a citation and its address."""

    citation: str
    url: str


@dataclass(frozen=True, slots=True)
class Sourced:
    """A published number: its value in ``unit`` as the source prints it, the source and the
    text it was read from (``quote``). ``value`` None: not found in the sources read
    (``note`` says what is known). A number computed from published ones has ``note``
    starting with ``DERIVED`` and gives the formula; its ``source`` is its inputs'."""

    value: float | None
    unit: str
    source: Source | None
    quote: str
    note: str = ""

    def in_base(self) -> float | None:
        """The value in the model's base unit of its kind (bytes, GB/s, GHz, ns, W,
        GFLOP/s); None when not published."""
        if self.value is None:
            return None
        return float(self.value) * UNIT_SCALE[self.unit]


#: a source unit -> factor to the model's base unit (bytes, GB/s, GHz, ns, W, GFLOP/s, us)
UNIT_SCALE = MappingProxyType({
    "GB": 1e9,
    "GiB": 2.0**30,
    "MiB": 2.0**20,
    "KiB": 2.0**10,
    "GB/s": 1.0,
    "Gb/s": 1.0 / 8.0,
    "MHz": 1e-3,
    "GHz": 1.0,
    "ns": 1.0,
    "us": 1.0,
    "W": 1.0,
    "TFLOP/s": 1e3,
    "count": 1.0,
    "fraction": 1.0,
    "B": 1.0,
})

#: prefix of ``Sourced.note`` for numbers computed from published ones
DERIVED = "DERIVED"

HOPPER_BLOG = Source(
    "NVIDIA Technical Blog, 'NVIDIA Hopper Architecture In-Depth' (2022), comparison table "
    "of A100 and H100",
    "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/",
)
