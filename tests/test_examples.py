"""The shipped examples (dfsearch/examples/*.toml) and the example in docs/spec.md are valid,
and each example translated from a DFModel case describes that case."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

import dfsearch
from dfsearch.codes import Equations, MemoryModel, RunStatus
from dfsearch.io.toml_writer import spec_to_toml
from dfsearch.loader import load_spec, load_toml_spec
from dfsearch.spec import Graph, Spec
from dfsearch.validate import validate_spec
from dfsearch.workloads import memory_model

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = Path(dfsearch.__file__).parent / "examples"
CASES = Path(__file__).parent / "data" / "dfmodel"

EXPECTED = {
    "gpt3_1T_sn30.toml",
    "gpt3_1.5B_a100x4.toml",
    "dlrm_a100x128.toml",
    "hpl_576gpu.toml",
    "fft_1024gpu.toml",
    "llm_decode.toml",
    "llama3_8b_layer.toml",
    "moe_layer.toml",
    "llama3_8b_decode_sn40l.toml",
    "llama3_405b_specdec_sn40l.toml",
    "gpt_whole_model.toml",
    "gpt_pipeline.toml",
}

# example -> (DFModel case folder, graph executions per run, "Workload FLOP" DFModel printed)
# Executions per run: LLM layers x global batch, DLRM global batch, HPL and FFT one.
FROM_DFMODEL = {
    "gpt3_1T_sn30": ("readme_gpt3_1T_sn30_1024chips_r_r_8x128", 128 * 3072, 3.85072240461978e19),
    "gpt3_1.5B_a100x4": ("gpt3_1.5B_seq1024_a100x4_ring_tp4", 24 * 8192, 6.588617271017472e16),
    "dlrm_a100x128": ("dlrm_A_128gpu_r_fc_8x16", 128000000, 8.957952e19),
    "hpl_576gpu": ("hpl_circe_576gpu_sw_sw_24x24_cu09_legacy", 1, 192070937477120.0),
    "fft_1024gpu": ("fft_1024gpu_sw_sw_8x128", 1, 682898292614256.0),
}


def _examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.toml"))


def test_all_examples_are_shipped() -> None:
    assert {p.name for p in _examples()} == EXPECTED


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.stem)
def test_example_has_a_proven_optimal_mapping(path: Path) -> None:
    """Every shipped example runs as shipped: feasible (its memory fits under the memory
    model it uses) and proven optimal."""
    result = dfsearch.run(path)
    assert result.status is RunStatus.OPTIMAL, result.status
    assert result.evaluation.dram_bytes <= load_spec(path).system.memory.dram_bytes


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.stem)
def test_example_is_valid(path: Path) -> None:
    spec = load_spec(path)
    assert validate_spec(spec) == []
    # and survives being written back
    assert load_toml_spec(spec_to_toml(spec), file=str(path), base_dir=path.parent) == spec


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.stem)
def test_example_explains_itself(path: Path) -> None:
    """For a first-time user: a comment block opens the file, and every kind of table has a
    comment within the few lines before its first occurrence."""
    lines = path.read_text().splitlines()
    assert lines[0].startswith("#")
    first: dict[str, int] = {}
    for i, ln in enumerate(lines):
        if ln.startswith("["):
            first.setdefault(ln, i)
    bare = [h for h, i in first.items() if not any(x.startswith("#") for x in lines[max(0, i - 6):i])]
    assert bare == []


@pytest.mark.parametrize("name", sorted(FROM_DFMODEL))
def test_example_workload_flop_matches_dfmodel_log(name: str) -> None:
    _, executions, printed = FROM_DFMODEL[name]
    spec = load_spec(EXAMPLES / f"{name}.toml")
    assert spec.graph.flop * executions == pytest.approx(printed, rel=1e-12)


def _close(ours: object, theirs: object, where: str) -> None:
    """Equal, except floats, which DFModel's importer rounds to float32."""
    if dataclasses.is_dataclass(ours):
        assert type(ours) is type(theirs), where
        for f in dataclasses.fields(ours):
            _close(getattr(ours, f.name), getattr(theirs, f.name), f"{where}.{f.name}")
    elif isinstance(ours, tuple):
        assert isinstance(theirs, tuple) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _close(a, b, f"{where}[{i}]")
    elif isinstance(ours, float) and not isinstance(ours, bool):
        assert math.isclose(ours, theirs, rel_tol=1e-6, abs_tol=0.0), (where, ours, theirs)
    else:
        assert ours == theirs, (where, ours, theirs)


def _without_training_annotations(graph: Graph) -> Graph:
    kernels = tuple(
        dataclasses.replace(k, saved_bytes=None, selective_recompute=False) for k in graph.kernels
    )
    return dataclasses.replace(graph, kernels=kernels)


@pytest.mark.parametrize("name", sorted(FROM_DFMODEL))
def test_example_is_the_dfmodel_case(name: str) -> None:
    case = CASES / FROM_DFMODEL[name][0] / "setup.txt"
    if not case.exists():
        pytest.skip(f"{case} not in tests/data")
    ours = load_spec(EXAMPLES / f"{name}.toml")
    theirs = load_spec(case)
    # generator output equals the graph in the setup.txt, but for the training-memory
    # annotations of the forward kernels, which DFModel's format has no field for
    assert _without_training_annotations(ours.graph) == theirs.graph
    # DFModel's DRAM check: memory_model "dfmodel" (given, or what "auto" means for this kind)
    assert memory_model(ours) is memory_model(theirs) is MemoryModel.DFMODEL
    ex_ours, ex_theirs = ours.execution, theirs.execution
    if name == "gpt3_1T_sn30":
        # The README case is v1 with the doubled all-reduce stated explicitly
        assert ex_ours.equations is Equations.V1 and ex_ours.separate_rs_ag_for_ar
    for part in ("workload", "system", "cost"):
        _close(getattr(ours, part), getattr(theirs, part), part)
    _close(ex_ours, ex_theirs, "execution")


def test_builtin_example_keeps_the_doubled_all_reduce() -> None:
    spec = load_spec(EXAMPLES / "gpt3_1T_sn30.toml")
    assert spec.execution.separate_rs_ag_for_ar is True
    assert spec.system.variant == "r_r" and spec.system.num_chip == 1024


def test_decode_example_tp_matches_network() -> None:
    spec = load_spec(EXAMPLES / "llm_decode.toml")
    tp = next(d.size for d in spec.system.network if d.parallelism.label == "tp")
    # llm-decode divides streamed weights by tp: Q streams h*h*word/tp bytes
    q = next(k for k in spec.graph.kernels if k.name == "Q")
    w = spec.workload
    assert q.memory_bytes == w.hidden_dim * w.hidden_dim * spec.execution.word_bytes / tp


def _doc_example() -> str:
    text = (ROOT / "docs" / "spec.md").read_text()
    section = text.split("## A complete example", 1)[1]
    match = re.search(r"```toml\n(.*?)```", section, re.S)
    assert match
    return match.group(1)


def test_spec_md_complete_example_is_valid() -> None:
    spec: Spec = load_toml_spec(_doc_example(), file="docs/spec.md", base_dir=ROOT)
    assert validate_spec(spec) == []
    assert [k.name for k in spec.graph.kernels] == ["LayerNorm", "FFN0", "FFN1"]


def test_spec_md_documents_every_key() -> None:
    """Every field of the spec dataclasses appears as a `key` in docs/spec.md."""
    from dfsearch import spec as S

    doc = (ROOT / "docs" / "spec.md").read_text()
    classes = [S.Kernel, S.Connection, S.System, S.Accelerator, S.Memory, S.NetworkDim, S.Cost,
               S.Execution, S.SearchSettings, S.LLMWorkload, S.DLRMWorkload, S.HPLWorkload,
               S.FFTWorkload]
    missing = [
        f"{c.__name__}.{f.name}"
        for c in classes
        for f in dataclasses.fields(c)
        if f"`{f.name}`" not in doc and f"[system.{f.name}]" not in doc
    ]
    assert missing == []
