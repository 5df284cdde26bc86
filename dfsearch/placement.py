"""Parallelism placements, kept under their old import path: they live in
``dfsearch.system.placement`` (the fabric package, ``dfsearch.system``)."""

from dfsearch.system.placement import (
    KINDS_OF_PARALLELISM,
    MAX_PARTS,
    Part,
    Placement,
    fixed_placement,
    has_searched_dims,
    parse_dim,
    placement_texts,
    placements,
    searched,
)

__all__ = [
    "KINDS_OF_PARALLELISM",
    "MAX_PARTS",
    "Part",
    "Placement",
    "searched",
    "has_searched_dims",
    "fixed_placement",
    "placement_texts",
    "placements",
    "parse_dim",
]
