"""PsutilReader on this machine: the job's process tree, found at most once per interval."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from traindoctor.collect.readers import HeapReader, PsutilReader, walk_proc, walk_psutil
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


def test_walk_proc_reads_what_psutil_reads_on_this_machine() -> None:
    through_psutil = walk_psutil()
    raw = walk_proc()
    both = set(raw) & set(through_psutil)
    # processes come and go between the two walks; nearly all are in both
    assert os.getpid() in both and len(both) >= 0.9 * len(through_psutil)
    for pid in both:
        ppid, name, cpu = raw[pid]
        assert ppid == through_psutil[pid][0]
        assert through_psutil[pid][1].startswith(name)  # psutil may find a longer name
        assert abs(cpu - through_psutil[pid][2]) < 1.0  # CPU used between the walks
    assert raw[os.getpid()][2] > 0


def test_walk_proc_takes_odd_names_and_skips_what_is_not_a_process(tmp_path: Path) -> None:
    def stat(pid: int, comm: str, ppid: int, utime: int, stime: int) -> bytes:
        rest = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), *["0"] * 30]
        return f"{pid} ({comm}) {' '.join(rest)}\n".encode()

    for pid, data in {
        "12": stat(12, "a) (b c", 1, 100, 50),  # a name with parens and spaces
        "13": stat(13, "worker", 12, 0, 0),
        "14": b"14 (cut",  # truncated
        "15": b"",
        "17": stat(17, "odd", 1, 0, 0).replace(b" 1 ", b" x ", 1),  # not a number
    }.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "stat").write_bytes(data)
    (tmp_path / "16").mkdir()  # ended: no stat
    (tmp_path / "self").mkdir()
    (tmp_path / "meminfo").write_text("x")
    ticks = os.sysconf("SC_CLK_TCK")
    assert walk_proc(str(tmp_path)) == {
        12: (1, "a) (b c", 150 / ticks),
        13: (12, "worker", 0.0),
    }
    with pytest.raises(FileNotFoundError):
        walk_proc(str(tmp_path / "missing"))
