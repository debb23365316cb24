"""``traindoctor run --trace``: capture a short torch.profiler trace of the job's own steps.

The profiler runs on a schedule (skip ``wait`` steps, warm up ``warmup``, record ``active``),
stepped by the job's optimizer (the same post-step hook as the step boundaries), and writes a
standard Kineto trace (``torch.profiler.tensorboard_trace_handler``) under the run folder, so
it opens in Perfetto and TensorBoard and ``traindoctor trace`` reads it. torch.profiler costs
15-45% of a step while active: only those steps pay. The capture notes when it ran (``span``,
on the session's clock) so that rules judging single steps leave those steps out, and the
time its own calls take after the job's optimizer step (writing the trace, ~0.1 s) is taken
out of the job's steps (``step`` returns True, the hook adds a RESET).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["TRACE_ACTIVE", "TRACE_WAIT", "TRACE_WARMUP", "TraceCapture"]

logger = logging.getLogger(__name__)

#: Steps skipped (start-up), warmed up (profiler overhead settles) and recorded.
TRACE_WAIT = 10
TRACE_WARMUP = 2
TRACE_ACTIVE = 5


class TraceCapture:
    """One scheduled torch.profiler capture, written to ``folder``."""

    def __init__(
        self,
        folder: Path,
        *,
        wait: int = TRACE_WAIT,
        warmup: int = TRACE_WARMUP,
        active: int = TRACE_ACTIVE,
    ) -> None:
        self.folder = folder
        self._schedule = (wait, warmup, active)
        self._profiler: Any = None
        self._optimizer: int | None = None
        self._steps = 0
        self._clock: Callable[[], int] = time.perf_counter_ns
        self.span_start_ns: int | None = None
        """When the profiler began recording the job's steps (its warm-up), if it did."""
        self.span_end_ns: int | None = None
        """When it stopped (its trace written, or the job ended first)."""
        self.error = ""

    def start(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        """Start the profiler (torch must be importable); a failure is kept in ``error``.

        ``clock`` is the session's: the span is noted on it.
        """
        self._clock = clock
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            wait, warmup, active = self._schedule
            self.folder.mkdir(parents=True, exist_ok=True)
            self._profiler = profile(
                activities=activities,
                schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                on_trace_ready=torch.profiler.tensorboard_trace_handler(
                    str(self.folder), use_gzip=True
                ),
            )
            self._profiler.__enter__()
            if wait == 0:
                self.span_start_ns = clock()
        except Exception as exc:  # the job runs on without a trace
            self.error = f"could not start torch.profiler: {exc!r}"
            self._profiler = None

    def step(self, optimizer: object) -> bool:
        """Advance the schedule on each step of the first optimizer.

        Returns whether the profiler was stepped: its time is then traindoctor's, not the job's.
        """
        if self._profiler is None:
            return False
        if self._optimizer is None:
            self._optimizer = id(optimizer)
        elif id(optimizer) != self._optimizer:
            return False
        try:
            self._profiler.step()
        except Exception as exc:  # never break the job over the profiler
            self.error = f"torch.profiler failed: {exc!r}"
            self._stop_quietly()
            return True
        self._steps += 1
        wait, warmup, active = self._schedule
        if self._steps == wait:  # the next step is the first the profiler records
            self.span_start_ns = self._clock()
        elif self._steps == wait + warmup + active:  # this call wrote the trace
            self.span_end_ns = self._clock()
            self._stop_quietly()
        return True

    def stop(self) -> None:
        """Stop the profiler (writes the trace if the active steps were reached)."""
        self._stop_quietly()

    @property
    def span(self) -> tuple[int, int] | None:
        """The (start, end) on the session's clock of the steps the profiler slowed, once it
        has stopped; None if it never recorded a step."""
        if self.span_start_ns is None or self.span_end_ns is None:
            return None
        return self.span_start_ns, self.span_end_ns

    def files(self) -> list[Path]:
        """The trace files written."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if p.name.endswith((".json", ".json.gz")))

    def _stop_quietly(self) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        try:
            profiler.__exit__(None, None, None)
        except Exception as exc:
            logger.debug("profiler stop failed", exc_info=True)
            self.error = self.error or f"torch.profiler failed at the end: {exc!r}"
        if self.span_start_ns is not None and self.span_end_ns is None:
            self.span_end_ns = self._clock()  # the job ended (or the profiler failed) mid-span
