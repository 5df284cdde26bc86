"""Mutants of study data: results tables and study files (the spec and mapping mutants are
in ``tests/_mutants.py``, whose choosers and checks this module reuses).

* A *table mutant* is a results table written by a real sweep with 1-3 text mutations
  (lines deleted, repeated, swapped or cut; a cell replaced by junk; the header edited; a
  column dropped or added; bytes that are not UTF-8; quotes, NUL, CRLF, BOM). It is fed to
  ``dfsearch pareto``, ``dfsearch plot`` (one kind) or a resumed ``dfsearch sweep``.
* A *study mutant* is a study file (a shipped study or the small one below) with 1-3
  mutations of its TOML data: catalogue axes given numbers, lists or tables, axis values
  repeated or emptied, unknown keys, odd ``combine`` / ``filter`` / ``seed`` / ``[networks]``
  / ``[area]`` / ``[set]`` values, or one of ``tests/_mutants.py``'s generic mutations. It is
  fed to ``dfsearch sweep --dry-run``, and when that passes and the study is small, to a
  real ``dfsearch sweep``.

A mutant fails when an exception escapes, a traceback is printed, the exit code is not 0, 1,
2 (or 130 for nothing), or an exit 2 does not name the file. Run a few hundred with
``python tests/_data_mutants.py --tables 300 --studies 200 [--seed S]``; the test suite runs
a few dozen (``tests/test_study_data.py``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _mutants as M

STUDIES = M.EXAMPLES / "studies"
SMALL_BASE = M.EXAMPLES / "hpl_576gpu.toml"
SMALL_STUDY = '[study]\nbase = "base.toml"\n[axes]\n"system.memory.dram_bw_GBps" = [400, 800, 1200, 1555]\n'

JUNK_CELLS = ["", "nan", "inf", "-inf", "-1", "0", "1e400", "abc", '"', '""', "\x00", "é", "1,5", "x" * 5000,
              "9" * 40, "true", "optimal", "infeasible", "3.5", " 7", "0x10"]  # fmt: skip
ODD_AXIS_VALUES = [[], [["h100"]], [{"chip": "h100"}], [1.5], [True], ["h100", "h100"], ["H100"], "h100", 3,
                   {"a": [1]}, [[1, 2], [3]], [float("nan")], [10**30], [-1]]  # fmt: skip
ODD_VALUES = [None, "", "zip", "cross", "both", 0, -1, 1.5, True, [], [1], {"x": 1}, ["a < 1"], "a <", "x == y",
              "system.num_chip <= 0", "accelerator == 'h100' and", 2**63, "nan"]  # fmt: skip


# ----------------------------------------------------------------------------- tables
def table_mutation(lines: list[bytes], ch: M.Chooser) -> str:
    """Apply one mutation to the table's lines (each ending in b"\\n") in place."""
    op = ch.choice(["delete", "repeat", "swap", "cut", "cell", "cell", "cell", "header", "drop_column",
                    "add_column", "bytes", "quote", "blank", "crlf", "bom", "empty", "only_header"])  # fmt: skip
    n = len(lines)
    if op == "empty":
        lines.clear()
        return "empty file"
    if op == "only_header":
        del lines[1:]
        return "header only"
    i = ch.integer(0, n - 1)
    cells = lines[i].rstrip(b"\n").split(b",")
    if op == "delete":
        del lines[i]
        return f"delete line {i + 1}"
    if op == "repeat":
        lines.insert(i, lines[i])
        return f"repeat line {i + 1}"
    if op == "swap":
        j = ch.integer(0, n - 1)
        lines[i], lines[j] = lines[j], lines[i]
        return f"swap lines {i + 1} and {j + 1}"
    if op == "cut":
        k = ch.integer(0, len(lines[i]))
        lines[i] = lines[i][:k]
        del lines[i + 1 :]
        return f"cut line {i + 1} after {k} bytes"
    if op in ("cell", "header"):
        i = 0 if op == "header" else i
        cells = lines[i].rstrip(b"\n").split(b",")
        k = ch.integer(0, len(cells) - 1)
        cells[k] = ch.choice(JUNK_CELLS + ["point", "digest", "status", "final_s"]).encode()
        lines[i] = b",".join(cells) + b"\n"
        return f"line {i + 1}, cell {k + 1} = {cells[k][:20]!r}"
    if op in ("drop_column", "add_column"):
        k = ch.integer(0, len(cells) - 1)
        for j, line in enumerate(lines):
            c = line.rstrip(b"\n").split(b",")
            if op == "drop_column" and k < len(c):
                del c[k]
            elif op == "add_column":
                c.insert(k, b"extra" if j == 0 else b"1")
            lines[j] = b",".join(c) + b"\n"
        return f"{op} {k + 1}"
    if op == "bytes":
        lines[i] = lines[i][:-1] + ch.choice([b"\xff", b"\xe9", b"\xc3", b"\x80\x80"]) + b"\n"
        return f"non-UTF-8 byte on line {i + 1}"
    if op == "quote":
        lines[i] = b'"' + lines[i]
        return f"unbalanced quote on line {i + 1}"
    if op == "blank":
        lines.insert(i, b"\n")
        return f"blank line before line {i + 1}"
    if op == "crlf":
        lines[:] = [ln[:-1] + b"\r\n" if ln.endswith(b"\n") else ln for ln in lines]
        return "CRLF line ends"
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    return "UTF-8 BOM"


def table_mutant(table: bytes, ch: M.Chooser) -> tuple[bytes, list[str]]:
    lines = table.splitlines(keepends=True)
    ops = []
    for _ in range(ch.choice([1, 1, 2, 3])):
        if not lines:
            break
        ops.append(table_mutation(lines, ch))
    return b"".join(lines), ops


def table_commands(folder: Path, study: Path, ch: M.Chooser) -> list[str]:
    kind = ch.choice(["pareto", "pareto3", "plot", "sweep"])
    if kind == "pareto":
        return ["pareto", str(folder)]
    if kind == "pareto3":
        return ["pareto", str(folder / "results.csv"), "--objectives", "throughput,cost,power", "--json", "-"]
    if kind == "plot":
        plot = ch.choice(["heatmap", "breakdown", "pareto", "roofline"])
        return ["plot", str(folder), "--kind", plot, "-o", str(folder / "fig.png")]
    return ["sweep", str(study), "-o", str(folder), "-q"]


def small_table(workdir: Path) -> tuple[Path, bytes]:
    """The small study (4 HPL points) and the table a sweep of it writes."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(SMALL_BASE, workdir / "base.toml")
    study = workdir / "study.toml"
    study.write_text(SMALL_STUDY)
    out = M.run_inprocess(["sweep", str(study), "-o", str(workdir / "source"), "-q"])
    assert out.code == 0, out.output
    return study, (workdir / "source" / "results.csv").read_bytes()


def check_table_mutant(seed: int, workdir: Path, study: Path, table: bytes) -> M.Report:
    ch = M.RandomChooser(seed)
    data, ops = table_mutant(table, ch)
    folder = workdir / f"t{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "results.csv").write_bytes(data)
    args = table_commands(folder, study, ch)
    return _report(f"table {seed}: {'; '.join(ops)} | {args[0]}", M.run_inprocess(args), "results.csv")


# ----------------------------------------------------------------------------- studies
def study_mutation(doc: dict[str, Any], ch: M.Chooser) -> str:
    """Apply one study-specific mutation to ``doc`` in place."""
    op = ch.choice(["preset", "preset", "axis", "axis", "study", "networks", "area", "set", "top", "generic"])
    axes = doc.setdefault("axes", {}) if isinstance(doc.get("axes", {}), dict) else {}
    if op == "preset":
        name = ch.choice(["accelerator", "memory", "topology", "interconnect", "style", "compute_share"])
        axes[name] = ch.choice(ODD_AXIS_VALUES)
        return f"axes.{name} = {axes[name]!r}"[:120]
    if op == "axis" and axes:
        name = ch.choice(sorted(axes))
        axes[name] = ch.choice(ODD_AXIS_VALUES + [[0], [1, 2, 3], ["x"]])
        return f"axes.{name} = {axes[name]!r}"[:120]
    if op == "study":
        head = doc.setdefault("study", {}) if isinstance(doc.get("study", {}), dict) else {}
        key = ch.choice(["combine", "filter", "seed", "base", "name", "bogus"])
        head[key] = ch.choice(ODD_VALUES + ["missing.toml", "../"])
        return f"study.{key} = {head[key]!r}"[:120]
    if op == "networks":
        doc["networks"] = ch.choice([{"torus2d": [0, 1]}, {"torus2d": [32]}, {"ring": [4]}, {"torus3d": [[1], 2, 3]},
                                     {"dgx1": {"a": 1}}, [1], {"torus2d": [2**40, 2]}])  # fmt: skip
        return f"networks = {doc['networks']!r}"
    if op == "area":
        doc["area"] = ch.choice([{"units": 1, "memory_unit_bytes": 1}, {"units": 2080}, [1], {"units": True, "memory_unit_bytes": -1},
                                 {"units": 2080, "memory_unit_bytes": 524288, "x": 1}])  # fmt: skip
        return f"area = {doc['area']!r}"
    if op == "set":
        doc["set"] = ch.choice([{"system.num_chip": 0}, {"bogus.path": 1}, {"system.network[9].size": 4},
                                {"a..b": 1}, {"system": {"num_chip": "x"}}, [1], {"execution.equations": "nope"}])  # fmt: skip
        return f"set = {doc['set']!r}"
    if op == "top":
        doc[ch.choice(["bogus", "axis", "study2"])] = {"x": 1}
        return "unknown top-level table"
    return M._toml_mutation(doc, ch)


def study_sources() -> list[tuple[str, str]]:
    """(name, TOML text) of every shipped study and the small study; ``base`` made absolute."""
    out = []
    for path in sorted(STUDIES.glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        doc["study"]["base"] = str((path.parent / doc["study"]["base"]).resolve())
        out.append((path.name, M.dump_toml(doc)))
    doc = tomllib.loads(SMALL_STUDY)
    doc["study"]["base"] = str(SMALL_BASE)
    out += [("small", M.dump_toml(doc))] * 3  # the small one most often: it is also swept
    return out


def check_study_mutant(seed: int, workdir: Path, sources: list[tuple[str, str]]) -> M.Report:
    ch = M.RandomChooser(seed)
    name, text = ch.choice(sources)
    path = workdir / f"s{seed}.toml"
    if ch.integer(0, 19) == 0:
        data, desc = M._file_mutation(text, ch)
        ops = [desc]
    else:
        doc = tomllib.loads(text)
        ops = [study_mutation(doc, ch) for _ in range(ch.choice([1, 1, 2, 3]))]
        try:
            data = M.dump_toml(doc).encode()
        except (TypeError, ValueError):  # a value the small writer cannot write (NaN): as text
            data = text.encode() + b"\nbogus = nan\n"
    path.write_bytes(data)
    label = f"study {seed} ({name}): {'; '.join(ops)}"
    out_dir = workdir / f"s{seed}"
    dry = M.run_inprocess(["sweep", str(path), "-o", str(out_dir), "--dry-run"])
    report = _report(label + " | --dry-run", dry, path.name)
    if not report.failures and dry.code == 0 and name == "small" and dry.output.count("point ") <= 8:
        report = _report(label + " | sweep", M.run_inprocess(["sweep", str(path), "-o", str(out_dir), "-q"]), path.name)
    return report


def _report(label: str, out: M.Outcome, filename: str) -> M.Report:
    failures = M._basic(out, label)
    if out.code == 2 and filename not in out.output and not out.output.lstrip().startswith("-"):
        failures.append(M.Failure("unclear_error", f"{label}: exit 2 without the file name: {M.head(out.output, 2)!r}"))
    return M.Report(label, out.code, out.seconds, failures, M.head(out.output, 3))


def main() -> None:
    ap = argparse.ArgumentParser(description="Fuzz results tables and study files.")
    ap.add_argument("--tables", type=int, default=300)
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/dfsearch-data-mutants"))
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    study, table = small_table(args.workdir)
    reports = [check_table_mutant(args.seed + i, args.workdir, study, table) for i in range(args.tables)]
    sources = study_sources()
    reports += [check_study_mutant(args.seed + i, args.workdir, sources) for i in range(args.studies)]
    bad = [r for r in reports if r.failures]
    codes: dict[Any, int] = {}
    for r in reports:
        codes[r.code] = codes.get(r.code, 0) + 1
    print(f"{len(reports)} mutants ({args.tables} tables, {args.studies} studies), exit codes {codes}, {len(bad)} failing")
    for r in bad:
        print(f"  {r.label}\n    " + "\n    ".join(map(str, r.failures)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
