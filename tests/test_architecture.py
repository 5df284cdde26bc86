"""Rules of the code base that a test can check (docs/design.md)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).parent.parent / "dfsearch"


def test_import_dfsearch_loads_no_heavy_module():
    code = (
        "import sys, dfsearch, dfsearch.cli, dfsearch.spec, dfsearch.codes; "
        "print(','.join(m for m in ('numba', 'optuna', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_help_loads_no_heavy_module():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom dfsearch.cli import app\n"
        "CliRunner().invoke(app, ['run', '--help'])\n"
        "print(','.join(m for m in ('numba', 'optuna', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_one_jit_configuration():
    """Only cost/_jit.py calls numba.njit; nobody passes fastmath or eager signatures."""
    offenders = []
    for path in PKG.rglob("*.py"):
        text = path.read_text()
        if path.name != "_jit.py" and re.search(r"numba\.njit|from numba import njit|fastmath", text):
            offenders.append(str(path))
    assert offenders == []


def test_one_definition_of_each_enum():
    defs = []
    for path in PKG.rglob("*.py"):
        for m in re.finditer(r"^class (\w+)\((?:enum\.)?(?:Int)?Enum|^class (\w+)\(_Coded\)", path.read_text(), re.M):
            defs.append((m.group(1) or m.group(2), path.name))
    names = [d[0] for d in defs]
    assert len(names) == len(set(names)), defs
    # graph.py: the private tensor Layout; layout.py: the column names of the arrays at the
    # Numba boundary; _dp.py: the private queue columns of the A* search
    allowed = {"codes.py", "graph.py", "layout.py", "_dp.py"}
    assert {p for _, p in defs} <= allowed, defs


# ---- short functions ---------------------------------------------------------------------
#: longest function (``def`` line to last line, docstring included) without a ``# long:`` note
MAX_FUNCTION_LINES = 80


def long_functions(text: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """(name, line, length) of every function in ``text`` longer than ``limit`` lines that
    carries no ``# long: <reason>`` comment: on its ``def`` or decorator lines, or in the
    comment block right above them."""
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        length = node.end_lineno - node.lineno + 1
        top = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1  # 0-based
        while top > 0 and lines[top - 1].lstrip().startswith("#"):
            top -= 1
        near = lines[top : node.lineno]
        if length > limit and not any(re.search(r"#\s*long:\s*\S", line) for line in near):
            out.append((node.name, node.lineno, length))
    return out


def test_functions_are_short():
    """Every function of the package fits in MAX_FUNCTION_LINES lines, unless a ``# long:``
    comment on its ``def`` line or right above it says why it may not."""
    offenders = [
        f"{path.relative_to(PKG)}:{line} {name} ({length} lines)"
        for path in sorted(PKG.rglob("*.py"))
        for name, line, length in long_functions(path.read_text())
    ]
    assert offenders == []


def test_long_functions_needs_a_reason():
    body = "".join(f"    x{i} = {i}\n" for i in range(4))
    assert long_functions(f"def f():\n{body}", limit=4) == [("f", 1, 5)]
    assert long_functions(f"def f():  # long: a table\n{body}", limit=4) == []
    assert long_functions(f"# long: a table\ndef f():\n{body}", limit=4) == []
    assert long_functions(f"# long:\ndef f():\n{body}", limit=4) == [("f", 2, 5)]  # no reason
    assert long_functions(f"# long: a loop\n@jit\ndef f():\n{body}", limit=4) == []
    assert long_functions(f"# long: a loop\n# measured\n@jit\ndef f():\n{body}", limit=4) == []
    assert long_functions(f"# long: a loop\n\n@jit\ndef f():\n{body}", limit=4) == [("f", 4, 5)]
    assert long_functions(f"def f():\n{body}", limit=5) == []


# ---- the jit cache -----------------------------------------------------------------------
def test_jit_cache_key_follows_the_jitted_modules_and_what_they_import(tmp_path):
    """Compiled code holds what it calls or reads in other modules (jitted helpers, enum
    values): the cache key changes with any of them, not with other modules."""
    from dfsearch.cost import _jit

    pkg = tmp_path / "dfsearch"
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    names = {p.relative_to(pkg).as_posix() for p in _jit.jitted_sources(pkg)}
    compiled = {"cost/_jit.py", "cost/evaluate.py", "search/_dp.py"}
    assert compiled | {"codes.py", "cost/layout.py", "cost/overlap.py"} <= names
    assert "cli.py" not in names
    digest = _jit.source_digest.__wrapped__  # uncached: the files change below
    before = digest(pkg)
    (pkg / "cli.py").write_text((pkg / "cli.py").read_text() + "\n# not compiled\n")
    assert digest(pkg) == before
    for name in ("codes.py", "cost/overlap.py", "cost/evaluate.py"):
        path = pkg / name
        original = path.read_text()
        path.write_text(original + "\n# an edit\n")
        assert digest(pkg) != before, name
        path.write_text(original)
    assert digest(pkg) == before


def test_compiled_functions_are_cached_under_the_source_digest():
    from dfsearch.cost import _jit, evaluate

    disp = evaluate.min_cycles
    assert disp(4, 1, 1, 4) == (1, 4, 1)  # compiled or loaded from the cache
    if not isinstance(disp._cache, _jit._SourceKeyedCache):
        pytest.skip("no writable cache folder: compiled without a cache")
    key = disp._cache._index_key(disp.signatures[0], disp.targetctx.codegen())
    assert key[-1] == _jit.source_digest()
