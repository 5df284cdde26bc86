"""Worker processes that solve outer choices for a search run on several cores.

A ``WorkerPool`` holds ``size`` processes started with the ``spawn`` method (a fresh
interpreter each: no state of the parent, no forked Numba or LLVM threads); each loads the
compiled functions from the on-disk cache (``cost/_jit.py``) on its first task, so no worker
compiles when the cache is warm. A worker gets one ``Task`` at a time over its own pipe: a
lowered ``Problem``, the assignment strategy's name, the seed and the control values (deadline
and evaluation allowance), runs the strategy exactly as the search's own process would, and
sends back a ``Done`` with the ``Assignment``. Workers ignore Ctrl-C (the search's process
handles it and stops them); a worker that dies is dropped and its task solved elsewhere.

Which outer choices are sent, and which answers are kept, is ``search/speculation.py``'s
business; nothing here decides anything a result depends on.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

from dfsearch.search.strategies import assignment_strategy
from dfsearch.search.strategies.base import control_array

if TYPE_CHECKING:
    from dfsearch.cost.lower import Problem
    from dfsearch.search.assign import Assignment

__all__ = ["Task", "Done", "WorkerPool", "can_start_workers", "task_of"]

#: seconds a stopped worker is given to exit before it is killed
JOIN_S = 5.0


@dataclass(frozen=True, slots=True)
class Task:
    """One outer choice to solve: the problem and everything its strategy reads."""

    index: int  #: the caller's name for the task (its place in the search order)
    problem: Problem
    #: the write flag of every array of ``problem.kernels`` and ``problem.edges`` (pickling
    #: makes arrays writable; a read-only array is another Numba type)
    flags: tuple[tuple[bool, ...], tuple[bool, ...]]
    strategy: str  #: the assignment strategy's registry name
    seed: int
    deadline: float  #: ``time.perf_counter`` seconds (inf = none; the clock is system-wide)
    allowance: float  #: evaluations the strategy may spend


@dataclass(frozen=True, slots=True)
class Done:
    """A worker's answer to a ``Task``."""

    index: int
    allowance: float  #: the task's allowance (an answer is valid for smaller ones only so)
    assignment: Assignment
    cpu_s: float  #: the worker's process CPU seconds so far


def can_start_workers() -> bool:
    """Whether this process may start child processes (a daemonic one, e.g. a worker of a
    sweep's pool, may not: its search then runs on one core)."""
    return not multiprocessing.current_process().daemon


def task_of(index: int, problem: Problem, strategy: str, seed: int, deadline: float,
            allowance: float) -> Task:  # fmt: skip
    """A ``Task`` carrying ``problem`` with the write flags of its arrays."""
    flags = (tuple(a.flags.writeable for a in problem.kernels),
             tuple(a.flags.writeable for a in problem.edges))  # fmt: skip
    return Task(index, problem, flags, strategy, seed, deadline, allowance)


def _restore_flags(task: Task) -> None:
    for arrays, flags in zip((task.problem.kernels, task.problem.edges), task.flags, strict=True):
        for a, writeable in zip(arrays, flags, strict=True):
            if not writeable:
                a.setflags(write=False)


def _solve(task: Task) -> Done:
    _restore_flags(task)
    control = control_array(deadline=task.deadline, max_evaluations=task.allowance)
    a = assignment_strategy(task.strategy).assign(task.problem, seed=task.seed, control=control)
    return Done(task.index, task.allowance, a, time.process_time())


def _serve(conn: Connection) -> None:
    """A worker's loop: solve tasks until ``None`` or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (already ignored since it started)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(_solve(task))


@contextlib.contextmanager
def _ctrl_c_ignored() -> Iterator[None]:
    """Ctrl-C ignored while workers start: an ignored signal stays ignored across ``exec``
    and Python then installs no handler of its own, so a Ctrl-C at the terminal (sent to
    every process of the group) never interrupts a worker, not even while it imports."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


class WorkerPool:
    """``size`` worker processes, each with its own pipe (mutable, private to one search)."""

    def __init__(self, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._procs = []
        self._conns: list[Connection] = []
        with _ctrl_c_ignored():
            for _ in range(size):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child,), daemon=True,
                                   name="dfsearch-worker")  # fmt: skip
                proc.start()
                child.close()
                self._procs.append(proc)
                self._conns.append(parent)
        self.busy: list[bool] = [False] * size
        self.alive: list[bool] = [True] * size
        self.cpu_s: list[float] = [0.0] * size  #: each worker's last reported CPU seconds

    def idle(self) -> list[int]:
        """The workers that are alive and have no task."""
        return [w for w, (b, a) in enumerate(zip(self.busy, self.alive, strict=True)) if a and not b]

    def any_alive(self) -> bool:
        return any(self.alive)

    def submit(self, worker: int, task: Task) -> bool:
        """Send ``task`` to an idle worker; False (and the worker dropped) if it died."""
        try:
            self._conns[worker].send(task)
        except (OSError, ValueError):
            self.alive[worker] = False
            return False
        self.busy[worker] = True
        return True

    def collect(self, timeout: float) -> tuple[list[Done], list[int]]:
        """Answers that arrived within ``timeout`` seconds, and the workers that died (their
        task is lost)."""
        conns = [c for c, b, a in zip(self._conns, self.busy, self.alive, strict=True) if a and b]
        done, died = [], []
        for c in wait(conns, timeout) if conns else ():
            w = self._conns.index(c)  # type: ignore[arg-type]
            self.busy[w] = False
            try:
                d = c.recv()  # type: ignore[union-attr]
            except (EOFError, OSError):
                self.alive[w] = False
                died.append(w)
                continue
            self.cpu_s[w] = d.cpu_s
            done.append(d)
        return done, died

    def close(self) -> None:
        """Stop every worker: idle ones are told to exit, busy ones (solving an outer choice
        nobody needs any more) are terminated."""
        for w, proc in enumerate(self._procs):
            if self.alive[w] and not self.busy[w]:
                with contextlib.suppress(OSError, ValueError):
                    self._conns[w].send(None)
            else:
                proc.terminate()
        for proc, conn in zip(self._procs, self._conns, strict=True):
            proc.join(JOIN_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
