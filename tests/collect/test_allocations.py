"""The allocation window (``allocations``) and what outlived it (``survivors``): it opens
when a full collection or memory growth shows after warm-up, names the lines whose objects
outlive it, tells growth from things made once, finds the tensors kept past the step that
made them and what holds them, and leaves tracemalloc as it found it."""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator

import pytest

from stepdoctor.collect.hooks.session import library_roots
from stepdoctor.collect.sampling import allocations
from stepdoctor.collect.sampling.allocations import WAIT_NS, AllocationWindow
from stepdoctor.collect.sampling.sampler import native_sampler
from stepdoctor.collect.sampling.survivors import (
    GROWTH_MIN_BYTES,
    held_by_traceback,
    kept_tensors,
    surviving_sites,
)
from stepdoctor.model import AllocationSite

pytestmark = pytest.mark.skipif(native_sampler() is None, reason="the C census is not built")

ROOTS = ("/nonexistent-stepdoctor/", *library_roots()[1:])
KEPT: list[object] = []


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    KEPT.clear()
    yield
    KEPT.clear()
    if tracemalloc.is_tracing():
        tracemalloc.stop()


def keep_records(n: int) -> None:
    KEPT.extend([[i, str(i)] for i in range(n)])


def make_once(n: int) -> list[bytes]:
    return [bytes(64) for _ in range(n)]


def in_body(site: AllocationSite, function: Callable[..., object]) -> bool:
    """Whether ``site`` is the one-line body of ``function`` (of this file): named by the
    function, or by its list comprehension, a function of its own up to 3.11 (and shown as
    ``<listcomp>`` alone on 3.10)."""
    return site.file == __file__ and site.line == function.__code__.co_firstlineno + 1


def test_the_line_whose_objects_survive_is_named() -> None:
    tracemalloc.start(16)
    keep_records(3000)
    sites = [s for s in surviving_sites(ROOTS) if s.kind == "gc"]
    top = sites[0]
    assert in_body(top, keep_records) and top.user
    assert top.count > 1500 and top.share > 0.5  # lists from the free lists go untraced


def test_growth_is_what_both_halves_added() -> None:
    tracemalloc.start(16)
    keep_records(2000)
    once = make_once(2000)  # made once, in the first half, and kept: no growth
    middle = held_by_traceback()[0]
    keep_records(2000)
    sites = surviving_sites(ROOTS, since=middle)
    growth = [s for s in sites if s.kind == "growth"]
    assert in_body(growth[0], keep_records)
    assert not any(in_body(s, make_once) for s in growth)
    assert growth[0].size_bytes * 2 >= GROWTH_MIN_BYTES
    del once


def test_kept_tensors_are_grouped_with_what_holds_them() -> None:
    torch = pytest.importorskip("torch")
    from stepdoctor.collect.sampling.survivors import new_tensor_refs, tensors_alive

    before = tensors_alive()
    w = torch.ones(64, 32, requires_grad=True)
    transient = [w * 2 for _ in range(3)]
    for _ in range(4):
        KEPT.append((w * 3).sum())  # a loss kept with its graph
    refs = new_tensor_refs(before)
    transient.clear()  # freed before the window ends: not kept
    sites = kept_tensors(refs, modules=[sys.modules[__name__]])
    kept = next(s for s in sites if s.function == "float32[] with SumBackward0")
    assert kept.count == 4 and "list 'KEPT'" in kept.caller
    assert not any(s.function.startswith("float32[64, 32] with MulBackward0") and s.count == 3
                   for s in sites)  # fmt: skip


def test_the_holder_is_found_among_a_large_globals_newest_items_without_python_per_item() -> None:
    """A kept object is found where a job keeps it (a list, a dict's values, a deque), in the
    newest ``HOLDER_SCAN_ITEMS`` of a container larger than that; the scan runs no Python
    code per item (a job's cache of millions would slow the job beside it for seconds)."""
    import collections

    from stepdoctor.collect.sampling import survivors

    kept = object()
    big = [None] * (survivors.HOLDER_SCAN_ITEMS + 10) + [kept]
    wanted = frozenset({id(kept)})
    assert survivors._held_ids(big, wanted) == wanted
    assert survivors._held_ids(dict(enumerate(big[-5:])), wanted) == wanted
    assert survivors._held_ids(collections.deque(big), wanted) == wanted
    assert survivors._held_ids([kept] + big[:-1], wanted) == frozenset()  # past the newest
    assert survivors._held_ids("not a container", wanted) == frozenset()

    def python_events(container: object) -> int:
        events = 0

        def tracer(frame: object, event: str, arg: object) -> object:
            nonlocal events
            events += 1
            return tracer

        before = sys.gettrace()  # coverage's, under make test: put back
        sys.settrace(tracer)
        try:
            survivors._held_ids(container, wanted)
        finally:
            sys.settrace(before)
        return events

    assert python_events(big[:10]) == python_events(big[:100_000])


def test_a_tensor_made_at_a_freed_tensors_id_counts_as_new() -> None:
    """An id is no identity: the job's next tensor often takes the id of one freed since the
    window began (CPython reuses the block freed last); it is still new."""
    torch = pytest.importorskip("torch")
    import weakref

    from stepdoctor.collect.sampling.survivors import new_tensor_refs, tensors_alive

    old = torch.zeros(1)
    KEPT.append(torch.ones(3))
    made = KEPT[-1]
    reused = {id(made): weakref.ref(old)}  # its id was another tensor's at the start
    assert any(r() is made for r in new_tensor_refs(reused))
    del old  # and that tensor is gone
    assert any(r() is made for r in new_tensor_refs(reused))
    assert not any(r() is made for r in new_tensor_refs(tensors_alive()))


def test_the_window_holds_steps_enough_at_the_jobs_pace() -> None:
    """Slow steps (a loaded machine, a big model) lengthen the window to ``WINDOW_STEPS``
    steps at the pace before it, up to ``MAX_WINDOW_NS``; fast ones keep the time window.
    The pace comes from the steps' own times: the monitor that counts them may lag."""
    ms = 1_000_000
    for steps, last_end, expected in (
        (1000, 1000 * ms, allocations.MIN_WINDOW_NS),  # 1 ms steps: the shortest window
        (10, 10 * ms, allocations.MIN_WINDOW_NS),  # 1 ms steps, the monitor behind
        (10, 1000 * ms, allocations.WINDOW_STEPS * 100 * ms),  # 100 ms steps
        (1, 1000 * ms, allocations.MAX_WINDOW_NS),  # 1 s steps
    ):
        now = [0]
        window = AllocationWindow(ROOTS, clock=lambda now=now: now[0])
        window.warmed_up(100, steps=(5, 0))
        now[0] = WAIT_NS
        window.tick(200, (5 + steps, last_end))  # grew: it starts
        assert window.started_ns == WAIT_NS and window._window_ns == expected, steps
        now[0] += expected - 1
        window.tick(200, (5 + steps, last_end))
        assert window.ended_ns is None  # not before its time
        window.stop()
        assert not tracemalloc.is_tracing()


def test_the_window_opens_after_warm_up_on_a_full_collection_and_closes() -> None:
    now = [0]
    window = AllocationWindow(ROOTS, clock=lambda: now[0], window_s=1.0)
    assert not window.tick(100)  # not warmed up
    window.warmed_up(100)
    gc.collect()
    now[0] = WAIT_NS
    assert not window.tick(100) and window.started_ns is None  # one full collection: no
    gc.collect()
    now[0] = WAIT_NS // 2
    assert not window.tick(100) and window.started_ns is None  # waits WAIT_NS after warm-up
    now[0] = WAIT_NS
    assert not window.tick(100) and window.started_ns == WAIT_NS and tracemalloc.is_tracing()
    keep_records(500)
    now[0] += 600_000_000
    assert not window.tick(100)  # the middle
    keep_records(500)
    now[0] += 600_000_000
    assert window.tick(100) and window.done and not tracemalloc.is_tracing()
    assert any(in_body(s, keep_records) for s in window.sites), window.sites


def _started_by_its_timekeeper(
    monkeypatch: pytest.MonkeyPatch, *, window_s: float
) -> AllocationWindow:
    """A window armed, found due at once (the process grew) and started by its timekeeper."""
    monkeypatch.setattr(allocations, "WAIT_NS", 0)
    window = AllocationWindow(ROOTS, clock=time.perf_counter_ns, window_s=window_s)
    window.arm()
    window.warmed_up(100)
    assert not window.tick(200)  # grew: due, and the timekeeper starts it
    deadline = time.monotonic() + 60  # liveness only
    while window.started_ns is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert window.started_ns is not None
    return window


def test_the_timekeeper_ends_the_window_without_the_monitor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The monitor (nice 19) may not run for seconds on a busy machine: once due, the
    window starts, takes its middle reading and ends on its own thread, and the monitor's next tick
    reports it once."""
    monkeypatch.setattr(allocations, "MIN_WINDOW_NS", 200_000_000)
    window = _started_by_its_timekeeper(monkeypatch, window_s=0.2)
    keep_records(500)
    deadline = time.monotonic() + 60  # liveness only: it ends 0.2 s after it started
    while window.ended_ns is None and time.monotonic() < deadline:
        keep_records(50)
        time.sleep(0.01)
    assert window.ended_ns is not None and not tracemalloc.is_tracing()  # no tick in between
    assert window.tick(200) and not window.tick(200)  # reported once
    assert not window.stop()  # and not again at the end
    assert any(in_body(s, keep_records) for s in window.sites), window.sites


def test_an_armed_window_that_never_opened_lets_its_timekeeper_go() -> None:
    window = AllocationWindow(ROOTS, clock=time.perf_counter_ns)
    window.arm()
    assert window._timekeeper is not None
    assert not window.stop()
    assert not window._timekeeper.is_alive() and window.sites == []  # gone when stop returns


def test_the_run_ending_mid_window_ends_the_timekeeper_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timekeeper waits out a window of up to 10 s; the run's end must not leave it
    behind (a session's test found a 'stepdoctor-allocations' thread alive after it ended)."""
    window = _started_by_its_timekeeper(monkeypatch, window_s=600.0)
    assert window._timekeeper is not None
    window.stop()
    assert not window._timekeeper.is_alive() and not tracemalloc.is_tracing()


def test_a_job_tracing_itself_keeps_its_tracemalloc() -> None:
    now = [0]
    window = AllocationWindow(ROOTS, clock=lambda: now[0])
    window.warmed_up(100)
    now[0] = WAIT_NS
    tracemalloc.start()
    assert not window.tick(200)  # grew: due, but tracemalloc is the job's
    assert window.skipped and window.done and tracemalloc.is_tracing()


def test_a_window_cut_short_by_the_end_gives_no_sites() -> None:
    now = [0]
    window = AllocationWindow(ROOTS, clock=lambda: now[0], window_s=2.0)
    window.warmed_up(100)
    now[0] = WAIT_NS
    window.tick(200)
    assert window.started_ns is not None
    assert not window.stop() and window.sites == [] and not tracemalloc.is_tracing()


class Span:
    """A job's own type, made many of in the window."""


def test_the_types_the_collector_holds_more_of_are_counted() -> None:
    from stepdoctor.collect.sampling.survivors import grown_types, objects_by_type

    before = objects_by_type()
    KEPT.extend([Span() for _ in range(2000)])
    grown = grown_types(before, objects_by_type())
    assert grown[0].function == f"{__name__}.Span" and grown[0].count >= 2000
    assert grown[0].kind == "types" and 0 < grown[0].share <= 1
