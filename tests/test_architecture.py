"""Rules of the code base that a test can check (docs/design.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
