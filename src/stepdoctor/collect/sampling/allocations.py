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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import logging
import os
import sys
import time
import tracemalloc
import types
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from stepdoctor.model import AllocationSite

__all__ = [
    "CENSUS_BUDGET_S",
    "GROWTH_MIN_BYTES",
    "GROWTH_SHARE",
    "MIN_WINDOW_NS",
    "OLD_RUN",
    "TOP_ALLOCATION_SITES",
    "TRACE_FRAMES",
    "WAIT_NS",
    "WINDOW_S",
    "AllocationWindow",
    "kept_tensors",
    "surviving_sites",
]

logger = logging.getLogger(__name__)

#: How long allocations are traced. Two seconds hold tens of steps of a typical job and many
#: collections of generation 0; tracemalloc's cost is paid only then.
WINDOW_S = 2.0
#: The shortest window: a few steps of a typical job.
MIN_WINDOW_NS = 1_000_000_000
#: Time watched after warm-up before a window may start. The window's steps, and the system
#: samples taken in it, are left out of the rules (tracemalloc's own memory and the census
#: move the job's memory): it is at most a tenth of the time watched before it, so the rules
#: keep most of a short job.
WAIT_NS = 1_000_000_000
#: Frames kept per allocation: enough to reach the job's own code from inside torch or the
#: standard library (a DataLoader's collate is ~8 deep).
TRACE_FRAMES = 16
#: Memory growing by this share of the process's size since warm-up starts the window
#: (memory-growth's own threshold is a trend over the run; this only decides to look).
GROWTH_SHARE = 0.05
#: A line must add this many bytes over the window to count as growth: CPython's free lists
#: (tuples, floats, dicts, lists) keep freed objects, which tracemalloc sees as held, and
#: fill over tens of kilobytes (measured: 28 KiB of a TensorDataset's sample tuples in one
#: second). 64 KiB in 2 s is ~2 MiB/min, below what memory-growth reports.
GROWTH_MIN_BYTES = 64 * 1024
#: The census of the window's surviving objects stops after this many objects of generation 2
#: in a row that were made before the window (the newest are at its end).
OLD_RUN = 20_000
#: ... or after this long: it holds the GIL (a step of the job waits).
CENSUS_BUDGET_S = 0.3
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
        self._tensors_before: set[int] = set()
        self._main: types.ModuleType | None = None
        self._tensors_middle: list[weakref.ref[Any]] = []
        self._middle: Counter[RawTraceback] | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.sites: list[AllocationSite] = []
        self.skipped = ""
        """Why no window ran although one was due (tracemalloc already on: the job's own)."""

    @property
    def done(self) -> bool:
        return self.ended_ns is not None or bool(self.skipped)

    def warmed_up(self, rss_bytes: int | None) -> None:
        """The job's warm-up is over: later growth and full collections count from now."""
        if self._base_rss is None:
            self._base_rss = rss_bytes or 0
            self._full_collections = _full_collections()
            self._warm_ns = self._clock()

    def tick(self, rss_bytes: int | None) -> bool:
        """Start or end the window when due; return True when it just ended (sites ready)."""
        if self.done or self._base_rss is None:
            return False
        now = self._clock()
        if self.started_ns is None:
            if now - self._warm_ns < WAIT_NS:
                return False
            grew = bool(
                rss_bytes and self._base_rss and rss_bytes > self._base_rss * (1 + GROWTH_SHARE)
            )
            if grew or _full_collections() > self._full_collections:
                # a tenth of the time watched so far: the job's rules keep the rest
                self._window_ns = max(
                    MIN_WINDOW_NS, min(self._window_ns, (now - self._warm_ns) // 10)
                )
                self._start(now)
            return False
        if self._middle is None and now - self.started_ns >= self._window_ns // 2:
            self._middle = held_by_traceback()[0]
            self._tensors_middle = _new_tensor_refs(self._tensors_before)
            self._tensors_before = set()
        if now - self.started_ns < self._window_ns:
            return False
        self._finish()
        return True

    def stop(self) -> bool:
        """The run ends: end a window still open; return whether one was. Its sites are kept
        when it ran at least half its length (a shorter one saw the job's end, not its
        steps)."""
        if self.started_ns is None or self.ended_ns is not None:
            return False
        if self._clock() - self.started_ns < self._window_ns // 2:
            tracemalloc.stop()
            self.ended_ns = self._clock()
            self.skipped = "the job ended as the allocation window began: no allocation sites"
            return False
        self._finish()
        return True

    def _start(self, now: int) -> None:
        if tracemalloc.is_tracing():
            self.skipped = "tracemalloc was already on (the job's own): no allocation window"
            return
        self._tensors_before = _tensor_ids()
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
            self.sites += kept_tensors(self._tensors_middle)
            self._tensors_middle = []
        finally:
            tracemalloc.stop()
            self.ended_ns = self._clock()


def _tensor_type() -> type | None:
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor if isinstance(tensor, type) else None


def _tensor_ids() -> set[int]:
    """The ids of the tensors alive now (none when torch is not imported)."""
    tensor = _tensor_type()
    if tensor is None:
        return set()
    return {id(obj) for obj in gc.get_objects() if issubclass(type(obj), tensor)}


def _new_tensor_refs(before: set[int]) -> list[weakref.ref[Any]]:
    """Weak references to the tensors alive now that were not in ``before`` (ids)."""
    tensor = _tensor_type()
    if tensor is None:
        return []
    refs = []
    for obj in gc.get_objects():
        if issubclass(type(obj), tensor) and id(obj) not in before:
            with contextlib.suppress(TypeError):
                refs.append(weakref.ref(obj))
    return refs


def kept_tensors(
    made: list[weakref.ref[Any]], *, top: int = TOP_ALLOCATION_SITES
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
                caller=_holder_of(groups[key], groups)
                or (
                    "autograd graphs (saved for the backward of tensors kept with their graph)"
                    if grad_fn
                    else ""
                ),
            )
        )
    groups.clear()
    return out


def _holder_of(members: list[Any], groups: dict[Any, list[Any]]) -> str:
    """What holds the first of ``members`` (up to 5 tried) that something named holds."""
    for index in range(min(5, len(members))):
        found = _holder(members[index], groups)
        if found:
            return found
    return ""


def _holder(obj: object, groups: dict[Any, list[Any]]) -> str:
    """What holds ``obj``: ``list 'kept' (global of train.py)``, ``dict``; "" when nothing
    but stepdoctor's own lists and frames does."""
    ours = {id(groups), *(id(v) for v in groups.values())}
    for ref in gc.get_referrers(obj):
        if id(ref) in ours or isinstance(ref, types.FrameType):
            continue
        container = type(ref).__name__
        for owner in gc.get_referrers(ref):
            if id(owner) in ours or not isinstance(owner, dict):
                continue
            name = next((k for k, v in owner.items() if v is ref and isinstance(k, str)), None)
            if name is None:
                continue
            module = owner.get("__file__") if "__name__" in owner else None
            where = f" (global of {module})" if isinstance(module, str) else ""
            return f"{container} {name!r}{where}"
        if isinstance(ref, dict):
            return "dict"
        return container
    return ""


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


def _young_objects() -> Iterator[object]:
    """The collector's objects that may have been made in the window: generations 0 and 1,
    then generation 2 from its newest end (objects that survive are appended there), until
    ``OLD_RUN`` objects in a row that tracemalloc did not trace or ``CENSUS_BUDGET_S`` is
    spent. A process holding millions of objects (a cache of dicts) would otherwise take
    seconds of the job's GIL."""
    deadline = time.perf_counter() + CENSUS_BUDGET_S
    for generation in (0, 1):
        yield from gc.get_objects(generation=generation)
    old = gc.get_objects(generation=2)
    untraced = 0
    for index in range(len(old) - 1, -1, -1):
        obj = old[index]
        if tracemalloc.get_object_traceback(obj) is None:
            untraced += 1
            if untraced >= OLD_RUN:
                return
        else:
            untraced = 0
        yield obj
        if index % 1024 == 0 and time.perf_counter() > deadline:
            return


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
    sites: dict[tracemalloc.Traceback, tuple[str, int, str] | None] = {}
    for obj in _young_objects():
        trace = tracemalloc.get_object_traceback(obj)
        if trace is None:
            continue
        if trace in sites:
            key = sites[trace]
        else:
            key = None
            if not _ours(trace, library_roots):
                key, where_info = _site(trace, library_roots)
                where[key] = where_info
            sites[trace] = key
        if key is not None:
            counts[key] += 1
            sizes[key] += sys.getsizeof(obj)
    grown: Counter[tuple[str, int, str]] = Counter()
    blocks: Counter[tuple[str, int, str]] = Counter()
    traces: dict[RawTraceback, tracemalloc.Traceback] = {}
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
            if size <= 0:
                continue
            trace = traces.get(raw)
            if trace is None:
                trace = traces[raw] = tracemalloc.Traceback(raw)
            if trace in sites:
                key = sites[trace]
            else:
                key = None
                if not _ours(trace, library_roots):
                    key, where_info = _site(trace, library_roots)
                    where[key] = where_info
                sites[trace] = key
            if key is not None:
                half[key] += size
        per_half.append(half)
    for raw, n in held_blocks.items():
        key = sites.get(traces[raw]) if raw in traces else None
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
            found[key] = code.co_qualname  # nested code (below) is more precise: it wins
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_lines(const, wanted, found)
