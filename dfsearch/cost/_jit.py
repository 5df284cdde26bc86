"""The one jit configuration of dfsearch: every jitted function is decorated with ``jit``.

Compiled code is cached on disk (reused across processes) where Numba finds a writable
folder: ``NUMBA_CACHE_DIR`` if set, else the package's ``__pycache__``, else the user's cache
folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``). When none is writable (a read-only
install and no writable home), the function is compiled in every process instead: slower to
start, same results. Before compiling, a function missing from that cache is looked up in the
compiled code shipped with dfsearch (``cost/prebuilt.py``, checked against this process's
versions and sources), so that a first run after an install compiles nothing it covers. No
eager signatures, no fastmath (infeasibility is signalled with inf, which fastmath may
assume away). The GIL is kept: the long searches step into object mode
now and then to read the clock and let a pending Ctrl-C handler run. Importing this module
imports numba: only jitted modules import it.

Numba keys its cache on the compiled function's own bytecode and source file, but compiled
code also holds what it calls or reads elsewhere: jitted helpers of another module (inlined),
enum values and module constants, frozen at compile time. So the key of every cached
function here also holds ``source_digest()``: a hash of every module that defines jitted
functions and of every dfsearch module they import (``jitted_sources``). Changing any of
them compiles afresh; the digest is computed once, on the first compilation or cache load.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numba
from numba.core import types
from numba.core.caching import FunctionCache, NullCache
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler import Compiler
from numba.core.registry import CPUDispatcher

from dfsearch.cost import prebuilt

__all__ = ["jit", "jitted_sources", "on_first_compilation", "source_digest", "entry_dispatchers",
           "shipped_code_note"]

#: the dfsearch package folder
PACKAGE = Path(__file__).absolute().parents[1]


def jit(func: Callable[..., Any] | None = None, *, step: bool = False,
        internal: bool = False, objmode: bool = False, inline: bool = False) -> Any:
    """Compile ``func`` in nopython mode, cached on disk when possible.

    ``@jit(internal=True)``: a function only jitted code calls. Its compiled code runs only
    as part of its callers: each caller links it into its own code library, optimises the
    whole and compiles it to machine code. So it gets no Python entry point (calling it from
    Python raises ``TypeError``), no optimisation and no machine code of its own and no disk
    cache (it is compiled again only when a caller is
    compiled in a process, not when its callers are loaded from the cache). That work, done
    for nothing before, took a third of the first run's compilation. It hooks into Numba's
    compiler and code library classes: pyproject.toml bounds Numba to the versions tested.

    ``@jit(step=True)``: a step of a hot loop, split out to be read on its own; internal. It
    is always inlined into its jitted callers (LLVM ``alwaysinline``) and compiled without
    Numba's reference counting, so it may only index the arrays it is given and must
    allocate, keep and return none (Numba refuses an allocation there when it compiles).
    With counting, every array a call passes (a record of arrays counts each one) is counted
    up and down with atomic operations, which cost more than a small step: the evaluator
    split into counted steps ran 2-4x slower, also with Numba's own ``inline="always"``,
    whose argument copies are counted too.

    ``@jit(inline=True)``: a step that only steps call, spliced into each caller's Numba IR
    before typing (Numba's ``inline="always"``): no call, no arguments to pass (a record
    passed to a step is taken apart field by field and put together again in the step, which
    made most of the code the first run compiled for the evaluator's steps), no code library
    of its own. Spliced into a counted caller its arrays would be counted: there use
    ``step``.

    ``@jit`` (an entry point, for Python): jitted code that calls it calls its ``linked``
    twin, the same function as ``jit(internal=True)`` (``_EntryDispatcher``), so a first run
    compiles no entry wrapper or machine code for a function only jitted code calls.
    ``@jit(objmode=True)``: an entry point with an ``objmode`` block, which needs an entry
    point of its own: jitted callers call it too. No entry point gets a C function wrapper
    (nothing takes a jitted function's address).
    """
    if func is None:
        return functools.partial(jit, step=step, internal=internal, objmode=objmode,
                                 inline=inline)  # fmt: skip
    # both flags explicit: a callee compiled on demand inherits the flags its caller leaves
    # unset, so a helper would otherwise compile differently depending on who calls it first
    if step or internal or inline:
        return _internal(func, step or inline, inline)
    dispatcher = numba.njit(cache=False, _nrt=True, forceinline=False,
                            no_cfunc_wrapper=True)(func)  # fmt: skip
    if not objmode:
        dispatcher.__class__ = _EntryDispatcher
        dispatcher.linked = _internal(func, False)
    try:
        dispatcher._cache = _SourceKeyedCache(func)  # what ``cache=True`` sets, with our key
    except RuntimeError as exc:  # raised while decorating: no writable cache folder
        if "cannot cache" not in str(exc):
            raise
        dispatcher._cache = _ShippedOnlyCache(func)
    return _typed_calls(dispatcher)


def _internal(func: Callable[..., Any], step: bool, inline: bool = False) -> Any:
    """``func`` compiled as ``jit(internal=True)`` (``step``: ``jit(step=True)``, ``inline``:
    ``jit(inline=True)``)."""
    options: dict[str, Any] = {"_nrt": not step, "forceinline": step, "no_cfunc_wrapper": True}
    if inline:
        options["inline"] = "always"
    dispatcher = numba.njit(cache=False, pipeline_class=_InternalCompiler, **options)(func)
    dispatcher.__class__ = _InternalDispatcher
    return _typed_calls(dispatcher)


def _typed_calls(dispatcher: Any) -> Any:
    """``dispatcher`` compiling one specialisation per argument types (see
    ``_typed_call_template``)."""
    dispatcher.get_call_template = functools.partial(_typed_call_template,
                                                     dispatcher.get_call_template)  # fmt: skip
    return dispatcher


class _EntryDispatcher(CPUDispatcher):
    """The dispatcher of a ``jit`` function (an entry point). Python calls compile it with
    its entry point, machine code and disk cache; jitted callers call ``linked`` instead, the
    same function compiled as ``jit(internal=True)``: its code is linked into theirs, so
    nothing is compiled for them that only a Python call needs (the entry wrapper, machine
    code of its own, a disk cache entry). A function that both call is typed twice."""

    @property
    def _numba_type_(self) -> Any:  # the type of the global in jitted code
        return types.Dispatcher(self.linked)


class _InternalDispatcher(CPUDispatcher):
    """The dispatcher of a ``jit(internal=True)`` or ``jit(step=True)`` function: compiled
    code calls it as any other, Python may not (it has no compiled Python entry point)."""

    def __call__(self, *args: Any, **kws: Any) -> Any:
        raise TypeError(f"{self.py_func.__qualname__} is internal (jit(internal=True) or "
                        "jit(step=True)): only jitted code may call it")  # fmt: skip

    def add_overload(self, cres: Any) -> None:
        """Register compiled code (``_InternalCompiler``: no entry point) for jitted callers:
        they find it under ``cres.entry_point``, here a new object per specialisation."""
        key = functools.partial(self.__call__)
        cres = cres._replace(entry_point=key)
        self.targetctx.insert_user_function(key, cres.fndesc, [cres.library])
        self.overloads[tuple(cres.signature.args)] = cres


class _LinkedOnlyLibrary(JITCodeLibrary):
    """The code library of an internal function (``jit(internal=True)``): only linked into
    its callers' libraries, never compiled to machine code on its own, and not optimised on
    its own either: each caller optimises it within its own module (LLVM simplifies a callee
    before it weighs inlining it), so optimising it here first was work done twice."""

    def _optimize_functions(self, ll_module: Any) -> None:
        ll_module.data_layout = self._codegen._data_layout  # no passes: see the class

    def _optimize_final_module(self) -> None:
        pass

    def _finalize_final_module(self) -> None:
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True  # never added to the execution engine: no machine code


class _InternalCompiler(Compiler):
    """Numba's compiler, with a ``_LinkedOnlyLibrary`` for the compiled code and no entry
    point."""

    def compile_extra(self, func: Any) -> Any:
        self.state.library = _LinkedOnlyLibrary(self.state.targetctx.codegen(), func.__qualname__)
        return super().compile_extra(func)

    def define_pipelines(self) -> Any:
        # No entry point, no wrappers, no environment to bind. Set here, after the flags
        # that callees see were taken (``_compile_core``): Numba compiles the functions it
        # implements itself (``np.zeros``, ...) once per distinct caller flags.
        flags = self.state.flags
        flags.no_compile = flags.no_cpython_wrapper = flags.no_cfunc_wrapper = True
        return super().define_pipelines()


def _typed_call_template(get_call_template: Callable[..., Any], args: tuple, kws: dict) -> Any:
    """Type a call from compiled code with its literal arguments widened to their types.

    A jitted caller passing a constant (``f(x, 0)``) would otherwise make Numba compile its
    callee once more for that literal (``Literal[int](0)`` instead of ``int64``): the same
    code, compiled several times on the first run (a few seconds each for the bigger steps).
    No jitted function of dfsearch depends on a literal argument."""
    args = tuple(types.unliteral(a) for a in args)
    kws = {k: types.unliteral(v) for k, v in kws.items()}
    return get_call_template(args, kws)


class _SourceKeyedCache(FunctionCache):
    """Numba's on-disk cache of one function, keyed also on ``source_digest()``. A function
    it does not hold is looked up in the shipped archive (``cost/prebuilt.py``) and, when
    found there, saved to it."""

    def _index_key(self, sig: Any, codegen: Any) -> tuple:
        return (*super()._index_key(sig, codegen), source_digest())

    def _load_overload(self, sig: Any, target_context: Any) -> Any:
        cres = super()._load_overload(sig, target_context)
        if cres is None and self._enabled:
            cres = prebuilt.load(self._py_func, sig, target_context, source_digest())
            if cres is not None:
                self._save_overload(sig, cres)
        return cres


class _ShippedOnlyCache(NullCache):
    """The cache of a function where no folder is writable: nothing is saved, but the
    shipped archive is read (its machine code is made again in every process)."""

    def __init__(self, py_func: Any) -> None:
        self._py_func = py_func

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        target_context.refresh()
        return prebuilt.load(self._py_func, sig, target_context, source_digest())


def entry_dispatchers() -> list[Any]:
    """The dispatchers of every ``jit`` entry point (those with an on-disk cache) of the
    dfsearch modules imported in this process."""
    found: dict[int, Any] = {}
    for name, module in list(sys.modules.items()):
        if name == "dfsearch" or name.startswith("dfsearch."):
            for obj in vars(module).values():
                if isinstance(obj, CPUDispatcher) and isinstance(
                        getattr(obj, "_cache", None), _SourceKeyedCache | _ShippedOnlyCache):
                    found[id(obj)] = obj
    return list(found.values())


@functools.cache
def source_digest(package: Path = PACKAGE) -> str:
    """SHA-256 of the contents of ``jitted_sources(package)`` (with their relative paths)."""
    h = hashlib.sha256()
    for path in jitted_sources(package):
        h.update(path.relative_to(package).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def jitted_sources(package: Path = PACKAGE) -> list[Path]:
    """The modules of ``package`` (the dfsearch folder) that compiled code depends on: those
    that import ``jit`` from this module at module level (they define jitted functions) and
    every module of the package they import at module level, sorted."""
    found: set[Path] = set()
    for path in package.rglob("*.py"):
        text = path.read_bytes()
        if b"_jit" not in text:  # cheap pre-filter: most modules never mention it
            continue
        tree = ast.parse(text, str(path))
        if any(isinstance(node, ast.ImportFrom) and node.module == f"{package.name}.cost._jit"
               and any(alias.name == "jit" for alias in node.names) for node in tree.body):  # fmt: skip
            found.add(path)
            found.update(_package_imports(tree, package))
    return sorted(found)


def _package_imports(tree: ast.Module, package: Path) -> set[Path]:
    """Files of ``package`` (``dfsearch``) imported by the module-level statements of
    ``tree``: ``import dfsearch.a.b``, ``from dfsearch.a import b`` (b a module or a name)."""
    out: set[Path] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != package.name:
                continue
            base = package.joinpath(*parts[1:])
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    out.add(candidate)
    return out


def shipped_code_note() -> str:
    """Why this process compiles instead of using the compiled code shipped with dfsearch
    (``prebuilt.why_not_used``), for the first-run line."""
    return prebuilt.why_not_used(source_digest())


@contextlib.contextmanager
def on_first_compilation(say: Callable[[], None]) -> Iterator[None]:
    """Within the block, call ``say()`` once, when a jitted function of dfsearch starts to
    compile (never when its compiled code is loaded from the on-disk cache), so that a user
    waiting for the first run is told why. Numba's compile event fires only for a real
    compilation; functions of other packages are ignored, and so are lifted blocks (the
    object-mode clock read in ``must_stop``), which Numba compiles anew in every process in
    milliseconds."""
    from numba.core import event
    from numba.core.dispatcher import LiftedCode

    class _Once(event.Listener):
        def __init__(self) -> None:
            self.said = False

        def on_start(self, ev: event.Event) -> None:
            dispatcher = ev.data.get("dispatcher")
            if isinstance(dispatcher, LiftedCode):
                return
            func = getattr(dispatcher, "py_func", None)
            if not self.said and getattr(func, "__module__", "").startswith("dfsearch."):
                self.said = True
                say()

        def on_end(self, ev: event.Event) -> None:
            pass

    with event.install_listener("numba:compile", _Once()):
        yield
