"""Workload kinds: one module per kind, registered in ``WORKLOADS``.

Each kind module holds the input dataclass of its ``[workload]`` table (re-exported by
``dfsearch.spec``) and a frozen, stateless ``WorkloadModel`` (``base.py``) with the rules in
which the kinds differ. Code outside this package asks ``model_of(spec.workload)`` and never
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
from typing import Any

from dfsearch.codes import WorkloadKind
from dfsearch.workloads.base import Batch, Lowering, NetworkNeeds, NetworkTerms, WorkloadModel
from dfsearch.workloads.dlrm import DLRM, DLRMWorkload
from dfsearch.workloads.fft import FFT, FFTWorkload
from dfsearch.workloads.hpl import HPL, HPLWorkload
from dfsearch.workloads.llm import LLM, LLMWorkload
from dfsearch.workloads.serving import Serving, ServingWorkload

__all__ = [
    "WORKLOADS",
    "Workload",
    "model_of",
    "model_named",
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
#: dataclass in ``Workload`` below)
WORKLOADS: Mapping[WorkloadKind, WorkloadModel] = MappingProxyType({
    WorkloadKind.LLM: LLM(),
    WorkloadKind.DLRM: DLRM(),
    WorkloadKind.HPL: HPL(),
    WorkloadKind.FFT: FFT(),
    WorkloadKind.LLM_SERVING: Serving(),
})

#: the ``[workload]`` table of a spec: one dataclass per registered kind
Workload = LLMWorkload | DLRMWorkload | HPLWorkload | FFTWorkload | ServingWorkload


def model_of(workload: Any) -> WorkloadModel:
    """The rules of a workload object's kind (``spec.workload``)."""
    return WORKLOADS[workload.kind]


def model_named(word: str) -> WorkloadModel | None:
    """The registered kind whose TOML word (``kind.label``) is ``word``, else None."""
    for m in WORKLOADS.values():
        if m.kind.label == word:
            return m
    return None
