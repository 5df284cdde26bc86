"""Reading input files: the one way dfsearch reads its inputs (specs, graph files, DFModel
``setup.txt``, mapping and study files), below every reader of a format.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dfsearch.errors import SpecError

__all__ = ["MAX_INPUT_MB", "read_text"]

#: Inputs (specs, graph files, setup.txt, mapping files) larger than this are refused.
MAX_INPUT_MB = 64


def read_text(path: str | Path) -> str:
    """The UTF-8 text of an input file; the one way dfsearch reads its inputs.

    Only regular files are read (not a device such as ``/dev/zero``, a FIFO or a folder), and at
    most :data:`MAX_INPUT_MB` MB of them, so a wrong path fails at once instead of reading
    forever.

    Raises
    ------
    SpecError
        Missing, not a regular file, too large, unreadable or not UTF-8; names the file.
    """
    name = str(path)
    limit = MAX_INPUT_MB * 1_000_000
    too_large = f"is larger than {MAX_INPUT_MB} MB: not a dfsearch input."
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise SpecError("is a directory, not a file.", file=name)
        if not stat.S_ISREG(info.st_mode):
            msg = "is not a regular file (a device, FIFO or socket); expected a text file."
            raise SpecError(msg, file=name)
        if info.st_size > limit:
            raise SpecError(too_large, file=name)
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise SpecError("no such file.", file=name) from None
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror or e}.", file=name) from None
    if len(data) > limit:  # grew while being read, or a special file that says size 0
        raise SpecError(too_large, file=name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        msg = f"cannot read: not UTF-8 text ({e.reason} at byte {e.start})."
        raise SpecError(msg, file=name) from None
