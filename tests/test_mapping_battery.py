"""Mapping files fed to ``dfsearch eval``, mutated (issue 21, item 6; ``tests/_mutants.py``,
"Mapping files"): no traceback, exit 0, 1 or 2, exit 2 names the mapping file and a field
path, exit 1 names the kernel, edge or configuration involved and gives units.

CI runs a fixed stream of mutants of four sources (a training layer, a decode step, a
DFModel serving input, a whole model in pipeline pieces), each as the TOML that
``run --mapping-out`` writes and as the JSON of ``run --json``. The longer run over every
source of ``_mutants.MAPPING_SPECS`` is ``python benchmarks/mapping_battery.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import _mutants as M
import pytest

SPECS = [
    M.EXAMPLES / "gpt3_1.5B_a100x4.toml",
    M.EXAMPLES / "llm_decode.toml",
    M.DATA / "dfmodel" / "serving" / "llama3_8B_SN40L_decode_tp2_pp8" / "setup.txt",
    M.EXAMPLES / "gpt_pipeline.toml",
]
MUTANTS = 160


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[M.MappingSource]:
    out = M.mapping_sources(tmp_path_factory.mktemp("mapping_sources"), SPECS)
    assert len(out) == 2 * len(SPECS), "a source spec's run found no mapping"
    return out


def test_unmutated_mappings_evaluate(sources: list[M.MappingSource]) -> None:
    for src in sources:
        mutant = M.Mutant(M.Source(src.name, src.mapping, "mapping"), ["(unmutated)"], src.mapping.read_bytes())
        with tempfile.TemporaryDirectory() as d:
            rep = M.check_mapping_mutant(src, mutant, Path(d))
        assert rep.code == 0 and not rep.failures, (src.name, rep.failures, rep.output_head)


@pytest.mark.slow
def test_mutated_mappings_never_crash_and_explain_themselves(sources: list[M.MappingSource]) -> None:
    failures, codes = [], {0: 0, 1: 0, 2: 0}
    for i in range(MUTANTS):
        src, mutant = M.mapping_mutant_from_seed(sources, i)
        with tempfile.TemporaryDirectory() as d:
            rep = M.check_mapping_mutant(src, mutant, Path(d))
        codes[rep.code] = codes.get(rep.code, 0) + 1
        if rep.failures:
            failures.append(f"seed {i}: {rep.label}: {[str(f) for f in rep.failures]}")
    assert not failures, "\n".join(failures[:10])
    assert codes[2] > 0 and codes[0] > 0 and codes[1] > 0, codes  # the stream reaches every answer
