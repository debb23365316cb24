"""A watched run: the hooks (``collect/hooks``) with the monitor thread, the readers and the
run record that collect what they append.

``Session`` is what ``stepdoctor run``, ``stepdoctor.watch()`` and the tests use; its hot-path
API (``step``, ``phase``, ``loader``) and the hooks' lifetime are ``BaseSession``'s.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from stepdoctor.collect.hooks import session as hooks
from stepdoctor.collect.hooks.events import SAMPLE
from stepdoctor.collect.hooks.profiling import TraceCapture
from stepdoctor.collect.hooks.session import BaseSession, end_status, library_roots, raised_at
from stepdoctor.collect.hooks.trigger import ExperimentTrigger
from stepdoctor.collect.reduce.monitor import MONITOR_NICE, Collected, Monitor
from stepdoctor.collect.reduce.progress import Progress
from stepdoctor.collect.reduce.reducers import new_reducer
from stepdoctor.collect.reduce.samples import SamplePairer
from stepdoctor.collect.sampling.allocations import AllocationWindow
from stepdoctor.collect.sampling.nvml import NvmlReader
from stepdoctor.collect.sampling.procfs import ProcFs
from stepdoctor.collect.sampling.pyspy import PySpyRecorder
from stepdoctor.collect.sampling.readers import PsutilReader, Reader
from stepdoctor.collect.sampling.stacks import (
    SAMPLE_INTERVAL_S,
    FrameTable,
    StackSampler,
    WorkerStacks,
    frame_walker,
    in_process_safe,
    python_stack,
    read_worker_stacks,
)
from stepdoctor.model import (
    GC_PHASE,
    CodeFrame,
    CodeStack,
    RunEnd,
    RunMeta,
    RunRecord,
    StackSample,
)
from stepdoctor.probes import flight
from stepdoctor.probes.ddp import ddp_stats
from stepdoctor.probes.ranks import rank_from_env
from stepdoctor.probes.run_meta import new_run_meta
from stepdoctor.record import RecordWriter

__all__ = ["Session", "current_session", "default_run_dir", "end_status", "raised_at"]

logger = logging.getLogger(__name__)

#: Sampling period of the monitor thread: 10 Hz; the cost is in docs/overhead.md.
DEFAULT_INTERVAL_S = 0.1
#: Where a forked worker's own stack starts (multiprocessing's child entry).
WORKER_ROOTS = ("BaseProcess._bootstrap",)
#: The record is flushed this often on average, at random points of successive slots this long
#: (``reduce.monitor.WakeSchedule``): flushes come at most twice this apart, and a killed job
#: loses at most that much.
FLUSH_EVERY_S = 0.5


def current_session() -> Session | None:
    """Return the active session of this process, if any."""
    running = hooks.current_session()
    return running if isinstance(running, Session) else None


def default_run_dir(base: Path | None = None) -> Path:
    """Return a new timestamped folder name under ``./stepdoctor-runs/``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (base or Path.cwd() / "stepdoctor-runs") / f"{stamp}-{os.getpid()}"


class Session(BaseSession):
    """Watch one run.

    Args:
        out_dir: folder of the run record (default: ``default_run_dir()``); ``None`` with
            ``record=False`` keeps everything in memory.
        command: the command line being watched, for the record's metadata.
        interval_s: how often the readers are sampled.
        flush_every_s: how often the record is flushed.
        log_every_steps / log_every_s: when a progress line is due (steps win when given).
        progress_sink: where progress lines go (``None``: no progress lines).
        readers: what to sample (default: psutil, plus NVML when a GPU is present).
        instrument_torch: ``True`` patches torch (importing it), ``"auto"`` only if the job
            already imported it, ``"on-import"`` now or when the job imports it, ``False``
            never (``hooks.session.BaseSession``).
        clock / environ: injectable seams for tests.
        experiment: runs an experiment once in the job's thread after its warm-up
            (``stepdoctor run --experiments``).
        max_steps: end the job after this many optimizer steps (``stepdoctor tune``).
        trace: capture a short torch.profiler trace of the job's steps (``run --trace``).
        monitor_nice: the monitor thread's nice value (Linux; ``None``: the job's own).
        stack_interval_s: how often the loop thread's Python stack is sampled (and each
            DataLoader worker's, when the run has a folder); ``None``: never, and no
            allocation window either (``collect/sampling/allocations.py``).
        stack_sampler: ``thread`` (in-process, phases tagged: the default) or ``py-spy``
            (from outside, the job's process and its children, no phases); where the
            in-process sampler cannot run safely (``stacks.in_process_safe``), py-spy is tried.

    Raises:
        UsageError: (at ``start``) another session is already active in this process.
    """

    def __init__(
        self,
        out_dir: Path | str | None = None,
        *,
        record: bool = True,
        command: Sequence[str] = (),
        interval_s: float = DEFAULT_INTERVAL_S,
        flush_every_s: float = FLUSH_EVERY_S,
        log_every_steps: int | None = None,
        log_every_s: float = 10.0,
        progress_sink: Callable[[str], None] | None = None,
        readers: Sequence[Reader] | None = None,
        instrument_torch: bool | str = "auto",
        clock: Callable[[], int] = time.perf_counter_ns,
        environ: Mapping[str, str] = os.environ,
        experiment: ExperimentTrigger | None = None,
        max_steps: int | None = None,
        trace: TraceCapture | None = None,
        monitor_nice: int | None = MONITOR_NICE,
        stack_interval_s: float | None = SAMPLE_INTERVAL_S,
        stack_sampler: str = "thread",
    ) -> None:
        super().__init__(
            instrument_torch=instrument_torch,
            clock=clock,
            experiment=experiment,
            max_steps=max_steps,
            trace=trace,
        )
        self.out_dir = (Path(out_dir) if out_dir else default_run_dir()) if record else None
        self._monitor_nice = monitor_nice
        self._command = tuple(command)
        self._interval_s = interval_s
        self._flush_every_s = flush_every_s
        self._progress = Progress(every_steps=log_every_steps, every_ns=int(log_every_s * 1e9))
        self._progress_sink = progress_sink
        self._readers = readers
        self._environ = environ
        self._rank = rank_from_env(environ)
        self._monitor: Monitor | None = None
        self._writer: RecordWriter | None = None
        self._nvml: NvmlReader | None = None
        self._meta: RunMeta | None = None
        self._stack_interval_s = stack_interval_s
        self._pyspy: PySpyRecorder | None = None
        self._pyspy_cpu_ns: int | None = None
        if stack_sampler not in ("thread", "py-spy"):
            raise ValueError(f"stack_sampler must be 'thread' or 'py-spy', not {stack_sampler!r}")
        self._walker = frame_walker()
        self._use_pyspy = stack_interval_s is not None and (
            stack_sampler == "py-spy" or not in_process_safe(self._walker)
        )
        self._in_process_unsafe = (
            stack_interval_s is not None and stack_sampler == "thread" and self._use_pyspy
        )
        if self._use_pyspy:
            self._stack_interval_s = None  # no in-process sampling, workers or window
        self._stacks: StackSampler | None = None
        self._owner = 0

    @property
    def record_path(self) -> Path | None:
        """The run record file, once started with a record."""
        return None if self._writer is None else self._writer.path

    def start(self) -> Session:
        """Install the hooks and start the monitor thread.

        Raises:
            UsageError: another session is already active in this process.
        """
        super().start()
        return self

    def __enter__(self) -> Session:
        return self.start()

    def _open(self) -> None:
        origin = self.clock()
        self._meta = new_run_meta(self._command, origin)
        if self.out_dir is not None:
            self._writer = RecordWriter(self.out_dir, self._meta)
        readers = self._readers
        if readers is None:
            # per-core CPU and the job's tree snapshotted on a thread of the reader's own
            # where /proc is there (the monitor then wakes only to flush)
            every = int(self._interval_s * 1e9) if ProcFs.available() else None
            # in a distributed job, torchrun's agent started every rank on this host: their
            # CPU is the job's, not another process's
            readers = [
                PsutilReader(
                    sample_every_ns=every,
                    nice=self._monitor_nice,
                    ranks_root=os.getppid() if self._rank is not None else None,
                )
            ]
            self._nvml = NvmlReader.open()
            if self._nvml is not None:
                readers.append(self._nvml)
        owner = self._owner = threading.get_ident()
        if self._stack_interval_s is not None:
            append = self.events.append

            def mark(t_ns: int, sample_id: int) -> None:
                append((t_ns, SAMPLE, sample_id, owner))

            self._stacks = StackSampler(
                thread_id=owner,
                table=FrameTable(library_roots()),
                mark=mark,
                clock=self.clock,
                interval_s=self._stack_interval_s,
            )
        window = None
        if self._stack_interval_s is not None:
            window = AllocationWindow(library_roots(), clock=self.clock)
            window.arm()  # from the job's thread: its timekeeper runs at the job's priority
        self._monitor = Monitor(
            events=self.events,
            reducer=new_reducer(owner, keep_steps=False),
            writer=self._writer,
            readers=readers,
            clock=self.clock,
            sink=self,
            environ=self._environ,
            interval_ns=int(self._interval_s * 1e9),
            flush_every_ns=int(self._flush_every_s * 1e9),
            progress=self._progress,
            progress_sink=self._progress_sink,
            nice=self._monitor_nice,
            stacks=None if self._stacks is None else SamplePairer(self._stacks),
            allocations=window,
            flight_after_ns=(
                None if self._rank is None else int(flight.read_after_s(self._environ) * 1e9)
            ),
        )

    def _run_collectors(self) -> None:
        assert self._monitor is not None, "_run_collectors() before _open()"
        self._monitor.start()
        if self._in_process_unsafe:
            self._notice(
                "stacks are sampled by py-spy, not in-process: this Python has no safe way to "
                "read another thread's frames (stepdoctor's C part _frames is not built)"
            )
        if self._use_pyspy:
            self._start_pyspy()
        if self._stacks is not None:
            self._stacks.start()
            gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A full collection started in the job's thread: where (its caller's stack)."""
        if (
            phase == "start"
            and info.get("generation") == 2
            and self._stacks is not None
            and threading.get_ident() == self._owner
        ):
            own = self._walker(self._owner) if self._walker is not None else None
            self._stacks.record(own or python_stack(sys._getframe(1)), GC_PHASE)

    def _after_fork_in_child(self) -> None:
        super()._after_fork_in_child()
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        # A DataLoader worker samples itself into a file of its own (any other forked child
        # too: the parent keeps only its DataLoader workers' files).
        if self._stack_interval_s is not None and self.out_dir is not None:
            table = FrameTable(library_roots(), cut_at=WORKER_ROOTS)
            WorkerStacks(self.out_dir, table, self._stack_interval_s).start()

    def _close(self, status: str, exit_code: int, error: str, error_at: str) -> RunRecord:
        assert self._monitor is not None, "stop() before start()"
        assert self._meta is not None, "stop() before start()"
        if self._stacks is not None:
            with contextlib.suppress(ValueError):
                gc.callbacks.remove(self._on_gc)
            self._stacks.stop()
            if self._stacks.failed:
                self._monitor.notice("warning", f"stack sampling stopped: {self._stacks.failed}")
        pyspy = self._stop_pyspy()
        self._monitor.stop()
        got = self._monitor.collected
        self._add_worker_stacks(got)
        if pyspy is not None:
            self._add_stacks(got, *pyspy)
        end = RunEnd(
            t_ns=self.clock(),
            status=status,
            exit_code=exit_code,
            error=error,
            error_at=error_at,
            monitor_cpu_ns=self._monitor.cpu_ns,
            stacks_cpu_ns=self._stacks_cpu_ns(),
        )
        warnings: list[str] = []
        ddp = [found for model in self.ddp_models if (found := ddp_stats(model))]
        self.ddp_models.clear()
        collectives = (flight.last() if self._rank is not None else []) or got.collectives
        if self._writer is not None:
            try:
                if ddp:
                    self._writer.write_items("ddp", ddp)
                if collectives and collectives is not got.collectives:
                    self._writer.write_items("collective", collectives)
                self._writer.write_end(end)
                self._writer.close()
            except OSError as exc:
                warnings.append(f"the run record {self._writer.path} is incomplete: {exc}")
        if self._nvml is not None:
            self._nvml.close()
        try:
            steps = got.steps()
        except ValueError as exc:  # our own bug: the rest of the run is still reported
            steps = []
            warnings.append(f"the steps could not be read back: {exc}")
        return RunRecord(
            meta=self._meta,
            steps=tuple(steps),
            system=tuple(got.system),
            gpu=tuple(got.gpu),
            loaders=tuple(got.loaders),
            loader_workers=tuple(got.loader_workers),
            models=tuple(got.models),
            env=tuple(got.env),
            batch_dtypes=tuple(got.batch_dtypes),
            concurrency=tuple(got.concurrency),
            notices=tuple(got.notices),
            experiments=tuple(got.experiments),
            profiled=tuple(got.profiled),
            frames=tuple(got.frames),
            stacks=tuple(got.stacks),
            samples=tuple(got.samples),
            allocations=tuple(got.allocations),
            ddp=tuple(ddp),
            collectives=tuple(collectives),
            hooks=tuple(got.hooks.values()),
            end=end,
            warnings=tuple(warnings),
        )

    def _add_worker_stacks(self, got: Collected) -> None:
        """Take in the DataLoader workers' samples (their files, in the run folder)."""
        if self.out_dir is None or self._stack_interval_s is None or not self.out_dir.is_dir():
            return
        workers = {w.pid for w in got.loader_workers}
        frames, stacks, samples, bad = read_worker_stacks(
            self.out_dir, got.frames, got.stacks, keep=workers
        )
        if bad:
            self._notice(f"{bad} lines of DataLoader workers' stack samples could not be read")
        self._add_stacks(got, frames, stacks, samples)

    def _add_stacks(
        self,
        got: Collected,
        frames: list[CodeFrame],
        stacks: list[CodeStack],
        samples: list[StackSample],
    ) -> None:
        """Keep samples gathered outside the monitor, in memory and in the record."""
        if not samples:
            return
        got.frames.extend(frames)
        got.stacks.extend(stacks)
        got.samples.extend(samples)
        if self._writer is not None and not self._writer.closed:
            try:
                for line_type, items in (("frame", frames), ("stack", stacks), ("sample", samples)):
                    self._writer.write_items(line_type, items)
            except (OSError, ValueError) as exc:
                self._notice(f"cannot write the stack samples: {exc}")

    def _stacks_cpu_ns(self) -> int | None:
        if self._stacks is not None:
            return self._stacks.cpu_ns
        return self._pyspy_cpu_ns

    def _start_pyspy(self) -> None:
        if self.out_dir is None:
            self._notice("no stacks sampled: py-spy needs a run folder to write to")
            return
        self._pyspy = PySpyRecorder(self.out_dir, os.getpid())
        problem = self._pyspy.start()
        if problem is not None:
            self._pyspy = None
            self._notice(f"no stacks sampled: {problem}")

    def _stop_pyspy(self) -> tuple[list[CodeFrame], list[CodeStack], list[StackSample]] | None:
        if self._pyspy is None:
            return None
        frames, stacks, samples, problem = self._pyspy.stop()
        self._pyspy_cpu_ns = self._pyspy.cpu_ns
        if problem is not None:
            self._notice(f"no stacks sampled: {problem}")
        return frames, stacks, samples

    def _notice(self, message: str) -> None:
        if self._monitor is not None:
            self._monitor.notice("warning", message)
