"""Every failure path ends cleanly: exit 2 with file, field path and value, never a traceback,
checked before any search runs; no input file overwritten; a read-only install runs."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dfsearch
import dfsearch.api
import dfsearch.io.files
import dfsearch.loader
from dfsearch.cli import app
from dfsearch.errors import SpecError
from dfsearch.io.dfmodel import load_dfmodel
from dfsearch.loader import replace_field
from dfsearch.mapping import mapping_to_toml

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
EXAMPLES = ROOT / "dfsearch" / "examples"
FFT = EXAMPLES / "fft_1024gpu.toml"
GPT = EXAMPLES / "gpt3_1.5B_a100x4.toml"
FFT_SETUP = DATA / "dfmodel" / "fft_1024gpu_sw_sw_8x128" / "setup.txt"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def assert_clean_exit_2(r, *needles: str) -> None:
    out = r.output + (r.stderr if r.stderr_bytes is not None else "")
    assert r.exit_code == 2, out
    assert "Traceback" not in out
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    for needle in needles:
        assert needle in out, (needle, out)


@pytest.fixture
def no_search(monkeypatch):
    """Any search or evaluation started by a command fails the test."""

    def forbidden(*args, **kwargs):
        pytest.fail("the command started working before checking its arguments")

    monkeypatch.setattr(dfsearch.api, "run", forbidden)
    monkeypatch.setattr(dfsearch.api, "evaluate", forbidden)


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.toml"
    shutil.copy(FFT, path)
    return path


# --------------------------------------------------------------------------- 1. output paths
@pytest.mark.parametrize(
    "args",
    [
        ["run", "{spec}", "--json", "{missing}/out.json"],
        ["run", "{spec}", "--mapping-out", "{missing}/m.toml"],
        ["eval", "{spec}", "--mapping", "{spec}", "--json", "{missing}/out.json"],
        ["validate", "{spec}", "--json", "{missing}/out.json"],
        ["check", "{spec}", "--json", "{missing}/out.json"],
        ["convert", str(FFT_SETUP), "-o", "{missing}/s.toml"],
        ["generate", "fft", "--length", "8", "-o", "{missing}/g.toml"],
    ],
)
def test_output_into_missing_folder_exit_2_before_work(args, spec, tmp_path, no_search):
    missing = tmp_path / "no_such_folder"
    r = invoke(*(a.format(spec=spec, missing=missing) for a in args))
    assert_clean_exit_2(r, "no_such_folder", "does not exist")
    assert not missing.exists()


@pytest.mark.parametrize("option", ["--json", "--mapping-out"])
def test_output_that_is_a_folder_exit_2(option, spec, tmp_path, no_search):
    r = invoke("run", spec, option, tmp_path)
    assert_clean_exit_2(r, option, "is a folder")


def test_json_to_stdout_is_not_a_path(spec, no_search):
    r = invoke("validate", spec, "--json", "-")
    assert r.exit_code == 0, r.output


def test_two_outputs_on_one_path_exit_2(spec, tmp_path, no_search):
    out = tmp_path / "out"
    r = invoke("run", spec, "--json", out, "--mapping-out", out)
    assert_clean_exit_2(r, "--mapping-out", "another output")


# --------------------------------------------------------------------------- 2. input overwrite
@pytest.mark.parametrize(
    "args",
    [
        ["run", "{spec}", "--mapping-out", "{spec}"],
        ["run", "{spec}", "--json", "{spec}"],
        ["run", "{spec}", "--json", "{alias}"],
        ["eval", "{spec}", "--mapping", "{spec}", "--json", "{spec}"],
        ["validate", "{spec}", "--json", "{spec}"],
        ["check", "{spec}", "--json", "{spec}"],
        ["convert", "{spec}", "-o", "{alias}"],
    ],
)
def test_refuse_to_overwrite_an_input(args, spec, no_search):
    before = spec.read_bytes()
    alias = spec.parent / "." / ".." / spec.parent.name / spec.name
    r = invoke(*(a.format(spec=spec, alias=alias) for a in args))
    assert_clean_exit_2(r, "input file", "refusing to overwrite")
    assert spec.read_bytes() == before


# --------------------------------------------------------------------------- 3. mapping values
@pytest.fixture(scope="module")
def gpt_mapping():
    s = dfsearch.load(GPT)
    config = {k.name: (1 if k.phase.label == "bwd" else 0) for k in s.graph.kernels}
    m = {"shape": [4], "micro_batch_size": 1, "num_tile": 512, "config": config, "sharding": {}}
    return s.graph.kernels[0].name, mapping_to_toml(m)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("config.{k}", '"two"'),
        ("config.{k}", "1.5"),
        ("config.{k}", "[1]"),
        ("config.{k}", "true"),
        ("config.{k}", "-1"),
        ("config.{k}", "{a = 1}"),
        ("config.{k}", "9223372036854775807"),
        ("config", '"x"'),
        ("shape", "[true]"),
        ("shape", "[100000000000000000000]"),
        ("shape", '"4"'),
        ("micro_batch_size", "1.0"),
        ("micro_batch_size", "100000000000000000"),
        ("num_tile", "9223372036854775807"),
        ("num_tile", "-3"),
        ("cores", "[1]"),
        ("cores.{k}.par_lane", "-1"),
        ("cores.{k}.par_lane", "10000000000000000000"),
        ("cores.{k}.par_stage", "false"),
        ("sharding.{k}", "3"),
    ],
)
def test_wrong_typed_mapping_values_exit_2(field, value, gpt_mapping, tmp_path):
    kernel, text = gpt_mapping
    field = field.format(k=kernel)
    lines = [ln for ln in text.splitlines() if not ln.startswith(("[", f"{kernel} ="))]
    head, _, rest = field.partition(".")
    if not rest:
        lines = [ln for ln in lines if not ln.startswith(f"{head} =")]
        lines.insert(1, f"{head} = {value}")
        body = "\n".join(lines)
    else:  # a table entry: write the table as dotted keys
        key = rest.replace(f"{kernel}.", f'"{kernel}".') if rest != kernel else f'"{kernel}"'
        others = [ln for ln in text.splitlines() if ln.startswith(("shape", "micro", "num_tile"))]
        config = [
            ln for ln in text.split("[config]")[1].split("[sharding]")[0].splitlines()[1:] if ln
        ]
        config = [f"config.{ln}" for ln in config if not ln.startswith(f"{kernel} =")]
        body = "\n".join(others + config + [f"{head}.{key} = {value}"])
        if head != "config":
            body += f"\nconfig.{kernel} = 0"
        if head == "cores":
            other = "par_stage" if rest.endswith("par_lane") else "par_lane"
            body += f"\ncores.{kernel}.{other} = 1"
    path = tmp_path / "m.toml"
    path.write_text(body + "\n")
    r = invoke("eval", GPT, "--mapping", path)
    assert_clean_exit_2(r, str(path), field)


def test_deeply_nested_json_mapping_exit_2(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"shape": ' + "[" * 5000 + "]" * 5000 + "}")
    r = invoke("eval", GPT, "--mapping", path)
    assert_clean_exit_2(r, str(path), "nested too deeply")


# --------------------------------------------------------------------------- 4. special files
def _run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dfsearch", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_dev_zero_as_spec_exit_2_at_once():
    r = _run_cli("validate", "/dev/zero")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "/dev/zero: is not a regular file" in r.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_special_file_as_graph_include_exit_2(target, tmp_path):
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
    text = FFT.read_text().replace('generator = "fft"', f'include = "{target}"')
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("r = "))
    path = tmp_path / "spec.toml"
    path.write_text(text)
    r = invoke("validate", path)
    assert_clean_exit_2(r, str(path), "graph.include", "is not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_as_spec_and_as_mapping_exit_2(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert_clean_exit_2(invoke("run", fifo), str(fifo), "is not a regular file")
    assert_clean_exit_2(invoke("eval", GPT, "--mapping", fifo), str(fifo), "not a regular file")


def test_too_large_input_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(dfsearch.io.files, "MAX_INPUT_MB", 1)
    path = tmp_path / "big.toml"
    path.write_text("# padding\n" * 200_000)
    assert_clean_exit_2(invoke("validate", path), str(path), "larger than 1 MB")


def test_setup_txt_read_through_the_same_helper(tmp_path):
    from dfsearch.io.dfmodel import load_dfmodel_file

    with pytest.raises(SpecError, match="is a directory"):
        load_dfmodel_file(tmp_path)


# --------------------------------------------------------------------------- 5. deep nesting
@pytest.mark.parametrize(
    "value", ["[" * 500 + "]" * 500, "{a = " * 500 + "1" + "}" * 500], ids=["arrays", "tables"]
)
def test_deeply_nested_toml_exit_2(value, tmp_path):
    path = tmp_path / "deep.toml"
    text = FFT.read_text() + f"\n[nested]\nx = {value}\n"
    path.write_text(text)
    line = len(text.splitlines())
    r = invoke("validate", path)
    assert_clean_exit_2(r, str(path), "nested too deeply")
    assert f"At line {line} (key 'x')" in r.output  # where, since there is no field path


def test_huge_integer_literal_exit_2(tmp_path):
    path = tmp_path / "digits.toml"
    path.write_text("x = 1" + "0" * 5000 + "\n")
    assert_clean_exit_2(invoke("validate", path), str(path), "invalid TOML")


def test_deeply_nested_setup_txt_exit_2(tmp_path):
    deep = "kernels { " + "x { " * 20000 + "}" * 20000 + " }"
    path = tmp_path / "setup.txt"
    path.write_text(
        FFT_SETUP.read_text().replace("dataflow_graph {", "dataflow_graph { " + deep, 1)
    )
    assert_clean_exit_2(invoke("validate", path), str(path), "dataflow_graph.kernels[0]")


# --------------------------------------------------------------------------- 6. huge kernel id
def test_huge_kernel_id_with_dangling_connection_is_cheap():
    text = FFT_SETUP.read_text().replace("id: 1\n", "id: 100000000\n", 1)
    tracemalloc.start()
    try:
        with pytest.raises(SpecError) as info:
            load_dfmodel(text, file="setup.txt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "setup.txt" in message and "connections[0].startIdx" in message
    assert "refers to kernel id 1" in message and "100000000" in message
    assert peak < 50_000_000, f"{peak / 1e6:.0f} MB to report a dangling connection"


# --------------------------------------------------------------------------- 7. read-only install
_PROBE = """from dfsearch.cost._jit import jit


@jit
def twice(x):
    return 2 * x
"""


def _read_only_copy(root: Path) -> Path:
    """A copy of the package where no folder can hold a cache, even for root: every
    ``__pycache__`` is a regular file, and the folders are read-only."""
    pkg = root / "site" / "dfsearch"
    shutil.copytree(ROOT / "dfsearch", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "cost" / "_probe.py").write_text(_PROBE)
    for folder in [pkg, *(p for p in pkg.rglob("*") if p.is_dir())]:
        (folder / "__pycache__").write_text("")
    return root / "site"


def _set_writable(path: Path, writable: bool) -> None:
    for p in [path, *path.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(
            mode | stat.S_IWUSR
            if writable
            else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        )


@pytest.mark.slow
@pytest.mark.parametrize("home_writable", [False, True])
def test_read_only_install_runs(home_writable, tmp_path):
    site = _read_only_copy(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    if not home_writable:
        (home / ".cache").write_text("")  # no ~/.cache folder can be made, even by root
    _set_writable(site, False)
    if not home_writable:
        _set_writable(home, False)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env |= {"HOME": str(home), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    code = (
        "import dfsearch, dfsearch.cost.evaluate, dfsearch.search._dp\n"
        f"assert dfsearch.__file__.startswith({str(site)!r})\n"
        "from dfsearch.cost._probe import twice\n"
        "print(twice(21))\n"
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env,
            cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip
    finally:
        _set_writable(tmp_path, True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.strip() == "42"
    cached = list((home / ".cache" / "numba").rglob("*.nbi")) if home_writable else []
    assert bool(cached) == home_writable  # the user cache folder is the fallback


# --------------------------------------------------------------------------- 8. seeds
@pytest.mark.parametrize("seed", [-1, 2**32, 2**40])
def test_spec_seed_out_of_range_exit_2(seed, tmp_path, no_search):
    path = tmp_path / "spec.toml"
    path.write_text(FFT.read_text() + f"\n[search]\nseed = {seed}\n")
    r = invoke("run", path)
    assert_clean_exit_2(
        r, str(path), f"search.seed must be an integer in [0, 2**32 - 1]. Got {seed}"
    )


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_cli_seed_out_of_range_exit_2(command, seed, spec, no_search):
    r = invoke(command, spec, "--seed", seed)
    assert_clean_exit_2(r, f"--seed must be an integer in [0, 2**32 - 1]. Got {seed} instead.")


def test_largest_seed_is_valid(spec):
    assert replace_field(dfsearch.load(spec), "search.seed", 2**32 - 1).search.seed == 2**32 - 1
    with pytest.raises(SpecError, match=r"search\.seed must be an integer in \[0, 2\*\*32 - 1\]"):
        replace_field(dfsearch.load(spec), "search.seed", 2**32)
