"""How a tuning run's process ends: ``stepdoctor tune`` runs the job once per change and
repeat, each time in a fresh process, and reads only the record and report it writes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

__all__ = ["end_without_teardown"]


def end_without_teardown(code: int) -> NoReturn:
    """End the process with ``code`` once its record and report are written, as the
    interpreter would end it: the job's threads are waited for and ``concurrent.futures``'
    pools shut down (``threading._shutdown``, first, as at any exit: multiprocessing's exit
    handler waits for a process pool's workers, which only that shutdown tells to leave), the
    exit handlers run (multiprocessing's stops the job's DataLoader workers, which would
    otherwise outlive it into the next run's measurement) and the standard streams are
    flushed; but the interpreter does not tear its modules down: 1.5-2.5 s with torch's
    compiler loaded (torch 2.13 loads it with the first optimizer), a fifth of a 40-step run
    of ``make demo``'s job, paid again by every run of a tuning sweep. What the job left to
    the teardown (a file it never closed) is not flushed: a tuning run's outputs are not the
    job's."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed or broken: nothing more to write
            stream.flush()
    os._exit(code)
