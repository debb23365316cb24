"""Event codes of the hot path (see docs/design/hot-path.md).

An event is a tuple ``(t_ns, code, arg, thread_id)`` appended to the session's event buffer
(``new_event_buffer``: the C ``Events`` of ``_hotpath`` where built, which the C hooks write
structs into and the C reducer reads without a tuple made, else ``EventQueue``). ``arg``
depends on the code:

=============  ============================================================
code           arg
=============  ============================================================
ENTER          the phase name entered
EXIT           ``None``, or the batch size when leaving ``data_wait``
STEP           the batch size given to ``Session.step()`` (or ``None``)
OPT_END        ``id(optimizer)``; leaves the ``optimizer`` phase
FWD_ENTER      ``fwd_arg(id(model), grad, training)``: an outermost model call starts
FWD_EXIT       ``id(model)``; it ends
GC_START       the generation being collected
GC_STOP        the generation collected
RESET          ``None``: time since the last boundary is not the job's (an experiment ran
               in its thread); the open step starts again now
SAMPLE         the id of a stack sample taken now (``collect/sampling/stacks.py``): the
               reducer notes the owner thread's phase for it, and charges no time
=============  ============================================================
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

from stepdoctor.native import c_part, wanted

__all__ = [
    "ENTER",
    "EXIT",
    "FWD_ENTER",
    "FWD_EXIT",
    "GC_START",
    "GC_STOP",
    "OPT_END",
    "RESET",
    "SAMPLE",
    "STEP",
    "Event",
    "EventBuffer",
    "EventQueue",
    "fwd_arg",
    "native_hooks",
    "new_event_buffer",
    "split_fwd_arg",
]

Event = tuple[int, int, object, int]

ENTER: Final = 0
EXIT: Final = 1
STEP: Final = 2
OPT_END: Final = 3
FWD_ENTER: Final = 4
FWD_EXIT: Final = 5
GC_START: Final = 6
GC_STOP: Final = 7
RESET: Final = 8
SAMPLE: Final = 9


def fwd_arg(model_id: int, grad: bool, training: bool) -> int:
    """Pack a FWD_ENTER arg: the model's id and whether autograd and train mode were on."""
    return model_id << 2 | grad << 1 | training


def split_fwd_arg(arg: int) -> tuple[int, bool, bool]:
    """Unpack ``fwd_arg``: ``(model_id, grad, training)``."""
    return arg >> 2, bool(arg & 2), bool(arg & 1)


class EventBuffer(Protocol):
    """Where the hot path appends events and the monitor takes them from (GIL held: both)."""

    def append(self, event: Event, /) -> None:
        """Add an event."""

    def take(self) -> list[Event]:
        """Return the events appended so far, oldest first, leaving the buffer empty."""

    def clear(self) -> None:
        """Drop every event."""

    def __len__(self) -> int:
        """How many events wait to be taken."""


class EventQueue(deque[Event]):
    """The pure-Python event buffer, the C ``Events``' twin: a deque (``append`` and
    ``popleft`` are atomic under the GIL, so no lock)."""

    def take(self) -> list[Event]:
        """Return the events appended so far, oldest first, leaving the rest to come."""
        return [self.popleft() for _ in range(len(self))]


def native_hooks() -> Any:
    """The ``_hotpath`` C module (hooks and ``Events``), or None (``native.c_part``: not built,
    switched off, or built from other event codes than these)."""
    codes = {"ENTER": ENTER, "EXIT": EXIT, "OPT_END": OPT_END}
    codes.update(FWD_ENTER=FWD_ENTER, FWD_EXIT=FWD_EXIT, GC_START=GC_START, GC_STOP=GC_STOP)
    return c_part("stepdoctor.collect.hooks._hotpath", codes)


def new_event_buffer(*, native: bool | None = None) -> EventBuffer:
    """An empty event buffer: the C one where built (None), necessarily (True: RuntimeError
    if not built) or ``EventQueue`` (False)."""
    module = wanted(native_hooks, native, "event buffer (collect/hooks/_hotpath)")
    buffer: EventBuffer = EventQueue() if module is None else module.Events()
    return buffer
