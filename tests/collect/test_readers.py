"""PsutilReader on this machine: the job's process tree, found at most once per interval."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from multiprocessing import resource_tracker
from pathlib import Path

import psutil
import pytest

from stepdoctor.collect.sampling.heap import HEAP_EVERY_NS, HeapReader
from stepdoctor.collect.sampling.procfs import (
    COMMAND_MAX,
    PAGE_SIZE,
    ProcFs,
    ProcStat,
    command_proc,
    command_psutil,
    run_delay_proc,
)
from stepdoctor.collect.sampling.readers import PsutilReader
from stepdoctor.model import GpuSample, SystemSample
from tests._zygote import stop_zygote

SECOND = 1_000_000_000


@pytest.fixture
def childless() -> None:
    """This test process with no child: the zygote a test before started (``tests/_zygote.py``)
    stopped, and multiprocessing's resource tracker, which a spawned pool an earlier test ran
    (``jobs/rows.py``'s) leaves for the process's life, stopped too (the next pool starts
    another)."""
    stop_zygote()
    resource_tracker._resource_tracker._stop()
    assert psutil.Process().children() == []


def _tree_size(reader: PsutilReader, t_ns: int) -> int:
    (sample,) = reader.read(t_ns)
    assert isinstance(sample, SystemSample)
    assert sample.job_processes is not None
    return sample.job_processes


@pytest.mark.usefixtures("childless")
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


_SANITIZED = pytest.mark.skipif(
    not HeapReader().available and "libasan" in Path("/proc/self/maps").read_text(),
    reason="under ASan (make asan) glibc's malloc is not the one in use",
)


@_SANITIZED
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


class _CountedHeap(HeapReader):
    """A heap whose readings count themselves: 1, 2, 3..."""

    def __init__(self) -> None:
        super().__init__(maps="")
        self.reads = 0

    @property
    def available(self) -> bool:
        return True

    def read(self) -> int | None:
        self.reads += 1
        return self.reads


def test_the_heap_is_read_at_the_first_read_in_each_slot_of_the_clock() -> None:
    """The monitor's reads come at random points of their slots (``WakeSchedule``): the heap
    is read at the first read in each ``HEAP_EVERY_NS`` slot, however close to the last."""
    reader = PsutilReader(heap=_CountedHeap(), heap_every_ns=HEAP_EVERY_NS)
    slot, heaps = HEAP_EVERY_NS, []
    for t_ns in (0, slot // 2, slot - 1, slot, slot + 1, 2 * slot - 1, 3 * slot + 7):
        (sample,) = reader.read(t_ns)
        assert isinstance(sample, SystemSample)
        heaps.append(sample.main_heap_bytes)
    assert heaps == [1, None, None, 2, None, None, 3]


@_SANITIZED
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


def test_children_files_find_the_tree_and_the_walk_only_names_the_others() -> None:
    me = os.getpid()
    walks = iter(
        [
            {me: (1, "python", 1.0), 900001: (1, "spinner", 10.0)},
            {me: (1, "python", 9.0), 900001: (1, "spinner", 17.5), 900002: (me, "w", 5.0)},
        ]
    )
    walked: list[int] = []

    def walk() -> dict[int, tuple[int, str, float]]:
        walked.append(1)
        return next(walks)

    looked: list[int] = []

    def children(pid: int) -> list[int]:
        looked.append(pid)
        return [os.getppid()] if pid == me and len(looked) > 1 else []

    reader = PsutilReader(
        scan_every_ns=2 * SECOND, walk_every_ns=10 * SECOND, walk=walk, children=children
    )
    assert _tree_size(reader, 0) == 1 and walked == [1]
    # At the next scan the children files find the new child; no walk till 10 s.
    (sample,) = reader.read(2 * SECOND)
    assert isinstance(sample, SystemSample)
    assert sample.job_processes == 2 and sample.top_others == () and walked == [1]
    assert _tree_size(reader, 3 * SECOND) == 2 and looked == [me, me, os.getppid()]
    (named,) = reader.read(10 * SECOND)
    assert isinstance(named, SystemSample) and walked == [1, 1]
    # 7.5 s of CPU in 10 s; the tree's own processes are not "others", whatever their
    # parent in the walk says.
    assert [(u.name, u.cpu_pct) for u in named.top_others] == [("spinner", 75.0)]


def test_the_last_reading_walks_and_names_the_others_by_their_command_lines() -> None:
    """A run shorter than the walk's period names the others at its last reading (the
    monitor's ``walk_next``), each with its command line, read once per process."""
    me = os.getpid()
    walks = iter(
        [
            {me: (1, "python", 1.0), 900001: (1, "python3", 10.0), 900002: (1, "sh", 0.0)},
            {me: (1, "python", 2.0), 900001: (1, "python3", 13.0), 900002: (1, "sh", 0.0)},
            {me: (1, "python", 3.0), 900001: (1, "python3", 14.0), 900003: (1, "x", 0.0)},
        ]
    )
    read: list[int] = []

    def command(pid: int) -> str:
        read.append(pid)
        return f"python3 hog.py --pid {pid}"

    reader = PsutilReader(
        scan_every_ns=2 * SECOND, walk_every_ns=10 * SECOND, walk=lambda: next(walks),
        children=lambda pid: [], command=command,
    )  # fmt: skip
    (first,) = reader.read(0)
    (before,) = reader.read(4 * SECOND)  # no walk due before 10 s
    assert isinstance(first, SystemSample) and isinstance(before, SystemSample)
    assert first.top_others == () and before.top_others == ()
    reader.walk_next()
    (last,) = reader.read(6 * SECOND)  # 3 s of CPU in 6 s: half a core
    assert isinstance(last, SystemSample)
    assert [(u.pid, u.cpu_pct, u.command) for u in last.top_others] == [
        (900001, 50.0, "python3 hog.py --pid 900001")
    ]
    reader.walk_next()  # a walk comes again only when asked or due; the command is kept
    (again,) = reader.read(8 * SECOND)
    assert isinstance(again, SystemSample)
    assert [u.command for u in again.top_others] == ["python3 hog.py --pid 900001"]
    assert read == [900001]  # the idle shell was not named, so not read


@pytest.mark.serial  # its busy process loads a core: beside no other test
def test_a_busy_process_started_between_two_walks_is_named_from_its_life() -> None:
    """A process that began after the first walk has no earlier reading: it is rated by its
    CPU over its life (from its start time), so a run shorter than the walk's period names a
    competitor started after the job (as a script that starts its own busy helpers does)."""
    reader = PsutilReader(scan_every_ns=2 * SECOND, walk_every_ns=10 * SECOND)
    reader.read(0)  # the first walk: before the busy process
    code = "import time\nprint(flush=True)\nend = time.time() + 30\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", code, "started-between-walks"],
                            stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert busy.stdout is not None
        busy.stdout.readline()
        time.sleep(1.0)  # past MIN_AGE_S, burning CPU
        reader.walk_next()
        (sample,) = reader.read(SECOND)
    finally:
        busy.kill()
        busy.wait()
        if busy.stdout is not None:
            busy.stdout.close()
    assert isinstance(sample, SystemSample)
    named = {u.pid: u for u in sample.top_others}
    assert busy.pid in named, sample.top_others
    assert named[busy.pid].command.endswith("started-between-walks")


def test_the_main_threads_wait_for_a_core_is_read_from_proc() -> None:
    """/proc/<pid>/schedstat's run delay: seconds, never falling; None where unreadable."""
    first = run_delay_proc(os.getpid())
    if first is None:
        pytest.skip("this kernel has no /proc/<pid>/schedstat")
    sum(range(2_000_000))
    later = run_delay_proc(os.getpid())
    assert later is not None and later >= first >= 0.0
    assert run_delay_proc(os.getpid(), proc="/nonexistent") is None


def test_command_lines_are_read_from_proc_on_one_line_and_cut() -> None:
    code = "import time\nprint(flush=True)\ntime.sleep(30)  # " + "x" * (COMMAND_MAX + 50)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        child.stdout.readline()  # it runs: its command line is its own, not its parent's
        for read in (command_proc, command_psutil):
            text = read(child.pid)
            assert text.startswith(f"{sys.executable} -c import time print(flush=True) time")
            assert len(text) == COMMAND_MAX and text.endswith("…")
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    # an ended process, and a kernel thread (kthreadd, pid 2, where this machine shows it)
    assert command_proc(child.pid) == "" and command_psutil(child.pid) == ""
    if Path("/proc/2/cmdline").exists():
        assert command_proc(2) == ""


def test_look_again_finds_new_children_at_the_next_reading_not_the_next_scan() -> None:
    # DataLoader workers of a short epoch can end before the next scan: the monitor asks the
    # reader to look again when they start, and their CPU is the job's from then on.
    me = os.getpid()
    found: list[int] = []

    def children(pid: int) -> list[int]:
        return list(found) if pid == me else []

    reader = PsutilReader(
        scan_every_ns=2 * SECOND, walk_every_ns=10 * SECOND, walk=dict, children=children
    )
    assert _tree_size(reader, 0) == 1
    found.append(os.getppid())  # a child appears (any live process will do)
    assert _tree_size(reader, SECOND // 10) == 1  # not looked for: the scan is not due
    reader.look_again()
    assert _tree_size(reader, SECOND // 5) == 2  # looked for at once


def test_without_children_files_the_walk_finds_the_tree_at_each_scan() -> None:
    me = os.getpid()
    walks = iter([{me: (1, "python", 1.0)}, {me: (1, "python", 1.0), os.getppid(): (me, "w", 0.0)}])
    reader = PsutilReader(scan_every_ns=2 * SECOND, walk=lambda: next(walks))
    assert _tree_size(reader, 0) == 1
    assert _tree_size(reader, 2 * SECOND) == 2  # walked again at the scan, not at 10 s


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


class _ScriptedSampler:
    """A ``Sampler`` whose ``take()`` returns what the test scripts, with contents made from
    ``(cores, {pid: stat line})`` per snapshot; records the files it is set to read."""

    def __init__(self) -> None:
        self.files: list[list[str]] = []
        self.pending: list[tuple[int, int, tuple[bytes | None, ...]]] = []
        self.started = self.stopped = False
        self.dropped = 0
        self.cpu_ns = 0

    def set_files(self, paths: Sequence[str]) -> int:
        self.files.append(list(paths))
        return len(self.files)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True
        self.cpu_ns = 1234

    def take(self) -> list[tuple[int, int, tuple[bytes | None, ...]]]:
        taken, self.pending = self.pending, []
        return taken

    def snap(self, t_s: float, cores: list[tuple[int, int]], *stats: bytes | None) -> None:
        lines = [b"cpu  0 0 0 0 0 0 0 0 0 0"]
        for i, (busy, idle) in enumerate(cores):
            lines.append(f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0".encode())
        lines.append(b"intr 1 2 3")
        contents = (b"\n".join(lines), *stats)
        self.pending.append((int(t_s * 1e9), len(self.files), contents))


def _stat_line(pid: int, cpu_ticks: int, *, ppid: int = 1, rss_pages: int = 10) -> bytes:
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(cpu_ticks), "0"] + ["0"] * 4
    fields += ["3", "0", "77", "0", str(rss_pages)] + ["0"] * 30  # threads, start, rss
    return f"{pid} (p) ".encode() + " ".join(fields).encode()


def test_snapshots_become_one_sample_each_with_the_walk_and_io_in_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = tmp_path / "proc"
    me, worker = 4242, 4343
    (proc / str(me)).mkdir(parents=True)
    (proc / "stat").write_bytes(b"cpu  0\ncpu0 0 0 0 100 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\n")
    (proc / str(me) / "stat").write_bytes(_stat_line(me, 0))
    now = [10 * SECOND]  # the snapshots' clock
    monkeypatch.setattr(time, "monotonic_ns", lambda: now[0])
    sampler = _ScriptedSampler()
    walks = iter(
        [
            {me: (1, "python", 0.0)},
            {me: (1, "python", 0.0), worker: (me, "w", 0.0)},
            {me: (1, "python", 0.0)},
        ]
    )
    reader = PsutilReader(
        me, counters=ProcFs(str(proc)), walk=lambda: next(walks), sampler=sampler,
        scan_every_ns=2 * SECOND, heap=HeapReader(maps="jemalloc"),
    )  # fmt: skip
    assert reader.self_timed and sampler.started
    assert sampler.files == [[f"{proc}/stat", f"{proc}/{me}/stat"]]
    sampler.snap(10.5, [(50, 150), (0, 200)], _stat_line(me, 50))  # 0.5 s of CPU in 0.5 s
    sampler.snap(11.0, [(150, 150), (0, 300)], _stat_line(me, 125))
    # the session clock is 1 s ahead of the monotonic one: t_ns of 11 s read at 10 s
    first, second = reader.read(11 * SECOND)
    assert isinstance(first, SystemSample) and isinstance(second, SystemSample)
    assert (first.t_ns, second.t_ns) == (11_500_000_000, 12 * SECOND)
    assert first.cpu_pct_per_core == (50.0, 0.0) and second.cpu_pct_per_core == (100.0, 0.0)
    assert (first.job_cpu_pct, second.job_cpu_pct) == (100.0, 150.0)
    assert second.other_cpu_pct == 0.0 and first.job_rss_bytes == 10 * PAGE_SIZE
    assert first.disk_read_bytes is None  # disk/net go into the newest sample of a read
    assert second.disk_read_bytes is not None and second.net_sent_bytes is not None
    # the next walk adopts the worker: its file is read from then on
    (proc / str(worker)).mkdir()
    (proc / str(worker) / "stat").write_bytes(_stat_line(worker, 100, ppid=me))
    sampler.snap(11.5, [(150, 200), (0, 350)], _stat_line(me, 125))  # taken before the walk
    now[0] = 11_750_000_000  # the walk primes the worker then
    (before,) = reader.read(13 * SECOND)
    assert isinstance(before, SystemSample) and before.job_processes == 1
    assert sampler.files[-1] == [f"{proc}/stat", f"{proc}/{me}/stat", f"{proc}/{worker}/stat"]
    sampler.snap(12.0, [(200, 200), (50, 350)], _stat_line(me, 150), _stat_line(worker, 150))
    sampler.snap(12.5, [(200, 250), (50, 400)], _stat_line(me, 150), None)  # the worker ended
    with_worker, ended = reader.read(14 * SECOND)
    assert isinstance(with_worker, SystemSample) and isinstance(ended, SystemSample)
    # 0.25 s of CPU in 0.5 s; the worker's 0.5 s in the 0.25 s since the walk read it
    assert (with_worker.job_cpu_pct, with_worker.children_cpu_pct) == (250.0, 200.0)
    assert with_worker.job_processes == 2 and ended.job_processes == 1
    # a snapshot of files no longer known, or with /proc/stat unreadable, is skipped
    sampler.pending.append((13 * SECOND, 99, (b"cpu  0\n",)))
    sampler.pending.append((13 * SECOND, len(sampler.files), (None, None)))
    assert reader.read(15 * SECOND) == []
    reader.close()
    assert sampler.stopped and reader.cpu_ns == 1234


def test_snapshots_need_proc() -> None:
    counters = _Counters(cores=[[(0.0, 1.0)]], processes={os.getpid(): [_stat(1.0)]})
    with pytest.raises(ValueError, match="need /proc"):
        PsutilReader(counters=counters, sample_every_ns=SECOND)


@pytest.mark.usefixtures("childless")
def test_a_sampler_thread_on_this_machine_feeds_the_reader() -> None:
    reader = PsutilReader(sample_every_ns=SECOND // 100)
    try:
        samples: list[SystemSample | GpuSample] = []
        deadline = time.monotonic() + 10
        while len(samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
            samples += reader.read(time.perf_counter_ns())
    finally:
        reader.close()
    assert len(samples) >= 3
    for sample in samples:
        assert isinstance(sample, SystemSample)
        assert len(sample.cpu_pct_per_core) == psutil.cpu_count()
        assert sample.job_processes == 1 and sample.main_rss_bytes
        assert sample.job_rss_bytes == sample.main_rss_bytes
    assert reader.cpu_ns > 0


@pytest.mark.usefixtures("childless")
def test_each_child_is_read_with_its_cpu_at_the_scans_after_it_was_found() -> None:
    code = "import time; print('ready', flush=True); "
    busy = subprocess.Popen(
        [sys.executable, "-c", code + "\nwhile True: pass"], stdout=subprocess.PIPE, text=True
    )
    idle = subprocess.Popen(
        [sys.executable, "-c", code + "time.sleep(60)"], stdout=subprocess.PIPE, text=True
    )
    try:
        for child in (busy, idle):  # started: the idle one's start-up CPU is behind it
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        reader = PsutilReader(scan_every_ns=SECOND)
        (found,) = reader.read(0)  # the scan finds both: their CPU counts from now
        assert isinstance(found, SystemSample) and found.job_children == ()
        (between,) = reader.read(SECOND // 2)  # no scan due: no reading of the children
        assert isinstance(between, SystemSample) and between.job_children == ()
        time.sleep(0.5)
        reader.read(SECOND * 9 // 10)  # the tree's reading the next scan's rates run up to
        (read,) = reader.read(SECOND)
        assert isinstance(read, SystemSample)
        usage = {p.pid: p for p in read.job_children}
        assert set(usage) == {busy.pid, idle.pid}
        assert usage[busy.pid].cpu_pct > usage[idle.pid].cpu_pct
        assert usage[busy.pid].name == psutil.Process(busy.pid).name()
    finally:
        for child in (busy, idle):
            child.kill()
            child.wait()
            assert child.stdout is not None
            child.stdout.close()


def test_the_jobs_other_ranks_are_neither_the_job_nor_other_processes() -> None:
    """In a distributed job the launcher's other children are the job's other ranks: their CPU
    is ``ranks_cpu_pct``, kept out of ``other_cpu_pct`` and of the busiest others."""
    code = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
    sibling = subprocess.Popen([sys.executable, "-c", code])  # another rank, busy
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # this rank
    try:
        reader = PsutilReader(job.pid, scan_every_ns=0, walk_every_ns=0,
                              ranks_root=os.getpid())  # fmt: skip
        reader.read(0)
        time.sleep(0.5)
        (sample,) = reader.read(SECOND)
        assert isinstance(sample, SystemSample)
        assert sibling.pid in reader._rank_cpu and job.pid not in reader._rank_cpu
        assert sample.ranks_cpu_pct is not None and sample.ranks_cpu_pct > 0
        assert sample.job_processes == 1  # the rank's own tree only
        assert sibling.pid not in {u.pid for u in sample.top_others}
        assert sample.other_cpu_pct is not None and sample.job_cpu_pct is not None
        total = sum(sample.cpu_pct_per_core)
        assert sample.other_cpu_pct == pytest.approx(
            max(0.0, total - sample.job_cpu_pct - sample.ranks_cpu_pct)
        )
        alone = PsutilReader(job.pid, scan_every_ns=0, walk_every_ns=0)
        (outside,) = alone.read(0)
        assert isinstance(outside, SystemSample) and outside.ranks_cpu_pct is None
    finally:
        sibling.kill()
        job.kill()
        sibling.wait()
        job.wait()
