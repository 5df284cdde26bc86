"""dfsearch: solver-free search for dataflow mappings of large workloads on distributed
accelerator systems, with DFModel's performance model.

Importing this package is cheap: numba, optuna and scipy load only when a function that
needs them runs.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load", "replace", "run", "evaluate"]

_LAZY = {
    "load": ("dfsearch.loader", "load_spec"),
    "replace": ("dfsearch.loader", "replace_field"),
    "run": ("dfsearch.api", "run"),
    "evaluate": ("dfsearch.api", "evaluate"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'dfsearch' has no attribute {name!r}")
