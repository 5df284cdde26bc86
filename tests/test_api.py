"""The Python API: ``dfsearch.load/run/evaluate`` in every import order, ``dfsearch.replace``."""

from __future__ import annotations

import doctest
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import dfsearch
import dfsearch.loader
import dfsearch.spec
from dfsearch.errors import SpecError

EXAMPLES = Path(__file__).parent.parent / "dfsearch" / "examples"
FFT = EXAMPLES / "fft_1024gpu.toml"
GPT = EXAMPLES / "gpt3_1.5B_a100x4.toml"


def test_no_submodule_shadows_an_api_function():
    """``import dfsearch.X`` binds ``dfsearch.X`` to the module: no X may be an API name."""
    submodules = {m.name for m in pkgutil.iter_modules(dfsearch.__path__)}
    assert submodules.isdisjoint({"load", "run", "evaluate"}), submodules


IMPORT_ORDERS = [
    "from dfsearch import load, run, evaluate",
    "import dfsearch.loader, dfsearch.api\nfrom dfsearch import load, run, evaluate",
    (
        "import dfsearch.cli, dfsearch.mapping, dfsearch.cost.evaluate\n"
        "from dfsearch import load, run, evaluate"
    ),
    (
        "import dfsearch\nload, run, evaluate = dfsearch.load, dfsearch.run, dfsearch.evaluate\n"
        "import dfsearch.loader"
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("imports", IMPORT_ORDERS)
def test_api_functions_callable_in_every_import_order(imports):
    code = (
        f"{imports}\n"
        "import dfsearch.loader, dfsearch.api\n"
        "assert all(callable(f) for f in (load, run, evaluate))\n"
        f"spec = load({str(FFT)!r})\n"
        "print(spec.workload.kind.label)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "fft"


def test_doctests_of_replace():
    for module in (dfsearch.loader, dfsearch.spec):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__


@pytest.fixture(scope="module")
def gpt():
    return dfsearch.load(GPT)


def test_replace_returns_a_new_validated_spec(gpt):
    new = dfsearch.replace(gpt, "system.memory.dram_bw_GBps", 600)
    assert new.system.memory.dram_bw_GBps == 600.0
    assert gpt.system.memory.dram_bw_GBps != 600.0 or new is not gpt
    assert new.graph == gpt.graph and new.workload == gpt.workload
    assert dfsearch.replace(gpt, "search.seed", gpt.search.seed) == gpt


@pytest.mark.parametrize(
    "path",
    ["system.network.0.link_bw_GBps", "system.network[0].link_bw_GBps"],
)
def test_replace_list_items_by_index(gpt, path):
    assert dfsearch.replace(gpt, path, 123.5).system.network[0].link_bw_GBps == 123.5


def test_replace_enum_by_label_and_auto(gpt):
    assert (
        dfsearch.replace(gpt, "system.network[0].topology", "switch").system.network[0].topology.label
        == "switch"
    )
    assert dfsearch.replace(gpt, "execution.num_config", "auto").execution.num_config == dfsearch.spec.AUTO


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("system.memory.dram_bw_GBps", 0, "system.memory.dram_bw_GBps must be > 0"),
        ("system.memory.dram_bw_GBps", -25, "Got -25 instead"),
        ("system.memory.dram_bw_GBps", "fast", "system.memory.dram_bw_GBps must be a number"),
        ("system.num_chip", 2.5, "system.num_chip must be an integer. Got 2.5 instead."),
        ("system.network[0].topology", "star", "system.network[0].topology must be one of"),
        ("system.memory.dram_bw", 1, "did you mean 'dram_bw_GBps'"),
        ("system.memry.dram_bw_GBps", 1, "did you mean 'memory'"),
        ("system.network.7.size", 4, "system.network is a list of"),
        ("search.seed", -1, "search.seed"),
        ("", 1, "non-empty string"),
    ],
)
def test_replace_rejects_bad_values_with_field_path(gpt, path, value, expected):
    with pytest.raises(SpecError) as info:
        dfsearch.replace(gpt, path, value)
    assert expected in str(info.value)
    assert str(info.value).startswith("dfsearch.replace: ")


def test_zero_dram_bandwidth_is_a_spec_error_not_a_zero_division(gpt):
    with pytest.raises(SpecError, match="dram_bw_GBps"):
        dfsearch.replace(gpt, "system.memory.dram_bw_GBps", 0.0)


def test_a_spec_changed_with_dataclasses_replace_is_validated_again():
    """dataclasses.replace skips validation; run() and evaluate() check the Spec they get."""
    import dataclasses

    import dfsearch
    from dfsearch.errors import SpecError

    spec = dfsearch.load(EXAMPLES / "hpl_576gpu.toml")
    memory = dataclasses.replace(spec.system.memory, dram_bw_GBps=0.0)
    bad = dataclasses.replace(spec, system=dataclasses.replace(spec.system, memory=memory))
    with pytest.raises(SpecError, match=r"system\.memory\.dram_bw_GBps must be > 0"):
        dfsearch.run(bad)
