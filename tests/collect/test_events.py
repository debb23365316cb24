"""The event buffers: the C ``Events`` of ``collect/hooks/_hotpath.c`` (structs) against its twin
``EventQueue``; what the C hooks cost the garbage collector with each; the hooks' own clock.

``make test`` sets ``STEPDOCTOR_REQUIRE_C_PARTS=1``: there the C module must have been built.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import weakref
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepdoctor.collect.hooks.events import (
    ENTER,
    EXIT,
    GC_START,
    OPT_END,
    Event,
    EventBuffer,
    EventQueue,
    native_hooks,
    new_event_buffer,
)
from stepdoctor.native import PURE_PYTHON_ENV

C = native_hooks()
REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"
needs_c = pytest.mark.skipif(
    C is None and not REQUIRED, reason="the C hooks were not built (no compiler at install)"
)


def _c_events() -> EventBuffer:
    return new_event_buffer(native=True)


BUFFERS = [
    pytest.param(EventQueue, id="python"),
    pytest.param(_c_events, id="c", marks=needs_c),
]

_ARGS = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),  # kept as C ints
    st.integers(2**63, 2**80) | st.integers(-(2**80), -(2**63) - 1),  # kept as objects
    st.booleans(),  # an int subclass: kept as the object itself
    st.text(max_size=8),
    st.floats(allow_nan=False),
    st.tuples(st.integers(), st.text(max_size=3)),
)
_EVENTS = st.lists(
    st.tuples(
        st.integers(0, 2**63 - 1),
        st.integers(0, 8),
        _ARGS,
        st.integers(0, 2**64 - 1),
    ),
    max_size=60,
)


@pytest.mark.no_cover
@pytest.mark.parametrize("make", BUFFERS)
@given(first=_EVENTS, second=_EVENTS)
def test_a_buffer_gives_back_what_was_appended_in_order(
    make: Callable[[], EventBuffer], first: list[Event], second: list[Event]
) -> None:
    buffer = make()
    for event in first:
        buffer.append(event)
    assert len(buffer) == len(first)
    taken = buffer.take()
    assert taken == first
    # the same objects and types back: a bool stays a bool, an int an int
    assert [type(arg) for _, _, arg, _ in taken] == [type(arg) for _, _, arg, _ in first]
    assert len(buffer) == 0 and buffer.take() == []
    for event in second:  # into the array the take handed back
        buffer.append(event)
    assert buffer.take() == second
    for event in first:
        buffer.append(event)
    buffer.clear()
    assert len(buffer) == 0 and buffer.take() == []


@needs_c
def test_the_c_buffer_refuses_what_is_not_an_event() -> None:
    buffer = _c_events()
    with pytest.raises(ValueError, match="an event is a tuple"):
        buffer.append([1, ENTER, "x", 1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="an event is a tuple"):
        buffer.append((1, ENTER, "x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        buffer.append((1.5, ENTER, "x", 1))  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        buffer.append((1, ENTER, "x", -1))  # a thread id is unsigned
    with pytest.raises(OverflowError):
        buffer.append((2**63, ENTER, "x", 1))
    with pytest.raises(OverflowError):
        buffer.append((1, 2**40, "x", 1))
    assert len(buffer) == 0  # nothing half-appended
    with pytest.raises(TypeError):
        type(buffer)(1)  # type: ignore[call-arg]


@needs_c
def test_the_c_buffer_keeps_objects_alive_and_lets_cycles_be_collected() -> None:
    class Arg:
        pass

    buffer = _c_events()
    arg = Arg()
    ref = weakref.ref(arg)
    buffer.append((1, ENTER, arg, 1))
    del arg
    assert ref() is not None  # held by the buffer
    buffer.clear()
    assert ref() is None  # released by clear()

    cycle = Arg()
    cycle.buffer = buffer  # type: ignore[attr-defined]
    buffer.append((2, ENTER, cycle, 1))  # buffer -> cycle -> buffer
    ref = weakref.ref(cycle)
    del cycle, buffer
    gc.collect()
    assert ref() is None


@needs_c
def test_the_c_buffer_gives_memory_back_after_a_burst() -> None:
    buffer = _c_events()
    empty = sys.getsizeof(buffer)
    for t in range(300_000):  # a burst: ~10 MB of structs
        buffer.append((t, EXIT, t, 1))
    assert sys.getsizeof(buffer) > empty + 300_000 * 24
    buffer.clear()  # a taken array this big is freed, not kept for reuse
    assert sys.getsizeof(buffer) == empty
    for t in range(5_000):  # a flush's worth is kept
        buffer.append((t, EXIT, None, 1))
    buffer.clear()
    assert empty < sys.getsizeof(buffer) < empty + 5_000 * 64


@needs_c
def test_new_event_buffer_picks_the_c_one_where_built(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(new_event_buffer(native=False), EventQueue)
    assert C is not None and isinstance(new_event_buffer(), C.Events)
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    assert isinstance(new_event_buffer(), EventQueue)
    with pytest.raises(RuntimeError, match="C event buffer"):
        new_event_buffer(native=True)


def _tracked_allocations(call: Callable[[], object], times: int) -> int:
    """Objects the collector tracks that ``times`` calls left allocated (its gen-0 count)."""
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        for _ in range(times):
            call()
        return gc.get_count()[0] - before
    finally:
        gc.enable()


def _hook_calls(buffer: EventBuffer) -> Callable[[], None]:
    """Four events through C hooks (mark, mark_id, a wrapped call) into ``buffer``."""
    assert C is not None
    mark = C.mark(ENTER, "optimizer", buffer.append, time.perf_counter_ns)
    mark_id = C.mark_id(OPT_END, buffer.append, time.perf_counter_ns)
    phase = C.phase(len, "backward", buffer.append, time.perf_counter_ns)

    def calls() -> None:
        mark()
        mark_id(mark)
        phase("ab")

    return calls


@needs_c
def test_c_hooks_writing_structs_give_the_collector_nothing_to_do() -> None:
    """A tuple per event, held until the monitor's next flush, counts towards the job's
    collections (~77 a second on a tiny loop that ran none otherwise: docs/overhead.md)."""
    assert C is not None
    queue, structs = EventQueue(), _c_events()
    made = {}
    for name, buffer in (("tuples", queue), ("structs", structs)):
        made[name] = _tracked_allocations(_hook_calls(buffer), 1000)
    assert len(queue) == len(structs) == 4000
    assert made["tuples"] >= 4000
    assert made["structs"] < 50  # the lambda's own tuples are freed at once


@needs_c
def test_c_hooks_read_the_clock_themselves_as_perf_counter_ns() -> None:
    assert C is not None
    buffer = _c_events()
    mark = C.mark(GC_START, 0, buffer.append, time.perf_counter_ns)
    readings = []
    for _ in range(50):
        readings.append(time.perf_counter_ns())
        mark()
    readings.append(time.perf_counter_ns())
    stamps = [t for t, _, _, _ in buffer.take()]
    assert all(a <= t <= b for a, t, b in zip(readings, stamps, readings[1:], strict=False))
    ticks = iter(range(10, 20))  # any other clock is called
    mark = C.mark(GC_START, 0, buffer.append, lambda: next(ticks))
    mark()
    mark()
    assert [t for t, _, _, _ in buffer.take()] == [10, 11]
