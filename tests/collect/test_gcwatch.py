"""The ``gc.callbacks`` entry (``collect/hooks/gcwatch.py``): the C hook against its Python twin,
on real collections."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")


from stepdoctor.collect.hooks.events import GC_START, GC_STOP, Event, EventQueue, native_hooks
from stepdoctor.collect.hooks.gcwatch import GcWatch
from stepdoctor.collect.session import Session
from stepdoctor.native import PURE_PYTHON_ENV

from .test_hotpath import HOOKS_AND_BUFFERS, Counter, needs_c

C = native_hooks()


@pytest.fixture
def no_automatic_collections() -> Iterator[None]:
    """Only the test's own ``gc.collect`` calls run the callbacks."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def watched_collections(native: bool, structs: bool, *generations: int) -> list[Event]:
    """The events appended while collecting each of ``generations`` in turn."""
    events = C.Events() if structs else EventQueue()
    watch = GcWatch(events, Counter(), native=native)
    watch.install()
    try:
        for generation in generations:
            gc.collect(generation)
    finally:
        watch.uninstall()
    return list(events.take())


@pytest.mark.usefixtures("no_automatic_collections")
@pytest.mark.parametrize(("native", "structs"), HOOKS_AND_BUFFERS)
def test_each_collection_is_bracketed_with_its_generation(native: bool, structs: bool) -> None:
    events = watched_collections(native, structs, 0, 2, 1)
    me = threading.get_ident()
    assert events == [
        (1, GC_START, 0, me),
        (2, GC_STOP, 0, me),
        (3, GC_START, 2, me),
        (4, GC_STOP, 2, me),
        (5, GC_START, 1, me),
        (6, GC_STOP, 1, me),
    ]


@pytest.mark.usefixtures("no_automatic_collections")
def test_uninstall_removes_the_callback_and_stops_the_events() -> None:
    events = EventQueue()
    watch = GcWatch(events, Counter())
    before = list(gc.callbacks)
    watch.install()
    watch.install()  # once only
    assert len(gc.callbacks) == len(before) + 1
    watch.uninstall()
    assert gc.callbacks == before
    gc.collect(0)
    assert not events


@pytest.mark.parametrize("native", [False, pytest.param(True, marks=needs_c)])
def test_an_info_without_a_generation_raises_like_the_python_twin(native: bool) -> None:
    callback: Any = GcWatch(EventQueue(), Counter(), native=native).callback
    with pytest.raises(KeyError):
        callback("start", {})


@needs_c
def test_the_c_callback_checks_its_arguments_and_leaks_nothing() -> None:
    events = C.Events()
    callback: Any = GcWatch(events, Counter(), native=True).callback
    assert isinstance(callback, C.Hook)
    with pytest.raises(TypeError):
        callback("start")
    with pytest.raises(TypeError):
        callback(phase="start", info={"generation": 0})
    info = {"generation": 2, "collected": 0, "uncollectable": 0}
    phase = "stop"
    before = (sys.getrefcount(info), sys.getrefcount(phase))
    for _ in range(1000):
        callback(phase, info)
    assert (sys.getrefcount(info), sys.getrefcount(phase)) == before
    assert len(events) == 1000
    assert events.take()[-1][1:3] == (GC_STOP, 2)


@needs_c
def test_pure_python_switch_and_the_sessions_choice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    assert C is not None
    with Session(tmp_path / "c", instrument_torch=False, readers=[], interval_s=3600.0):
        assert any(isinstance(cb, C.Hook) for cb in gc.callbacks)
    assert not any(isinstance(cb, C.Hook) for cb in gc.callbacks)
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    with pytest.raises(RuntimeError, match="C gc callback"):
        GcWatch(EventQueue(), Counter(), native=True)
    with Session(tmp_path / "py", instrument_torch=False, readers=[], interval_s=3600.0):
        assert not any(isinstance(cb, C.Hook) for cb in gc.callbacks)
