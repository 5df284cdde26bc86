"""Compiled code shipped with dfsearch, so that the first run after an install does not compile.

Numba compiles dfsearch's jitted functions on their first call: typing, lowering to LLVM IR,
optimising, machine code, ~20 s of CPU for the built-in example on a 2-core machine, after
which its on-disk cache (``cost/_jit.py``) makes later runs start at once. The archive shipped
in ``cost/prebuilt_code/`` holds, for every entry point and argument types that the shipped
examples compile, Numba's compile result with the *optimised LLVM bitcode* in place of the
machine code. A process that finds no compiled code of its own for a function looks there,
turns the bitcode into machine code for this CPU (about a second for the built-in example)
and saves the result to the on-disk cache, as if it had compiled it.

The archive is checked before it is used: its header must match this process exactly (the
archive format, the Numba, llvmlite and Python versions, the LLVM target triple, and
``source_digest()``, the hash of every source file compiled code depends on); any difference
and it is ignored, and the functions compile as before (``why_unusable`` says why, and the
first-run line of the CLI repeats it). Each entry is also checked against the argument types
it is loaded for. Bitcode, not machine code: it was optimised for a generic CPU of the triple
(``python -m dfsearch.prebuild`` builds it so), so it runs on any CPU of that triple, and it
computes the same numbers, bit for bit, as code compiled here (no fast-math: LLVM neither
reorders nor fuses floating-point operations for a wider CPU). ``DFSEARCH_PREBUILT=off``
turns the archive off (to measure or test compilation itself).
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import sys
import zlib
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as ll
import numba
from numba.core import compiler

__all__ = [
    "FORMAT", "archive_path", "header", "why_unusable", "problem", "why_not_used", "turned_off",
    "load",
    "payload", "write_archive", "read_header", "read_entries", "entry_key",
]

#: version of the archive layout below; a change makes older archives unusable
FORMAT = 1
#: first line of an archive
MAGIC = b"dfsearch prebuilt compiled code\n"
#: the folder of the shipped archives, one per target triple and Python version
FOLDER = Path(__file__).absolute().parent / "prebuilt_code"
#: the variable that turns the archive off
OFF_VARIABLE = "DFSEARCH_PREBUILT"


def _python() -> str:
    """This Python's version, major.minor (pickles and Numba's compiled wrappers follow it)."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def triple() -> str:
    """The LLVM target triple of this process (``x86_64-unknown-linux-gnu``)."""
    return ll.get_process_triple()


def archive_path(folder: Path = FOLDER) -> Path:
    """The archive for this process's target triple and Python version."""
    return folder / f"{triple()}-py{_python()}.bin"


def header(digest: str) -> dict[str, Any]:
    """What an archive for this process, of dfsearch sources with ``digest``, must say."""
    return {"format": FORMAT, "numba": numba.__version__, "llvmlite": llvmlite.__version__,
            "python": _python(), "triple": triple(),
            "source_digest": digest}  # fmt: skip


def why_unusable(found: dict[str, Any] | None, wanted: dict[str, Any]) -> str | None:
    """Why an archive with header ``found`` (None: no archive) cannot serve a process that
    wants ``wanted``; None when it can."""
    if found is None:
        return f"no compiled code is shipped for {wanted['triple']} and Python {wanted['python']}"
    for field, what in (("format", "archive format"), ("triple", "target"),
                        ("python", "Python"), ("numba", "Numba"), ("llvmlite", "llvmlite")):  # fmt: skip
        if found.get(field) != wanted[field]:
            return (f"the shipped compiled code is for {what} {found.get(field)}, "
                    f"this is {wanted[field]}")  # fmt: skip
    if found.get("source_digest") != wanted["source_digest"]:
        return "the shipped compiled code is older than the sources (python -m dfsearch.prebuild)"
    return None


def problem(digest: str) -> str | None:
    """Why the archive cannot serve this process, whose sources have ``digest``: turned off,
    none shipped for this platform, or built for other versions or sources. None: it can."""
    if turned_off():
        return f"the shipped compiled code is turned off ({OFF_VARIABLE}=off)"
    return why_unusable(read_header(archive_path()), header(digest))


def why_not_used(digest: str) -> str:
    """Why a function of this process is compiled rather than taken from the archive:
    ``problem``, or the archive lacks that function for those argument types."""
    return problem(digest) or "the shipped compiled code does not cover this path"


def read_header(path: Path) -> dict[str, Any] | None:
    """The header of the archive at ``path`` (None: no readable archive there)."""
    try:
        with path.open("rb") as f:
            if f.readline() != MAGIC:
                return None
            return json.loads(f.readline())
    except (OSError, ValueError):
        return None


def turned_off() -> bool:
    """Whether ``DFSEARCH_PREBUILT=off`` turns the archive off in this process."""
    return os.environ.get(OFF_VARIABLE, "").strip().lower() == "off"


def read_entries(path: Path) -> dict[str, bytes] | None:
    """The entries of the archive at ``path`` (None: missing or damaged, so unused)."""
    try:
        with path.open("rb") as f:
            f.readline()
            f.readline()
            entries = pickle.loads(zlib.decompress(f.read()))
    except (OSError, zlib.error, pickle.UnpicklingError, EOFError, ValueError):
        return None
    return entries if isinstance(entries, dict) else None


@functools.cache
def _entries(digest: str) -> dict[str, bytes] | None:
    """The entries of the archive if it can serve this process, else None (read once per
    process; ``turned_off`` is asked on every load)."""
    return read_entries(archive_path()) if problem(digest) is None else None


def entry_key(py_func: Any, sig: tuple) -> str:
    """The key of a function's compiled code for the argument types ``sig``."""
    return f"{py_func.__module__}.{py_func.__qualname__}{tuple(sig)!r}"


def load(py_func: Any, sig: tuple, target_context: Any, digest: str) -> Any:
    """The compile result of ``py_func`` for argument types ``sig`` built from the shipped
    archive (machine code made for this CPU), or None when the archive is unusable here or
    lacks it. The result keeps its object code, so the caller can save it to its cache."""
    entries = None if turned_off() else _entries(digest)
    blob = None if entries is None else entries.get(entry_key(py_func, sig))
    if blob is None:
        return None
    try:
        (name, bitcode), fndesc, env, signature, objectmode, lifted, typeann, reload_init, envs = (
            pickle.loads(blob))  # fmt: skip
        module = ll.parse_bitcode(bitcode)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, RuntimeError):
        return None  # a damaged entry: compiled instead
    if tuple(signature.args) != tuple(sig):
        return None
    for init in reload_init:
        init()
    library = target_context.codegen().create_library(name)
    library.enable_object_caching()  # keep the machine code: the on-disk cache saves it
    library._final_module = module
    library._finalize_final_module()  # optimised already: machine code only
    for referenced in envs:
        library.codegen.set_env(referenced.env_name, referenced)
    return compiler.CompileResult(
        target_context=target_context, typing_context=target_context.typing_context,
        library=library, environment=env,
        entry_point=target_context.get_executable(library, fndesc, env), fndesc=fndesc,
        type_annotation=typeann, signature=signature, objectmode=objectmode, lifted=lifted,
        typing_error=None, call_helper=None, metadata=None, reload_init=reload_init,
        referenced_envs=envs,
    )  # fmt: skip


def payload(cres: Any) -> bytes:
    """An archive entry for the compile result ``cres``: what Numba's on-disk cache keeps
    (``CompileResult._reduce``), with the library's optimised bitcode for its machine code."""
    library = cres.library
    bitcode = library.serialize_using_bitcode()[2]
    fndesc = cres.fndesc
    fndesc.typemap = fndesc.calltypes = None  # not needed to run, and not picklable
    envs = tuple(cres._find_referenced_environments())
    return pickle.dumps(
        ((library.name, bitcode), fndesc, cres.environment, cres.signature, cres.objectmode,
         cres.lifted, str(cres.type_annotation), cres.reload_init, envs),
        protocol=pickle.HIGHEST_PROTOCOL,
    )  # fmt: skip


def write_archive(path: Path, entries: dict[str, bytes], digest: str, built_for: str) -> None:
    """Write an archive of ``entries`` (``entry_key`` -> ``payload``) for this process's
    versions and sources with ``digest``; ``built_for`` (the CPU its bitcode was optimised
    for) is recorded in the header for readers."""
    head = {**header(digest), "optimised_for_cpu": built_for, "entries": len(entries)}
    body = zlib.compress(pickle.dumps(dict(sorted(entries.items())), protocol=4), 9)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + body)
