"""PsutilReader on this machine: the job's process tree, found at most once per interval."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from traindoctor.collect.procfs import ProcStat
from traindoctor.collect.readers import HeapReader, PsutilReader
from traindoctor.model import SystemSample

SECOND = 1_000_000_000


def _tree_size(reader: PsutilReader, t_ns: int) -> int:
    (sample,) = reader.read(t_ns)
    assert isinstance(sample, SystemSample)
    assert sample.job_processes is not None
    return sample.job_processes


def test_children_are_found_at_the_next_scan_and_dropped_when_they_end() -> None:
    reader = PsutilReader(scan_every_ns=SECOND)
    assert _tree_size(reader, 0) == 1
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # Between scans the child is not looked for (a /proc walk is costly)...
        assert _tree_size(reader, SECOND // 10) == 1
        # ...and at the next scan it is part of the job's tree.
        assert _tree_size(reader, SECOND + 1) == 2
    finally:
        child.kill()
        child.wait()
    # A child that ended is dropped at once, without waiting for the next scan.
    assert _tree_size(reader, SECOND + 2) == 1


def test_heap_in_use_follows_what_the_process_keeps_allocated() -> None:
    heap = HeapReader()
    assert heap.available  # glibc >= 2.33 on the reference machine
    before = heap.read()
    kept = [bytearray(1 << 20) for _ in range(64)]  # 64 MiB kept alive
    during = heap.read()
    del kept
    after = heap.read()
    assert before is not None and during is not None and after is not None
    assert during - before >= 60 << 20
    assert during - after >= 60 << 20


def test_heap_is_not_read_under_another_malloc_or_outside_the_process() -> None:
    preloaded = HeapReader(maps="7f00-7f10 r-xp 0 08:01 1 /usr/lib/libjemalloc.so.2\n")
    assert not preloaded.available and preloaded.read() is None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        (outside,) = PsutilReader(child.pid).read(0)
    finally:
        child.kill()
        child.wait()
    (inside,) = PsutilReader().read(0)
    assert isinstance(outside, SystemSample) and isinstance(inside, SystemSample)
    assert outside.main_heap_bytes is None
    assert inside.main_heap_bytes is not None and inside.main_heap_bytes > 0
    assert inside.main_rss_bytes is not None and inside.job_rss_bytes is not None
    assert 0 < inside.main_rss_bytes <= inside.job_rss_bytes  # the tree holds the main process


def test_one_walk_finds_children_and_the_busiest_other_processes() -> None:
    me = os.getpid()
    walks = iter(
        [
            {me: (1, "python", 1.0), 900001: (1, "spinner", 10.0)},
            {
                me: (1, "python", 3.0),
                900001: (1, "spinner", 11.5),  # 1.5 s of CPU in 2 s: 75% of a core
                900002: (1, "idle", 0.0),
                900003: (1, "newcomer", 50.0),  # no earlier reading: not judged yet
            },
        ]
    )
    reader = PsutilReader(scan_every_ns=2 * SECOND, walk=lambda: next(walks))
    (first,) = reader.read(0)
    (between,) = reader.read(SECOND)  # no walk between scans
    (second,) = reader.read(2 * SECOND)
    assert isinstance(first, SystemSample) and isinstance(second, SystemSample)
    assert isinstance(between, SystemSample) and between.top_others == ()
    assert first.top_others == ()  # the first walk only primes the counters
    assert [(u.name, u.cpu_pct) for u in second.top_others] == [("spinner", 75.0)]
    assert second.job_processes == 1  # none of them is a child of this process


class _Counters:
    """Counters a test scripts: each ``cores()``/``process()`` call takes the next reading."""

    def __init__(
        self,
        cores: list[list[tuple[float, float]]],
        processes: dict[int, list[ProcStat | None]],
    ) -> None:
        self._cores = iter(cores)
        self._processes = {pid: iter(stats) for pid, stats in processes.items()}

    def cores(self) -> list[tuple[float, float]]:
        return next(self._cores)

    def process(self, pid: int) -> ProcStat | None:
        return next(self._processes[pid])


def _stat(
    cpu_s: float, *, ppid: int = 1, rss: int = 1000, threads: int = 1, start: int = 7
) -> ProcStat:
    return ProcStat(ppid=ppid, name="p", cpu_s=cpu_s, threads=threads, rss_bytes=rss, start=start)


def test_cpu_shares_are_psutils_from_the_counters_between_samples() -> None:
    me, worker = os.getpid(), 900001
    counters = _Counters(
        cores=[
            [(100.0, 1000.0), (0.0, 1000.0)],
            [(150.0, 1100.0), (0.0, 1100.0)],  # core 0: 50 of 100 busy; core 1 idle
            [(150.0, 1100.0), (33.3, 1130.0)],  # core 0: no time passed; core 1: 111% -> 100
        ],
        processes={
            me: [_stat(10.0), _stat(10.5, rss=2000, threads=3), _stat(11.0, rss=2000, threads=3)],
            worker: [
                _stat(3.0, ppid=me),  # read when the walk adopts it
                _stat(3.0, ppid=me, rss=500),
                _stat(3.25, ppid=me, rss=500, threads=2),
            ],
        },
    )
    walks = iter([{me: (1, "python", 10.0), worker: (me, "worker", 3.0)}])
    clock = iter([0.0, 0.0, 1.0, 2.0, 2.0])  # init, scan's adoption, then one per tree read
    reader = PsutilReader(
        counters=counters, walk=lambda: next(walks), timer=lambda: next(clock),
        scan_every_ns=100 * SECOND, heap=HeapReader(maps="jemalloc"),
    )  # fmt: skip
    (first,) = reader.read(0)  # the walk adopts the worker: its share counts from now
    (second,) = reader.read(SECOND)
    assert isinstance(first, SystemSample) and isinstance(second, SystemSample)
    assert first.cpu_pct_per_core == (50.0, 0.0)
    assert (first.job_cpu_pct, first.children_cpu_pct) == (50.0, 0.0)  # 0.5 s of CPU in 1 s
    assert first.job_processes == 2 and first.job_threads == 4
    assert (first.main_rss_bytes, first.job_rss_bytes) == (2000, 2500)
    assert second.cpu_pct_per_core == (0.0, 100.0)
    assert (second.job_cpu_pct, second.children_cpu_pct) == (75.0, 25.0)
    assert second.other_cpu_pct == 25.0  # 100 busy in all, 75 of it the job's


def test_a_reused_pid_or_an_ended_worker_leaves_the_tree_but_the_root_stays() -> None:
    me, worker = os.getpid(), 900002
    counters = _Counters(
        cores=[[(0.0, 1.0)]] * 4,
        processes={
            me: [_stat(1.0), None, _stat(2.0)],  # the root unreadable once: kept, skipped
            worker: [_stat(0.0, ppid=me), _stat(9.0, ppid=me, start=99)],  # another process
        },
    )
    walks = iter([{me: (1, "python", 1.0), worker: (me, "worker", 0.0)}])
    reader = PsutilReader(
        counters=counters, walk=lambda: next(walks), timer=iter(range(10)).__next__,
        scan_every_ns=100 * SECOND, heap=HeapReader(maps="jemalloc"),
    )  # fmt: skip
    (first,) = reader.read(0)
    (second,) = reader.read(SECOND)
    assert isinstance(first, SystemSample) and isinstance(second, SystemSample)
    assert (first.job_processes, first.main_rss_bytes) == (1, None)
    # the reused pid is not ours; the root's share spans the reading it missed
    assert (second.job_processes, second.job_cpu_pct) == (1, 33.3)


def test_a_root_that_does_not_exist_is_refused() -> None:
    counters = _Counters(cores=[[(0.0, 1.0)]], processes={900003: [None]})
    with pytest.raises(psutil.NoSuchProcess):
        PsutilReader(900003, counters=counters)
