"""The output folder of a sweep: checked before any work, and locked while a sweep writes
to it, so that two sweeps never append to the same table.

The lock is an advisory operating-system lock (``fcntl.flock`` on POSIX, ``msvcrt.locking``
on Windows) on the file ``.dfsearch.lock`` in the folder. The operating system releases it
when the process ends, however it ends (Ctrl-C, ``kill -9``, a crash): a stale lock never
blocks the next sweep, and the file itself may stay. On a platform with neither call, or
on a file system that does not support the lock (some network file systems), the sweep
runs unlocked and says so on stderr.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from dfsearch.errors import Issue, SpecError

__all__ = ["LOCK_NAME", "output_folder", "folder_lock"]

LOCK_NAME = ".dfsearch.lock"


def output_folder(folder: str | Path, option: str = "-o") -> Path:
    """``folder`` created if missing and checked writable.

    Raises
    ------
    SpecError
        It is a file, it cannot be created, or it cannot be written (exit 2).
    """
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise SpecError(Issue(option, f"{str(path)!r} is a file; expected a folder for results.csv (it is created if missing)."))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecError(Issue(option, f"{str(path)!r}: cannot create the folder: {e.strerror or e}.")) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise SpecError(Issue(option, f"{str(path)!r}: cannot write in this folder: permission denied."))
    return path


@contextlib.contextmanager
def folder_lock(folder: Path, option: str = "-o") -> Iterator[None]:
    """Hold the lock of ``folder`` for the duration of the block.

    Raises
    ------
    SpecError
        Another process holds it (another sweep writes to this folder), or the lock file
        cannot be created (exit 2).
    """
    lock = folder / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise SpecError(Issue(option, f"{str(folder)!r}: cannot write in this folder: {e.strerror or e}.")) from None
    try:
        if not _try_lock(fd):
            os.lseek(fd, 0, os.SEEK_SET)
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            msg = (f"{str(folder)!r} is in use: another sweep (process {holder}) is writing its results there. "
                   "Wait for it to finish, stop it, or choose another output folder.")  # fmt: skip
            raise SpecError(Issue(option, msg))
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def _try_lock(fd: int) -> bool:
    """True when this process now holds the lock (or the platform has none)."""
    try:
        import fcntl
    except ImportError:
        fcntl = None  # type: ignore[assignment]
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        import msvcrt  # type: ignore[import-not-found]

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        return True
    except ImportError:
        sys.stderr.write("note: no file lock on this platform; the output folder is not locked.\n")
        return True
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK, errno.EDEADLK):
            return False
        sys.stderr.write(f"note: the output folder could not be locked ({e.strerror or e}); running unlocked.\n")
        return True
