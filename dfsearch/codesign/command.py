"""``dfsearch codesign STUDY -o DIR``: load the study, run its trials, write the outputs and
return the text to print with the summary (the CLI's one entry point into this package,
imported when the command runs since the search behind it loads Numba)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfsearch.codesign.output import summary_lines, write_outputs
from dfsearch.codesign.runner import run_codesign
from dfsearch.codesign.study import load_codesign

__all__ = ["codesign_command"]


def codesign_command(study: Path, output: Path, progress: Callable[[int, int, float, int], None] | None) -> tuple[list[str], dict[str, Any]]:
    """Run the study at ``study``; write into ``output``; (lines to print, summary)."""
    s = load_codesign(study)
    result = run_codesign(s, progress=progress)
    summary = write_outputs(result, output)
    return summary_lines(result, summary), summary
