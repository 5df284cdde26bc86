"""The network dimension kinds, kept under their old import path: they live in
``dfsearch.system.kinds`` (the fabric package, ``dfsearch.system``)."""

from dfsearch.system.kinds import (
    KINDS,
    MAX_GRID_DIMS,
    FullyConnected,
    Mesh,
    Ring,
    Switch,
    TopologyKind,
    allowed_network,
    dfmodel_variant,
    kinds_of,
    network_name,
)

__all__ = [
    "TopologyKind",
    "Ring",
    "Switch",
    "FullyConnected",
    "Mesh",
    "KINDS",
    "kinds_of",
    "network_name",
    "allowed_network",
    "dfmodel_variant",
    "MAX_GRID_DIMS",
]
