"""Regression battery, CI subset (issue 9, item 8).

Hypothesis mutates every example and DFModel input (``tests/_mutants.py``), derandomized so CI
sees the same ~170 mutants on every run, and runs the CLI in-process on each. For every mutant:

* the exit code is 0, 1 or 2 and no exception escapes (no traceback);
* exit 2 names the file and a field path;
* exit 0: ``search.lower_bound_s <= final_s``, and ``eval`` of the ``--mapping-out`` file gives
  the same ``final_s`` (relative 1e-12).

A handful of plausible mutants are also run twice in two separate processes: the JSON must be
identical except timing fields. The nightly mode (thousands of mutants, subprocesses with a
timeout so hangs are seen) is ``python benchmarks/battery.py --mutants 2000``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import _mutants as M
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

#: every mutant runs the whole CLI: the quick subset (-m "not slow") leaves the battery out
pytestmark = pytest.mark.slow

SHIPPED = {s.name: s for s in M.shipped_sources()}
SOURCE_IDS = sorted(SHIPPED) + ["converted/gpt3_1.5B.toml"]
EXAMPLES_PER_SOURCE = 12

BATTERY_SETTINGS = settings(
    max_examples=EXAMPLES_PER_SOURCE,
    derandomize=True,
    deadline=None,
    database=None,
    # no shrinking: each mutant is already 1-3 named mutations, and shrinking reruns the CLI
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    """Compile (or load) the evaluator before the first mutant: a run's CPU seconds, checked
    against ``HANG_S``, then count its own work, not a first compilation."""
    from dfsearch.search.warmup import warm_up

    warm_up()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("battery")


@pytest.fixture(scope="module")
def sources(workdir: Path) -> dict[str, M.Source]:
    out = dict(SHIPPED)
    conv = M.converted_source(workdir)
    if conv is not None:
        out[conv.name] = conv
    return out


def _source(sources: dict[str, M.Source], name: str) -> M.Source:
    if name not in sources:
        pytest.fail(f"{name}: could not be prepared ('dfsearch convert' of {M.CONVERT_FROM} failed)")
    return sources[name]


def _explain(rep: M.Report) -> str:
    lines = [f"mutant {rep.label}", f"exit {rep.code} in {rep.seconds:.2f} s"]
    lines += [f"  {f}" for f in rep.failures]
    lines += ["output:"] + ["  | " + ln for ln in rep.output_head.splitlines()]
    return "\n".join(lines)


@pytest.mark.parametrize("name", SOURCE_IDS)
def test_unmutated_source(name: str, sources: dict[str, M.Source]) -> None:
    """Baseline: the shipped input itself passes every check (exit 0 with round trip, or a clear exit 2)."""
    src = _source(sources, name)
    with tempfile.TemporaryDirectory() as d:
        rep = M.check_mutant(M.Mutant(src, ["(unmutated)"], src.path.read_bytes()), Path(d))
    assert not rep.failures, _explain(rep)


@pytest.mark.parametrize("name", SOURCE_IDS)
@BATTERY_SETTINGS
@given(data=st.data())
def test_mutant(name: str, sources: dict[str, M.Source], data: st.DataObject) -> None:
    src = _source(sources, name)
    mutant = M.make_mutant(src, M.HypothesisChooser(data))
    note(mutant.label)
    with tempfile.TemporaryDirectory() as d:
        rep = M.check_mutant(mutant, Path(d))
    assert rep.code in (0, 1, 2) or rep.failures, _explain(rep)
    assert not rep.failures, _explain(rep)


# Determinism across processes: a few plausible (usually feasible) mutants, each run twice in
# two fresh subprocesses.
DETERMINISM_CASES = [
    ("examples/gpt3_1.5B_a100x4.toml", 1),
    ("examples/llm_decode.toml", 2),
    ("dfmodel/fft_1024gpu_sw_sw_8x128/setup.txt", 3),
]


@pytest.mark.parametrize(("name", "seed"), DETERMINISM_CASES)
def test_determinism_across_processes(name: str, seed: int, sources: dict[str, M.Source]) -> None:
    mutant = M.make_gentle_mutant(_source(sources, name), M.RandomChooser(seed))
    with tempfile.TemporaryDirectory() as d:
        rep = M.check_mutant(mutant, Path(d), M.run_subprocess, roundtrip=False, determinism=True)
    assert not rep.failures, _explain(rep)
