"""How compute, memory and network time of one configuration combine into its II.

``combine_overlap`` is the one definition of the ``codes.Overlap`` rule. It is plain Python:
``dfsearch.cost.evaluate`` compiles it (``evaluate.combine_overlap``) for the jitted
evaluator and searches, while ``search/outer.py`` and the reference twin call it as it is.
The CP-SAT model (``search/exact.py``) states the same rule as linear constraints.
Importing this module does not import numba.

>>> from dfsearch.codes import Overlap
>>> [combine_overlap(3.0, 2.0, 1.0, o) for o in Overlap]
[3.0, 4.0, 6.0]
"""

from __future__ import annotations

from dfsearch.codes import Overlap

__all__ = ["combine_overlap"]


def combine_overlap(tc: float, tm: float, tn: float, overlap: int) -> float:
    """II of a configuration from its compute ``tc``, memory ``tm`` and network ``tn`` time.

    ``overlap`` is a ``codes.Overlap`` value: PERFECT max(tc, tm, tn), COMPUTE_MEMORY
    max(tc, tm) + tn, NONE tc + tm + tn.
    """
    if overlap == Overlap.PERFECT:
        return max(tc, tm, tn)
    if overlap == Overlap.COMPUTE_MEMORY:
        return max(tc, tm) + tn
    return tc + tm + tn
