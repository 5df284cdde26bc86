"""Shape-only network terms, kept under their old import path: they live in
``dfsearch.system.ratios`` and are asked of the ``Fabric`` (``dfsearch.system.fabric``)."""

from dfsearch.system.ratios import (
    ExpertRatios,
    GroupLinks,
    Groups,
    LLMRatios,
    a2a_factors,
    expert_parallelism,
    expert_ratios,
    experts_per_chip,
    group_links,
    groups,
    hbd_reduce_ratio,
    hpl_grid,
    is_grid,
    llm_ratios,
    placement_key,
)

__all__ = [
    "Groups",
    "groups",
    "GroupLinks",
    "group_links",
    "placement_key",
    "llm_ratios",
    "LLMRatios",
    "hbd_reduce_ratio",
    "is_grid",
    "a2a_factors",
    "hpl_grid",
    "ExpertRatios",
    "expert_parallelism",
    "expert_ratios",
    "experts_per_chip",
]
