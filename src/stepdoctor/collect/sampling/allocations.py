"""Which lines create the objects that outlive a short traced window (GC pressure, leaks).

When a run shows signs of either — a full (generation-2) collection after warm-up, or the
process's memory growing — ``AllocationWindow`` traces allocations with ``tracemalloc`` for
up to ``WINDOW_S`` seconds (a tenth of the time watched so far), then looks at what is still
alive at the window's end:

- ``gc`` sites: Python objects the collector tracks (containers: dicts, lists, instances),
  allocated in the window and alive at its end, counted by the line that created them. These
  survive the young collections, so every full collection walks them again: the cost of GC
  pauses grows with them.
- ``growth`` sites: bytes allocated in the window and still held at its end (tensors counted
  by their storage's size, which torch allocates outside tracemalloc's view), by line. What a
  leak keeps, it keeps here.

A line is the innermost frame of the job's own code in the allocation's traceback (the
library function below it named as ``caller``'s counterpart). The window slows allocation-heavy
Python code (tracemalloc records a traceback per allocation), so its span is recorded and the
steps in it are left out of the measurements, like the ``--trace`` capture's.

The monitor decides when a window starts, but a thread of the window's own, made by the job's
thread at the job's priority (``arm``), takes its middle reading and ends it on time: the
monitor runs at nice 19, and on a machine whose cores other processes keep busy it may not run
for tens of seconds. Measured before this: with two busy processes on the two cores, a 1.2 s
window stayed open 37 s, the rest of the run, tracing every allocation of the job and taking
the memory readings memory-growth needed with it (tests/scenarios/memory_growth.py found
nothing).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import threading
import tracemalloc
import types
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

from stepdoctor.collect.sampling.survivors import (
    RawTraceback,
    TensorsAlive,
    grown_types,
    held_by_traceback,
    kept_tensors,
    new_tensor_refs,
    objects_by_type,
    surviving_sites,
    tensors_alive,
    user_modules,
)
from stepdoctor.model import AllocationSite

__all__ = [
    "FULL_COLLECTIONS",
    "GROWTH_SHARE",
    "MAX_WINDOW_NS",
    "MIN_WINDOW_NS",
    "TRACE_FRAMES",
    "WAIT_NS",
    "WINDOW_S",
    "WINDOW_STEPS",
    "AllocationWindow",
]

logger = logging.getLogger(__name__)

#: How long allocations are traced. Two seconds hold tens of steps of a typical job and many
#: collections of generation 0; tracemalloc's cost is paid only then.
WINDOW_S = 2.0
#: The shortest window: a few steps of a typical job.
MIN_WINDOW_NS = 1_000_000_000
#: ...and at least this many steps at the pace of the steps before it, so that something the
#: job keeps every few steps is made in the window's first half and seen alive at its end
#: (tests/scenarios/memory_growth.py keeps a copy every 4th step). Tracing slows the steps
#: (1.26x measured on memory_growth.py), so each half holds a little under half of these.
WINDOW_STEPS = 20
#: ...but no longer than this, whatever the pace: a job of slow steps keeps most of them.
MAX_WINDOW_NS = 10_000_000_000
#: How long the run's end waits for the timekeeper to leave: it leaves at once, unless it is
#: taking the window's middle reading or census (tens of ms; seconds on a machine whose other
#: processes keep it off the cores).
TIMEKEEPER_JOIN_S = 10.0
#: Time watched after warm-up before a window may start. The window's steps, and the system
#: samples taken in it, are left out of the rules (tracemalloc's own memory and the census
#: move the job's memory): it lasts a tenth of the time watched before it, so the rules keep
#: most of a short job, unless the job's steps are so slow that ``WINDOW_STEPS`` of them take
#: longer.
WAIT_NS = 1_000_000_000
#: Frames kept per allocation: enough to reach the job's own code from inside torch or the
#: standard library (a DataLoader's collate is ~8 deep).
TRACE_FRAMES = 16
#: Full collections after warm-up that start the window: one can be the job's own
#: ``gc.collect()`` after loading its data, or the collector's rare full pass; two or more in
#: the first seconds after warm-up are GC pressure worth the window's cost.
FULL_COLLECTIONS = 2
#: Memory growing by this share of the process's size since warm-up starts the window
#: (memory-growth's own threshold is a trend over the run; this only decides to look).
GROWTH_SHARE = 0.05


class AllocationWindow:
    """Decide when to trace, trace once, and keep the sites found.

    Args:
        library_roots: folders whose code is not the job's (``hooks.session.library_roots``).
        clock: the record's clock.
        window_s: how long to trace.
    """

    def __init__(
        self,
        library_roots: tuple[str, ...],
        *,
        clock: Callable[[], int],
        window_s: float = WINDOW_S,
    ) -> None:
        self._roots = library_roots
        self._clock = clock
        self._window_ns = int(window_s * 1e9)
        self._full_collections = _full_collections()
        self._base_rss: int | None = None
        self._warm_ns = 0
        self._warm_steps: StepsSoFar | None = None
        self._tensors_before: TensorsAlive = {}
        self._types_before: Counter[str] = Counter()
        self._main: types.ModuleType | None = None
        self._tensors_middle: list[weakref.ref[Any]] = []
        self._middle: Counter[RawTraceback] | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.sites: list[AllocationSite] = []
        self.skipped = ""
        """Why no window ran although one was due (tracemalloc already on: the job's own)."""
        self._lock = threading.Lock()
        """Held by whichever thread moves the window on (the monitor, the timekeeper)."""
        self._opened = threading.Event()
        """Set when the window starts, or when no window will run (the timekeeper's cue)."""
        self._ending = threading.Event()
        """Set when the run ends: no window starts now, and the timekeeper stops waiting."""
        self._timekeeper: threading.Thread | None = None
        self._due = False
        """The monitor found the window due; the timekeeper starts it."""
        self._reported = False

    def arm(self) -> None:
        """Start the window's timekeeper thread (once). Call it from the job's thread: a
        thread is born at its creator's priority, and the monitor's is lowered."""
        if self._timekeeper is None:
            self._timekeeper = threading.Thread(
                target=self._keep_time, name="stepdoctor-allocations", daemon=True
            )
            self._timekeeper.start()

    def _keep_time(self) -> None:
        """The timekeeper: once the window is due, start it, take its middle reading and end
        it when due, whatever the monitor's share of the CPU. The census that starts it holds
        the GIL for tens of milliseconds: a thread at nice 19 that other processes keep off the
        cores holds it for seconds (measured: 2 steps in an 8.8 s window, the job's pace 43 ms
        a step, with two busy processes on the two cores)."""
        try:
            self._opened.wait()
            with self._lock:
                if not self._due or self._ending.is_set():
                    return
                self._start(self._clock())
            for due in (self._window_ns // 2, self._window_ns):
                started = self.started_ns
                if started is None:
                    return
                delay = started + due - self._clock()
                if delay > 0 and self._ending.wait(delay / 1e9):
                    return  # the run ended: stop() ended the window
                with self._lock:
                    if self.ended_ns is not None:
                        return
                    self._advance(self._clock())
        except Exception as exc:  # never break the job over our own bug
            logger.warning("stepdoctor: the allocation window stopped: %r", exc)
            with self._lock, contextlib.suppress(Exception):
                if self.ended_ns is None:
                    tracemalloc.stop()
                    self.ended_ns = self._clock()
                    self.skipped = f"the allocation window failed: {exc!r}"

    @property
    def done(self) -> bool:
        return self.ended_ns is not None or bool(self.skipped)

    def warmed_up(self, rss_bytes: int | None, steps: StepsSoFar | None = None) -> None:
        """The job's warm-up is over (``steps``: the steps made by then): later growth and
        full collections count from now."""
        if self._base_rss is None:
            self._base_rss = rss_bytes or 0
            self._full_collections = _full_collections()
            self._warm_ns = self._clock()
            self._warm_steps = steps

    def tick(self, rss_bytes: int | None, steps: StepsSoFar | None = None) -> bool:
        """Find the window due (and, without a timekeeper, start and end it); return True
        once, when it has ended (sites ready). ``steps``: the steps made so far (the window's
        length follows their pace)."""
        with self._lock:
            if self._reported or self._base_rss is None:
                return False
            if self.ended_ns is not None:
                self._reported = True
                return not self.skipped
            if self.skipped:
                return False
            now = self._clock()
            if self.started_ns is None:
                if not self._due:
                    self._maybe_start(now, rss_bytes, steps)
                return False
            if self._timekeeper is None:
                self._advance(now)
                self._reported = self.ended_ns is not None
                return self._reported
            return False

    def _maybe_start(self, now: int, rss_bytes: int | None, steps: StepsSoFar | None) -> None:
        watched = now - self._warm_ns
        if watched < WAIT_NS:
            return
        grew = bool(
            rss_bytes and self._base_rss and rss_bytes > self._base_rss * (1 + GROWTH_SHARE)
        )
        full = _full_collections() - self._full_collections >= FULL_COLLECTIONS
        if not (grew or full):
            return
        # a tenth of the time watched so far: the job's rules keep the rest
        window = max(MIN_WINDOW_NS, min(self._window_ns, watched // 10))
        pace = _pace(self._warm_steps, steps)
        if pace is not None:
            window = max(window, min(MAX_WINDOW_NS, WINDOW_STEPS * pace))
        self._window_ns = window
        self._due = True
        if self._timekeeper is None:
            self._start(now)
        self._opened.set()

    def _advance(self, now: int) -> None:
        """Take the middle reading, or end the window, when due (the lock held)."""
        assert self.started_ns is not None
        if self._middle is None and now - self.started_ns >= self._window_ns // 2:
            self._middle = held_by_traceback()[0]
            self._tensors_middle = new_tensor_refs(self._tensors_before)
            self._tensors_before = {}
        if now - self.started_ns >= self._window_ns:
            self._finish()

    def stop(self) -> bool:
        """The run ends: end a window still open; return whether one ended that was not
        reported yet. Its sites are kept when it ran at least half its length (a shorter one
        saw the job's end, not its steps). The timekeeper is gone when it returns (a thread
        left over after the run ends is the job's to see)."""
        ended = self._stop()
        keeper = self._timekeeper
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(timeout=TIMEKEEPER_JOIN_S)
        return ended

    def _stop(self) -> bool:
        with self._lock:
            self._ending.set()
            self._opened.set()  # a timekeeper still waiting for a window: none will come
            if self._reported or self.started_ns is None:
                return False
            self._reported = True
            if self.ended_ns is not None:
                return not self.skipped
            if self._clock() - self.started_ns < self._window_ns // 2:
                tracemalloc.stop()
                # nothing of the job's kept past its end, not even weakly
                self._tensors_before, self._tensors_middle, self._main = {}, [], None
                self.ended_ns = self._clock()
                self.skipped = "the job ended as the allocation window began: no allocation sites"
                return False
            self._finish()
            return True

    def _start(self, now: int) -> None:
        if tracemalloc.is_tracing():
            self.skipped = "tracemalloc was already on (the job's own): no allocation window"
            return
        self._tensors_before = tensors_alive()
        self._types_before = objects_by_type()
        # the job's script as a module: runpy takes it out of sys.modules when the script
        # returns, which may come before the window's census
        self._main = sys.modules.get("__main__")
        tracemalloc.start(TRACE_FRAMES)
        self.started_ns = now

    def _finish(self) -> None:
        modules = [] if self._main is None else [self._main]
        self._main = None
        try:
            self.sites = surviving_sites(self._roots, since=self._middle, modules=modules)
        finally:
            tracemalloc.stop()
        try:  # tracing is off: what the census allocates is not traced, nor slowed by it
            self.sites += kept_tensors(
                self._tensors_middle, modules=user_modules(modules, self._roots)
            )
            self.sites += grown_types(self._types_before, objects_by_type())
        finally:
            self._tensors_middle = []
            self.ended_ns = self._clock()


StepsSoFar = tuple[int, int]
"""The steps the job has made so far and the last one's end (the record's clock)."""


def _pace(since: StepsSoFar | None, now: StepsSoFar | None) -> int | None:
    """Nanoseconds a step between two counts of the steps, from the steps' own times: the
    monitor that counts them may lag the job on a busy machine."""
    if since is None or now is None or now[0] <= since[0]:
        return None
    return (now[1] - since[1]) // (now[0] - since[0])


def _full_collections() -> int:
    return int(gc.get_stats()[-1]["collections"])
