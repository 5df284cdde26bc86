"""Build the compiled code that dfsearch ships (``cost/prebuilt.py``), for this platform.

``python -m dfsearch.prebuild``, in a checkout of dfsearch, runs every shipped example
(``dfsearch run`` on ``dfsearch/examples/*.toml``, ``dfsearch serve`` on
``dfsearch/examples/serve/*.toml``), the other assignment strategies and the hard graphs of
``benchmarks/data/hard`` (``commands``) in a child process that compiles everything afresh
(an empty Numba cache folder, the archive turned off) for a generic CPU of this target
triple, then writes each compiled entry point's optimised bitcode to
``dfsearch/cost/prebuilt_code/<triple>-py<version>.bin``: about a minute. Run it after changing any jitted module (``tests/test_prebuilt.py`` fails until
then) and commit the archive. ``--check`` only says whether the archive fits this process
(exit 0) or why not (exit 1).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from numba.core import config

from dfsearch import cli
from dfsearch.cost import prebuilt
from dfsearch.cost._jit import entry_dispatchers, source_digest

#: the shipped examples the archive covers
EXAMPLES = Path(__file__).absolute().parent / "examples"
#: the hard graphs of the benchmarks (a checkout's, not installed)
HARD = Path(__file__).absolute().parents[1] / "benchmarks" / "data" / "hard"
#: the CPU the bitcode is optimised for: any CPU of the triple can run it
CPU = "generic"


def commands(examples: Path = EXAMPLES, hard: Path = HARD) -> list[list[str]]:
    """The CLI commands whose compiled code the archive holds: the shipped examples, the
    built-in one with the assignment strategies that are not the default's, and the hard
    graphs of the benchmarks (a few thousand evaluations each: enough to compile their
    bounds and steps)."""
    runs = [["run", "--quiet", str(p)] for p in sorted(examples.glob("*.toml"))]
    serves = [["serve", str(p)] for p in sorted((examples / "serve").glob("*.toml"))]
    strategies = [["run", "--quiet", "--assignment", a] for a in ("order-dp", "anneal")]
    hard_runs = [["run", "--quiet", "--max-evaluations", "3000", str(p)]
                 for p in sorted(hard.glob("*.toml"))]  # fmt: skip
    if not hard_runs:
        raise SystemExit(f"{hard} holds no spec: build the archive in a checkout of dfsearch")
    return runs + serves + strategies + hard_runs


def _compile_and_write(out: Path) -> int:
    """In the child: run ``commands()`` in this process, then write the archive of every
    entry point they compiled. Returns the number of entries."""
    for argv in commands():
        sys.argv = ["dfsearch", *argv]
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                cli.main()
        except SystemExit as stop:
            if stop.code not in (None, 0, 1):  # 1: no feasible mapping, still compiled
                raise SystemExit(f"dfsearch {' '.join(argv)} failed:\n{err.getvalue()}") from None
    entries = {prebuilt.entry_key(d.py_func, sig): prebuilt.payload(cres)
               for d in entry_dispatchers() for sig, cres in d.overloads.items()}  # fmt: skip
    prebuilt.write_archive(out, entries, source_digest(), config.CPU_NAME or "host")
    return len(entries)


def build(out: Path) -> None:
    """Build the archive at ``out`` in a child process (Numba reads its CPU settings once,
    when it is imported)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "NUMBA_CPU_NAME": CPU,
               "NUMBA_CPU_FEATURES": "", prebuilt.OFF_VARIABLE: "off"}  # fmt: skip
        subprocess.run([sys.executable, "-m", "dfsearch.prebuild", "--child", str(out)],
                       env=env, check=True)  # fmt: skip


def check() -> str | None:
    """Why the shipped archive cannot serve this process (None: it can)."""
    return prebuilt.problem(source_digest())


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        n = _compile_and_write(Path(argv[1]))
        print(f"{n} compiled entry points written to {argv[1]}")
        return 0
    if argv[:1] == ["--check"]:
        why = check()
        print(why or f"{prebuilt.archive_path()} fits this process")
        return 1 if why else 0
    if argv:
        print(__doc__.split("\n\n")[0], "\nusage: python -m dfsearch.prebuild [--check]")
        return 2
    out = prebuilt.archive_path()
    t0 = time.perf_counter()
    build(out)
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
