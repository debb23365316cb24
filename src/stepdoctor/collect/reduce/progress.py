"""The periodic one-line log, like DL4J's PerformanceListener.

``ETL: 0 ms; iteration 16; iteration time: 65 ms; samples/sec: 492.3; batches/sec: 15.4;
GC: 2 (1 ms)`` — ETL and iteration time are means over the steps since the last line;
samples/s and batches/s are over those steps' wall time; GC counts the collections (and their
total pause) in them.

The monitor feeds it each flush's *marks*: per step, the int64s ``MARK_FIELDS`` made by the
reducer as it makes the step (no ``StepTiming`` made during a run), and a line is summed from
them with a few calls over the whole flush, not a Python loop over its steps.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from stepdoctor.model import Phase, StepTiming

__all__ = [
    "MARK_FIELDS",
    "MARK_SIZE",
    "NO_BATCH",
    "Progress",
    "ProgressLine",
    "end_times",
    "marks_of",
]

#: What a step's progress mark holds, int64 each (native byte order).
MARK_FIELDS = (
    "index", "start_ns", "end_ns", "batch_size", "data_wait_ns", "gc_count", "gc_pause_ns",
)  # fmt: skip
_N = len(MARK_FIELDS)
#: Bytes of one step's mark.
MARK_SIZE = 8 * _N
#: The batch size of a step that has none (or one that is not an int of 64 bits).
NO_BATCH = -(2**63)


def _batch_mark(batch: object) -> int:
    if isinstance(batch, int) and NO_BATCH < batch < 2**63:
        return int(batch)  # a bool as 0 or 1
    return NO_BATCH


def end_times(marks: bytes) -> list[int]:
    """The end of each step of ``marks``."""
    return list(memoryview(marks).cast("q")[MARK_FIELDS.index("end_ns") :: _N])


def marks_of(steps: Sequence[StepTiming]) -> bytes:
    """The steps' progress marks (what the C reducer writes as it makes them)."""
    marks = array("q")
    for s in steps:
        marks.extend(
            (
                s.index, s.start_ns, s.end_ns, _batch_mark(s.batch_size),
                s.phase(Phase.DATA_WAIT), s.gc_count, s.gc_pause_ns,
            )
        )  # fmt: skip
    return marks.tobytes()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressLine:
    """Numbers for one log line."""

    iteration: int
    etl_ms: float
    iteration_ms: float
    samples_per_sec: float | None
    batches_per_sec: float
    gc_count: int
    gc_ms: float

    @classmethod
    def of(cls, steps: Sequence[StepTiming]) -> ProgressLine:
        """Summarise ``steps`` (not empty)."""
        return cls.of_marks(memoryview(marks_of(steps)).cast("q"), 0, len(steps))

    @classmethod
    def of_marks(cls, marks: memoryview, first: int, end: int) -> ProgressLine:
        """Summarise the steps ``first`` to ``end`` (excluded, not empty) of ``marks``."""
        n = end - first

        def column(name: str) -> memoryview:
            at = MARK_FIELDS.index(name)
            return marks[first * _N + at : end * _N : _N]

        wall_ns = sum(column("end_ns")) - sum(column("start_ns")) or 1
        batches = column("batch_size")
        samples = None if NO_BATCH in batches else sum(batches)
        return cls(
            iteration=marks[(end - 1) * _N],
            etl_ms=sum(column("data_wait_ns")) / n / 1e6,
            iteration_ms=wall_ns / n / 1e6,
            samples_per_sec=None if samples is None else samples / (wall_ns / 1e9),
            batches_per_sec=n / (wall_ns / 1e9),
            gc_count=sum(column("gc_count")),
            gc_ms=sum(column("gc_pause_ns")) / 1e6,
        )

    def format(self) -> str:
        """Return the line, DL4J style."""
        samples = "n/a" if self.samples_per_sec is None else f"{self.samples_per_sec:.1f}"
        return (
            f"ETL: {self.etl_ms:.0f} ms; iteration {self.iteration}; "
            f"iteration time: {self.iteration_ms:.0f} ms; samples/sec: {samples}; "
            f"batches/sec: {self.batches_per_sec:.1f}; GC: {self.gc_count} ({self.gc_ms:.0f} ms)"
        )


class Progress:
    """Decide when a line is due: every ``every_steps`` steps, or every ``every_ns`` of steps.

    Args:
        every_steps: log after this many steps (wins over ``every_ns`` when set).
        every_ns: log after this much step time (default 10 s).
    """

    def __init__(self, *, every_steps: int | None = None, every_ns: int = 10_000_000_000) -> None:
        self._every_steps = every_steps
        self._every_ns = every_ns
        self._pending = b""
        """The marks of the steps not yet in a line."""

    def add(self, steps: Sequence[StepTiming]) -> list[ProgressLine]:
        """Add finished steps; return the lines now due (maybe several with ``every_steps``)."""
        return self.add_marks(marks_of(steps))

    def add_marks(self, marks: bytes) -> list[ProgressLine]:
        """``add`` for the steps' marks (``marks_of``; the reducer's ``take_marks()``)."""
        pending = self._pending + marks
        view = memoryview(pending).cast("q")
        steps = len(view) // _N
        lines = []
        first = 0
        while first < steps:
            last = self._last_of_line(view, first, steps)
            if last is None:
                break
            lines.append(ProgressLine.of_marks(view, first, last + 1))
            first = last + 1
        self._pending = pending[first * _N * view.itemsize :]
        return lines

    def _last_of_line(self, marks: memoryview, first: int, steps: int) -> int | None:
        """The step that makes a line due when ``first`` starts it (None: none yet)."""
        if self._every_steps is not None:
            last = first + max(self._every_steps, 1) - 1
            return last if last < steps else None
        ends = marks[2 : steps * _N : _N]  # ends only grow: the steps are the loop's, in order
        start = marks[first * _N + 1]
        last = bisect.bisect_left(ends, start + self._every_ns, lo=first)
        return last if last < steps else None
