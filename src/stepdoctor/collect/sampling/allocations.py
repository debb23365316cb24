"""Which lines create the objects that outlive a short traced window (GC pressure, leaks).

When a run shows signs of either — a full (generation-2) collection after warm-up, or the
process's memory growing — ``AllocationWindow`` traces allocations with ``tracemalloc`` for
``WINDOW_S`` seconds, then looks at what is still alive at the window's end:

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
import gc
import logging
import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable

from stepdoctor.model import AllocationSite

__all__ = [
    "GROWTH_SHARE",
    "TOP_ALLOCATION_SITES",
    "TRACE_FRAMES",
    "WINDOW_S",
    "AllocationWindow",
    "surviving_sites",
]

logger = logging.getLogger(__name__)

#: How long allocations are traced. Two seconds hold tens of steps of a typical job and many
#: collections of generation 0; tracemalloc's cost is paid only then.
WINDOW_S = 2.0
#: Frames kept per allocation: enough to reach the job's own code from inside torch or the
#: standard library (a DataLoader's collate is ~8 deep).
TRACE_FRAMES = 16
#: Memory growing by this share of the process's size since warm-up starts the window
#: (memory-growth's own threshold is a trend over the run; this only decides to look).
GROWTH_SHARE = 0.05
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

    def tick(self, rss_bytes: int | None) -> bool:
        """Start or end the window when due; return True when it just ended (sites ready)."""
        if self.done or self._base_rss is None:
            return False
        now = self._clock()
        if self.started_ns is None:
            grew = bool(
                rss_bytes and self._base_rss and rss_bytes > self._base_rss * (1 + GROWTH_SHARE)
            )
            if grew or _full_collections() > self._full_collections:
                self._start(now)
            return False
        if now - self.started_ns < self._window_ns:
            return False
        self._finish()
        return True

    def stop(self) -> bool:
        """The run ends: end a window still open (its sites are kept); return whether one
        was."""
        if self.started_ns is not None and self.ended_ns is None:
            self._finish()
            return True
        return False

    def _start(self, now: int) -> None:
        if tracemalloc.is_tracing():
            self.skipped = "tracemalloc was already on (the job's own): no allocation window"
            return
        tracemalloc.start(TRACE_FRAMES)
        self.started_ns = now

    def _finish(self) -> None:
        try:
            self.sites = surviving_sites(self._roots)
        finally:
            tracemalloc.stop()
            self.ended_ns = self._clock()


def _full_collections() -> int:
    return int(gc.get_stats()[-1]["collections"])


def surviving_sites(
    library_roots: tuple[str, ...], *, top: int = TOP_ALLOCATION_SITES
) -> list[AllocationSite]:
    """The sites of what tracemalloc traced and is still alive, now (tracemalloc must be on)."""
    snapshot = tracemalloc.take_snapshot()
    tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
    counts: Counter[tuple[str, int, str]] = Counter()
    sizes: Counter[tuple[str, int, str]] = Counter()
    where: dict[tuple[str, int, str], tuple[str, bool, str]] = {}
    tensor_bytes: Counter[tuple[str, int, str]] = Counter()
    for obj in gc.get_objects():
        trace = tracemalloc.get_object_traceback(obj)
        if trace is None or _ours(trace, library_roots):
            continue
        key, info = _site(trace, library_roots)
        where[key] = info
        counts[key] += 1
        sizes[key] += sys.getsizeof(obj)
        if tensor_type is not None and isinstance(obj, tensor_type):
            # a tensor without storage (meta, sparse): its object only
            with contextlib.suppress(Exception):
                tensor_bytes[key] += obj.untyped_storage().nbytes()
    del obj
    grown: Counter[tuple[str, int, str]] = Counter()
    blocks: Counter[tuple[str, int, str]] = Counter()
    for stat in snapshot.statistics("traceback"):
        if _ours(stat.traceback, library_roots):
            continue
        key, info = _site(stat.traceback, library_roots)
        where.setdefault(key, info)
        grown[key] += stat.size
        blocks[key] += stat.count
    grown.update(tensor_bytes)
    out = _ranked("gc", counts, sizes, where, by_count=True, top=top)
    out += _ranked("growth", blocks, grown, where, by_count=False, top=top)
    return out


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
    ours, library = roots[0], roots
    return any(f.filename.startswith(ours) for f in trace) and all(
        f.filename.startswith(library) or f.filename.startswith("<frozen ") for f in trace
    )


def _site(
    trace: tracemalloc.Traceback, roots: tuple[str, ...]
) -> tuple[tuple[str, int, str], tuple[str, bool, str]]:
    """(file, line, function) of the innermost frame of the job's own code in ``trace``
    (oldest frame first), else of its innermost frame; and (the library call below it as
    ``file:line``, whether it is the job's code, "")."""
    frames = list(trace)
    at = next(
        (i for i in range(len(frames) - 1, -1, -1) if not frames[i].filename.startswith(roots)),
        None,
    )
    user = at is not None and not frames[at].filename.startswith("<frozen ")
    index = len(frames) - 1 if at is None else at
    frame = frames[index]
    below = frames[index + 1] if index + 1 < len(frames) else None
    caller = f"{below.filename}:{below.lineno}" if below is not None else ""
    return (frame.filename, frame.lineno, _function(frame.filename, frame.lineno)), (
        caller,
        user,
        "",
    )


def _function(file: str, line: int) -> str:
    """The function holding ``file:line``: tracemalloc keeps lines, not functions; found from
    the loaded modules' code objects (cached)."""
    return _functions_of(file).get(line, "<module>")


_FUNCTIONS: dict[str, dict[int, str]] = {}


def _functions_of(file: str) -> dict[int, str]:
    found = _FUNCTIONS.get(file)
    if found is not None:
        return found
    lines: dict[int, str] = {}
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) != file:
            continue
        for value in list(vars(module).values()):
            _collect(value, lines, 0)
    _FUNCTIONS[file] = lines
    return lines


def _collect(value: object, lines: dict[int, str], depth: int) -> None:
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    if code is not None:
        _code_lines(code, lines)
    elif isinstance(value, type) and depth < 2:
        for member in list(vars(value).values()):
            _collect(member, lines, depth + 1)


def _code_lines(code: object, lines: dict[int, str]) -> None:
    name = getattr(code, "co_qualname", "")
    for _, _, line in getattr(code, "co_lines", list)():
        if line is not None:
            lines.setdefault(line, name)
    for const in getattr(code, "co_consts", ()):
        if hasattr(const, "co_lines"):
            _code_lines(const, lines)
