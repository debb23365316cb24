"""The running sums a GC log's parser feeds, event by event, with GCViewer's definitions
(``model.jvm``): memory stays bounded whatever the log's length.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stepdoctor.model.jvm import GcCause, GcPause, GcProblem, JvmGcLog

__all__ = ["KEPT_PAUSES", "LONGEST_KEPT", "UNPARSED_SAMPLES", "GcStats", "log_number"]

#: Pauses kept for the timeline: past this, every other one kept is dropped and the stride
#: doubles (a 1 GB log holds millions; a plot shows a few thousand points). The sums are
#: always over every pause.
KEPT_PAUSES = 20_000
#: The longest pauses, always kept whole (the long-pause finding names them).
LONGEST_KEPT = 10
#: Lines that could not be read, shown as samples.
UNPARSED_SAMPLES = 5


def log_number(text: str) -> float:
    """A number as a JVM wrote it, in any locale (``0,0354890`` or ``0.0354890``)."""
    return float(text.replace(",", "."))


@dataclass(slots=True)
class _Cause:
    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0


@dataclass(slots=True)
class GcStats:
    """Accumulates one log's events in file order."""

    source: str
    format: str
    collector: str = ""
    pauses: int = 0
    total_pause_s: float = 0.0
    max_pause_s: float = 0.0
    full_gcs: int = 0
    full_pause_s: float = 0.0
    first_t_s: float | None = None
    last_t_s: float | None = None
    started_unix_s: float | None = None
    safepoint_pauses: int = 0
    safepoint_s: float = 0.0
    concurrent_s: float = 0.0
    heap_max_bytes: int | None = None
    metaspace_after_bytes: int | None = None
    metaspace_total_bytes: int | None = None
    lines: int = 0
    unparsed: int = 0
    events: int = 0
    pause_times_known: bool = True
    unparsed_samples: list[str] = field(default_factory=list)
    _causes: dict[tuple[str, str], _Cause] = field(default_factory=dict)
    _problem_first: dict[str, float] = field(default_factory=dict)
    _problem_count: dict[str, int] = field(default_factory=dict)
    _timeline: list[GcPause] = field(default_factory=list)
    _stride: int = 1
    _seen: int = 0
    _longest: list[tuple[float, int, GcPause]] = field(default_factory=list)
    _last_pause: GcPause | None = None
    """The last stop-the-world event (GCViewer's running time adds its pause)."""
    _last_was_gc: bool = False
    _since_stop: float = 0.0
    utc_offset_s: float | None = None
    """The UTC offset of the log's dates (the first one's), to line them up with another log's
    local times."""
    _first_date: float | None = None
    zgc_phases: int = 0
    """ZGC's pauses (``Pause Mark Start`` ...) read: none beside its cycles, the log was
    written with ``-Xlog:gc`` and says no pause times."""
    zgc_cycles: int = 0
    last_collection: tuple[int, str, float] = (-1, "", 0.0)
    """The last collection of a unified log: its GC id, kind, and pause where it was a full
    one (Serial logs a full collection that ran inside a failed young one before it)."""

    def date_seconds(self, text: str | None) -> float | None:
        """A log date's Unix time (``2012-04-26T23:59:50.253+0200``); the first one's UTC
        offset is kept (``utc_offset_s``)."""
        if text is None:
            return None
        try:
            moment = datetime.strptime(text.replace(",", "."), "%Y-%m-%dT%H:%M:%S.%f%z")
        except ValueError:
            return None
        if self.utc_offset_s is None:
            offset = moment.utcoffset()
            self.utc_offset_s = 0.0 if offset is None else offset.total_seconds()
        return moment.timestamp()

    def timestamp(self, t_s: float | None, unix_s: float | None) -> float | None:
        """The event's time in seconds: its uptime, or where the log has dates only, the
        seconds since the first event's date (GCViewer's ``makeSureHasTimeStamp``)."""
        if unix_s is not None and self._first_date is None:
            self._first_date = unix_s
            self.started_unix_s = unix_s
        if t_s is not None:
            return t_s
        if unix_s is not None and self._first_date is not None:
            return round(unix_s - self._first_date, 3)
        return None

    def _saw(self, t_s: float | None) -> None:
        self.events += 1
        if t_s is None:
            return
        # an event at 0 counts for the start only when it is the first (GCViewer: a mixed
        # line's event may have lost its timestamp)
        if self.events == 1 or t_s > 0.0:
            self.first_t_s = t_s if self.first_t_s is None else min(self.first_t_s, t_s)
        self.last_t_s = t_s if self.last_t_s is None else max(self.last_t_s, t_s)

    def concurrent(self, t_s: float | None, seconds: float = 0.0) -> None:
        """A concurrent phase: no pause, but it counts for the log's span."""
        self._saw(t_s)
        self.concurrent_s += seconds

    def pause(
        self,
        t_s: float | None,
        pause_s: float,
        kind: str,
        cause: str = "",
        *,
        heap: tuple[int | None, int | None, int | None] = (None, None, None),
        unix_s: float | None = None,
    ) -> None:
        """A stop-the-world GC pause at ``t_s`` (None where its line had no time stamp: a log
        without any, ``-verbose:gc`` alone, spans no known time: no span, no throughput);
        ``heap``: the heap's bytes before and after it, and its size."""
        timed = t_s is not None
        pause = GcPause(
            t_s=t_s if t_s is not None else (self.last_t_s or 0.0),
            pause_s=pause_s,
            kind=kind,
            cause=cause,
            heap_before_bytes=heap[0],
            heap_after_bytes=heap[1],
            heap_total_bytes=heap[2],
            unix_s=unix_s,
        )
        if not math.isfinite(pause.pause_s) or pause.pause_s < 0:
            self.bad_line(f"a pause of {pause.pause_s} s")
            return
        if timed:
            self._saw(pause.t_s)
        else:
            self.events += 1
        self._add(pause)
        # a stop at a safepoint holds every GC pause since the last one (a collection
        # nested in another is logged as two)
        self._since_stop += pause.pause_s
        self._last_was_gc = True
        if pause.kind == "full":
            self.full_gcs += 1
            self.full_pause_s += pause.pause_s
        if pause.heap_total_bytes is not None:
            self.heap_max_bytes = max(self.heap_max_bytes or 0, pause.heap_total_bytes)

    def stopped(self, t_s: float | None, seconds: float, unix_s: float | None = None) -> None:
        """Threads stopped at a safepoint for ``seconds``: beyond the GC pause just before
        it, this is a pause of its own (GCViewer's ``adjustPause``: the stop includes that
        GC's pause; after another safepoint stop, all of it is overhead)."""
        pause_s = seconds
        last = self._last_pause
        if t_s is None:
            # no stamp (-XX:+PrintGCApplicationStoppedTime without time stamps): right
            # after the pause before it, or at 0 (GCViewer's ``setTimeStamp``)
            t_s = 0.0 if last is None else last.t_s + last.pause_s
        if last is not None and self._last_was_gc:
            # beyond them (none where the stop, rounded differently, reads shorter than the
            # pauses: GCViewer then counts the whole stop again)
            pause_s = max(0.0, seconds - self._since_stop)
            t_s = max(t_s, last.t_s + last.pause_s)
        self._saw(t_s)
        if not math.isfinite(pause_s):
            self.bad_line(f"a stop of {seconds} s")
            return
        self._add(GcPause(t_s=t_s, pause_s=pause_s, kind="safepoint", unix_s=unix_s))
        self._since_stop = 0.0
        self._last_was_gc = False
        self.safepoint_pauses += 1
        self.safepoint_s += pause_s

    def _add(self, pause: GcPause) -> None:
        self.pauses += 1
        self.total_pause_s += pause.pause_s
        self.max_pause_s = max(self.max_pause_s, pause.pause_s)
        self._last_pause = pause
        key = (pause.kind, pause.cause)
        cause = self._causes.get(key)
        if cause is None:
            cause = self._causes[key] = _Cause()
        cause.count += 1
        cause.total_s += pause.pause_s
        cause.max_s = max(cause.max_s, pause.pause_s)
        entry = (pause.pause_s, self.pauses, pause)
        if len(self._longest) < LONGEST_KEPT:
            heapq.heappush(self._longest, entry)
        elif entry > self._longest[0]:
            heapq.heapreplace(self._longest, entry)
        self._seen += 1
        if (self._seen - 1) % self._stride == 0:
            self._timeline.append(pause)
            if len(self._timeline) >= KEPT_PAUSES:
                del self._timeline[1::2]
                self._stride *= 2

    def scanner(self, part: Any, family: str, min_events: int, span_phases: frozenset[str]) -> Any:
        """The C fast path (``part``: the ``_gcscan`` module) over these sums, for a log of
        ``family`` (``jdk8``, ``unified``): it adds what it reads as ``pause``, ``stopped``
        and ``_add`` do (events only after the first ``min_events``; ``span_phases``: the
        concurrent phases that count for the span)."""
        return part.Scanner(
            self,
            part.JDK8 if family == "jdk8" else part.UNIFIED,
            GcPause,
            _Cause,
            heapq.heappush,
            heapq.heapreplace,
            KEPT_PAUSES,
            LONGEST_KEPT,
            min_events,
            span_phases,
        )

    @property
    def keeps_next(self) -> bool:
        """Whether the next pause goes into the timeline (the parsers read its heap then)."""
        return self._seen % self._stride == 0

    def problem(self, name: str, t_s: float | None) -> None:
        """A failure or warning sign of the collector (``model.jvm.GcProblem``)."""
        self._problem_first.setdefault(name, t_s if t_s is not None else 0.0)
        self._problem_count[name] = self._problem_count.get(name, 0) + 1

    def bad_line(self, line: str) -> None:
        """A line that looked like an event but could not be read."""
        self.unparsed += 1
        if len(self.unparsed_samples) < UNPARSED_SAMPLES:
            self.unparsed_samples.append(line[:300])

    @property
    def duration_s(self) -> float:
        """GCViewer's running time: first to last event, plus the last pause."""
        if self.first_t_s is None or self.last_t_s is None:
            return 0.0
        last = self._last_pause.pause_s if self._last_pause is not None else 0.0
        return max(0.0, self.last_t_s - self.first_t_s + last)

    @property
    def pause_kinds_and_causes(self) -> frozenset[tuple[str, str]]:
        """The (kind, cause) of each pause fed so far."""
        return frozenset(self._causes)

    def result(self) -> JvmGcLog:
        """The summary of what was fed so far."""
        causes = tuple(
            GcCause(kind=k, cause=c, count=v.count, total_s=v.total_s, max_s=v.max_s)
            for (k, c), v in sorted(self._causes.items(), key=lambda kv: -kv[1].total_s)
        )
        problems = tuple(
            GcProblem(name=name, count=count, first_t_s=self._problem_first[name])
            for name, count in self._problem_count.items()
        )
        return JvmGcLog(
            source=self.source,
            format=self.format,
            collector=self.collector,
            pauses=self.pauses,
            total_pause_s=self.total_pause_s,
            max_pause_s=self.max_pause_s,
            full_gcs=self.full_gcs,
            full_pause_s=self.full_pause_s,
            duration_s=self.duration_s,
            first_t_s=self.first_t_s,
            last_t_s=self.last_t_s,
            started_unix_s=self.started_unix_s,
            safepoint_pauses=self.safepoint_pauses,
            safepoint_s=self.safepoint_s,
            concurrent_s=self.concurrent_s,
            causes=causes,
            problems=problems,
            timeline=tuple(self._timeline),
            pause_stride=self._stride,
            longest=tuple(p for _, _, p in sorted(self._longest, reverse=True)),
            heap_max_bytes=self.heap_max_bytes,
            metaspace_after_bytes=self.metaspace_after_bytes,
            metaspace_total_bytes=self.metaspace_total_bytes,
            lines=self.lines,
            unparsed=self.unparsed,
            unparsed_samples=tuple(self.unparsed_samples),
            pause_times_known=self.pause_times_known,
            utc_offset_s=self.utc_offset_s,
        )
