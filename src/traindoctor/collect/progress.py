"""The periodic one-line log, like DL4J's PerformanceListener.

``ETL: 0 ms; iteration 16; iteration time: 65 ms; samples/sec: 492.3; batches/sec: 15.4;
GC: 2 (1 ms)`` — ETL and iteration time are means over the steps since the last line;
samples/s and batches/s are over those steps' wall time; GC counts the collections (and their
total pause) in them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from traindoctor.model import Phase, StepTiming

__all__ = ["Progress", "ProgressLine"]


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
        wall_ns = sum(s.duration_ns for s in steps) or 1
        n = len(steps)
        sizes = [s.batch_size for s in steps]
        samples = None if any(b is None for b in sizes) else sum(b or 0 for b in sizes)
        return cls(
            iteration=steps[-1].index,
            etl_ms=sum(s.phase(Phase.DATA_WAIT) for s in steps) / n / 1e6,
            iteration_ms=wall_ns / n / 1e6,
            samples_per_sec=None if samples is None else samples / (wall_ns / 1e9),
            batches_per_sec=n / (wall_ns / 1e9),
            gc_count=sum(s.gc_count for s in steps),
            gc_ms=sum(s.gc_pause_ns for s in steps) / 1e6,
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
        self._pending: list[StepTiming] = []

    def add(self, steps: Sequence[StepTiming]) -> list[ProgressLine]:
        """Add finished steps; return the lines now due (maybe several with ``every_steps``)."""
        lines = []
        for step in steps:
            self._pending.append(step)
            if self._due():
                lines.append(ProgressLine.of(self._pending))
                self._pending = []
        return lines

    def _due(self) -> bool:
        if self._every_steps is not None:
            return len(self._pending) >= self._every_steps
        return self._pending[-1].end_ns - self._pending[0].start_ns >= self._every_ns
