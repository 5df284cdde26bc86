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


# ---- the import graph --------------------------------------------------------------------
# Layers (docs/design.md, "Layers"): data -> model -> search -> plans -> API/CLI, no upward
# import. The graph counts imports inside functions too and skips ``if TYPE_CHECKING:``
# blocks. Both ratchets may only shrink: when a cycle loses a module or disappears, or a
# function-level import goes, lower the record below in the same commit.

#: the strongly connected components (more than one module) of the package's import graph
KNOWN_CYCLES: tuple[frozenset[str], ...] = (
    frozenset({
        "cost.training", "io.dfmodel", "kernels.generators",
        "kernels.graph", "kernels.pieces", "loader", "pins", "spec", "validate",
        "workloads", "workloads.base", "workloads.dlrm", "workloads.fft", "workloads.hpl",
        "workloads.llm", "workloads.serving", "workloads.speculative",
    }),
    frozenset({"study.distributed", "study.runner"}),
)

#: imports written inside a function (lazy optional dependencies, and cycles still to break)
MAX_FUNCTION_LEVEL_IMPORTS = 211


def module_files(pkg: Path = PKG) -> dict[str, Path]:
    """Module name relative to the package (``cost.lower``; ``""`` for the package) -> file."""
    out = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = path.relative_to(pkg).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(tree: ast.AST):
    """(import node, inside a function) for every import not under ``if TYPE_CHECKING:``."""
    stack = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend((c, in_function) for c in child.orelse)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function
            else:
                function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                stack.append((child, in_function or function))


def _imported(name: str, node: ast.Import | ast.ImportFrom, mods: dict[str, Path]) -> set[str]:
    """The package's modules (other than ``name``) that an import statement in ``name`` names."""
    if isinstance(node, ast.Import):
        words = [a.name for a in node.names]
    else:
        module = node.module or ""
        if node.level:
            base = f"{PKG.name}.{name}".rstrip(".").split(".")
            base = base[: len(base) - node.level + (mods[name].name == "__init__.py")]
            module = ".".join(base + ([module] if module else []))
        words = [f"{module}.{a.name}" for a in node.names]
        words = [w if w.partition(".")[2] in mods else module for w in words]
    out = set()
    for word in words:
        if word.split(".")[0] != PKG.name:
            continue
        target = word.partition(".")[2]
        while target not in mods:
            target = target.rpartition(".")[0]
        if target != name:
            out.add(target)
    return out


def import_graph(pkg: Path = PKG) -> tuple[dict[str, dict[str, int]], int]:
    """module -> {imported module: line of its first import}, and the number of import
    statements inside functions that name one of the package's modules."""
    mods = module_files(pkg)
    edges: dict[str, dict[str, int]] = {m: {} for m in mods}
    function_level = 0
    for name, path in mods.items():
        for node, in_function in _imports(ast.parse(path.read_text())):
            targets = _imported(name, node, mods)
            for target in targets:
                line = edges[name].get(target, node.lineno)
                edges[name][target] = min(line, node.lineno)
            function_level += bool(targets) and in_function
    return edges, function_level


def import_cycles(edges: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def cycle_problems(edges: dict[str, dict[str, int]], known=KNOWN_CYCLES) -> list[str]:
    """What differs from the record: a new cycle or a module joining one (with the import
    edges inside the cycle that touch the newcomers, one of which must go), or a recorded
    cycle that shrank or went (the record is then to be lowered)."""
    out = []
    cycles = import_cycles(edges)
    for cycle in cycles:
        home = [k for k in known if cycle & k]
        new = cycle - frozenset().union(*home)
        if len(home) <= 1 and not new:
            continue
        if new:
            what = f"modules {sorted(new)} joined a cycle" if home else "a new cycle"
        else:
            what = "recorded cycles merged"
        touch = new or cycle
        cut = sorted(
            f"{a} -> {b} ({a.replace('.', '/') or '__init__'}.py:{line})"
            for a in sorted(cycle) for b, line in edges[a].items()
            if b in cycle and (a in touch or b in touch)
        )
        out.append(f"{what}: {sorted(cycle)}; remove one of the imports {cut}")
    for k in known:
        parts = [c for c in cycles if c & k]
        now = frozenset().union(*parts) & k
        if len(parts) > 1:
            out.append(f"the cycle {sorted(k)} split into {[sorted(c) for c in parts]}: record "
                       "them in KNOWN_CYCLES")
        if now != k:
            out.append(f"modules {sorted(k - now)} left the cycle {sorted(k)}: remove them from "
                       "KNOWN_CYCLES (a cycle of fewer than two modules goes)")
    return out


def test_no_new_import_cycle():
    """The package's import cycles are the recorded ones, or fewer: no module joins one."""
    edges, _ = import_graph()
    assert cycle_problems(edges) == []


def test_function_level_imports_do_not_grow():
    _, function_level = import_graph()
    assert function_level <= MAX_FUNCTION_LEVEL_IMPORTS, (
        f"{function_level} imports inside functions (at most {MAX_FUNCTION_LEVEL_IMPORTS}): "
        "import at the top of the module, or move the function to the layer it belongs to"
    )


def test_cycle_problems_name_the_modules_and_an_edge():
    toy = {"a": {"b": 3}, "b": {"a": 5}, "c": {"a": 1}, "d": {}}
    known = (frozenset({"a", "b"}),)
    assert cycle_problems(toy, known) == []
    toy["a"]["c"] = 7
    (msg,) = cycle_problems(toy, known)
    assert "['c'] joined a cycle" in msg and "a -> c (a.py:7)" in msg and "c -> a (c.py:1)" in msg
    assert "b -> a" not in msg
    toy = {"a": {"b": 3}, "b": {}, "c": {"d": 2}, "d": {"c": 4}}
    (new, shrank) = cycle_problems(toy, known)
    assert new.startswith("a new cycle: ['c', 'd']") and "c -> d (c.py:2)" in new
    assert shrank.startswith("modules ['a', 'b'] left the cycle ['a', 'b']")
    toy = {"a": {"b": 1}, "b": {"a": 1}, "c": {"d": 1}, "d": {"c": 1}}
    (split,) = cycle_problems(toy, (frozenset("abcd"),))
    assert split.startswith("the cycle ['a', 'b', 'c', 'd'] split into [['a', 'b'], ['c', 'd']]")


def test_import_graph_reads_relative_and_lazy_imports(tmp_path):
    pkg = tmp_path / "dfsearch"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import leaf\n")
    (pkg / "sub" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dfsearch import top\n"
        "def f():\n    from ..top import X\n    import numpy\n"
    )
    (pkg / "top.py").write_text("from dfsearch.sub.leaf import f\nfrom dfsearch.sub import g\n")
    edges, function_level = import_graph(pkg)
    assert edges == {"": {}, "sub": {"sub.leaf": 1}, "sub.leaf": {"top": 5}, "top": {"sub.leaf": 1, "sub": 2}}
    assert function_level == 1
    assert import_cycles(edges) == [frozenset({"sub", "sub.leaf", "top"})]
