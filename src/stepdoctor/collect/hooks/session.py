"""The hot-path half of a watched run: ``step``, ``phase``, ``loader`` and the hooks' lifetime.

Only one session is active at a time in a process; ``current_session()`` returns it, so a
``stepdoctor.watch()`` inside a script run by ``stepdoctor run`` joins the running session.
The hot-path methods only read the clock and append (docs/design/hot-path.md).

``BaseSession`` installs and removes the hooks (torch patches, the GC callback, the trace
capture); what collects and records the events (the monitor thread, the readers, the run
record) is a subclass's: ``stepdoctor.collect.Session``. This module imports neither the
reducer nor the samplers.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import sys
import sysconfig
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from stepdoctor.collect.hooks.autoinstrument import TorchPatches
from stepdoctor.collect.hooks.batches import batch_size_of, loader_info, note_workers
from stepdoctor.collect.hooks.events import (
    ENTER,
    EXIT,
    STEP,
    Event,
    EventBuffer,
    new_event_buffer,
)
from stepdoctor.collect.hooks.gcwatch import GcWatch
from stepdoctor.collect.hooks.on_import import when_imported
from stepdoctor.collect.hooks.profiling import TraceCapture
from stepdoctor.collect.hooks.trigger import ExperimentTrigger, StepLimit, StepLimitReached
from stepdoctor.errors import UsageError
from stepdoctor.model import EnvFact, LoaderInfo, ModelInfo, Phase, RunRecord

__all__ = ["BaseSession", "current_session", "end_status", "library_roots", "raised_at"]

T = TypeVar("T")

_DATA_WAIT = Phase.DATA_WAIT.value
_ACTIVE: BaseSession | None = None


def current_session() -> BaseSession | None:
    """Return the active session of this process, if any."""
    return _ACTIVE


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


class BaseSession(ABC):
    """The hooks of one watched run and the events they append.

    Args:
        instrument_torch: ``True`` patches torch (importing it), ``"auto"`` only if the job
            already imported it, ``"on-import"`` now if the job imported it or else as soon
            as it does (a job that never imports torch does not pay its import: 1-3 s),
            ``False`` never.
        clock: the event clock (an injectable seam for tests).
        experiment: runs an experiment once in the job's thread after its warm-up
            (``stepdoctor run --experiments``).
        max_steps: end the job after this many optimizer steps (``stepdoctor tune``).
        trace: capture a short torch.profiler trace of the job's steps (``run --trace``).
    """

    def __init__(
        self,
        *,
        instrument_torch: bool | str = "auto",
        clock: Callable[[], int] = time.perf_counter_ns,
        experiment: ExperimentTrigger | None = None,
        max_steps: int | None = None,
        trace: TraceCapture | None = None,
    ) -> None:
        self.events: EventBuffer = new_event_buffer()
        self.experiment_trigger = experiment
        self.step_limit = None if max_steps is None else StepLimit(max_steps)
        self.trace_capture = trace
        self.clock = clock
        self.models: dict[int, Any] = {}
        self.ddp_models: list[Any] = []
        """DistributedDataParallel models kept (at most monitor.DDP_MODELS_KEPT) until the run
        ends, when their own timings are read in the job's thread: read from the monitor's
        thread they would race with the backward that writes them."""
        self.loaders: dict[int, LoaderInfo] = {}
        self.loader_workers: list[tuple[int, int]] = []
        self.batch_dtypes: list[str] = []
        self.model_inputs: dict[int, tuple[tuple[int, ...], str | None]] = {}
        self.model_precision: dict[int, tuple[str | None, str | None]] = {}
        self.fallback_ops: list[str] = []
        self.h2d_in_forward: list[int] = [0]
        self.h2d_copies: list[int] = [0, 0]
        self.sync_calls: list[int] = [0]
        self.framework_facts: list[EnvFact] = []
        """A training framework's name, version and settings (``stepdoctor.integrations``)."""
        self.framework_models: list[ModelInfo] = []
        """Models a framework's integration described itself: those torch's hooks do not see
        (Keras on TensorFlow or JAX)."""
        self.hook_calls: collections.deque[tuple[str, str, int]] = collections.deque()
        """``(hook name, phase, duration_ns)`` of the framework hook calls its integration
        timed (appended on the hot path, taken off by the monitor)."""
        self.record: RunRecord | None = None
        self._instrument_torch = instrument_torch
        self._append = self.events.append
        self._phases: dict[str, _PhaseContext] = {}
        self._gc = GcWatch(self.events, clock)
        self._patches = TorchPatches(self)

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
            self.loaders[id(iterable)] = loader_info(iterable)
        append, clock, get_ident = self._append, self.clock, threading.get_ident
        iterator = iter(iterable)
        note_workers(iterator, iterable, self.loader_workers)
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

    # -- what a subclass collects with ---------------------------------------------------

    @abstractmethod
    def _open(self) -> None:
        """Make the record and the collectors, not yet running (before any hook)."""

    @abstractmethod
    def _run_collectors(self) -> None:
        """Start the collectors (after every hook is in place)."""

    @abstractmethod
    def _close(self, status: str, exit_code: int, error: str, error_at: str) -> RunRecord:
        """Stop the collectors (every hook is off), finish the record and return the run."""

    @abstractmethod
    def _notice(self, message: str) -> None:
        """Note a warning about the watching itself in the run's record."""

    def notice(self, message: str) -> None:
        """Note a warning about the watching itself (a framework integration that failed,
        say) in the run's record; the job carries on."""
        self._notice(message)

    # -- lifetime ------------------------------------------------------------------------

    def start(self) -> BaseSession:
        """Install the hooks and start the collectors.

        Raises:
            UsageError: another session is already active in this process.
        """
        global _ACTIVE
        if _ACTIVE is not None:
            raise UsageError(
                "a stepdoctor session is already active in this process; "
                "use stepdoctor.watch(), which joins it"
            )
        self._open()
        _ACTIVE = self
        self._install_torch()
        if self.trace_capture is not None:
            self.trace_capture.start(self.clock)
            if self.trace_capture.error:
                self._notice(self.trace_capture.error)
        self._gc.install()
        self._run_collectors()
        return self

    def stop(
        self, status: str = "ok", exit_code: int = 0, error: str = "", *, error_at: str = ""
    ) -> RunRecord:
        """Remove every hook, finish the record and return what was recorded.

        ``status``, ``exit_code`` and ``error`` are ``end_status``'s; ``error_at`` is
        ``raised_at``'s (where in the job's code it ended). Safe to call once per start; the
        job's own exception is not touched.
        """
        global _ACTIVE
        if self.record is not None:
            return self.record
        if self.trace_capture is not None:
            self.trace_capture.stop()
            if self.trace_capture.error:
                self._notice(self.trace_capture.error)
        self._patches.uninstall()
        self._gc.uninstall()
        if _ACTIVE is self:
            _ACTIVE = None
        self.record = self._close(status, exit_code, error, error_at)
        return self.record

    def __enter__(self) -> BaseSession:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        status, code, error = end_status(exc)
        self.stop(status, code, error, error_at=raised_at(exc))

    def _install_torch(self) -> None:
        wanted = self._instrument_torch
        if wanted == "on-import" and importlib.util.find_spec("torch") is not None:
            # called at once if torch is imported already, else in the thread that imports
            # it, once its import is over; the hook stays registered, inert after the stop
            when_imported("torch", self._torch_imported)
            return
        if wanted is False or (wanted == "auto" and "torch" not in sys.modules):
            return
        self._patch_torch(wanted)

    def _torch_imported(self, module: object) -> None:
        if _ACTIVE is self and self.record is None and not self._patches.installed:
            self._patch_torch(True)

    def _patch_torch(self, wanted: bool | str) -> None:
        try:
            self._patches.install()
        except ImportError:
            if wanted is True:
                self._notice("torch is not installed: only doc.step()/doc.phase() are timed")
        except Exception as exc:  # a torch we do not understand must not break the job
            self._patches.uninstall()
            self._notice(f"could not instrument torch: {exc!r}")

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


def raised_at(exc: BaseException | None) -> str:
    """Return ``path:line`` of the innermost frame of the job's own code in ``exc``'s traceback:
    where it raised, called ``sys.exit`` or was interrupted, or where it called the library that
    did. Frames of Python itself, of installed packages (torch) and of stepdoctor are not the
    job's. Empty for no exception, a clean ``sys.exit(0)``, a tuning trial's step limit, or a
    traceback without the job's code."""
    if exc is None or end_status(exc)[:2] in (("exit", 0), ("stopped", 0)):
        return ""
    libraries = library_roots()
    own, anywhere = "", ""
    tb = exc.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not path.startswith("<") and not path.startswith(libraries[0]):
            anywhere = f"{path}:{tb.tb_lineno}"
            if not path.startswith(libraries):
                own = f"{path}:{tb.tb_lineno}"
        tb = tb.tb_next
    return own or anywhere  # a job installed as a package: its innermost frame not ours


def library_roots() -> tuple[str, ...]:
    """Folders whose code is not the job's: stepdoctor itself (first), the standard library,
    installed packages (user site-packages included) and their command launchers."""
    ours = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = sysconfig.get_paths()
    # "scripts": console-script launchers (the ``stepdoctor`` command itself)
    keys = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")
    roots = {paths[key] for key in keys if key in paths}
    with contextlib.suppress(KeyError):  # no user scheme on this platform
        roots.add(sysconfig.get_path("purelib", f"{os.name}_user"))
    return tuple(os.path.join(root, "") for root in (ours, *sorted(roots)) if root)


def _in_child() -> None:
    if _ACTIVE is not None:
        _ACTIVE._after_fork_in_child()


os.register_at_fork(after_in_child=_in_child)
