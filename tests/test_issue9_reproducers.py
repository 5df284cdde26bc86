"""The concrete reproducers of issue 9 ("Trustworthy answers"), one test each.

Each test asserts the behaviour the issue asks for (exit codes 0 / 1 / 2, a message naming the
file and the field path, no traceback, no hang), not whatever the code did when the issue was
filed. Only the CLI (``dfsearch.cli.app`` in-process, or ``python -m dfsearch`` in a subprocess
where a hang, a signal or a fresh interpreter matters) and the package's public names
(``dfsearch.load`` / ``run`` / ``evaluate``) are used.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import _mutants as M
import pytest

from _clock import children_cpu_s, load_factor

EXAMPLES = M.EXAMPLES
GPT_SMALL = EXAMPLES / "gpt3_1.5B_a100x4.toml"
GPT_1T = EXAMPLES / "gpt3_1T_sn30.toml"
SETUP_SMALL = M.DATA / "dfmodel" / "gpt3_1.5B_seq1024_a100x4_ring_tp4" / "setup.txt"
STATUSES = {"optimal", "feasible_not_proven", "stopped_by_limit", "infeasible"}


def cli(*args: str) -> M.Outcome:
    """Run the CLI in-process; fail on an escaping exception (= a traceback for a user)."""
    out = M.run_inprocess([str(a) for a in args])
    assert out.exception is None, f"dfsearch {' '.join(map(str, args))}: exception escaped:\n{out.exception}"
    assert "Traceback (most recent call last)" not in out.output, out.output
    return out


def cli_subprocess(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                   memory_bytes: int | None = None) -> M.Outcome:
    full_env = dict(os.environ) | (env or {})

    def limit() -> None:  # pragma: no cover - runs in the child
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    t0, wall = children_cpu_s(), timeout * load_factor()  # the timeout only catches a hang
    try:
        cp = subprocess.run([sys.executable, "-m", "dfsearch", *map(str, args)], check=False, capture_output=True,
                            timeout=wall, env=full_env, stdin=subprocess.DEVNULL, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"dfsearch {' '.join(map(str, args))} did not finish within {wall:.0f} s (hang)")
    out = cp.stdout.decode(errors="replace") + cp.stderr.decode(errors="replace")
    assert "Traceback (most recent call last)" not in out, out[-3000:]
    return M.Outcome(cp.returncode, out, children_cpu_s() - t0)  # CPU seconds of the run


def load_doc(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


def write_doc(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(M.dump_toml(doc))
    return path


def set_path(doc: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b[0].c`` in a parsed TOML document."""
    parts: list[Any] = []
    for seg in dotted.split("."):
        name, _, rest = seg.partition("[")
        parts.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            parts.append(int(idx))
            rest = rest.lstrip("[")
    obj: Any = doc
    for p in parts[:-1]:
        if isinstance(p, str) and p not in obj:
            obj[p] = {}
        obj = obj[p]
    obj[parts[-1]] = value


def mutated(tmp_path: Path, src: Path, name: str = "spec.toml", **fields: Any) -> Path:
    doc = load_doc(src)
    for dotted, value in fields.items():
        set_path(doc, dotted.replace("__", "."), value)
    return write_doc(doc, tmp_path / name)


def assert_exit2(out: M.Outcome, file: Path | str, field: str | None = None) -> None:
    assert out.code == 2, f"expected exit 2, got {out.code}:\n{M.head(out.output, 12)}"
    assert Path(file).name in out.output, f"message does not name {file}:\n{M.head(out.output, 12)}"
    if field is not None:
        assert field in out.output, f"message does not name the field {field}:\n{M.head(out.output, 12)}"


# --------------------------------------------------------------------------------------------
# Seeds


def test_search_seed_2_pow_32_in_spec_is_exit_2(tmp_path: Path) -> None:
    spec = mutated(tmp_path, GPT_SMALL, **{"search.seed": 2**32})
    assert_exit2(cli("run", spec, "--quiet"), spec, "search.seed")


@pytest.mark.parametrize("seed", ["-1", str(2**32), str(2**63), str(2**64)])
def test_seed_option_out_of_range_is_exit_2(seed: str) -> None:
    out = cli("run", GPT_SMALL, "--quiet", "--seed", seed)
    assert out.code == 2, M.head(out.output, 8)
    assert "seed" in out.output, M.head(out.output, 8)


def test_seed_out_of_range_on_the_optuna_path_is_exit_2(tmp_path: Path) -> None:
    # many free outer choices (the path that reached Optuna / annealing) and a negative seed
    doc = load_doc(GPT_1T)
    for d in doc["system"]["network"]:
        d["size"] = 0
    doc["workload"]["micro_batch_size"] = 0
    spec = write_doc(doc, tmp_path / "free.toml")
    out = cli_subprocess("run", spec, "--quiet", "--seed", "-1", "--time-limit", "20")
    assert out.code == 2 and "seed" in out.output, M.head(out.output, 8)


# --------------------------------------------------------------------------------------------
# Integers >= 2**63 anywhere


HUGE_FIELDS = [  # integer-typed fields (docs/spec.md)
    "system.num_chip",
    "system.accelerator.cores",
    "system.accelerator.systolic_width",
    "system.network[0].size",
    "workload.seq_len",
    "workload.global_batch_size",
    "workload.micro_batch_size",
    "execution.word_bytes",
    "execution.num_config",
    "search.max_evaluations",
]


@pytest.mark.parametrize("value", [2**63, 2**64, -(2**63) - 1], ids=["2**63", "2**64", "-2**63-1"])
@pytest.mark.parametrize("field", HUGE_FIELDS)
def test_integer_beyond_int64_is_exit_2_with_field_path(tmp_path: Path, field: str, value: int) -> None:
    spec = mutated(tmp_path, GPT_SMALL, **{field: value})
    assert_exit2(cli("run", spec, "--quiet"), spec, field)


@pytest.mark.parametrize("field", ["system.accelerator.sram_bytes", "system.memory.dram_bytes"])
def test_huge_integer_in_a_float_field_is_a_number_or_exit_2(tmp_path: Path, field: str) -> None:
    # byte capacities are floats: 2**63 bytes is a (very large) legal capacity
    spec = mutated(tmp_path, GPT_SMALL, **{field: 2**64})
    js = tmp_path / "o.json"
    out = cli("run", spec, "--quiet", "--json", js)
    if out.code == 2:
        assert_exit2(out, spec, field)
        return
    assert out.code == 0, M.head(out.output, 8)
    assert json.loads(js.read_text())["final_s"] is not None


@pytest.mark.parametrize("key", ["m", "k", "n", "outer", "config"])
def test_kernel_integer_beyond_int64_is_exit_2(tmp_path: Path, key: str) -> None:
    conv = tmp_path / "conv.toml"
    assert cli("convert", SETUP_SMALL, "-o", conv).code == 0
    doc = load_doc(conv)
    doc["graph"]["kernels"][2][key] = 2**63
    spec = write_doc(doc, tmp_path / "spec.toml")
    assert_exit2(cli("run", spec, "--quiet"), spec, "graph.kernels[2]")
    assert key in cli("run", spec, "--quiet").output


@pytest.mark.parametrize(("line_key", "value", "field"), [
    ("num_chip: 4", "num_chip: 9223372036854775808", "system.num_chip"),
    ("core: 432", "core: 18446744073709551616", "system.accelerator"),
    ("M: 2048", "M: 9223372036854775808", "dataflow_graph.kernels[0]"),
])
def test_setup_integer_beyond_int64_is_exit_2(tmp_path: Path, line_key: str, value: str, field: str) -> None:
    text = SETUP_SMALL.read_text()
    assert line_key in text
    setup = tmp_path / "setup.txt"
    setup.write_text(text.replace(line_key, value, 1))
    assert_exit2(cli("run", setup, "--quiet"), setup, field)


# --------------------------------------------------------------------------------------------
# Malformed files


def test_500_deep_nested_array_is_exit_2(tmp_path: Path) -> None:
    text = GPT_SMALL.read_text() + "\n[bogus]\nx = " + "[" * 500 + "1" + "]" * 500 + "\n"
    spec = tmp_path / "deep.toml"
    spec.write_text(text)
    assert_exit2(cli("run", spec, "--quiet"), spec)
    assert_exit2(cli("validate", spec), spec)


def test_500_deep_nested_array_as_field_value_is_exit_2(tmp_path: Path) -> None:
    doc = load_doc(GPT_SMALL)
    doc["cost"]["link_power_J_per_GB"] = M.DeepArray(500)
    spec = write_doc(doc, tmp_path / "deep.toml")
    assert_exit2(cli("run", spec, "--quiet"), spec)


def test_dev_zero_as_spec_is_exit_2() -> None:
    out = cli_subprocess("run", "/dev/zero", "--quiet", timeout=60, memory_bytes=4 << 30)
    assert out.code == 2, M.head(out.output, 8)
    assert "/dev/zero" in out.output


def test_dev_zero_as_include_is_exit_2(tmp_path: Path) -> None:
    doc = load_doc(GPT_SMALL)
    doc["graph"] = {"include": "/dev/zero"}
    spec = write_doc(doc, tmp_path / "spec.toml")
    out = cli_subprocess("run", spec, "--quiet", timeout=60, memory_bytes=4 << 30)
    assert_exit2(out, spec, "graph.include")


def test_dev_zero_as_mapping_is_exit_2() -> None:
    out = cli_subprocess("eval", GPT_SMALL, "--mapping", "/dev/zero", timeout=60, memory_bytes=4 << 30)
    assert out.code == 2, M.head(out.output, 8)
    assert "/dev/zero" in out.output


def test_setup_with_kernel_id_1e8_and_dangling_connection_is_quick_exit_2(tmp_path: Path) -> None:
    text = SETUP_SMALL.read_text()
    text = text.replace("  id: 1\n", "  id: 100000000\n", 1)  # the first kernel's id
    text = text.replace("  endIdx: 2\n", "  endIdx: 99999999\n", 1)  # a connection to no kernel
    setup = tmp_path / "setup.txt"
    setup.write_text(text)
    out = cli_subprocess("run", setup, "--quiet", timeout=60, memory_bytes=3 << 30)
    assert_exit2(out, setup, "connections")
    assert out.seconds < 30, f"used {out.seconds:.1f} CPU s"
    assert len(out.output) < 20_000, f"{len(out.output)} characters of output"


# --------------------------------------------------------------------------------------------
# Physically meaningless numbers: a clear exit 2, never "inf s, proven optimal"


@pytest.mark.parametrize(("field", "value"), [
    ("system.accelerator.freq_GHz", 1e-300),
    ("system.memory.dram_bw_GBps", 1e-300),
    ("system.network[0].link_bw_GBps", 1e-300),
    ("system.accelerator.freq_GHz", 1e300),
    ("system.accelerator.sram_bytes", 1e300),
])
def test_time_overflowing_values_are_exit_2(tmp_path: Path, field: str, value: float) -> None:
    spec = mutated(tmp_path, GPT_SMALL, **{field: value})
    out = cli("run", spec, "--quiet", "--time-limit", "20")
    if out.code == 0 and value > 1:  # a huge capacity/clock is legal if the answer is finite
        js_out = tmp_path / "o.json"
        out = cli("run", spec, "--quiet", "--json", js_out)
        js = json.loads(js_out.read_text())
        assert js["final_s"] is not None and js["final_s"] > 0, js["final_s"]
        return
    assert_exit2(out, spec, field)


def test_frequency_1e_300_is_exit_2_not_inf(tmp_path: Path) -> None:
    spec = mutated(tmp_path, GPT_1T, **{"system.accelerator.freq_GHz": 1e-300})
    out = cli("run", spec, "--quiet")
    assert_exit2(out, spec, "system.accelerator.freq_GHz")
    assert "proven optimal" not in out.output


# --------------------------------------------------------------------------------------------
# Cycle model (compute_util = 0): no silent int64 wrap-around


def _cycle_spec(tmp_path: Path, side: int) -> Path:
    kern = textwrap.dedent(f"""
        [[graph.kernels]]
        name = "{{name}}"
        kind = "gemm_weight"
        m = {side}
        k = {side}
        n = {side}
        tiling = "n"
        input_bytes = 1e6
        weight_bytes = 1e6
        output_bytes = 1e6
    """)
    text = textwrap.dedent("""
        [workload]
        kind = "fft"
        length = 1024
    """) + kern.replace("{name}", "A") + kern.replace("{name}", "B") + textwrap.dedent("""
        [[graph.connections]]
        src = "A"
        dst = "B"

        [system]
        num_chip = 1

        [system.accelerator]
        cores = 1000
        systolic_width = 32
        systolic_height = 32
        sram_bytes = 1e9
        freq_GHz = 1.0

        [system.memory]
        dram_bw_GBps = 1000.0

        [[system.network]]
        topology = "ring"
        size = 1
        link_bw_GBps = 100.0

        [execution]
        num_config = 1
        compute_util = 0
    """)
    p = tmp_path / "cycles.toml"
    p.write_text(text)
    return p


def test_cycle_model_overflowing_gemm_is_exit_2(tmp_path: Path) -> None:
    spec = _cycle_spec(tmp_path, 2**21)  # m * k * n = 2**63
    assert_exit2(cli("run", spec, "--quiet"), spec, "graph.kernels[0]")


def test_cycle_model_large_gemms_are_consistent(tmp_path: Path) -> None:
    spec = _cycle_spec(tmp_path, 2**19)
    js, mp = tmp_path / "o.json", tmp_path / "m.toml"
    out = cli("run", spec, "--quiet", "--json", js, "--mapping-out", mp)
    assert out.code in (0, 1, 2), out.output
    if out.code != 0:
        return
    res = json.loads(js.read_text())
    assert res["utilization"] <= 1.0 + 1e-9, res["utilization"]
    ev_js = tmp_path / "e.json"
    ev = cli("eval", spec, "--mapping", mp, "--json", ev_js)
    assert ev.code == 0, ev.output
    assert M.same_float(json.loads(ev_js.read_text())["final_s"], res["final_s"])


# --------------------------------------------------------------------------------------------
# Output files


@pytest.mark.parametrize("option", ["--json", "--mapping-out"])
def test_output_into_missing_folder_fails_before_the_search(tmp_path: Path, option: str) -> None:
    dest = tmp_path / "no_such_folder" / "out.file"
    out = cli("run", GPT_SMALL, "--quiet", option, dest)
    assert out.code == 2, M.head(out.output, 8)
    assert "no_such_folder" in out.output, M.head(out.output, 8)
    assert "final_s" not in out.output and "util" not in out.output, "the search ran before the check"


def test_eval_json_into_missing_folder_is_exit_2(tmp_path: Path) -> None:
    mp = tmp_path / "m.toml"
    assert cli("run", GPT_SMALL, "--quiet", "--mapping-out", mp).code == 0
    out = cli("eval", GPT_SMALL, "--mapping", mp, "--json", tmp_path / "nope" / "e.json")
    assert out.code == 2 and "nope" in out.output, M.head(out.output, 8)


def test_convert_into_missing_folder_is_exit_2(tmp_path: Path) -> None:
    out = cli("convert", SETUP_SMALL, "-o", tmp_path / "nope" / "s.toml")
    assert out.code == 2 and "nope" in out.output, M.head(out.output, 8)


def test_generate_into_missing_folder_is_exit_2(tmp_path: Path) -> None:
    out = cli("generate", "fft", "--length", "1024", "-o", tmp_path / "nope" / "g.toml")
    assert out.code == 2 and "nope" in out.output, M.head(out.output, 8)


@pytest.mark.parametrize("option", ["--mapping-out", "--json"])
def test_run_refuses_to_overwrite_its_input(tmp_path: Path, option: str) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_bytes(GPT_SMALL.read_bytes())
    before = spec.read_bytes()
    out = cli("run", spec, "--quiet", option, spec)
    assert out.code == 2, M.head(out.output, 8)
    assert spec.name in out.output
    assert spec.read_bytes() == before, "the input spec was overwritten"


def test_eval_refuses_to_overwrite_its_inputs(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_bytes(GPT_SMALL.read_bytes())
    mp = tmp_path / "m.toml"
    assert cli("run", spec, "--quiet", "--mapping-out", mp).code == 0
    before = mp.read_bytes()
    out = cli("eval", spec, "--mapping", mp, "--json", mp)
    assert out.code == 2, M.head(out.output, 8)
    assert mp.read_bytes() == before


def test_convert_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    setup = tmp_path / "setup.txt"
    setup.write_bytes(SETUP_SMALL.read_bytes())
    out = cli("convert", setup, "-o", setup)
    assert out.code == 2, M.head(out.output, 8)
    assert setup.read_bytes() == SETUP_SMALL.read_bytes()


# --------------------------------------------------------------------------------------------
# Mapping files with wrong types


@pytest.mark.parametrize(("edit", "field"), [
    (("num_tile", "abc"), "num_tile"),
    (("num_tile", 2.5), "num_tile"),
    (("micro_batch_size", 2**63), "micro_batch_size"),
    (("shape", ["x"]), "shape"),
    (("shape", 4), "shape"),
    (("config.Q", "abc"), "Q"),
    (("config.Q", 2**63), "Q"),
    (("config", [1, 2]), "config"),
])
def test_wrong_typed_mapping_values_are_exit_2(tmp_path: Path, edit: tuple[str, Any], field: str) -> None:
    mp = tmp_path / "m.toml"
    assert cli("run", GPT_SMALL, "--quiet", "--mapping-out", mp).code == 0
    doc = load_doc(mp)
    set_path(doc, edit[0], edit[1])
    bad = write_doc(doc, tmp_path / "bad_mapping.toml")
    out = cli("eval", GPT_SMALL, "--mapping", bad)
    assert_exit2(out, bad, field)


# --------------------------------------------------------------------------------------------
# Honest results


def test_json_carries_status_and_lower_bound(tmp_path: Path) -> None:
    js = tmp_path / "o.json"
    assert cli("run", GPT_SMALL, "--quiet", "--json", js).code == 0
    res = json.loads(js.read_text())
    status = res.get("status", res.get("search", {}).get("status"))
    assert status in STATUSES, status
    lb = res.get("lower_bound_s", res.get("search", {}).get("lower_bound_s"))
    assert lb is not None and lb <= res["final_s"] * (1 + 1e-12)


def test_weights_overflowing_dram_name_the_real_amount(tmp_path: Path) -> None:
    spec = mutated(tmp_path, GPT_1T, **{"system.memory.dram_bytes": 1e6})  # 1 MB of DRAM per chip
    out = cli("run", spec, "--quiet")
    assert out.code == 1, M.head(out.output, 8)
    assert "at least 1 bytes" not in out.output, M.head(out.output, 8)
    assert "DRAM" in out.output
    assert any(u in out.output for u in ("MB", "GB", "TB")), M.head(out.output, 8)


# --------------------------------------------------------------------------------------------
# Sizes that used to be scanned integer by integer


@pytest.mark.wallclock
def test_prime_num_chip_near_1e9_does_not_hang(tmp_path: Path) -> None:
    doc = load_doc(GPT_1T)
    doc["system"]["num_chip"] = 999_999_937  # prime
    for d in doc["system"]["network"]:
        d["size"] = 0
    spec = write_doc(doc, tmp_path / "prime.toml")
    out = cli_subprocess("run", spec, "--quiet", "--time-limit", "20", timeout=90)
    assert out.code in (0, 1, 2), M.head(out.output, 8)
    assert out.seconds < 60, f"used {out.seconds:.1f} CPU s"


@pytest.mark.wallclock
def test_seq_len_1e12_does_not_hang(tmp_path: Path) -> None:
    spec = mutated(tmp_path, GPT_1T, **{"workload.seq_len": 10**12, "workload.micro_batch_size": 0})
    out = cli_subprocess("run", spec, "--quiet", "--time-limit", "20", timeout=90)
    assert out.code in (0, 1, 2), M.head(out.output, 8)
    assert out.seconds < 60, f"used {out.seconds:.1f} CPU s"


def _chained_copies(tmp_path: Path, copies: int) -> Path:
    conv = tmp_path / "conv.toml"
    assert cli("convert", SETUP_SMALL, "-o", conv).code == 0
    doc = load_doc(conv)
    kernels, conns = doc["graph"]["kernels"], doc["graph"]["connections"]
    new_k, new_c = [], []
    for j in range(copies):
        for k in kernels:
            new_k.append(k | {"name": f"{k['name']}_{j}"} | ({"id": len(new_k) + 1} if "id" in k else {}))
        for c in conns:
            new_c.append({kk: v for kk, v in c.items() if kk != "id"} | {"src": f"{c['src']}_{j}", "dst": f"{c['dst']}_{j}"})
    doc["graph"] = {"kernels": new_k, "connections": new_c}
    doc["execution"]["num_config"] = "auto"
    return write_doc(doc, tmp_path / "wide.toml")


@pytest.mark.slow
@pytest.mark.wallclock
def test_time_limit_is_honoured_on_a_540_kernel_graph(tmp_path: Path) -> None:
    spec = _chained_copies(tmp_path, 13)  # 13 x 41 = 533 kernels
    out = cli_subprocess("run", spec, "--quiet", "--time-limit", "1", timeout=120)
    assert out.code in (0, 1, 2), M.head(out.output, 8)
    # a safety stop: the CPU time past the limit is import, compilation and reporting only
    assert out.seconds < 20, f"--time-limit 1 used {out.seconds:.1f} CPU s"


# --------------------------------------------------------------------------------------------
# Ctrl-C


CTRL_C_AFTER_SOLVES = """
import os, signal, sys
import dfsearch.search.engine as engine
solve, calls = engine._solve, []
def solve_then_ctrl_c(*args):
    calls.append(1)
    if len(calls) == {n}:
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, delivered while searching
    return solve(*args)
engine._solve = solve_then_ctrl_c
from dfsearch.cli import main
sys.argv = ["dfsearch", "run", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("after", [1, 6])
def test_ctrl_c_reports_interrupted_and_exits_130(tmp_path: Path, after: int) -> None:
    """A real SIGINT during the search: the best mapping so far is reported and written,
    labelled interrupted, exit 130 (after 1 solve: maybe nothing feasible yet, exit 130 too)."""
    js, mp = tmp_path / "o.json", tmp_path / "m.toml"
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_AFTER_SOLVES.format(n=after), str(GPT_1T), "--quiet",
         "--json", str(js), "--mapping-out", str(mp)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 130, out[-2000:]
    assert "Traceback" not in out, out[-3000:]
    assert "interrupted" in out.lower(), out[-2000:]
    data = json.loads(js.read_text())
    assert data["status"] == "interrupted"
    if data["final_s"] is not None:
        assert mp.exists()
        assert data["lower_bound_s"] is None or data["lower_bound_s"] <= data["final_s"]


# --------------------------------------------------------------------------------------------
# Python API


IMPORT_ORDERS = [
    "import dfsearch.cli",
    "import dfsearch.api",
    "import dfsearch.cli, dfsearch.api",
    "import dfsearch",
    "from dfsearch.cli import app",
]


@pytest.mark.slow
@pytest.mark.parametrize("first", IMPORT_ORDERS)
def test_public_api_callable_in_every_import_order(first: str) -> None:
    code = textwrap.dedent(f"""
        {first}
        import dfsearch
        try:
            import dfsearch.load  # the old submodule name shadowed the function
        except ImportError:
            pass
        from dfsearch import load, run, evaluate
        assert callable(load) and callable(run) and callable(evaluate), (load, run, evaluate)
        assert callable(dfsearch.load)
        spec = load({str(GPT_SMALL)!r})
        print(type(spec).__name__, spec.system.num_chip)
    """)
    cp = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert cp.stdout.split()[-1] == "4"


def test_spec_replace_validates() -> None:
    import dfsearch

    spec = dfsearch.load(GPT_SMALL)
    faster = dfsearch.replace(spec, "system.memory.dram_bw_GBps", 600)
    assert faster.system.memory.dram_bw_GBps == 600
    assert spec.system.memory.dram_bw_GBps != 600  # the original is unchanged
    with pytest.raises(ValueError, match=r"system\.memory\.dram_bw_GBps"):
        dfsearch.replace(spec, "system.memory.dram_bw_GBps", 0)
    with pytest.raises(ValueError, match=r"system\.network\[0\]\.link_bw_GBps"):
        dfsearch.replace(spec, "system.network[0].link_bw_GBps", -1)


def test_api_run_and_evaluate_agree() -> None:
    import dfsearch

    spec = dfsearch.load(GPT_SMALL)
    res = dfsearch.run(spec)
    ev = dfsearch.evaluate(spec, res.evaluation.decision)
    assert M.same_float(ev.final_s, res.evaluation.final_s)


# --------------------------------------------------------------------------------------------
# Found by the battery (benchmarks/battery.py) while issue 9 was being fixed


@pytest.mark.parametrize("num_config", ["auto", -1])
def test_num_config_auto_mapping_round_trips(tmp_path: Path, num_config: Any) -> None:
    """run -> --mapping-out -> eval gives the same final_s (the README example, num_config left
    to the search; -1 is not a documented value: exit 2 is also acceptable)."""
    spec = mutated(tmp_path, GPT_1T, **{"execution.num_config": num_config})
    js, mp, ejs = tmp_path / "o.json", tmp_path / "m.toml", tmp_path / "e.json"
    out = cli("run", spec, "--quiet", "--json", js, "--mapping-out", mp)
    if num_config == -1 and out.code == 2:
        assert_exit2(out, spec, "execution.num_config")
        return
    assert out.code == 0, M.head(out.output, 8)
    ev = cli("eval", spec, "--mapping", mp, "--json", ejs)
    assert ev.code == 0, M.head(ev.output.splitlines()[-1] if ev.output else "", 3)
    assert M.same_float(json.loads(ejs.read_text())["final_s"], json.loads(js.read_text())["final_s"])


@pytest.mark.slow
@pytest.mark.wallclock
def test_time_limit_is_honoured_when_nothing_fits(tmp_path: Path) -> None:
    """README example with num_config = 60: nothing fits in SRAM; --time-limit 2 must stop it."""
    spec = mutated(tmp_path, GPT_1T, **{"execution.num_config": 60})
    out = cli_subprocess("run", spec, "--quiet", "--time-limit", "2", timeout=60)
    assert out.code in (1, 2), M.head(out.output, 8)
    assert out.seconds < 30, f"--time-limit 2 used {out.seconds:.1f} CPU s"
