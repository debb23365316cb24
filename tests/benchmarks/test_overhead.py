"""The overhead benchmark's statistics (benchmarks/overhead.py): its interval and verdict."""

from __future__ import annotations

import gc
import hashlib
import os
import random
import threading
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmarks._load import benchmark

pytest.importorskip("torch")  # benchmarks/overhead.py trains a model


def overhead_module() -> ModuleType:
    """benchmarks/overhead.py."""
    return benchmark("overhead")


@pytest.fixture
def overhead() -> ModuleType:
    return overhead_module()


def _rounds(n: int, overhead: float, noise: float, seed: int) -> list[tuple[float, float]]:
    """``n`` pairs of rounds (watched, plain) of 50 steps of ~1 ms, the watched ones
    ``overhead`` slower, each round's steps shifted by the machine's noise of that moment."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        rounds = []
        for factor in (1.0 + overhead, 1.0):
            load = 1.0 + abs(rng.gauss(0.0, noise))  # other processes only ever slow steps
            rounds.append([round(1e6 * factor * load * rng.uniform(0.98, 1.02)) for _ in range(50)])
        pairs.append((rounds[0], rounds[1]))
    return overhead_module().round_means(pairs)


def test_the_interval_holds_the_true_overhead_and_narrows_with_more_rounds(
    overhead: ModuleType,
) -> None:
    few = _rounds(12, 0.005, 0.02, seed=1)
    many = _rounds(300, 0.005, 0.02, seed=1)
    for statistic in (overhead.median_round_ratio, overhead.total_ratio):
        low, high = overhead.interval(few, statistic)
        m_low, m_high = overhead.interval(many, statistic)
        assert low <= statistic(few) <= high
        assert m_low < 1.005 < m_high
        assert m_high - m_low < (high - low) / 2
    # the same rounds, the same interval (a seeded bootstrap)
    assert overhead.interval(few, overhead.total_ratio) == overhead.interval(
        few, overhead.total_ratio
    )


def test_the_statistics_of_rounds_of_known_times(overhead: ModuleType) -> None:
    pairs = overhead.round_means(
        [([110, 110], [100, 100]), ([200, 200], [100, 100]), ([90, 90], [100, 100])]
    )
    assert overhead.median_round_ratio(pairs) == pytest.approx(1.1)
    assert overhead.total_ratio(pairs) == pytest.approx(800 / 600)


def test_the_verdict_says_whether_noise_could_account_for_the_figure(
    overhead: ModuleType,
) -> None:
    assert overhead.verdict(1.004, 1.009, 0.01) == "OK"
    assert overhead.verdict(1.008, 1.015, 0.01).startswith("OK within noise")
    assert "+1.5%" in overhead.verdict(1.008, 1.015, 0.01)
    assert overhead.verdict(1.012, 1.02, 0.01) == "OVER TARGET"


def test_the_median_difference_of_rounds(overhead: ModuleType) -> None:
    assert overhead.median_difference([(7.0, 2.0), (3.0, 2.0), (10.0, 1.0)]) == 5.0


def test_the_loop_marks_the_first_timed_step(overhead: ModuleType) -> None:
    loop = overhead.make_loop(5, batch=2)
    marks: list[int] = []
    times = loop(lambda: marks.append(len(marks)), 3)
    assert len(times) == 5 and marks == [0]
    loop(lambda: marks.append(len(marks)), 0)  # 0: before the first step
    assert marks == [0, 1]


@pytest.mark.skipif(
    not Path("/proc/self/task").is_dir() or not hasattr(os, "sched_setaffinity"),
    reason="Linux /proc schedstat and CPU affinity",
)
def test_waits_for_a_core_are_counted_when_threads_share_one(overhead: ModuleType) -> None:
    if not Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").exists():
        pytest.skip("the kernel keeps no schedstat")
    data = b"x" * (8 << 20)
    stop = threading.Event()

    def burn() -> None:  # sha256 of a large buffer runs without the GIL
        while not stop.is_set():
            hashlib.sha256(data).digest()

    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})  # (threads started from here inherit it)
    threads = [threading.Thread(target=burn) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        tids = [t.native_id for t in threads if t.native_id is not None]
        before = overhead._waited_ns(tids)
        stop.wait(0.3)
        after = overhead._waited_ns(tids)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        os.sched_setaffinity(0, affinity)
    assert before is not None and after is not None
    # two threads that never sleep on one core: each waits while the other runs, so together
    # they wait about as long as the wall time (far more than 0.1 of it, whatever the load)
    assert after - before > 30_000_000
    assert overhead._waited_ns([2**22 + 12345]) is None  # no such thread: unknown, not 0


def test_collections_are_counted_per_configuration(overhead: ModuleType) -> None:
    counter = overhead._Collections()
    gc.callbacks.append(counter)
    try:
        gc.collect()  # no configuration: not counted
        counter.config = "plain"
        gc.collect()
        gc.collect(0)
        counter.config = None
    finally:
        gc.callbacks.remove(counter)
    assert counter.count == {"plain": 2}
    assert counter.full == {"plain": 1} and counter.full_ns["plain"] > 0
