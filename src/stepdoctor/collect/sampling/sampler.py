"""A thread that snapshots small files (``/proc/stat``, ``/proc/<pid>/stat``) at an interval.

The monitor parses the snapshots when it flushes, twice a second, instead of waking ten times
a second to read and parse: a wake-up, not the reading, is what a sample costs (the first
Python code after 100 ms asleep runs 10-20x slower than warm; docs/overhead.md). The C
``collect/sampling/_sample.Sampler`` runs without the GIL; ``PySampler`` is its Python twin, the
reference and the fallback (``native.c_part``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from stepdoctor.native import c_part, wanted

__all__ = [
    "READ_MAX",
    "SNAPSHOTS_KEPT",
    "PySampler",
    "Sampler",
    "Snapshot",
    "lower_thread_priority",
    "native_sampler",
    "new_sampler",
]

#: The most bytes read of one file (``/proc/stat``'s cpu lines come first; its interrupt
#: lines, which may run past this on a large machine, are not needed).
READ_MAX = 1 << 20
_READ_FIRST = 1 << 16
#: Snapshots kept between two ``take()`` calls: a minute at 10 Hz (the monitor takes them
#: every half second; if it stalls, the oldest are dropped).
SNAPSHOTS_KEPT = 600


def lower_thread_priority(nice: int) -> bool:
    """Give the calling thread ``nice`` (Linux only: elsewhere the value is per process).

    Returns:
        Whether it was set (False off Linux or when the system refused).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError:
        return False
    return True


Snapshot = tuple[int, int, tuple[bytes | None, ...]]
"""``(t_ns, generation, contents)``: ``time.monotonic_ns()`` when taken, the ``set_files``
call whose files it read, and each file's bytes (None: it could not be read)."""


class Sampler(Protocol):
    """Snapshots files at an interval on a thread of its own."""

    @property
    def dropped(self) -> int:
        """Snapshots dropped because ``take()`` came too late."""
        ...

    @property
    def cpu_ns(self) -> int:
        """CPU time the thread spent, once stopped (0 before)."""
        ...

    def set_files(self, paths: Sequence[str]) -> int:
        """Read ``paths`` from the next tick on; return their generation number."""
        ...

    def start(self) -> None:
        """Start the thread (again: nothing)."""
        ...

    def stop(self) -> None:
        """Stop the thread, wait for it and close the files it read (again: nothing)."""
        ...

    def take(self) -> list[Snapshot]:
        """Return the snapshots taken since the last call, oldest first."""
        ...


def _pread(fd: int) -> bytes | None:
    """The file's bytes (up to ``READ_MAX``), or None: it cannot be read (ESRCH: ended)."""
    try:
        data = os.pread(fd, _READ_FIRST, 0)  # a 1 MiB buffer every tick would be an mmap
        if len(data) == _READ_FIRST:
            data = os.pread(fd, READ_MAX, 0)
    except OSError:
        return None
    return data


class PySampler:
    """``Sampler`` on a Python thread: the C one's twin (see ``_sample.c``)."""

    def __init__(
        self, interval_ns: int, capacity: int = SNAPSHOTS_KEPT, nice: int | None = None
    ) -> None:
        if interval_ns <= 0 or capacity <= 0:
            raise ValueError("interval_ns and capacity must be positive")
        self._interval_ns = interval_ns
        self._nice = nice
        self._lock = threading.Lock()
        self._fds: list[int | None] = []
        self._ring: deque[Snapshot] = deque()
        self._capacity = capacity
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()
        self.generation = 0
        self.dropped = 0
        self.cpu_ns = 0

    def set_files(self, paths: Sequence[str]) -> int:
        if os.getpid() != self._owner:
            raise RuntimeError("a Sampler cannot be changed in a forked child")
        fds: list[int | None] = []
        for path in paths:
            try:
                fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                fds.append(None)
        with self._lock:
            old, self._fds = self._fds, fds
            self.generation += 1
            generation = self.generation
        for fd in old:
            if fd is not None:
                os.close(fd)
        return generation

    def start(self) -> None:
        if self._thread is not None:
            return
        if os.getpid() != self._owner:
            raise RuntimeError("a Sampler cannot start in a forked child")
        self._thread = threading.Thread(target=self._run, name="stepdoctor-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None or os.getpid() != self._owner:
            return
        self._stopping.set()
        self._thread.join()
        with self._lock:
            old, self._fds = self._fds, []
        for fd in old:
            if fd is not None:
                os.close(fd)

    def take(self) -> list[Snapshot]:
        if os.getpid() != self._owner:
            return []
        with self._lock:
            taken = list(self._ring)
            self._ring.clear()
        return taken

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.cpu_ns = time.thread_time_ns()

    def _loop(self) -> None:
        if self._nice is not None:
            lower_thread_priority(self._nice)
        next_ns = time.monotonic_ns()
        while True:
            next_ns += self._interval_ns
            now = time.monotonic_ns()
            if next_ns <= now:  # fell behind: start again from now
                next_ns = now + self._interval_ns
            if self._stopping.wait((next_ns - now) / 1e9):
                return
            with self._lock:
                t_ns = time.monotonic_ns()
                contents = tuple(None if fd is None else _pread(fd) for fd in self._fds)
                if len(self._ring) == self._capacity:
                    self._ring.popleft()
                    self.dropped += 1
                self._ring.append((t_ns, self.generation, contents))


def native_sampler() -> Any:
    """The ``_sample`` C module, or None (``native.c_part``: not built or switched off)."""
    return c_part("stepdoctor.collect.sampling._sample", {"READ_MAX": READ_MAX})


def new_sampler(
    interval_ns: int,
    *,
    capacity: int = SNAPSHOTS_KEPT,
    nice: int | None = None,
    native: bool | None = None,
) -> Sampler:
    """A sampler (not started): the C one where built, else ``PySampler``.

    Args:
        native: the C one (True: it must be built), the Python one (False), or the C one
            when built (None).

    Raises:
        RuntimeError: ``native`` is True and the C sampler is not built.
    """
    module = wanted(native_sampler, native, "sampler (collect/sampling/_sample)")
    if module is None:
        return PySampler(interval_ns, capacity, nice)
    sampler: Sampler = module.Sampler(interval_ns, capacity, nice)
    return sampler
