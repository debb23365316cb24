"""A thread that samples the Python stack of the job's loop thread, for "where in the code".

Each sample appends a ``SAMPLE`` event to the hot path's event buffer, so the reducer, which
replays the events in order, tags it with the phase the loop was in (``collect/reduce/
reducer.py``): no phase is guessed from timestamps.

An in-process sampler reads a thread's stack only once it holds the GIL. When the job's thread
runs Python code, the sampler waits until the job gives the GIL up: at the interpreter's switch
interval (5 ms), or earlier in a call that releases it (a torch op, I/O). Such a sample lands
later than it was due, at a release point: on its own, a pure-Python loop followed by a model
call would put the loop's samples in the model's forward (measured: 21% of the samples in a
forward that took 0.5% of the time). So the ``SAMPLE`` event carries the time the sample was
*due* (``_frames.sleep_read`` and ``_sample.sleep_until`` tell the wait for the GIL apart
from the sleep, without the GIL), and the reducer drops a sample when the loop's thread
appended an event between that time and the sample: it straddles a phase change. A sample
kept fell in the phase it was due in, at a point where that phase's code released the GIL or
was switched out (the same bias every in-process sampler has: pyinstrument, cProfile's
callers). ``py-spy`` reads stacks from outside without that limit (docs/stacks.md compares the
two).

The wait can be long where the job's thread holds the GIL in C code and lets it go now and
then for a moment: each release wakes the sampler before CPython asks the holder to give the
GIL up, and the holder takes it back first (samples due in a JSON parse waited up to 5 ms and
landed in the collate's ``torch.stack``, 9-47% of a data wait's samples for 2.6% of its
time). So where the sampled thread is the main thread, ``_frames.sleep_read`` also asks it,
through CPython's pending calls, to read its own stack at its next bytecode boundary; the
first reading, its own or the sampler's (the main thread was in code that let the GIL go), is
the sample.

A DataLoader worker (a forked child) samples itself the same way, with no phase to tag
(``WORKER_PHASE``), and appends its samples to a file of its own in the run folder
(``worker_file``), which the parent reads when the run ends. Its times are
``time.perf_counter_ns()``, the record's clock (CLOCK_MONOTONIC on Linux, one clock for every
process of the machine).

A stack is read by ``_frames.thread_stack`` (C): the interpreter's own frame records, in one
call that runs no Python code, so the job's thread cannot pop a frame while it is read. Walking
``sys._current_frames()``' frame objects from Python instead crashes CPython 3.11 now and then
(``_frames.c`` says why): where that C part is not built, 3.12 and later walk frame objects
(``python_stack``), and 3.11 does not sample in-process at all (``in_process_safe``; the
session tries py-spy instead).
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from stepdoctor.collect.sampling._code import qualified_name
from stepdoctor.collect.sampling.sampler import lower_thread_priority, native_sampler
from stepdoctor.model import WORKER_PHASE, CodeFrame, CodeStack, StackSample

__all__ = [
    "MAX_DEPTH",
    "SAMPLE_INTERVAL_S",
    "SWITCH_US",
    "FrameTable",
    "Stack",
    "StackSampler",
    "WorkerStacks",
    "frame_walker",
    "in_process_safe",
    "python_stack",
    "read_worker_stacks",
    "worker_file",
]

logger = logging.getLogger(__name__)

#: Default sampling period: 50 Hz, half py-spy's default rate. At 100 Hz the sampler took
#: ~1% from a 1.6 ms-step job on two busy cores (benchmarks/overhead.py: its wake-ups and
#: GIL hand-overs, the job's threads waiting for a core); 50 Hz still gives a second of a phase
#: 50 samples, five times the least a phase needs for sites (``rules/where.py``).
SAMPLE_INTERVAL_S = 0.02
#: The sampling thread's nice value: None, the job's own priority. At nice 19 (as the monitor)
#: it ran only when a core came free, and on two cores that had torch's threads busy it then
#: named the wrong function: a data set's JSON parsing (96% of its data wait) lost to the
#: DataLoader's collate in 2 of 3 runs (benchmarks/stacks.py). Its cost at the job's priority
#: is in docs/stacks.md.
SAMPLER_NICE: int | None = None
#: The switch interval while the sampling thread waits for the GIL (``_gilwait.h``; CPython
#: 3.11: from 3.12 it can be set only with the GIL held): the job's thread gives the GIL up at
#: its next bytecode boundary instead of up to 5 ms later. Measured on a data set parsing JSON
#: in C (json.loads holds the GIL) and collating with torch.stack (which releases it): at the
#: default interval 100% of the data wait's samples landed in the collate, which took 1.6% of
#: it; with this one, and with the main thread reading its own stack, docs/stacks.md.
SWITCH_US = 20
#: Frames kept of one stack, innermost first (deeper recursion is cut at its outer end).
MAX_DEPTH = 200
#: How often a DataLoader worker appends its samples to its file.
WORKER_FLUSH_S = 0.5
_WORKER_GLOB = "stacks-worker-*.jsonl"
#: The frames ``frame_walker`` reads at most: MAX_DEPTH of the job's, and stepdoctor's own.
_WALK_LIMIT = MAX_DEPTH + 50

Stack = list[tuple[CodeType, int]]
"""A thread's Python stack as ``(code, line)`` pairs, innermost first."""


def frame_walker() -> Callable[[int], Stack | None] | None:
    """``_frames.thread_stack`` bound to ``_WALK_LIMIT``: a thread's stack by thread id (None:
    no such thread), read in C without frame objects; None where that part is not built (no
    C compiler at install, or a CPython it was not written for). Not switched off by
    ``STEPDOCTOR_PURE_PYTHON``: it is what makes sampling safe, not a faster twin."""
    try:
        module = importlib.import_module("stepdoctor.collect.sampling._frames")
    except ImportError:
        return None
    walk = getattr(module, "thread_stack", None)
    if walk is None:
        return None
    return lambda thread_id: walk(thread_id, _WALK_LIMIT)


def _native_sleep_read() -> Callable[[int, int, int, int, bool], Any] | None:
    """``_frames.sleep_read`` (Linux, where ``_frames`` is built), or None. Like
    ``frame_walker``, not switched off by ``STEPDOCTOR_PURE_PYTHON``: it reads the stack where
    the sample was due, which no Python twin can."""
    try:
        module = importlib.import_module("stepdoctor.collect.sampling._frames")
    except ImportError:
        return None
    return getattr(module, "sleep_read", None)


def python_stack(frame: FrameType | None, limit: int = _WALK_LIMIT) -> Stack:
    """The stack ending in ``frame``, walked through frame objects: safe for the calling
    thread's own frames; for another thread's, only where ``in_process_safe`` says so."""
    stack: Stack = []
    while frame is not None and len(stack) < limit:
        stack.append((frame.f_code, frame.f_lineno or 0))
        frame = frame.f_back
    return stack


def in_process_safe(walker: Callable[[int], Stack | None] | None) -> bool:
    """Whether another thread's stack can be sampled in this process: with ``frame_walker``,
    or with ``sys._current_frames`` on CPython 3.10, whose frames are objects of their own,
    and on 3.12 and later, where a frame object no longer keeps a link to a popped frame
    (3.11's does: ``_frames.c``)."""
    if walker is not None:
        return True
    return hasattr(sys, "_current_frames") and sys.version_info[:2] != (3, 11)


def _current_stack(thread_id: int) -> Stack | None:
    """``frame_walker``'s fallback: the thread's stack through ``sys._current_frames``."""
    frame = sys._current_frames().get(thread_id)
    return None if frame is None else python_stack(frame)


class FrameTable:
    """Interns functions (``CodeFrame``) and stacks (``CodeStack``); hands out the new ones.

    Args:
        library_roots: folders whose code is not the job's (``os.path.join(root, "")`` each);
            the first is stepdoctor's own, whose frames are left out of stacks.
        cut_at: qualified names of functions where a stack starts: they and the frames
            outside them are left out (a forked worker's stack holds its parent's frames at
            the fork above ``BaseProcess._bootstrap``).
    """

    def __init__(self, library_roots: tuple[str, ...], cut_at: tuple[str, ...] = ()) -> None:
        self._ours = library_roots[0] if library_roots else None
        self._cut_at = cut_at
        self._library = library_roots
        self._codes: dict[int, tuple[CodeType, int | None]] = {}
        """id(code) -> (the code, kept so that its id is not reused; its frame id: see
        ``_frame_id``)."""
        self._stacks: dict[tuple[int, ...], int] = {}
        self.new_frames: list[CodeFrame] = []
        self.new_stacks: list[CodeStack] = []
        self._frame_count = 0
        self._user: set[int] = set()
        self.line = 0
        """The line of the last ``stack_id``'s stack (see there)."""

    def stack_id(self, stack: Stack | None) -> int | None:
        """Return the id of ``stack`` (``(code, line)`` pairs, innermost first: a
        ``frame_walker`` or ``python_stack`` result); None: no frame of the job's. The line its
        innermost frame of the job's code (else its innermost frame) was at is left in
        ``line``."""
        key: list[int] = []
        self.line = 0
        user_line = 0
        for code, at in stack or ():
            if len(key) >= MAX_DEPTH:
                break
            line = max(at, 0)  # -1: no line (CPython's answer for an unknown offset)
            known = self._codes.get(id(code))
            if known is None:
                known = self._codes[id(code)] = (code, self._frame_id(code))
            if known[1] is not None:
                if known[1] < 0:
                    break
                if not key:
                    self.line = line
                if not user_line and known[1] in self._user:
                    user_line = line
                key.append(known[1])
        self.line = user_line or self.line
        if not key:
            return None
        key.reverse()
        found = self._stacks.get(tuple(key))
        if found is None:
            found = self._stacks[tuple(key)] = len(self._stacks)
            self.new_stacks.append(CodeStack(id=found, frames=tuple(key)))
        return found

    def take(self) -> tuple[list[CodeFrame], list[CodeStack]]:
        """Return the frames and stacks interned since the last call."""
        frames, self.new_frames = self.new_frames, []
        stacks, self.new_stacks = self.new_stacks, []
        return frames, stacks

    def _frame_id(self, code: CodeType) -> int | None:
        """A new frame's id; None: stepdoctor's own (left out); -1: a frame to cut at."""
        file = code.co_filename
        if not file.startswith("<"):  # a script started by a relative path
            file = os.path.abspath(file)
        if self._ours is not None and file.startswith(self._ours):
            return None
        if qualified_name(code) in self._cut_at:
            return -1
        frame_id = self._frame_count
        self._frame_count += 1
        user = not file.startswith(self._library) and not file.startswith("<frozen ")
        if user:
            self._user.add(frame_id)
        self.new_frames.append(
            CodeFrame(
                id=frame_id,
                function=qualified_name(code),
                file=file,
                line=code.co_firstlineno,
                user=user,
            )
        )
        return frame_id


class StackSampler:
    """Sample one thread's stack on a daemon thread of its own.

    Args:
        thread_id: the thread to sample (``threading.get_ident()`` of the job's loop).
        table: interns what is sampled.
        mark: called with ``(t_ns, sample id)`` as each sample is taken, with the GIL held
            (the session appends the ``SAMPLE`` event; None: no phase is tagged).
        clock: the event buffer's clock.
        interval_s: the sampling period.
        read_stack: a thread's stack by thread id (None: no such thread); default
            ``frame_walker()``, else ``sys._current_frames`` (a seam for tests).
        nice: the sampling thread's nice value (Linux; None: the job's).
    """

    def __init__(
        self,
        *,
        thread_id: int,
        table: FrameTable,
        mark: Callable[[int, int], None] | None,
        clock: Callable[[], int] = time.perf_counter_ns,
        interval_s: float = SAMPLE_INTERVAL_S,
        read_stack: Callable[[int], Stack | None] | None = None,
        nice: int | None = SAMPLER_NICE,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.table = table
        self._thread_id = thread_id
        self._mark = mark
        self._clock = clock
        self._interval_s = interval_s
        self._read_stack = read_stack or frame_walker() or _current_stack
        self._sleep_read = None if read_stack is not None else _native_sleep_read()
        """``_frames.sleep_read`` (the wait and the read in one call), where built."""
        self._ask_main = thread_id == threading.main_thread().ident
        self._nice = nice
        self._samples: list[tuple[int, int, int, int]] = []
        """(sample id, t_ns, stack id, line), since the last take."""
        self._next_id = 0
        self._table_lock = threading.Lock()
        self._events_kept: list[StackSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cpu_ns = 0
        """The sampling thread's CPU time, once stopped."""
        native = native_sampler()
        self._sleep_until: Callable[[int, int], tuple[int, int]] = (
            _sleep_until if native is None else native.sleep_until
        )
        self.failed: str | None = None
        """Why sampling stopped early (an exception of ours), or None."""

    def start(self) -> None:
        """Start sampling (again: nothing). A sampler left running is stopped before the
        interpreter shuts down: asleep there, it would ask the main thread for its stack
        after the interpreter freed its queue of calls (``_frames.c``)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="stepdoctor-stacks", daemon=True)
            self._thread.start()
            atexit.register(self.stop)

    def stop(self) -> None:
        """Stop sampling and wait for the thread (again: nothing)."""
        atexit.unregister(self.stop)
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def sample(self, waited_ns: int = 0) -> None:
        """Take one sample now (the thread calls this; tests may too).

        Args:
            waited_ns: how long the sampling thread waited for the GIL: the sample is due
                that long ago, and its ``SAMPLE`` event says so (module docstring).
        """
        self._keep(self._read_stack(self._thread_id), waited_ns)

    def _keep(self, read: Stack | None, waited_ns: int) -> None:
        """Keep ``read``, the stack sampled ``waited_ns`` after it was due (None: no such
        thread)."""
        if read is None:
            return
        with self._table_lock:
            t_ns = self._clock() - waited_ns
            sample_id = self._next_id
            self._next_id += 1
            if self._mark is not None:
                self._mark(t_ns, sample_id)
            stack = self.table.stack_id(read)
            self._samples.append((sample_id, t_ns, -1 if stack is None else stack, self.table.line))

    def record(self, stack: Stack, phase: str) -> None:
        """Keep ``stack`` (the calling thread's own) as a sample of ``phase`` now: an event of
        the job's (a full collection starting) rather than a timed sample. Called from the
        job's thread (a ``gc.callbacks`` entry): skipped when the sampling thread holds the
        frame table."""
        if not self._table_lock.acquire(blocking=False):
            return
        try:
            found = self.table.stack_id(stack)
            if found is not None:
                self._events_kept.append(
                    StackSample(t_ns=self._clock(), stack=found, phase=phase, line=self.table.line)
                )
        finally:
            self._table_lock.release()

    def take_table(self) -> tuple[list[CodeFrame], list[CodeStack]]:
        """Return the frames and stacks interned since the last call (``FrameTable.take``,
        with the table held: a sample may be interning on another thread)."""
        with self._table_lock:
            return self.table.take()

    def take_events(self) -> list[StackSample]:
        """Return the samples ``record`` kept since the last call."""
        kept, self._events_kept = self._events_kept, []
        return kept

    @property
    def next_id(self) -> int:
        """The id the next sample will have (every sample before ``next_id - 1`` has been
        handed to ``take``'s list)."""
        return self._next_id

    def take(self) -> list[tuple[int, int, int, int]]:
        """Return ``(sample id, t_ns, stack id, line)`` of the samples since the last call
        (stack -1: no frame of the job's, e.g. only stepdoctor's; line: ``FrameTable.line``)."""
        samples, self._samples = self._samples, []
        return samples

    def _run(self) -> None:
        interval_ns = int(self._interval_s * 1e9)
        if self._nice is not None:
            lower_thread_priority(self._nice)
        try:
            due = time.monotonic_ns() + interval_ns
            while not self._stop.is_set():
                if self._sleep_read is not None:
                    woke, got, read, _ = self._sleep_read(
                        due, SWITCH_US, self._thread_id, _WALK_LIMIT, self._ask_main
                    )
                else:
                    woke, got = self._sleep_until(due, SWITCH_US)
                if self._stop.is_set():
                    break
                due += interval_ns * (1 + max(0, got - due) // interval_ns)
                waited_ns = max(0, time.monotonic_ns() - woke)
                if self._sleep_read is not None:
                    self._keep(read, waited_ns)
                else:
                    self.sample(waited_ns=waited_ns)
        except Exception as exc:  # never break the job over our own bug
            self.failed = repr(exc)
            logger.warning("stepdoctor: stack sampling stopped: %r", exc)
        finally:
            self.cpu_ns = time.thread_time_ns()


def _sleep_until(deadline_ns: int, switch_us: int = 0) -> tuple[int, int]:
    """``_sample.sleep_until``'s twin: it cannot tell the wait for the GIL from the sleep (so
    every sample is taken as due when it got the GIL)."""
    time.sleep(max(0, deadline_ns - time.monotonic_ns()) / 1e9)
    now = time.monotonic_ns()
    return now, now


def worker_file(run_dir: Path, pid: int) -> Path:
    """The file a DataLoader worker's samples go to."""
    return run_dir / f"stacks-worker-{pid}.jsonl"


class WorkerStacks:
    """A DataLoader worker's own sampler: its main thread, written to ``worker_file``.

    Started in the forked child (``Session._after_fork_in_child``); a worker ends with
    ``os._exit``, so its thread writes what it has every ``WORKER_FLUSH_S``, each line a
    complete JSON object (a line cut short by the worker's end is skipped by the reader).
    """

    def __init__(self, run_dir: Path, table: FrameTable, interval_s: float) -> None:
        self.pid = os.getpid()
        self._path = worker_file(run_dir, self.pid)
        self._sampler = StackSampler(
            thread_id=threading.get_ident(),
            table=table,
            mark=None,
            clock=time.perf_counter_ns,
            interval_s=interval_s,
        )
        self._thread = threading.Thread(
            target=self._run, name="stepdoctor-worker-stacks", daemon=True
        )

    def start(self) -> None:
        """Start sampling and writing."""
        self._sampler.start()
        self._thread.start()

    def _run(self) -> None:
        try:
            with open(self._path, "a", encoding="utf-8") as out:
                while True:
                    time.sleep(WORKER_FLUSH_S)
                    self._write(out)
        except Exception as exc:  # a worker's sampling is best effort
            logger.debug("stepdoctor: worker stack sampling stopped: %r", exc)

    def _write(self, out: Any) -> None:
        frames, stacks = self._sampler.take_table()
        samples = self._sampler.take()
        line = {
            "frames": [[f.id, f.function, f.file, f.line, f.user] for f in frames],
            "stacks": [[s.id, list(s.frames)] for s in stacks],
            "samples": [[t, stack, line] for _, t, stack, line in samples if stack >= 0],
        }
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
        out.flush()


def read_worker_stacks(
    run_dir: Path,
    frames: list[CodeFrame],
    stacks: list[CodeStack],
    *,
    keep: set[int],
) -> tuple[list[CodeFrame], list[CodeStack], list[StackSample], int]:
    """Read the DataLoader workers' sample files of a run and delete them.

    Each worker numbered its frames and stacks from 0: they become the ids of the same
    function or stack in ``frames`` and ``stacks`` (the parent's), or new ids after them.
    Files of processes not in ``keep`` (forked children that were not DataLoader workers) are
    deleted unread.

    Returns:
        (new frames, new stacks, samples, lines that could not be read).
    """
    frame_ids = {(f.function, f.file, f.line): f.id for f in frames}
    stack_ids = {s.frames: s.id for s in stacks}
    next_frame = max(frame_ids.values(), default=-1) + 1
    next_stack = max(stack_ids.values(), default=-1) + 1
    new_frames: list[CodeFrame] = []
    new_stacks: list[CodeStack] = []
    samples: list[StackSample] = []
    bad = 0
    for path in sorted(run_dir.glob(_WORKER_GLOB)):
        try:
            pid = int(path.stem.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid not in keep:
            path.unlink(missing_ok=True)
            continue
        frame_map: dict[int, int] = {}
        stack_map: dict[int, int] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            bad += 1
            continue
        for text in lines:
            try:
                line = json.loads(text)
                for fid, function, file, fline, user in line["frames"]:
                    key = (function, file, fline)
                    if key not in frame_ids:
                        frame_ids[key] = next_frame
                        new_frames.append(
                            CodeFrame(id=next_frame, function=function, file=file, line=fline,
                                      user=bool(user))
                        )  # fmt: skip
                        next_frame += 1
                    frame_map[fid] = frame_ids[key]
                for sid, ids in line["stacks"]:
                    stack = tuple(frame_map[i] for i in ids)
                    if stack not in stack_ids:
                        stack_ids[stack] = next_stack
                        new_stacks.append(CodeStack(id=next_stack, frames=stack))
                        next_stack += 1
                    stack_map[sid] = stack_ids[stack]
                samples.extend(
                    StackSample(
                        t_ns=t, stack=stack_map[s], phase=WORKER_PHASE, process=pid, line=at
                    )
                    for t, s, at in line["samples"]
                )
            except (ValueError, KeyError, TypeError):
                bad += 1
        path.unlink(missing_ok=True)
    return new_frames, new_stacks, samples, bad
