"""``dfsearch codesign STUDY -o DIR``: load the study, run its trials, write the outputs and
return the text to print with the summary (the CLI's one entry point into this package;
importing it is cheap: the search, and Numba with it, load when the first trial runs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfsearch.codesign.output import columns, summary_lines, write_outputs
from dfsearch.codesign.resume import DIGEST, TrialWriter, read_previous, study_digest
from dfsearch.codesign.runner import run_codesign
from dfsearch.codesign.study import load_codesign
from dfsearch.study.commands import progress_printer

__all__ = ["codesign_command", "trial_printer"]


def codesign_command(study: Path, output: Path, show_progress: bool, fresh: bool = False) -> tuple[list[str], dict[str, Any]]:
    """Run the study at ``study``; write into ``output`` (``trials.csv`` row by row: run again
    after an interrupt, the trials already there are read back); (lines to print, summary)."""
    s = load_codesign(study)
    header, digest = columns(s), study_digest(s)
    table = output / "trials.csv"
    previous = read_previous(table, header, digest, fresh, s.file)
    writer = TrialWriter(table, header)
    try:
        result = run_codesign(s, progress=trial_printer() if show_progress else None, previous=previous,
                              on_row=lambda row: writer.write({**row, DIGEST: digest}))  # fmt: skip
    finally:
        writer.close()
    summary = write_outputs(result, output)
    return summary_lines(result, summary), summary


def trial_printer(stream: Any = None) -> Callable[[int, int, float, int], None]:
    """A progress callback writing ``codesign: 12/36 trials, 0.41 s/trial, ETA 0m10s`` to
    stderr (one line rewritten in place on a terminal, a line per trial otherwise)."""
    return progress_printer(stream, what="codesign", unit="trial")


