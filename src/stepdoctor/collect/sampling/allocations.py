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

import collections
import contextlib
import dataclasses
import functools
import gc
import logging
import os
import sys
import threading
import tracemalloc
import types
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

from stepdoctor.collect.sampling._code import qualified_name
from stepdoctor.collect.sampling.sampler import native_sampler
from stepdoctor.model import AllocationSite

__all__ = [
    "FULL_COLLECTIONS",
    "GROWTH_MIN_BYTES",
    "GROWTH_SHARE",
    "MAX_WINDOW_NS",
    "MIN_WINDOW_NS",
    "OLD_TAIL",
    "TOP_ALLOCATION_SITES",
    "TRACE_FRAMES",
    "WAIT_NS",
    "WINDOW_S",
    "WINDOW_STEPS",
    "AllocationWindow",
    "grown_types",
    "kept_tensors",
    "objects_by_type",
    "surviving_sites",
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
#: A line must add this many bytes over the window to count as growth: CPython's free lists
#: (tuples, floats, dicts, lists) keep freed objects, which tracemalloc sees as held, and
#: fill over tens of kilobytes (measured: 28 KiB of a TensorDataset's sample tuples in one
#: second). 64 KiB in 2 s is ~2 MiB/min, below what memory-growth reports.
GROWTH_MIN_BYTES = 64 * 1024
#: The census of the window's surviving objects reads this many of the newest objects of
#: generation 2 (those that survived the window's collections are appended there); the C
#: census holds the GIL while it runs, ~0.1 µs an object.
OLD_TAIL = 500_000
#: Sites kept of each kind.
TOP_ALLOCATION_SITES = 5


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
            self._tensors_middle = _new_tensor_refs(self._tensors_before)
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
        self._tensors_before = _tensors_alive()
        self._types_before = objects_by_type()
        # the job's script as a module: runpy takes it out of sys.modules when the script
        # returns, which may come before the window's census
        self._main = sys.modules.get("__main__")
        tracemalloc.start(TRACE_FRAMES)
        self.started_ns = now

    def _finish(self) -> None:
        try:
            modules = [] if self._main is None else [self._main]
            self._main = None
            self.sites = surviving_sites(self._roots, since=self._middle, modules=modules)
            self.sites += kept_tensors(
                self._tensors_middle, modules=_user_modules(modules, self._roots)
            )
            self._tensors_middle = []
        finally:
            tracemalloc.stop()
        try:  # tracing is off: the count allocates nothing it would trace
            self.sites += grown_types(self._types_before, objects_by_type())
        finally:
            self.ended_ns = self._clock()


StepsSoFar = tuple[int, int]
"""The steps the job has made so far and the last one's end (the record's clock)."""


def _pace(since: StepsSoFar | None, now: StepsSoFar | None) -> int | None:
    """Nanoseconds a step between two counts of the steps, from the steps' own times: the
    monitor that counts them may lag the job on a busy machine."""
    if since is None or now is None or now[0] <= since[0]:
        return None
    return (now[1] - since[1]) // (now[0] - since[0])


def _tensor_type() -> type | None:
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor if isinstance(tensor, type) else None


def _tensors() -> list[Any]:
    """The tensors alive now (none when torch is not imported or the C census is not built:
    a census from Python code is not safe while the job runs, see ``_sample.c``)."""
    tensor = _tensor_type()
    census = native_sampler()
    if tensor is None or census is None:
        return []
    tensors: list[Any] = census.instances(tensor)
    return tensors


TensorsAlive = dict[int, "weakref.ref[Any]"]
"""The tensors alive at a moment, by id, each held weakly: an id alone is no identity (a
tensor freed since frees its id, and the job's next tensor often gets it: CPython's allocator
hands out the block freed last)."""


def _tensors_alive() -> TensorsAlive:
    """The tensors alive now, by id."""
    alive: TensorsAlive = {}
    for obj in _tensors():
        with contextlib.suppress(TypeError):
            alive[id(obj)] = weakref.ref(obj)
    return alive


def _new_tensor_refs(before: TensorsAlive) -> list[weakref.ref[Any]]:
    """Weak references to the tensors alive now that were not alive at ``before``."""
    refs = []
    for obj in _tensors():
        old = before.get(id(obj))
        if old is not None and old() is obj:
            continue
        with contextlib.suppress(TypeError):
            refs.append(weakref.ref(obj))
    return refs


def kept_tensors(
    made: list[weakref.ref[Any]],
    *,
    modules: list[types.ModuleType] | None = None,
    top: int = TOP_ALLOCATION_SITES,
) -> list[AllocationSite]:
    """The tensors of ``made`` (made in the window's first half) still alive: kept beyond the
    step that made them. Grouped by dtype, shape and the operation that made them
    (``grad_fn``: a tensor that keeps its autograd graph), with what holds them (tracemalloc
    does not see torch's tensor objects, so they have no creation line)."""
    groups: dict[tuple[str, tuple[int, ...], str], list[Any]] = {}
    nbytes: Counter[tuple[str, tuple[int, ...], str]] = Counter()
    storages: set[int] = set()
    for ref in made:
        obj = ref()
        if obj is None:
            continue
        grad_fn = type(obj.grad_fn).__name__ if obj.grad_fn is not None else ""
        key = (str(obj.dtype).removeprefix("torch."), tuple(obj.shape), grad_fn)
        groups.setdefault(key, []).append(obj)
        with contextlib.suppress(Exception):  # no storage (meta, sparse): counted as 0 bytes
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:  # views of one storage count it once
                storages.add(storage.data_ptr())
                nbytes[key] += storage.nbytes()
    obj = None
    total = sum(nbytes.values())
    ranked = sorted(groups, key=lambda k: (-nbytes[k], -len(groups[k])))[:top]
    out = []
    for key in ranked:
        dtype, shape, grad_fn = key
        what = f"{dtype}[{', '.join(map(str, shape))}]" + (f" with {grad_fn}" if grad_fn else "")
        out.append(
            AllocationSite(
                kind="tensors",
                file="",
                line=0,
                function=what,
                user=True,
                count=len(groups[key]),
                size_bytes=nbytes[key],
                share=nbytes[key] / total if total else len(groups[key]) / len(made),
                caller=_holder_of(groups[key], modules or [])
                or (
                    "autograd graphs (saved for the backward of tensors kept with their graph)"
                    if grad_fn
                    else ""
                ),
            )
        )
    groups.clear()
    return out


def _holder_of(members: list[Any], modules: list[types.ModuleType]) -> str:
    """What holds the first of ``members`` (up to 5 tried) that a global of ``modules`` holds:
    ``list 'kept' (global of train.py)``. Only module globals are searched, by identity:
    ``gc.get_referrers`` would hand Python code every container of the process (``_sample.c``
    says why that is not safe while the job runs)."""
    wanted = {id(m) for m in members[:5]}
    for module in modules:
        try:
            items = list(vars(module).items())
        except Exception:  # a module whose namespace cannot be read
            continue
        file = getattr(module, "__file__", None) or getattr(module, "__name__", "?")
        for name, value in items:
            if _holds(value, wanted):
                return f"{type(value).__name__} {name!r} (global of {file})"
    return ""


def _holds(value: object, wanted: set[int]) -> bool:
    try:
        if isinstance(value, dict):
            return any(id(v) in wanted for v in list(value.values()))
        if isinstance(value, list | tuple | set | frozenset | collections.deque):
            return any(id(v) in wanted for v in list(value))
    except Exception:  # changed while read (another thread): not found
        return False
    return False


RawTraceback = tuple[tuple[str, int], ...]
"""A traceback as tracemalloc keeps it: ``(file, line)`` frames, the most recent first."""


def held_by_traceback() -> tuple[Counter[RawTraceback], Counter[RawTraceback]]:
    """Bytes and blocks alive now that tracemalloc traced, by traceback. Read from
    ``tracemalloc._get_traces()`` (the list ``take_snapshot`` wraps), which hands out one
    tuple per distinct traceback: grouping by its id is cheap, where a snapshot's
    ``statistics`` builds and hashes an object per trace (measured: 6.8 s for a window of
    156,000 allocations here; this takes a few hundredths of that)."""
    sizes: Counter[RawTraceback] = Counter()
    blocks: Counter[RawTraceback] = Counter()
    get_traces = getattr(tracemalloc, "_get_traces", None)
    if get_traces is None:  # not CPython's tracemalloc: the public, slower way
        for stat in tracemalloc.take_snapshot().statistics("traceback"):
            raw = tuple((f.filename, f.lineno) for f in reversed(stat.traceback))
            sizes[raw] += stat.size
            blocks[raw] += stat.count
        return sizes, blocks
    by_id: dict[int, RawTraceback] = {}
    size_by_id: dict[int, int] = {}
    count_by_id: Counter[int] = Counter()
    for trace in get_traces():
        raw = trace[2]
        key = id(raw)
        if key not in by_id:
            by_id[key] = raw
            size_by_id[key] = 0
        size_by_id[key] += trace[1]
        count_by_id[key] += 1
    for key, raw in by_id.items():
        sizes[raw] += size_by_id[key]
        blocks[raw] += count_by_id[key]
    return sizes, blocks


def objects_by_type() -> Counter[str]:
    """The collector's objects counted by type (``module.Name``), by the C census (none where
    it is not built)."""
    census = native_sampler()
    counts: Counter[str] = Counter()
    if census is None:
        return counts
    for kind, n in census.count_by(type, -1, -1).items():
        module = getattr(kind, "__module__", "")
        if not isinstance(module, str):  # a type whose __module__ is a descriptor
            module = ""
        if module == "stepdoctor" or module.startswith("stepdoctor."):
            continue  # our own records of the run (samples, steps): not the job's
        name = getattr(kind, "__qualname__", "?")
        if not isinstance(name, str):
            name = "?"
        counts[name if module == "builtins" else f"{module}.{name}"] += n
    return counts


def grown_types(
    before: Counter[str], after: Counter[str], *, top: int = TOP_ALLOCATION_SITES
) -> list[AllocationSite]:
    """The types the collector holds more of at the window's end than at its start: Python
    objects by type, the first thing to look at for a leak that tracemalloc's lines leave
    vague (a cache of instances filled from many places)."""
    grown = {name: after[name] - before.get(name, 0) for name in after}
    grown = {name: n for name, n in grown.items() if n > 0}
    total = sum(grown.values())
    ranked = sorted(grown.items(), key=lambda item: -item[1])[:top]
    return [
        AllocationSite(
            kind="types",
            file="",
            line=0,
            function=name,
            user=True,
            count=n,
            size_bytes=0,
            share=n / total,
        )
        for name, n in ranked
    ]


def _objects_by_traceback() -> Counter[RawTraceback]:
    """The collector's objects that tracemalloc traced, counted by traceback: generations 0
    and 1, and the newest ``OLD_TAIL`` objects of generation 2 (objects that survive a
    collection are appended to the older generation). Counted by the C census (``_sample.c``:
    the job's thread may be building one of these objects); none where it is not built."""
    census = native_sampler()
    get = getattr(tracemalloc, "_get_object_traceback", None)
    counts: Counter[RawTraceback] = Counter()
    if census is None or get is None:
        return counts
    for generation, tail in ((0, -1), (1, -1), (2, OLD_TAIL)):
        counts.update(census.count_by(get, generation, tail))
    return counts


def _user_modules(first: list[types.ModuleType], roots: tuple[str, ...]) -> list[types.ModuleType]:
    """``first``, then the loaded modules of the job's own code (not a library's)."""
    mods = list(first)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and not _absolute(file).startswith(roots) and module not in mods:
            mods.append(module)
    return mods


def _full_collections() -> int:
    return int(gc.get_stats()[-1]["collections"])


def surviving_sites(
    library_roots: tuple[str, ...],
    *,
    since: Counter[RawTraceback] | None = None,
    modules: list[types.ModuleType] | None = None,
    top: int = TOP_ALLOCATION_SITES,
) -> list[AllocationSite]:
    """The sites of what tracemalloc traced and is still alive now (tracemalloc must be on).

    ``gc`` sites count the collector's objects alive; ``growth`` sites the bytes that both
    halves of the window added (``since``: ``held_by_traceback()`` in its middle): what kept
    growing, not what was made once and kept (a DataLoader's epoch of shuffled indices).
    """
    held, held_blocks = held_by_traceback()
    counts: Counter[tuple[str, int, str]] = Counter()
    sizes: Counter[tuple[str, int, str]] = Counter()
    where: dict[tuple[str, int, str], tuple[str, bool, str]] = {}
    traces: dict[RawTraceback, tracemalloc.Traceback] = {}
    sites: dict[tracemalloc.Traceback, tuple[str, int, str] | None] = {}

    def site_of(raw: RawTraceback) -> tuple[str, int, str] | None:
        trace = traces.get(raw)
        if trace is None:
            trace = traces[raw] = tracemalloc.Traceback(raw)
        if trace not in sites:
            key = None
            if not _ours(trace, library_roots):
                key, where[key] = _site(trace, library_roots)
            sites[trace] = key
        return sites[trace]

    for raw, n in _objects_by_traceback().items():
        key = site_of(raw)
        if key is not None:
            counts[key] += n
            sizes[key] += held.get(raw, 0)
    grown: Counter[tuple[str, int, str]] = Counter()
    blocks: Counter[tuple[str, int, str]] = Counter()
    if since is None:
        halves = [held]
    else:
        second = held.copy()
        second.subtract(since)
        halves = [since, second]
    per_half: list[Counter[tuple[str, int, str]]] = []
    for half_held in halves:
        half: Counter[tuple[str, int, str]] = Counter()
        for raw, size in half_held.items():
            if size > 0:
                key = site_of(raw)
                if key is not None:
                    half[key] += size
        per_half.append(half)
    for raw, n in held_blocks.items():
        key = site_of(raw) if raw in traces else None
        if key is not None:
            blocks[key] += n
    # Growth is what both halves of the window added: a line that allocates once (a new
    # epoch's shuffled indices) adds in one half only.
    for key in per_half[0]:
        grown[key] = min(half[key] for half in per_half)
    grown = Counter({k: v for k, v in grown.items() if v * len(per_half) >= GROWTH_MIN_BYTES})
    out = _ranked("gc", counts, sizes, where, by_count=True, top=top)
    out += _ranked("growth", blocks, grown, where, by_count=False, top=top)
    names = _function_names({(a.file, a.line) for a in out}, modules or [])
    return [dataclasses.replace(a, function=names.get((a.file, a.line), "<module>")) for a in out]


def _ranked(
    kind: str,
    counts: Counter[tuple[str, int, str]],
    sizes: Counter[tuple[str, int, str]],
    where: dict[tuple[str, int, str], tuple[str, bool, str]],
    *,
    by_count: bool,
    top: int,
) -> list[AllocationSite]:
    ranked = counts if by_count else sizes
    total = sum(ranked.values())
    if not total:
        return []
    out = []
    for key, value in ranked.most_common(top):
        caller, user, _ = where[key]
        out.append(
            AllocationSite(
                kind=kind,
                file=key[0],
                line=key[1],
                function=key[2],
                user=user,
                count=counts[key],
                size_bytes=sizes[key],
                share=value / total,
                caller=caller,
            )
        )
    return out


def _ours(trace: tracemalloc.Traceback, roots: tuple[str, ...]) -> bool:
    """Whether stepdoctor made the allocation (a frame of its own, none of the job's)."""
    files = [_absolute(f.filename) for f in trace]
    return any(f.startswith(roots[0]) for f in files) and all(
        f.startswith(roots) or f.startswith("<") for f in files
    )


def _site(
    trace: tracemalloc.Traceback, roots: tuple[str, ...]
) -> tuple[tuple[str, int, str], tuple[str, bool, str]]:
    """(file, line, function) of the innermost frame of the job's own code in ``trace``
    (oldest frame first), else of its innermost frame; and (the library call below it as
    ``file:line``, whether it is the job's code, "")."""
    frames = [(_absolute(f.filename), f.lineno) for f in trace]
    at = next(
        (
            i
            for i in range(len(frames) - 1, -1, -1)
            if not frames[i][0].startswith(roots) and not frames[i][0].startswith("<")
        ),
        None,
    )
    index = len(frames) - 1 if at is None else at
    file, line = frames[index]
    below = frames[index + 1] if index + 1 < len(frames) else None
    caller = f"{below[0]}:{below[1]}" if below is not None else ""
    return (file, line, ""), (caller, at is not None, "")


@functools.lru_cache(maxsize=4096)
def _absolute(file: str) -> str:
    """``file`` as an absolute path (a script started by a relative path has relative code
    file names); ``<...>`` names as they are."""
    return file if file.startswith("<") else os.path.abspath(file)


def _function_names(
    lines: set[tuple[str, int]], extra: list[types.ModuleType]
) -> dict[tuple[str, int], str]:
    """The qualified name of the function holding each ``(file, line)`` (tracemalloc keeps
    lines, not functions), from the code of the loaded modules of those files: their
    functions, classes' methods and the functions nested in them."""
    files = {file for file, _ in lines}
    found: dict[tuple[str, int], str] = {}
    for module in [*extra, *sys.modules.values()]:
        module_file = getattr(module, "__file__", None)
        if not isinstance(module_file, str) or _absolute(module_file) not in files:
            continue
        for value in list(vars(module).values()):
            members = list(vars(value).values()) if isinstance(value, type) else [value]
            for member in members:
                code = getattr(getattr(member, "__func__", member), "__code__", None)
                if isinstance(code, types.CodeType) and _absolute(code.co_filename) in files:
                    _code_lines(code, lines, found)
    return found


def _code_lines(
    code: types.CodeType, wanted: set[tuple[str, int]], found: dict[tuple[str, int], str]
) -> None:
    for _, _, line in code.co_lines():
        key = (_absolute(code.co_filename), line or 0)
        if key in wanted:
            found[key] = qualified_name(code)  # nested code (below) is more precise: it wins
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_lines(const, wanted, found)
