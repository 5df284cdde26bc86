"""Workload kinds: one module per kind, registered in ``WORKLOADS``.

Each kind module holds a frozen, stateless ``WorkloadModel`` (``base.py``) with the rules in
which the kinds differ; the input dataclass of its ``[workload]`` table lives in the data
layer, ``dfsearch.workload_specs`` (re-exported here and by ``dfsearch.spec``). Code
outside this package asks ``model_of(spec.workload)`` and never
branches on ``codes.WorkloadKind``; the pure-Python twin ``cost/reference.py`` (the test
oracle) keeps its own branches on purpose.

>>> from dfsearch.codes import WorkloadKind
>>> WORKLOADS[WorkloadKind.HPL].describe(HPLWorkload(n=1024, b=64))
'n 1024, block 64, 1 copies'
>>> [m.kind.label for m in WORKLOADS.values()]
['llm', 'dlrm', 'hpl', 'fft', 'llm_serving']
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from dfsearch.codes import MemoryModel, WorkloadKind
from dfsearch.workload_specs import (  # re-exported
    DLRMWorkload,
    FFTWorkload,
    HPLWorkload,
    LLMWorkload,
    ServingWorkload,
    Workload,
)
from dfsearch.workloads.base import Batch, Lowering, NetworkNeeds, NetworkTerms, WorkloadModel
from dfsearch.workloads.dlrm import DLRM
from dfsearch.workloads.fft import FFT
from dfsearch.workloads.hpl import HPL
from dfsearch.workloads.llm import LLM
from dfsearch.workloads.serving import Serving

if TYPE_CHECKING:
    from dfsearch.spec import Spec

__all__ = [
    "WORKLOADS",
    "Workload",
    "model_of",
    "model_named",
    "memory_model",
    "WorkloadModel",
    "Batch",
    "Lowering",
    "NetworkTerms",
    "NetworkNeeds",
    "LLMWorkload",
    "DLRMWorkload",
    "HPLWorkload",
    "FFTWorkload",
    "ServingWorkload",
]

#: workload kind -> its rules; the one table to extend when a kind is added (with its
#: dataclass in ``dfsearch.workload_specs.Workload``)
WORKLOADS: Mapping[WorkloadKind, WorkloadModel] = MappingProxyType({
    WorkloadKind.LLM: LLM(),
    WorkloadKind.DLRM: DLRM(),
    WorkloadKind.HPL: HPL(),
    WorkloadKind.FFT: FFT(),
    WorkloadKind.LLM_SERVING: Serving(),
})

def model_of(workload: Any) -> WorkloadModel:
    """The rules of a workload object's kind (``spec.workload``)."""
    return WORKLOADS[workload.kind]


def memory_model(spec: Spec) -> MemoryModel:
    """The memory model in effect for ``spec`` (``WorkloadModel.memory_model`` of its kind)."""
    return model_of(spec.workload).memory_model(spec)


def model_named(word: str) -> WorkloadModel | None:
    """The registered kind whose TOML word (``kind.label``) is ``word``, else None."""
    for m in WORKLOADS.values():
        if m.kind.label == word:
            return m
    return None
