"""A chip in the model's terms: peak = 2 x systolic_width x systolic_height x cores x freq.

``cores`` and ``freq_GHz`` are the chip's compute units and clock; the systolic array of one
core is what makes the peak of the chosen precision at that clock: w x h = round(peak /
(2 x cores x freq)), split into the most nearly square pair of factors (docs/presets.md,
"How a chip becomes an accelerator").

>>> systolic_shape(989.4, 132, 1.83)   # H100 BF16: 2048 MACs per SM and clock
(32, 64)
>>> systolic_shape(1978.9, 132, 1.83)  # H100 FP8
(64, 64)
"""

from __future__ import annotations

import math

__all__ = ["systolic_shape", "peak_tflops"]


def systolic_shape(tflops: float, cores: int, freq_GHz: float) -> tuple[int, int]:
    """(width, height) of one core's array giving ``tflops`` with ``cores`` at ``freq_GHz``;
    width <= height, width the largest factor of the product not above its square root."""
    macs = max(1, round(tflops * 1e3 / (2.0 * cores * freq_GHz)))
    width = max(d for d in range(1, math.isqrt(macs) + 1) if macs % d == 0)
    return width, macs // width


def peak_tflops(width: int, height: int, cores: int, freq_GHz: float) -> float:
    """The model's peak (TFLOP/s) of an accelerator: 2 x width x height x cores x freq."""
    return 2.0 * width * height * cores * freq_GHz / 1e3
