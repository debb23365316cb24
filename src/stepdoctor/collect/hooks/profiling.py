"""``stepdoctor run --trace``: capture a short torch.profiler trace of the job's own steps.

The profiler starts once the job is past the warm-up the rules leave out (SageMaker Debugger's
first 1,000 samples, and at least ``wait`` optimizer steps), so that the trace shows the job's
steady state rather than its start-up (lazy initialisation, allocator growth, cuDNN's
autotuning, the first epoch's worker start). It then warms up ``warmup`` steps and records
``active``, stepped by the job's optimizer (the same post-step hook as the step boundaries),
and writes a standard Kineto trace (``torch.profiler.tensorboard_trace_handler``) under the
run folder, so it opens in Perfetto and TensorBoard and ``stepdoctor trace`` reads it.
torch.profiler costs 15-45% of a step while active: only those steps pay. The capture notes
when it ran (``span``, on the session's clock) so that rules judging single steps leave those
steps out, and the time its own calls take after the job's optimizer step (starting, writing
the trace: ~0.1 s) is taken out of the job's steps (``step`` returns True, the hook adds a
RESET).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepdoctor.collect.hooks.batches import batch_size_of
from stepdoctor.collect.hooks.trigger import EXPERIMENT_AFTER_SAMPLES, FirstOptimizerSteps

__all__ = [
    "TRACE_ACTIVE",
    "TRACE_MAX_WAIT",
    "TRACE_WAIT",
    "TRACE_WAIT_SAMPLES",
    "TRACE_WARMUP",
    "TraceCapture",
]

logger = logging.getLogger(__name__)

#: The capture waits at least this many optimizer steps (start-up)...
TRACE_WAIT = 10
#: ...and for the samples the rules leave out as warm-up (SageMaker Debugger's 1,000, as the
#: experiments of ``--experiments`` do)...
TRACE_WAIT_SAMPLES = EXPERIMENT_AFTER_SAMPLES
#: ...but no longer than this many steps (tiny batches, or batch sizes unknown).
TRACE_MAX_WAIT = 100
#: Steps warmed up (the profiler's own start settles) and recorded.
TRACE_WARMUP = 2
TRACE_ACTIVE = 5


class TraceCapture:
    """One torch.profiler capture after the job's warm-up, written to ``folder``."""

    def __init__(
        self,
        folder: Path,
        *,
        wait: int = TRACE_WAIT,
        wait_samples: int = TRACE_WAIT_SAMPLES,
        max_wait: int = TRACE_MAX_WAIT,
        warmup: int = TRACE_WARMUP,
        active: int = TRACE_ACTIVE,
    ) -> None:
        self.folder = folder
        self._wait = (wait, wait_samples, max(wait, max_wait))
        self._schedule = (warmup, active)
        self._profiler: Any = None
        self._entered = False
        self._steps = FirstOptimizerSteps()
        self._samples = 0
        self._recorded = 0
        self._clock: Callable[[], int] = time.perf_counter_ns
        self.span_start_ns: int | None = None
        """When the profiler began recording the job's steps (its warm-up), if it did."""
        self.span_end_ns: int | None = None
        """When it stopped (its trace written, or the job ended first)."""
        self.error = ""

    def start(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        """Make the profiler (torch must be importable; it starts after the job's warm-up);
        a failure is kept in ``error``.

        ``clock`` is the session's: the span is noted on it.
        """
        self._clock = clock
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            warmup, active = self._schedule
            self.folder.mkdir(parents=True, exist_ok=True)
            self._profiler = profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=warmup, active=active, repeat=1),
                on_trace_ready=torch.profiler.tensorboard_trace_handler(
                    str(self.folder), use_gzip=True
                ),
            )
        except Exception as exc:  # the job runs on without a trace
            self.error = f"could not start torch.profiler: {exc!r}"
            self._profiler = None

    @property
    def waiting(self) -> bool:
        """Whether the capture still waits for the job's warm-up (and counts its samples)."""
        return self._profiler is not None and not self._entered

    def saw_batch(self, batch: object) -> None:
        """The job took a batch (its samples count towards the warm-up)."""
        self._samples += batch_size_of(batch) or 0

    def step(self, optimizer: object) -> bool:
        """Count a step of the first optimizer: start the profiler once the warm-up is over,
        then advance its schedule.

        Returns whether the profiler was started or stepped: its time is then stepdoctor's,
        not the job's.
        """
        if self._profiler is None:
            return False
        if not self._steps.step(optimizer):
            return False
        if not self._entered:
            return self._start_if_due()
        try:
            self._profiler.step()
        except Exception as exc:  # never break the job over the profiler
            self.error = f"torch.profiler failed: {exc!r}"
            self._stop_quietly()
            return True
        self._recorded += 1
        if self._recorded == sum(self._schedule):  # this call wrote the trace
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

    def _start_if_due(self) -> bool:
        wait, wait_samples, max_wait = self._wait
        # no batch size seen (no DataLoader, or sizes unknown): steps alone decide
        steps = self._steps.count
        warm = self._samples >= wait_samples or self._samples == 0 or steps >= max_wait
        if steps < wait or not warm:
            return False
        self._entered = True
        try:
            self._profiler.__enter__()
        except Exception as exc:
            self.error = f"could not start torch.profiler: {exc!r}"
            self._profiler = None
            return True
        self.span_start_ns = self._clock()  # the next step is the first the profiler records
        return True

    def files(self) -> list[Path]:
        """The trace files written."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if p.name.endswith((".json", ".json.gz")))

    def _stop_quietly(self) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is None or not self._entered:
            return  # never started: nothing to stop
        try:
            profiler.__exit__(None, None, None)
        except Exception as exc:
            logger.debug("profiler stop failed", exc_info=True)
            self.error = self.error or f"torch.profiler failed at the end: {exc!r}"
        if self.span_start_ns is not None and self.span_end_ns is None:
            self.span_end_ns = self._clock()  # the job ended (or the profiler failed) mid-span
