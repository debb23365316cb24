"""What every framework integration shares: the session it feeds, phases entered and left on
its hot path, hook calls timed, settings noted, and a session of its own when none runs.

The hot path here is the hooks' own: a clock read and an append per framework action
(docs/design/hot-path.md); the monitor thread turns the appended hook calls into the
``hook`` table and the noted settings into ``env`` facts.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from stepdoctor.collect import current_session
from stepdoctor.collect.hooks.events import ENTER, EXIT
from stepdoctor.collect.hooks.session import BaseSession
from stepdoctor.model import EnvFact
from stepdoctor.watching import Watch, watch

__all__ = [
    "FrameworkTimer",
    "FusedWaits",
    "OwnSession",
    "Setting",
    "framework_loop",
    "guarded",
    "in_framework_loop",
    "note_settings",
    "patch_class",
    "setting_facts",
    "time_method",
]

logger = logging.getLogger(__name__)

Setting = str | int | float | bool | None
F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """A framework callback's method whose own failure is logged once and swallowed: our
    bookkeeping never breaks the job's loop (DESIGN.md, non-negotiables)."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            if method.__qualname__ not in _FAILED:
                _FAILED.add(method.__qualname__)
                logger.warning(
                    "stepdoctor: %s failed (the job carries on): %r", method.__qualname__, exc
                )
            return None

    return call  # type: ignore[return-value]


_FAILED: set[str] = set()
#: Framework loops running now (Keras's ``fit``), each counted by ``framework_loop``: the
#: hooks of hand-written loops (``integrations/tensorflow.py``) stay out of them.
_LOOPS = [0]


@contextlib.contextmanager
def framework_loop() -> Iterator[None]:
    """A framework's own loop runs inside (its integration times it)."""
    _LOOPS[0] += 1
    try:
        yield
    finally:
        _LOOPS[0] -= 1


def in_framework_loop() -> bool:
    """Whether a framework's own loop is running (``framework_loop``)."""
    return _LOOPS[0] > 0


class FrameworkTimer:
    """Phases and hook times of one framework's loop, appended to ``session``'s buffers."""

    __slots__ = ("_append", "_calls", "clock", "session")

    def __init__(self, session: BaseSession) -> None:
        self.session = session
        self.clock = session.clock
        self._append = session.events.append
        self._calls = session.hook_calls

    def enter(self, phase: str) -> None:
        """The loop's thread enters ``phase`` now (left by ``leave``, innermost first)."""
        self._append((self.clock(), ENTER, phase, threading.get_ident()))

    def leave(self) -> None:
        """The loop's thread leaves the phase it entered last."""
        self._append((self.clock(), EXIT, None, threading.get_ident()))

    def hook(self, name: str, phase: str, duration_ns: int) -> None:
        """One call of the framework's hook ``name`` took ``duration_ns``, counted in
        ``phase``."""
        self._calls.append((name, phase, duration_ns))

    def step(self, batch_size: int | None = None) -> None:
        """A step (one parameter update) ends now."""
        self.session.step(batch_size)


def note_settings(
    session: BaseSession, framework: str, version: str, settings: Mapping[str, Setting]
) -> None:
    """Note the framework, its version and its settings as env facts (``framework``,
    ``<framework>.version``, ``<framework>.<setting>``) for the rules to read."""
    source = f"{framework} integration"
    session.framework_facts.extend(
        [
            EnvFact(key="framework", value=framework, source=source),
            EnvFact(key=f"{framework}.version", value=version, source=source),
            *setting_facts(framework, settings),
        ]
    )


def setting_facts(framework: str, settings: Mapping[str, Setting]) -> list[EnvFact]:
    """``settings`` as ``<framework>.<setting>`` env facts."""
    source = f"{framework} integration"
    return [
        EnvFact(key=f"{framework}.{key}", value=value, source=source)
        for key, value in settings.items()
    ]


def time_method(
    owner: Any,
    name: str,
    timer: FrameworkTimer,
    phase: str,
    hook: str | None = None,
    *,
    own: bool = False,
    on_call: Callable[[int], None] | None = None,
    on_raise: Callable[[], None] | None = None,
) -> Callable[[], None] | None:
    """Put on ``owner`` (as an instance attribute) a wrapper of its method ``name`` that
    enters ``phase`` around each call, tells ``on_call`` when each call begins and, given
    ``hook``, times each call under that name (``on_raise`` is told of a call that raised).
    Return the undo (it takes the wrapper away
    while it is still the one set); None where ``owner`` has no such method or one set on the
    instance already (ours, or the user's). ``own``: the attribute is the instance's own
    instead (a function the framework set on it, as Keras's ``train_function``), wrapped in
    place and put back by the undo."""
    original = getattr(owner, name, None)
    if original is None or (name in vars(owner)) != own:
        return None

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = timer.clock()
        if on_call is not None:
            on_call(began)
        timer.enter(phase)
        try:
            return original(*args, **kwargs)
        except BaseException:
            if on_raise is not None:
                on_raise()
            raise
        finally:
            timer.leave()
            if hook is not None:
                timer.hook(hook, phase, timer.clock() - began)

    setattr(owner, name, timed)

    def undo() -> None:
        if vars(owner).get(name) is timed:  # ours, not one set since
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)

    return undo


def patch_class(owner: type, name: str, replacement: Any) -> Callable[[], None]:
    """Set ``replacement`` as the class ``owner``'s attribute ``name``; return the undo, which
    puts back what was there while ``replacement`` is still the one set: the class's own
    attribute, or, where it inherited it, none (the inherited one uncovered again)."""
    had = name in vars(owner)
    original = vars(owner).get(name)
    setattr(owner, name, replacement)

    def undo() -> None:
        if vars(owner).get(name) is replacement:
            if had:
                setattr(owner, name, original)
            else:
                delattr(owner, name)

    return undo


class OwnSession:
    """The session a framework callback feeds: the running one (``stepdoctor run``, an
    enclosing ``watch()``), or one of its own, started with ``open`` and ended, with the
    diagnosis printed, by ``close`` (one per ``fit``)."""

    def __init__(self, **watch_options: Any) -> None:
        self._options = watch_options
        self._watch: Watch | None = None
        self.session: BaseSession | None = None

    def open(self) -> BaseSession:
        """The session to feed: the running one, else a new one of this callback's own."""
        running = current_session()
        if running is not None:
            self.session = running
            return running
        self._watch = watch(**self._options)
        self.session = self._watch.__enter__()
        return self.session

    def close(self, exc: BaseException | None = None) -> None:
        """End this callback's own session (if it started one): the record is finalised and
        the diagnosis printed; ``exc``: the exception that ended the job's loop."""
        own, self._watch = self._watch, None
        self.session = None
        if own is not None:
            own.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


class FusedWaits:
    """How long each call of a compiled train step waited for its batch, where the batch is
    made on another thread (tf.data runs the generator given to ``fit``) and fetched inside
    the graph, out of the hooks' sight.

    The batches are made and consumed in order, the first made (the one Keras reads first to
    learn their shapes, which it yields again) the first consumed: the call ``j`` (each taking
    ``per_call`` batches) takes the batch ``per_call * (j + 1) - 1`` last, and waited for it
    ``max(0, made_end - call_begin)``: nothing where tf.data's prefetch had it ready, the
    whole making where it was made on request. Each pair is settled by whichever of its two
    times comes second (the producer's thread or the loop's), under a lock. The first call
    is left out: it traces the step's graph before its fetch, and that time is no wait.
    """

    def __init__(self, per_call: int = 1) -> None:
        self.per_call = per_call
        self.skip_first = True
        """Leave the first call out (it traces the step's graph): not where the compiled step
        was traced before (a second ``fit`` of the same model)."""
        self._ends: list[int] = []
        self._begins: list[int] = []
        self._lock = threading.Lock()
        self.on_wait: Callable[[int], None] | None = None

    def made(self, end_ns: int) -> None:
        """A batch was made at ``end_ns`` (the producer's thread)."""
        with self._lock:
            self._ends.append(end_ns)
            index = len(self._ends)
            if index % self.per_call == 0 and index // self.per_call <= len(self._begins):
                self._settle(self._begins[index // self.per_call - 1], end_ns)

    def call_begins(self, begin_ns: int) -> None:
        """A call of the compiled step begins at ``begin_ns`` (the loop's thread)."""
        with self._lock:
            self._begins.append(begin_ns)
            last = len(self._begins) * self.per_call
            if last <= len(self._ends):
                self._settle(begin_ns, self._ends[last - 1])

    def call_failed(self) -> None:
        """The call that began last raised (the pipeline ran out: tf.data's end of an epoch
        of unknown length): it took no batch, and its begin is withdrawn."""
        with self._lock:
            if self._begins and len(self._begins) * self.per_call > len(self._ends):
                self._begins.pop()

    def _settle(self, begin_ns: int, end_ns: int) -> None:
        if self.skip_first and begin_ns == self._begins[0]:
            return  # the first call: its graph traced before its fetch
        if self.on_wait is not None:
            self.on_wait(max(0, end_ns - begin_ns))
