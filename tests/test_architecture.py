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


#: the modules that compile (and import Numba at module level, or a module that does)
#: the modules that import Numba: the jitted ones, and the reader of the compiled code that
#: dfsearch ships, which only ``cost._jit`` imports
JITTED = ("cost._jit", "cost.evaluate", "search._dp", "search._window", "cost.prebuilt")


def test_data_and_model_layers_load_no_heavy_module():
    """Reading, checking and converting specs loads no Numba: the data and model layers
    import the jitted modules only inside the functions that run compiled code."""
    light = [m for m in module_files() if layer_of(m) in ("data", "model") and m not in JITTED]
    assert "loader" in light and "cost.model" in light
    code = (
        "import importlib, sys\n"
        f"for m in {light!r}:\n    importlib.import_module('dfsearch.' + m)\n"
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
# Layers (docs/design.md, "Layers"): data -> model -> search -> plans -> API/CLI. A module
# imports modules of its own layer or of lower ones, never of a higher one, and the graph
# has no cycle. The graph counts imports inside functions too (they run, only later), skips
# ``if TYPE_CHECKING:`` blocks (they never run), and counts the packages an import runs on
# the way: ``import dfsearch.workloads.base`` runs ``workloads/__init__.py`` first.

#: the layers, lowest first
LAYERS = ("data", "model", "search", "plans", "API/CLI")

#: module or package (relative to ``dfsearch``) -> its layer; a module takes the layer of its
#: longest listed prefix, and every module must have one
LAYER_OF = {
    # the validated input and the words every layer shares; no module of another layer
    "codes": "data", "errors": "data", "issues": "data", "spec": "data", "quirks": "data",
    "workload_specs": "data", "memo": "data",
    # the catalogue of chips, fabrics and models (numbers with their sources) that specs name
    "presets": "data",
    # the performance model and everything it reads: readers and checks of the input, the
    # graph, the system, the workload kinds, lowering and costing
    "io": "model", "loader": "model", "validate": "model", "pins": "model", "sanity": "model",
    "kernels": "model", "system": "model",
    "workloads": "model", "cost": "model", "decision": "model",
    # the single-phase search, the result it returns, its text form (which the plan kinds'
    # sections use too), why a mapping is infeasible and the mapping files it reads back
    "search": "search", "result": "search", "report": "search", "explain": "search",
    "mapping": "search",
    # a run as a plan of searches
    "plan": "plans",
    # what users call: the Python API, the CLI and what only they use
    "": "API/CLI", "__main__": "API/CLI", "api": "API/CLI", "cli": "API/CLI",
    "check": "API/CLI", "study": "API/CLI", "prebuild": "API/CLI",
    "capacity": "API/CLI",
    # co-design: the command and its study are API/CLI; the cited technology catalogue is data,
    # the chip's area, yield, cost and power model is model
    "codesign": "API/CLI", "codesign.technology": "data", "codesign.chip": "model",
}

#: upward imports still to remove: (importer, imported) -> why it is still there. Empty: a
#: new entry needs a reason and a plan to remove it.
ALLOWED_FOR_NOW: dict[tuple[str, str], str] = {}

#: imports written inside a function that name a module of the package. Only lazy optional
#: or slow dependencies justify one (the commands of ``cli.py`` load the search, and with
#: it Numba, only when they run); lower the record in the commit that removes one.
MAX_FUNCTION_LEVEL_IMPORTS = 13


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


def _ancestors(name: str) -> list[str]:
    """The packages above a module (``cost.lower`` -> ``cost``), the root package left out."""
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def import_graph(pkg: Path = PKG) -> tuple[dict[str, dict[str, int]], int]:
    """module -> {imported module: line of its first import}, and the number of import
    statements inside functions that name one of the package's modules. Importing a module
    runs its packages first: they count as imported too, except the importer's own packages
    (already running when it runs)."""
    mods = module_files(pkg)
    edges: dict[str, dict[str, int]] = {m: {} for m in mods}
    function_level = 0
    for name, path in mods.items():
        own = set(_ancestors(name))
        for node, in_function in _imports(ast.parse(path.read_text())):
            targets = _imported(name, node, mods)
            ran = {p for t in targets for p in _ancestors(t)} - own - {name}
            for target in targets | ran:
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


def cycle_problems(edges: dict[str, dict[str, int]]) -> list[str]:
    """One line per import cycle: its modules and the imports inside it, one of which must go."""
    out = []
    for cycle in import_cycles(edges):
        cut = sorted(
            f"{a} -> {b} ({a.replace('.', '/') or '__init__'}.py:{line})"
            for a in sorted(cycle) for b, line in edges[a].items() if b in cycle
        )
        out.append(f"import cycle {sorted(cycle)}: remove one of the imports {cut}")
    return out


def layer_of(module: str, layer_of: dict[str, str] = LAYER_OF) -> str | None:
    """The layer of a module: that of its longest prefix in ``layer_of`` (None: unmapped)."""
    parts = module.split(".")
    for k in range(len(parts), -1, -1):
        prefix = ".".join(parts[:k])
        if prefix in layer_of and (k or module == ""):
            return layer_of[prefix]
    return None


def layer_problems(edges: dict[str, dict[str, int]], layers=LAYERS, layer_map=LAYER_OF,
                   allowed=ALLOWED_FOR_NOW) -> list[str]:
    """Modules without a layer, and every import of a higher layer's module that ``allowed``
    does not list (with the line to change); allowed imports that are gone (to drop)."""
    rank = {name: i for i, name in enumerate(layers)}
    out = [f"{m or '__init__'} has no layer: add it (or its package) to LAYER_OF"
           for m in sorted(edges) if layer_of(m, layer_map) is None]
    seen = set()
    for a in sorted(edges):
        la = layer_of(a, layer_map)
        for b, line in sorted(edges[a].items()):
            lb = layer_of(b, layer_map)
            if la is None or lb is None or rank[lb] <= rank[la]:
                continue
            seen.add((a, b))
            if (a, b) not in allowed:
                out.append(f"{a} ({la}) imports {b} ({lb}) at "
                           f"{a.replace('.', '/') or '__init__'}.py:{line}: a {la} module "
                           f"may not import a {lb} module")
    out += [f"allowed upward import {a} -> {b} is gone: remove it from ALLOWED_FOR_NOW"
            for a, b in sorted(set(allowed) - seen)]
    return out


def test_no_import_cycle():
    """No import cycle, counting the imports inside functions and the packages imports run."""
    edges, _ = import_graph()
    assert cycle_problems(edges) == []


def test_no_upward_import():
    """Every module has a layer, and none imports a module of a higher layer."""
    edges, _ = import_graph()
    assert layer_problems(edges) == []


def test_function_level_imports_do_not_grow():
    _, function_level = import_graph()
    assert function_level <= MAX_FUNCTION_LEVEL_IMPORTS, (
        f"{function_level} imports inside functions (at most {MAX_FUNCTION_LEVEL_IMPORTS}): "
        "import at the top of the module, or move the function to the layer it belongs to"
    )


def test_cycle_problems_name_the_modules_and_the_edges():
    toy = {"a": {"b": 3}, "b": {"c": 5}, "c": {}, "d": {"a": 1}}
    assert cycle_problems(toy) == []
    toy["c"]["a"] = 7
    (msg,) = cycle_problems(toy)
    assert msg.startswith("import cycle ['a', 'b', 'c']")
    assert "a -> b (a.py:3)" in msg and "b -> c (b.py:5)" in msg and "c -> a (c.py:7)" in msg
    assert "d -> a" not in msg
    toy["d"]["e"], toy["e"] = 2, {"d": 4}
    assert len(cycle_problems(toy)) == 2


def test_layer_problems_name_the_upward_import_and_its_line():
    layers = ("low", "high")
    mapping = {"low": "low", "": "high", "high": "high"}
    toy = {"": {}, "low": {}, "low.sub": {"low": 2}, "high": {"low.sub": 1}}
    assert layer_of("low.sub", mapping) == "low" and layer_of("", mapping) == "high"
    assert layer_problems(toy, layers, mapping, {}) == []
    toy["low.sub"]["high"] = 9
    (msg,) = layer_problems(toy, layers, mapping, {})
    assert msg.startswith("low.sub (low) imports high (high) at low/sub.py:9")
    assert layer_problems(toy, layers, mapping, {("low.sub", "high"): "why"}) == []
    toy["low.sub"].pop("high")
    (gone,) = layer_problems(toy, layers, mapping, {("low.sub", "high"): "why"})
    assert gone.startswith("allowed upward import low.sub -> high is gone")
    toy["new"] = {}
    assert layer_problems(toy, layers, mapping, {}) == [
        "new has no layer: add it (or its package) to LAYER_OF"
    ]


def test_import_graph_reads_relative_and_lazy_imports(tmp_path):
    pkg = tmp_path / "dfsearch"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import leaf\n")
    (pkg / "sub" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dfsearch import top\n"
        "def f():\n    from ..top import X\n    import numpy\n"
    )
    (pkg / "top.py").write_text("from dfsearch.sub.leaf import f\n")
    (pkg / "other.py").write_text("def g():\n    import dfsearch.sub.leaf\n")
    edges, function_level = import_graph(pkg)
    assert edges == {"": {}, "other": {"sub.leaf": 2, "sub": 2}, "sub": {"sub.leaf": 1},
                     "sub.leaf": {"top": 5}, "top": {"sub.leaf": 1, "sub": 1}}  # fmt: skip
    assert function_level == 2
    assert import_cycles(edges) == [frozenset({"sub", "sub.leaf", "top"})]
