"""Time in tests without depending on how fast or how loaded the machine is (issue 21).

A test asserts on work counts where it can. Where a check is about time:

* "this did not hang" counts CPU seconds (``children_cpu_s`` around a subprocess,
  ``time.process_time`` in-process): another process sharing the cores does not inflate them;
* a wall-clock bound that cannot be avoided (a ``--time-limit`` is honoured, a safety
  timeout) is multiplied by ``load_factor()``, and the test is marked ``wallclock``.
"""

from __future__ import annotations

import resource
import time


def load_factor(sample_cpu_s: float = 0.05) -> float:
    """Wall-clock seconds per CPU second of this process just now (1 on an idle machine,
    about 2 when every core is shared by two busy processes); at least 1."""
    w0, c0 = time.perf_counter(), time.process_time()
    spin = 0
    while time.process_time() - c0 < sample_cpu_s:
        spin += 1
    return max(1.0, (time.perf_counter() - w0) / (time.process_time() - c0))


def children_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
