"""A watched run: the hot-path API (``step``, ``phase``, ``loader``) and its lifetime.

Only one session is active at a time in a process; ``current_session()`` returns it, so a
``traindoctor.watch()`` inside a script run by ``traindoctor run`` joins the running session.
The hot-path methods only read the clock and append (docs/design/hot-path.md).
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import psutil

from traindoctor._version import __version__
from traindoctor.collect.autoinstrument import TorchPatches, _loader_info, batch_size_of
from traindoctor.collect.events import ENTER, EXIT, STEP, Event, EventBuffer, new_event_buffer
from traindoctor.collect.gcwatch import GcWatch
from traindoctor.collect.monitor import MONITOR_NICE, Monitor
from traindoctor.collect.nvml import NvmlReader
from traindoctor.collect.procfs import ProcFs
from traindoctor.collect.profiling import TraceCapture
from traindoctor.collect.progress import Progress
from traindoctor.collect.readers import PsutilReader, Reader
from traindoctor.collect.reducer import new_reducer
from traindoctor.collect.trigger import ExperimentTrigger, StepLimit, StepLimitReached
from traindoctor.errors import UsageError
from traindoctor.model import LoaderInfo, Phase, RunEnd, RunMeta, RunRecord
from traindoctor.record import RecordWriter

__all__ = ["Session", "current_session", "default_run_dir", "new_run_meta"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Sampling period of the monitor thread: 10 Hz, as the issue asks; the cost is in
#: docs/overhead.md.
DEFAULT_INTERVAL_S = 0.1
#: The record is flushed at least this often (a killed job loses at most this much).
FLUSH_EVERY_S = 0.5

_DATA_WAIT = Phase.DATA_WAIT.value
_ACTIVE: Session | None = None


def current_session() -> Session | None:
    """Return the active session of this process, if any."""
    return _ACTIVE


def default_run_dir(base: Path | None = None) -> Path:
    """Return a new timestamped folder name under ``./traindoctor-runs/``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (base or Path.cwd() / "traindoctor-runs") / f"{stamp}-{os.getpid()}"


class _PhaseContext:
    __slots__ = ("_append", "_clock", "_name")

    def __init__(
        self, append: Callable[[Event], None], clock: Callable[[], int], name: str
    ) -> None:
        self._append = append
        self._clock = clock
        self._name = name

    def __enter__(self) -> None:
        self._append((self._clock(), ENTER, self._name, threading.get_ident()))

    def __exit__(self, *exc: object) -> None:
        self._append((self._clock(), EXIT, None, threading.get_ident()))


class Session:
    """Watch one run.

    Args:
        out_dir: folder of the run record (default: ``default_run_dir()``); ``None`` with
            ``record=False`` keeps everything in memory.
        command: the command line being watched, for the record's metadata.
        interval_s: how often the readers are sampled.
        log_every_steps / log_every_s: when a progress line is due (steps win when given).
        progress_sink: where progress lines go (``None``: no progress lines).
        readers: what to sample (default: psutil, plus NVML when a GPU is present).
        instrument_torch: ``True`` patches torch (importing it), ``"auto"`` only if the job
            already imported it, ``False`` never.
        clock / environ: injectable seams for tests.
        experiment: runs an experiment once in the job's thread after its warm-up
            (``traindoctor run --experiments``).
        max_steps: end the job after this many optimizer steps (``traindoctor tune``).
        trace: capture a short torch.profiler trace of the job's steps (``run --trace``).
        monitor_nice: the monitor thread's nice value (Linux; ``None``: the job's own).

    Raises:
        UsageError: another session is already active in this process.
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
    ) -> None:
        self.events: EventBuffer = new_event_buffer()
        self._monitor_nice = monitor_nice
        self.experiment_trigger = experiment
        self.step_limit = None if max_steps is None else StepLimit(max_steps)
        self.trace_capture = trace
        self.clock = clock
        self.models: dict[int, Any] = {}
        self.loaders: dict[int, LoaderInfo] = {}
        self.batch_dtypes: list[str] = []
        self.model_inputs: dict[int, tuple[tuple[int, ...], str | None]] = {}
        self.fallback_ops: list[str] = []
        self.h2d_in_forward: list[int] = [0]
        self.sync_calls: list[int] = [0]
        self.out_dir = (Path(out_dir) if out_dir else default_run_dir()) if record else None
        self.record: RunRecord | None = None
        self._command = tuple(command)
        self._interval_s = interval_s
        self._flush_every_s = flush_every_s
        self._progress = Progress(every_steps=log_every_steps, every_ns=int(log_every_s * 1e9))
        self._progress_sink = progress_sink
        self._readers = readers
        self._instrument_torch = instrument_torch
        self._environ = environ
        self._append = self.events.append
        self._phases: dict[str, _PhaseContext] = {}
        self._gc = GcWatch(self.events, clock)
        self._patches = TorchPatches(self)
        self._monitor: Monitor | None = None
        self._writer: RecordWriter | None = None
        self._nvml: NvmlReader | None = None
        self._meta: RunMeta | None = None

    # -- hot path ------------------------------------------------------------------------

    def step(self, batch_size: int | None = None) -> None:
        """Mark the end of a training (or inference) step; ``batch_size`` sets samples/s."""
        self._append((self.clock(), STEP, batch_size, threading.get_ident()))

    def phase(self, name: Phase | str) -> _PhaseContext:
        """Return a context manager timing a phase (``with doc.phase("h2d"): ...``)."""
        key = str(name)
        ctx = self._phases.get(key)
        if ctx is None:
            ctx = self._phases[key] = _PhaseContext(self._append, self.clock, key)
        return ctx

    def loader(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield from ``iterable``, timing each wait for the next batch as ``data_wait``."""
        if hasattr(iterable, "num_workers") and id(iterable) not in self.loaders:
            self.loaders[id(iterable)] = _loader_info(iterable)
        append, clock, get_ident = self._append, self.clock, threading.get_ident
        iterator = iter(iterable)
        while True:
            tid = get_ident()
            append((clock(), ENTER, _DATA_WAIT, tid))
            try:
                batch = next(iterator)
            except StopIteration:
                append((clock(), EXIT, None, tid))
                return
            except BaseException:
                append((clock(), EXIT, None, tid))
                raise
            append((clock(), EXIT, batch_size_of(batch), tid))
            yield batch

    # -- lifetime ------------------------------------------------------------------------

    @property
    def record_path(self) -> Path | None:
        """The run record file, once started with a record."""
        return None if self._writer is None else self._writer.path

    def start(self) -> Session:
        """Install the patches and collectors and start the monitor thread."""
        global _ACTIVE
        if _ACTIVE is not None:
            raise UsageError(
                "a traindoctor session is already active in this process; "
                "use traindoctor.watch(), which joins it"
            )
        origin = self.clock()
        self._meta = new_run_meta(self._command, origin)
        if self.out_dir is not None:
            self._writer = RecordWriter(self.out_dir, self._meta)
        readers = self._readers
        if readers is None:
            # per-core CPU and the job's tree snapshotted on a thread of the reader's own
            # where /proc is there (the monitor then wakes only to flush)
            every = int(self._interval_s * 1e9) if ProcFs.available() else None
            readers = [PsutilReader(sample_every_ns=every, nice=self._monitor_nice)]
            self._nvml = NvmlReader.open()
            if self._nvml is not None:
                readers.append(self._nvml)
        self._monitor = Monitor(
            events=self.events,
            reducer=new_reducer(threading.get_ident(), keep_steps=False),
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
        )
        _ACTIVE = self
        self._install_torch()
        if self.trace_capture is not None:
            self.trace_capture.start(self.clock)
            if self.trace_capture.error:
                self._monitor_notice(self.trace_capture.error)
        self._gc.install()
        self._monitor.start()
        return self

    def stop(self, status: str = "ok", exit_code: int = 0, error: str = "") -> RunRecord:
        """Remove every patch, finish the record and return what was recorded.

        Safe to call once per start; the job's own exception is not touched.
        """
        global _ACTIVE
        if self.record is not None:
            return self.record
        if self.trace_capture is not None:
            self.trace_capture.stop()
            if self.trace_capture.error:
                self._monitor_notice(self.trace_capture.error)
        self._patches.uninstall()
        self._gc.uninstall()
        if _ACTIVE is self:
            _ACTIVE = None
        assert self._monitor is not None, "stop() before start()"
        assert self._meta is not None, "stop() before start()"
        self._monitor.stop()
        end = RunEnd(
            t_ns=self.clock(),
            status=status,
            exit_code=exit_code,
            error=error,
            monitor_cpu_ns=self._monitor.cpu_ns,
        )
        warnings: list[str] = []
        if self._writer is not None:
            try:
                self._writer.write_end(end)
                self._writer.close()
            except OSError as exc:
                warnings.append(f"the run record {self._writer.path} is incomplete: {exc}")
        if self._nvml is not None:
            self._nvml.close()
        got = self._monitor.collected
        try:
            steps = got.steps()
        except ValueError as exc:  # our own bug: the rest of the run is still reported
            steps = []
            warnings.append(f"the steps could not be read back: {exc}")
        self.record = RunRecord(
            meta=self._meta,
            steps=tuple(steps),
            system=tuple(got.system),
            gpu=tuple(got.gpu),
            loaders=tuple(got.loaders),
            models=tuple(got.models),
            env=tuple(got.env),
            batch_dtypes=tuple(got.batch_dtypes),
            concurrency=tuple(got.concurrency),
            notices=tuple(got.notices),
            experiments=tuple(got.experiments),
            profiled=tuple(got.profiled),
            end=end,
            warnings=tuple(warnings),
        )
        return self.record

    def __enter__(self) -> Session:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        status, code, error = end_status(exc)
        self.stop(status, code, error)

    def _install_torch(self) -> None:
        wanted = self._instrument_torch
        if wanted is False or (wanted == "auto" and "torch" not in sys.modules):
            return
        try:
            self._patches.install()
        except ImportError:
            if wanted is True:
                self._monitor_notice(
                    "torch is not installed: only doc.step()/doc.phase() are timed"
                )
        except Exception as exc:  # a torch we do not understand must not break the job
            self._patches.uninstall()
            self._monitor_notice(f"could not instrument torch: {exc!r}")

    def _monitor_notice(self, message: str) -> None:
        if self._monitor is not None:
            self._monitor.notice("warning", message)

    def _after_fork_in_child(self) -> None:
        """In a forked child (a DataLoader worker): stop recording into the copied state."""
        self._patches.uninstall()
        self._gc.uninstall()
        self.events.clear()


def end_status(exc: BaseException | None) -> tuple[str, int, str]:
    """Return (status, exit code, error text) for how a job ended."""
    if exc is None:
        return "ok", 0, ""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return "exit", 0, ""
        if isinstance(code, int):
            return "exit", code, ""
        return "exit", 1, str(code)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130, "KeyboardInterrupt"
    if isinstance(exc, StepLimitReached):
        return "stopped", 0, str(exc)
    return "exception", 1, f"{type(exc).__name__}: {exc}"


def new_run_meta(command: tuple[str, ...], origin: int) -> RunMeta:
    """Describe this process for a new record (also used by the doctor and lint)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    return RunMeta(
        run_id=uuid.uuid4().hex[:12],
        started_unix_s=time.time(),
        command=command or tuple(sys.argv),
        cwd=os.getcwd(),
        hostname=socket.gethostname(),
        pid=os.getpid(),
        python_version=platform.python_version(),
        traindoctor_version=__version__,
        cpu_count=os.cpu_count() or 1,
        affinity_cores=affinity,
        total_memory_bytes=psutil.virtual_memory().total,
        clock_origin_ns=origin,
    )


def _in_child() -> None:
    if _ACTIVE is not None:
        _ACTIVE._after_fork_in_child()


os.register_at_fork(after_in_child=_in_child)
