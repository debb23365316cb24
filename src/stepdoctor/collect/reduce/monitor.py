"""The monitor thread: samples readers, reduces events into steps, writes the record.

Everything that is not the hot path happens here (docs/design/hot-path.md). A failure of a
reader or of the record file is reported once (a log warning and a ``Notice`` in the record)
and the job carries on; a failing reader is switched off.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import random
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stepdoctor.collect.hooks.autoinstrument import TorchSink
from stepdoctor.collect.hooks.events import EventBuffer
from stepdoctor.collect.hooks.trigger import (
    EXPERIMENT_AFTER_SAMPLES,
    EXPERIMENT_AFTER_STEPS,
)
from stepdoctor.collect.reduce.progress import MARK_SIZE, Progress, end_times
from stepdoctor.collect.reduce.reducers import Reducer, concurrency_stats
from stepdoctor.collect.reduce.samples import SamplePairer
from stepdoctor.collect.sampling.allocations import AllocationWindow
from stepdoctor.collect.sampling.readers import Reader, samples_itself
from stepdoctor.collect.sampling.sampler import lower_thread_priority
from stepdoctor.model import (
    AllocationSite,
    BoundVerdict,
    CodeFrame,
    CodeStack,
    Collective,
    ConcurrencyStat,
    EnvFact,
    GpuSample,
    HookTime,
    LoaderInfo,
    LoaderWorker,
    ModelInfo,
    Notice,
    ProfiledSpan,
    StackSample,
    StepTiming,
    SystemSample,
)
from stepdoctor.probes import flight
from stepdoctor.probes.environment import PROBE_TIMEOUT_S, SLOW_PROBES, probe_environment
from stepdoctor.probes.model_lint import describe_model
from stepdoctor.record import RecordWriter
from stepdoctor.record.rows import STEP_FIELDS, steps_from_rows

__all__ = ["MONITOR_NICE", "Collected", "Monitor", "WakeSchedule", "lower_thread_priority"]

logger = logging.getLogger(__name__)

#: The monitor thread's nice value (Linux: a per-thread attribute). Its CPU comes from the
#: job's cores; at the lowest priority the scheduler runs it when a job thread blocks rather
#: than in the middle of a parallel region (docs/overhead.md). Under full load it still gets
#: CFS's share for nice 19 (weight 15 against 1024), more than its ~1% of a core.
MONITOR_NICE = 19


class WakeSchedule:
    """The monitor's wake-ups: one at a random point of each ``interval_s`` slot of a grid
    that starts at the first call; a thread that fell a slot behind (a busy machine) starts
    the grid again from now instead of waking in a burst.

    Reads at a fixed period alias with a job whose step period divides it: the heap read every
    0.5 s of 125 ms steps lands at the same point of a step each time, drifting slowly through
    it, and a step's swing reads as a smooth rise (tests/scenarios/inference_cnn_autograd.py,
    no memory kept: 142, 142, 142, 158, 170, 170, 178 MiB, t = 6.9, called a leak). Woken at
    a uniformly random point of each slot (jittered sampling: the mean rate unchanged, each
    wake's phase independent of the others'), the monitor reads a step's swing as noise, as
    the memory rule's trend test expects.
    """

    def __init__(
        self,
        interval_s: float,
        phase: Callable[[], float],
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval_s
        self._phase = phase
        self._now = now
        self._slot: float | None = None

    def next_wait_s(self) -> float:
        """Seconds from now to the next wake-up."""
        now = self._now()
        if self._slot is None or self._slot + self._interval < now:
            self._slot = now
        wake = self._slot + self._interval * self._phase()
        self._slot += self._interval
        return max(0.0, wake - now)


#: DistributedDataParallel models kept alive till the run ends, for their own timings
#: (``probes/ddp.py``): a job wraps one model, or a few (a GAN's two); a loop making a new
#: one each round must not have them all kept.
DDP_MODELS_KEPT = 4
#: Steps whose end times are kept (to count those in the allocation window): more than a
#: window of up to 10 s holds at any pace worth tracing.
RECENT_STEPS = 4096


class Collected:
    """What the monitor gathered, kept in memory as well as in the record.

    The steps are kept as their record rows (``record/rows.py``, ~110 bytes a step rather than
    a ``StepTiming``'s ~500-670): ``steps()`` makes them, once, at the end.
    """

    def __init__(self) -> None:
        self.step_rows: list[bytes] = []
        """The reducer's rows, one chunk a flush (``take_rows``)."""
        self.step_count = 0
        self.recent_step_ends: collections.deque[int] = collections.deque(maxlen=RECENT_STEPS)
        """When the last ``RECENT_STEPS`` steps reduced so far ended."""
        self.system: list[SystemSample] = []
        self.gpu: list[GpuSample] = []
        self.loaders: list[LoaderInfo] = []
        self.loader_workers: list[LoaderWorker] = []
        self.models: list[ModelInfo] = []
        self.env: list[EnvFact] = []
        self.batch_dtypes: list[str] = []
        self.concurrency: list[ConcurrencyStat] = []
        self.notices: list[Notice] = []
        self.experiments: list[BoundVerdict] = []
        self.profiled: list[ProfiledSpan] = []
        self.frames: list[CodeFrame] = []
        self.stacks: list[CodeStack] = []
        self.samples: list[StackSample] = []
        self.allocations: list[AllocationSite] = []
        self.collectives: list[Collective] = []
        """A rank's last collectives, as read last (flight recorder)."""
        self.hooks: dict[str, HookTime] = {}
        """A training framework's hooks, by name, with their time so far."""

    def steps(self) -> list[StepTiming]:
        """The steps, made from their rows.

        Raises:
            ValueError: a chunk is not step rows (a bug of the reducer's).
        """
        return steps_from_rows(self.step_rows)


class Monitor:
    """Drive readers and the reducer on a daemon thread.

    Args:
        events: the hot-path event buffer (drained into the reducer at each flush).
        reducer: turns events into steps.
        writer: the run record (``None`` to keep everything in memory only).
        readers: sampled every ``interval_ns``.
        sink: what the hot path fills (models, loaders, batch dtypes, counters, the
            experiment trigger): the Session; read here.
        progress: where periodic log lines go (``None``: no lines).
        nice: the monitor thread's nice value (``None``: left as the job's).
        stacks: the stack sampler's samples, paired with their phases at each flush.
        allocations: traces allocations for a while when GC pressure or memory growth shows.
        flight_after_ns: a rank of a distributed job: read its flight recorder when no step
            completed for this long (once a stall).
    """

    def __init__(
        self,
        *,
        events: EventBuffer,
        reducer: Reducer,
        writer: RecordWriter | None,
        readers: Sequence[Reader],
        clock: Callable[[], int],
        sink: TorchSink,
        environ: Mapping[str, str],
        interval_ns: int,
        flush_every_ns: int,
        progress: Progress | None,
        progress_sink: Callable[[str], None] | None,
        nice: int | None = MONITOR_NICE,
        stacks: SamplePairer | None = None,
        allocations: AllocationWindow | None = None,
        flight_after_ns: int | None = None,
    ) -> None:
        self.collected = Collected()
        self._flight_after = flight_after_ns
        self._flight_steps = -1
        self._flight_since = clock()
        self._flight_read = False
        self._stacks = stacks
        self._allocations = allocations
        self._nice = nice
        self._events = events
        self._reducer = reducer
        self._writer = writer
        self._readers = list(readers)
        self._own_thread = [r for r in self._readers if samples_itself(r)]
        """Readers sampling on a thread of their own: read at each flush, closed at stop."""
        self._clock = clock
        self._sink = sink
        self._model_ids: set[int] = set()
        self._loader_ids: set[int] = set()
        self._trigger_seen = False
        self._environ = environ
        # Woken only to flush when every reader samples on its own thread: a wake-up is
        # most of what the monitor costs the job (docs/overhead.md).
        wake_ns = flush_every_ns if len(self._own_thread) == len(self._readers) else interval_ns
        self._interval_s = wake_ns / 1e9
        self._flush_every = flush_every_ns
        # wake-ups come anywhere in their slot: a flush is due an interval early (at each
        # wake-up when the monitor wakes only to flush; every 0.4-0.6 s at 10 Hz)
        self._flush_due = flush_every_ns - wake_ns
        self._progress = progress
        self._progress_sink = progress_sink
        self._env_probed = False
        self._framework_facts_seen = 0
        self._framework_models_seen = 0
        self._last_flush = clock()
        self._wakes = WakeSchedule(self._interval_s, random.Random().random)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stepdoctor-monitor", daemon=True)
        self._reported: set[str] = set()
        self._pending: dict[str, list[Any]] = {}
        self._pending_rows = b""
        self._slow_facts: list[EnvFact] = []
        self._slow_probe = threading.Thread(
            target=self._probe_slow, name="stepdoctor-probe", daemon=True
        )
        self.cpu_ns = 0
        """CPU time spent by this monitor (its thread, plus the final flush in stop())."""

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def _probe_slow(self) -> None:
        self._slow_facts = probe_environment(self._environ, probes=SLOW_PROBES)

    def stop(self) -> None:
        """Stop the thread, take one last sample, flush everything and close the readers
        that sample on a thread of their own (their CPU counts in ``cpu_ns``)."""
        self._stop.set()
        # The costly probes (py-cpuinfo runs a child process for ~1 s) wait for the job to
        # end: at its start they slowed the first steps into outliers. They run while the
        # last records are written.
        self._slow_probe.start()
        if self._thread.is_alive():
            self._thread.join()
        start = time.thread_time_ns()
        for reader in self._readers:  # the last reading names who else used the CPUs
            walk_next = getattr(reader, "walk_next", None)
            if callable(walk_next):
                walk_next()
        self._sample()
        self.flush(final=True)
        self.cpu_ns += time.thread_time_ns() - start
        for reader in self._own_thread:
            try:
                reader.close()
                self.cpu_ns += reader.cpu_ns
            except Exception as exc:  # closing is best effort
                self.notice("warning", f"reader {reader.name!r} did not close: {exc!r}")

    def notice(self, level: str, message: str, *, key: str | None = None) -> None:
        """Report a problem of stepdoctor's own, once per ``key``."""
        key = key or message
        if key in self._reported:
            return
        self._reported.add(key)
        logger.warning("stepdoctor: %s (the job carries on)", message)
        note = Notice(t_ns=self._clock(), level=level, message=message)
        self.collected.notices.append(note)
        self._queue("notice", [note])

    def flush(self, *, final: bool = False) -> None:
        """Reduce the events appended so far and write everything pending to the record."""
        self._last_flush = self._clock()
        try:
            self._reducer.drain(self._events)
            if final:
                self._reducer.finish()
            rows, marks = self._reducer.take_rows(), self._reducer.take_marks()
        except Exception as exc:  # never break the job over our own bug
            self.notice("error", f"step reduction failed: {exc!r}", key="reduce")
            rows, marks = b"", b""
        self._collect_stacks(final=final)
        if rows:
            self.collected.step_rows.append(rows)
            self.collected.step_count += len(marks) // MARK_SIZE
            self.collected.recent_step_ends.extend(end_times(marks))
            self._pending_rows = rows
        if marks:
            self._log_progress(marks)
        self._inspect(final=final)
        if final:
            stats = concurrency_stats(self._reducer.model_calls(), self._reducer.model_names)
            self.collected.concurrency = stats
            self._queue("concurrency", stats)
        self._write_pending()

    def _run(self) -> None:
        if self._nice is not None:
            lower_thread_priority(self._nice)
        try:
            while not self._stop.wait(self._wakes.next_wait_s()):
                self._sample()
                if self._clock() - self._last_flush >= self._flush_due:
                    self.flush()
        finally:
            self.cpu_ns += time.thread_time_ns()  # this thread's whole CPU time

    def _sample(self) -> None:
        now = self._clock()
        for reader in list(self._readers):
            try:
                readings = reader.read(now)
            except Exception as exc:  # a reader's failure must not stop the others
                self._readers.remove(reader)
                self.notice(
                    "warning", f"reader {reader.name!r} failed and was switched off: {exc!r}"
                )
                continue
            for reading in readings:
                if isinstance(reading, GpuSample):
                    self.collected.gpu.append(reading)
                    self._queue("gpu", [reading])
                else:
                    sample = reading
                    if sample.main_heap_bytes and tracemalloc.is_tracing():
                        # the allocation window's own traces are not the job's memory
                        own = tracemalloc.get_tracemalloc_memory()
                        heap = max(0, sample.main_heap_bytes - own)
                        sample = dataclasses.replace(sample, main_heap_bytes=heap)
                    self.collected.system.append(sample)
                    self._queue("system", [sample])

    def _inspect(self, *, final: bool) -> None:
        try:
            self._inspect_unsafe(final=final)
        except Exception as exc:  # inspection is best effort
            self.notice("warning", f"inspection failed: {exc!r}", key="inspect")

    def _inspect_unsafe(self, *, final: bool) -> None:
        for loader_id, info in list(self._sink.loaders.items()):
            if loader_id not in self._loader_ids:
                self._loader_ids.add(loader_id)
                self.collected.loaders.append(info)
                self._queue("loader", [info])
        seen = len(self.collected.loader_workers)
        workers = [
            LoaderWorker(pid=pid, loader_id=loader_id)
            for pid, loader_id in self._sink.loader_workers[seen:]
        ]
        if workers:
            self.collected.loader_workers.extend(workers)
            self._queue("loader_worker", workers)
            for reader in self._readers:  # their CPU is the job's: into its tree at once
                look_again = getattr(reader, "look_again", None)
                if callable(look_again):
                    look_again()
        for model_id, model in list(self._sink.models.items()):
            if model is None or model_id in self._model_ids:
                continue
            self._model_ids.add(model_id)
            self._sink.models[model_id] = None  # inspected: stop keeping the model alive
            if hasattr(model, "_get_ddp_logging_data") and (
                len(self._sink.ddp_models) < DDP_MODELS_KEPT
            ):
                self._sink.ddp_models.append(model)  # but a DDP model's timings: at the end
            shape, dtype = self._sink.model_inputs.get(model_id, ((), None))
            model_info = describe_model(model, model_id, input_shape=shape, input_dtype=dtype)
            autocast, matmul = getattr(self._sink, "model_precision", {}).get(
                model_id, (None, None)
            )
            model_info = dataclasses.replace(model_info, autocast=autocast, float32_matmul=matmul)
            self._reducer.model_names[model_id] = model_info.class_name
            self.collected.models.append(model_info)
            self._queue("model", [model_info])
        self._collect_experiments(final=final)
        self._collect_profiled()
        self._collect_allocations(final=final)
        self._collect_collectives(final=final)
        self._collect_framework()
        seen = len(self.collected.batch_dtypes)
        new = list(self._sink.batch_dtypes[seen:])
        if new:
            self.collected.batch_dtypes.extend(new)
            self._queue("batch_dtypes", new)
        if (final or not self._env_probed) and self.collected.step_count:
            self._env_probed = True
            facts = probe_environment(self._environ)
            self.collected.env.extend(facts)
            self._queue("env", facts)
        if final:
            self._slow_probe.join(PROBE_TIMEOUT_S)
            slow = list(self._slow_facts) or [
                EnvFact(key="probe.slow", value="unknown: not finished before the end")
            ]
            if self._sink.sync_calls[0]:
                slow.append(
                    EnvFact(
                        key="torch.sync_calls",
                        value=self._sink.sync_calls[0],
                        source=".item()/.tolist()/.cpu() of device tensors",
                    )
                )
            if self._sink.h2d_in_forward[0]:
                slow.append(
                    EnvFact(
                        key="torch.h2d_in_forward",
                        value=self._sink.h2d_in_forward[0],
                        source="host-to-device copies inside the model's forward",
                    )
                )
            pageable, pinned = getattr(self._sink, "h2d_copies", (0, 0))
            if pageable or pinned:
                slow += [
                    EnvFact(
                        key="torch.h2d_pageable",
                        value=pageable,
                        source="host-to-device copies from pageable memory",
                    ),
                    EnvFact(
                        key="torch.h2d_pinned",
                        value=pinned,
                        source="host-to-device copies from pinned memory",
                    ),
                ]
            if self._sink.fallback_ops:
                slow.append(
                    EnvFact(
                        key="torch.mps_fallback_ops",
                        value=", ".join(self._sink.fallback_ops),
                        source="MPS fallback warnings",
                    )
                )
            self.collected.env.extend(slow)
            self._queue("env", slow)

    def _collect_experiments(self, *, final: bool) -> None:
        trigger = self._sink.experiment_trigger
        if trigger is None or not trigger.pauses:
            return
        if trigger.finished and not self._trigger_seen:
            self._trigger_seen = True
            results = [r for r in trigger.results if isinstance(r, BoundVerdict)]
            self.collected.experiments.extend(results)
            self._queue("experiment", results)
            for note in trigger.notes:
                self.notice("info", note, key=note)
        elif final and not trigger.finished:
            self.notice(
                "info",
                "experiments did not run: the job ended before its warm-up was over "
                f"({EXPERIMENT_AFTER_STEPS} optimizer steps and {EXPERIMENT_AFTER_SAMPLES} "
                "samples)",
                key="experiments",
            )

    def _collect_stacks(self, *, final: bool) -> None:
        if self._stacks is None:
            return
        try:
            phases = self._reducer.take_sample_phases()
            frames, stacks, samples = self._stacks.collect(phases, final=final)
        except Exception as exc:  # never break the job over our own bug
            self.notice("error", f"stack samples could not be kept: {exc!r}", key="stacks")
            return
        got = self.collected
        got.frames.extend(frames)
        got.stacks.extend(stacks)
        got.samples.extend(samples)
        for line_type, items in (("frame", frames), ("stack", stacks), ("sample", samples)):
            if items:
                self._queue(line_type, items)

    def _collect_collectives(self, *, final: bool) -> None:
        """A rank whose steps stalled: its last collectives, once a stall (the one the other
        ranks wait in, or the one it never issued). At the end the session reads them in the
        job's thread."""
        if self._flight_after is None or final:
            return
        now, steps = self._clock(), self.collected.step_count
        if steps != self._flight_steps:
            self._flight_steps, self._flight_since, self._flight_read = steps, now, False
            return
        if self._flight_read or now - self._flight_since < self._flight_after:
            return
        self._flight_read = True
        found = flight.last()
        if found:
            self.collected.collectives = found
            self._queue("collective", found)

    def _collect_allocations(self, *, final: bool) -> None:
        window = self._allocations
        if window is None:
            return
        got = self.collected
        rss = next((s.main_rss_bytes for s in reversed(got.system) if s.main_rss_bytes), None)
        steps = (got.step_count, got.recent_step_ends[-1] if got.recent_step_ends else 0)
        if got.step_count >= EXPERIMENT_AFTER_STEPS:
            window.warmed_up(rss, steps)
        ended = window.stop() if final else window.tick(rss, steps)
        if window.skipped:
            self.notice("info", window.skipped, key="allocations")
            self._allocations = None
        start, end = window.started_ns, window.ended_ns
        if start is None or end is None:
            return
        self._allocations = None
        # tracemalloc slowed the steps it ran over, whatever the window found: they are left
        # out of the figures (a window that saw fewer than two steps end, its steps slowed
        # 20-fold by the tracing on a busy machine, once left them in: slow-callbacks on a
        # healthy job)
        span = ProfiledSpan(start_ns=start, end_ns=end, what="tracemalloc")
        got.profiled.append(span)
        self._queue("profiled", [span])
        if not ended:
            return
        if sum(start <= t <= end for t in got.recent_step_ends) < 2:  # the job's end, not steps
            self.notice("info", "the allocation window saw no steps: no allocation sites")
            return
        got.allocations.extend(window.sites)
        self._queue("allocation", window.sites)

    def _collect_profiled(self) -> None:
        capture = self._sink.trace_capture
        if capture is None or any(p.what == "torch.profiler" for p in self.collected.profiled):
            return
        span = capture.span
        if span is not None:
            item = ProfiledSpan(start_ns=span[0], end_ns=span[1])
            self.collected.profiled.append(item)
            self._queue("profiled", [item])

    def _log_progress(self, marks: bytes) -> None:
        if self._progress is None or self._progress_sink is None:
            return
        for line in self._progress.add_marks(marks):
            try:
                self._progress_sink(line.format())
            except Exception as exc:  # e.g. a closed stderr
                self.notice("warning", f"progress log failed: {exc!r}", key="progress")

    def _collect_framework(self) -> None:
        """A training framework's settings (env facts its integration noted) and its hooks'
        times, from the calls it timed since the last flush (the whole table is written: a
        ``hook`` line replaces the one before)."""
        facts = self._sink.framework_facts
        new_facts = list(facts[self._framework_facts_seen :])
        self._framework_facts_seen += len(new_facts)
        if new_facts:
            self.collected.env.extend(new_facts)
            self._queue("env", new_facts)
        described = self._sink.framework_models
        new_models = list(described[self._framework_models_seen :])
        self._framework_models_seen += len(new_models)
        if new_models:
            self.collected.models.extend(new_models)
            self._queue("model", new_models)
        calls = self._sink.hook_calls
        if not calls:
            return
        hooks = self.collected.hooks
        while calls:
            name, phase, duration_ns = calls.popleft()
            was = hooks.get(name)
            hooks[name] = HookTime(
                name=name,
                phase=phase,
                calls=(was.calls if was else 0) + 1,
                total_ns=(was.total_ns if was else 0) + duration_ns,
            )
        self._pending["hook"] = list(hooks.values())  # the whole table, not added to

    def _queue(self, line_type: str, items: Sequence[Any]) -> None:
        self._pending.setdefault(line_type, []).extend(items)

    def _write_pending(self) -> None:
        pending, self._pending = self._pending, {}
        rows, self._pending_rows = self._pending_rows, b""
        if self._writer is None or self._writer.closed:
            return
        try:
            self._writer.write_rows("steps", STEP_FIELDS, rows)
            for line_type, items in pending.items():
                self._writer.write_items(line_type, items)
            self._writer.flush()
        except (OSError, ValueError) as exc:
            self.notice(
                "error",
                f"cannot write the run record {self._writer.path}: {exc}; "
                "what is in memory is still reported",
                key="writer",
            )
