"""Readers the monitor thread samples: the machine and the job's process tree.

A reader is anything with ``name`` and ``read(t_ns) -> list[SystemSample | GpuSample]``; tests
and users pass their own (the ``readers=`` seam of ``Session``). GPU readers live in
``collect/sampling/nvml.py``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol, TypeGuard

import psutil

from stepdoctor.collect.sampling.heap import HEAP_EVERY_NS, HeapReader
from stepdoctor.collect.sampling.procfs import (
    CLK_TCK,
    Children,
    ProcessCounters,
    ProcFs,
    ProcStat,
    Walk,
    default_children,
    default_command,
    default_counters,
    default_walk,
    parse_cores,
    parse_stat,
    run_delay_proc,
)
from stepdoctor.collect.sampling.sampler import Sampler, new_sampler
from stepdoctor.model import TOP_OTHERS_MIN_PCT, GpuSample, ProcessUsage, SystemSample

__all__ = ["PsutilReader", "Reader", "ThreadedReader", "samples_itself"]

#: How often the costlier parts are read: disk/net through psutil (0.1 ms warm here, 0.4-0.6
#: ms in situ at each flush, 0.6-0.9 µs a step at 1 Hz; its disk_io_counters looks up which
#: block devices are partitions) and the heap (below), every 2 s. A disk or network rate
#: over 2 s still shows a checkpoint's burst; the memory rule judges minutes.
IO_EVERY_NS = 2_000_000_000
#: The job's tree is looked at every 2 s for new child processes (DataLoader workers, which
#: live for an epoch): through its processes' ``/proc/<pid>/task/<tid>/children`` files where
#: the kernel has them (CONFIG_PROC_CHILDREN), else by a walk of every process's stat.
SCAN_EVERY_NS = 2_000_000_000
#: The walk of every process then runs only to name the other processes using the CPU, every
#: 10 s: the competing-processes rule judges minutes, and each sample's ``other_cpu_pct``
#: comes from /proc/stat regardless. The walk took 1.0-1.5 µs a step in situ at 2 s (0.4 ms
#: warm, 1.6 ms after a sleep, for 65 processes); the children files 13 µs warm.
WALK_EVERY_NS = 10_000_000_000
#: ``set_files`` generations remembered: the tree changes at most once a walk (2 s), and the
#: monitor takes the snapshots every half second, so the last few are all it can meet.
GENERATIONS_KEPT = 8
#: Other processes listed per sample (the least CPU to be listed: ``TOP_OTHERS_MIN_PCT``).
TOP_OTHERS = 5
#: A process first seen at a walk is rated over its life from this age on: younger, its CPU
#: over a few clock ticks (10 ms each) is noise.
MIN_AGE_S = 0.5


class Reader(Protocol):
    """Something the monitor thread samples."""

    name: str

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        """Return the readings taken now (``t_ns`` on the session clock)."""
        ...


class ThreadedReader(Reader, Protocol):
    """A reader that samples on a thread of its own (``self_timed`` true): the monitor reads
    it only when it flushes and, at the end, closes it and counts its thread's CPU."""

    @property
    def self_timed(self) -> bool:
        """Whether it samples on its own thread now."""
        ...

    @property
    def cpu_ns(self) -> int:
        """CPU time of its thread, once closed."""
        ...

    def close(self) -> None:
        """Stop its thread."""
        ...


def samples_itself(reader: Reader) -> TypeGuard[ThreadedReader]:
    """Whether ``reader`` samples on a thread of its own."""
    return bool(getattr(reader, "self_timed", False))


def _monotonic_s() -> float:
    """``time.monotonic()`` as the sampler's snapshots count it (``monotonic_ns``)."""
    return time.monotonic_ns() / 1e9


class PsutilReader:
    """Per-core CPU, the job's process tree (CPU, RSS, threads), disk/net I/O, other processes.

    The CPU percentages are psutil's (``cpu_percent``: of one core, rounded to 0.1), read
    from ``/proc`` directly on Linux (``collect/sampling/procfs.py``); disk and network
    through psutil.

    With ``sample_every_ns`` (and ``/proc``), per-core CPU and the job's tree are snapshotted
    by a thread of its own (``collect/sampling/sampler.py``, C where built) at that interval,
    and each ``read()`` turns the snapshots taken since the last one into samples: the reader is
    ``self_timed`` and the monitor reads it when it flushes. The walk, disk/net and the heap
    are read at ``read()`` time, into the newest sample. ``close()`` stops the thread.

    Args:
        pid: root of the job's process tree (DataLoader workers are its children).
        heap: reads the root's malloc heap in use (default: when the root is this process).
        io_every_ns / heap_every_ns / scan_every_ns: how often disk/net, the heap and the
            job's tree are read.
        walk_every_ns: how often every process is walked to name the busiest others (default:
            ``WALK_EVERY_NS`` when ``children`` finds the tree, else each ``scan_every_ns``).
        walk: lists every process (default: ``walk_proc`` where /proc can be read, else
            ``walk_psutil``).
        children: lists a process's children (default: ``children_proc`` where the kernel
            has the files and no ``walk`` was given; ``None``: the walk finds the tree).
        command: a process's command line, read for the busiest others only (default:
            ``command_proc`` where /proc can be read, else ``command_psutil``).
        counters: per-core CPU and one process's counters (default: ``ProcFs`` where /proc
            can be read, else ``PsutilCounters``).
        timer: seconds for CPU rates (``time.monotonic``; the session clock may be a test's).
            With a sampler, its snapshots' clock.
        sample_every_ns: snapshot on a thread at this interval (needs ``ProcFs`` counters).
        sampler: the thread (default: ``new_sampler``); tests pass their own.
        nice: the sampler thread's nice value (``None``: the job's).
        ranks_root: in a distributed job, the process that started the ranks on this host
            (torchrun's agent): it and its descendants outside the job's tree are the job's
            other ranks, whose CPU is ``ranks_cpu_pct`` and not another process's.
    """

    name = "psutil"

    def __init__(
        self,
        pid: int | None = None,
        *,
        io_every_ns: int = IO_EVERY_NS,
        heap_every_ns: int = HEAP_EVERY_NS,
        scan_every_ns: int = SCAN_EVERY_NS,
        walk_every_ns: int | None = None,
        walk: Walk | None = None,
        children: Children | None = None,
        command: Callable[[int], str] | None = None,
        heap: HeapReader | None = None,
        counters: ProcessCounters | None = None,
        timer: Callable[[], float] = time.monotonic,
        sample_every_ns: int | None = None,
        sampler: Sampler | None = None,
        nice: int | None = None,
        ranks_root: int | None = None,
    ) -> None:
        self._root = pid or os.getpid()
        self._ranks_root = ranks_root
        self._rank_cpu: dict[int, tuple[float, int, float]] = {}
        """pid -> (CPU seconds, start, timer) of each process of the job's other ranks."""
        # The heap can be read only from inside the job's process (where the monitor runs).
        if heap is None and self._root == os.getpid():
            heap = HeapReader()
        self._heap = heap
        # Likewise the main thread's CPU clock (where the training loop runs).
        self._main_clock = _main_thread_clock() if self._root == os.getpid() else None
        self._counters = counters or default_counters()
        self._timer = timer
        self._io_every = io_every_ns
        self._heap_every = heap_every_ns
        self._heap_slot: int | None = None
        """The slot of the clock (``heap_every_ns`` long) of the last heap reading."""
        self._scan_every = scan_every_ns
        if walk is None and children is None:
            children = default_children()
        self._children = children
        self._walk = walk or default_walk()
        self._command = command or default_command()
        self._procfs_here = ProcFs.available()
        self._commands: dict[tuple[int, str], str] = {}
        """(pid, name) -> command line of each other process named so far."""
        self._walk_next = False
        # (without children files the walk runs at each scan: _scan_if_due)
        self._walk_every = WALK_EVERY_NS if walk_every_ns is None else walk_every_ns
        self._last_io: int | None = None
        self._last_scan: int | None = None
        self._last_walk: int | None = None
        self._others_cpu: dict[int, tuple[float, int]] = {}
        """pid -> (CPU seconds, t_ns) of each other process at the last walk."""
        self._cores = self._counters.cores()
        self._tree_cpu: dict[int, tuple[float, int, float]] = {}
        """pid -> (CPU seconds, start, timer) of each process of the job's tree when last read."""
        self._names: dict[int, str] = {}
        """pid -> name of each process of the job's tree."""
        self._children_at_scan: dict[int, tuple[float, float]] = {}
        """pid -> (CPU seconds, timer) of each child of the job at the last scan."""
        self._sampler: Sampler | None = None
        self._procfs: ProcFs | None = None
        self._generations: dict[int, tuple[int, ...]] = {}
        """set_files generation -> the pids whose stat files follow /proc/stat in it."""
        if sampler is not None or sample_every_ns is not None:
            if not isinstance(self._counters, ProcFs):
                raise ValueError("snapshots on a thread need /proc (ProcFs counters)")
            self._procfs = self._counters
            if sampler is None:
                assert sample_every_ns is not None
                sampler = new_sampler(sample_every_ns, nice=nice)
            self._sampler = sampler
            self._timer = _monotonic_s  # the snapshots' clock
        if not self._prime(self._root):
            raise psutil.NoSuchProcess(self._root)
        if self._sampler is not None:
            self._set_files()
            self._sampler.start()

    @property
    def self_timed(self) -> bool:
        """Whether a thread of its own samples (the monitor then reads at each flush)."""
        return self._sampler is not None

    @property
    def cpu_ns(self) -> int:
        """CPU time of the sampler thread, once closed (0 without one)."""
        return 0 if self._sampler is None else self._sampler.cpu_ns

    def close(self) -> None:
        """Stop the sampler thread, if any (again: nothing)."""
        if self._sampler is not None:
            self._sampler.stop()

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        """Take one sample, or with a sampler thread one per snapshot since the last read."""
        if self._sampler is not None:
            return self._read_snapshots(t_ns)
        per_core = self._per_core(self._counters.cores())
        top, children = self._scan_if_due(t_ns)
        now = self._timer()
        stats = {pid: self._counters.process(pid) for pid in (*self._tree_cpu, *self._rank_cpu)}
        sample = self._system_sample(
            t_ns, per_core, self._tree(now, stats), self._ranks(now, stats)
        )
        return [self._with_io(sample, t_ns, top, children)]

    def _read_snapshots(self, t_ns: int) -> list[SystemSample | GpuSample]:
        assert self._sampler is not None
        offset = t_ns - time.monotonic_ns()  # snapshot times onto the session clock
        samples: list[SystemSample | GpuSample] = []
        for taken_ns, generation, contents in self._sampler.take():
            pids = self._generations.get(generation)
            if pids is None or not contents or contents[0] is None:
                continue  # /proc/stat unreadable at that tick
            stats = {
                pid: None if data is None else parse_stat(data)
                for pid, data in zip(pids, contents[1:], strict=False)
            }
            per_core = self._per_core(parse_cores(contents[0]))
            tree = self._tree(taken_ns / 1e9, stats)
            ranks = self._ranks(taken_ns / 1e9, stats)
            samples.append(self._system_sample(taken_ns + offset, per_core, tree, ranks))
        top, children = self._scan_if_due(t_ns)
        if samples:
            last = samples[-1]
            assert isinstance(last, SystemSample)
            samples[-1] = self._with_io(last, t_ns, top, children)
        return samples

    def _set_files(self) -> None:
        assert self._sampler is not None
        assert self._procfs is not None
        pids = (*self._tree_cpu, *self._rank_cpu)
        paths = [self._procfs.stat_path()] + [self._procfs.process_path(pid) for pid in pids]
        self._generations[self._sampler.set_files(paths)] = pids
        while len(self._generations) > GENERATIONS_KEPT:
            del self._generations[min(self._generations)]

    def look_again(self) -> None:
        """Look for the job's new children at the next reading rather than at the next scan
        (the monitor calls it when DataLoader workers start: their CPU is the job's, and a
        short epoch's workers can end before a scan every ``SCAN_EVERY_NS`` finds them)."""
        self._last_scan = None
        if self._children is None:
            self._last_walk = None

    def walk_next(self) -> None:
        """Walk every process at the next reading whether or not a walk is due (the monitor
        calls it before the run's last reading: a run shorter than ``WALK_EVERY_NS`` then
        names the others that used the CPU since its first walk)."""
        self._walk_next = True

    def _scan_if_due(self, t_ns: int) -> tuple[tuple[ProcessUsage, ...], tuple[ProcessUsage, ...]]:
        """Look for new children and walk every process, each when due; return the busiest
        other processes when the walk ran, and the job's children's CPU when the scan ran."""
        scan_due = self._last_scan is None or t_ns - self._last_scan >= self._scan_every
        walk_due = (
            self._walk_next or self._last_walk is None or t_ns - self._last_walk >= self._walk_every
        )
        self._walk_next = False
        if self._children is None:
            walk_due = scan_due  # the walk is what finds the tree
        if not scan_due and not walk_due:
            return (), ()
        before = set(self._tree_cpu)
        top: tuple[ProcessUsage, ...] = ()
        children: tuple[ProcessUsage, ...] = ()
        tree = before
        walked: Mapping[int, tuple[int, str, float]] = {}
        if scan_due:
            self._last_scan = t_ns
            children = self._children_usage()
            if self._children is not None:
                tree = self._descendants()
        if walk_due:
            first = self._last_walk is None
            self._last_walk = t_ns
            walked = self._walk()
            if self._children is None:
                tree = self._tree_of(walked)
            top = self._others(walked, tree | set(self._rank_cpu), t_ns, report=not first)
        self._adopt(tree)
        if self._ranks_root is not None and (scan_due or walk_due):
            group = (
                self._descendants(self._ranks_root)
                if self._children is not None
                else self._tree_of(walked, self._ranks_root)
                if walk_due
                else set(self._rank_cpu)
            )
            ranks_before = set(self._rank_cpu)
            self._adopt_ranks(group - set(self._tree_cpu))
            if self._sampler is not None and set(self._rank_cpu) != ranks_before:
                self._set_files()
        for pid in set(self._tree_cpu) - before:  # new children: their rates count from now
            if scan_due and pid != self._root:
                cpu_s, _, when = self._tree_cpu[pid]
                self._children_at_scan[pid] = (cpu_s, when)
        if self._sampler is not None and set(self._tree_cpu) != before:
            self._set_files()
        return top, children

    def _children_usage(self) -> tuple[ProcessUsage, ...]:
        """Each child of the job with its CPU since the last scan (from the tree's readings;
        a child first seen at the last scan has no rate yet)."""
        usage = []
        now: dict[int, tuple[float, float]] = {}
        for pid, (cpu_s, _, when) in self._tree_cpu.items():
            if pid == self._root:
                continue
            now[pid] = (cpu_s, when)
            last = self._children_at_scan.get(pid)
            if last is not None and when > last[1]:
                pct = 100.0 * (cpu_s - last[0]) / (when - last[1])
                name = self._names.get(pid, "")
                usage.append(ProcessUsage(pid=pid, name=name, cpu_pct=round(pct, 1)))
        self._children_at_scan = now
        return tuple(usage)

    @staticmethod
    def _system_sample(
        t_ns: int,
        per_core: tuple[float, ...],
        tree: tuple[float, float, int, int | None, int, int],
        ranks_cpu: float | None = None,
    ) -> SystemSample:
        job_cpu, children_cpu, rss, main_rss, threads, procs = tree
        return SystemSample(
            t_ns=t_ns,
            cpu_pct_per_core=per_core,
            job_cpu_pct=job_cpu,
            children_cpu_pct=children_cpu,
            job_rss_bytes=rss,
            main_rss_bytes=main_rss,
            job_threads=threads,
            job_processes=procs,
            other_cpu_pct=max(0.0, sum(per_core) - job_cpu - (ranks_cpu or 0.0)),
            ranks_cpu_pct=ranks_cpu,
        )

    def _with_io(
        self,
        sample: SystemSample,
        t_ns: int,
        top: tuple[ProcessUsage, ...],
        children: tuple[ProcessUsage, ...],
    ) -> SystemSample:
        """``sample`` with the other processes and the job's children, and disk/net and the
        heap when they are due."""
        heap = None
        if self._heap is not None and (
            self._heap_slot is None or t_ns // self._heap_every > self._heap_slot
        ):
            self._heap_slot = t_ns // self._heap_every  # once in each slot of the clock
            heap = self._heap.read()
            main_cpu = self._main_cpu()
            if main_cpu is not None:
                sample = dataclasses.replace(sample, main_thread_cpu_s=main_cpu)
            delay = run_delay_proc(self._root) if self._procfs_here else None
            if delay is not None:
                sample = dataclasses.replace(sample, main_run_delay_s=delay)
        if self._last_io is not None and t_ns - self._last_io < self._io_every:
            if top or children or heap is not None:
                return dataclasses.replace(
                    sample, top_others=top, job_children=children, main_heap_bytes=heap
                )
            return sample
        self._last_io = t_ns
        disk = psutil.disk_io_counters()
        net = psutil.net_io_counters()
        freq = _cpu_freq()
        return dataclasses.replace(
            sample,
            top_others=top,
            job_children=children,
            main_heap_bytes=heap,
            disk_read_bytes=None if disk is None else disk.read_bytes,
            disk_write_bytes=None if disk is None else disk.write_bytes,
            net_sent_bytes=None if net is None else net.bytes_sent,
            net_recv_bytes=None if net is None else net.bytes_recv,
            cpu_mhz=freq,
        )

    def _main_cpu(self) -> float | None:
        if self._main_clock is None:
            return None
        try:
            return time.clock_gettime(self._main_clock)
        except OSError:  # the thread ended
            self._main_clock = None
            return None

    def _per_core(self, now: list[tuple[float, float]]) -> tuple[float, ...]:
        """Each core's busy share since the last reading, as ``psutil.cpu_percent``."""
        before, self._cores = self._cores, now
        found = []
        for (busy, total), (busy0, total0) in zip(now, before, strict=False):
            elapsed = total - total0
            pct = 100.0 * (busy - busy0) / elapsed if elapsed > 0 else 0.0
            found.append(round(min(100.0, max(0.0, pct)), 1))
        return tuple(found)

    def _prime(self, pid: int) -> bool:
        """Take ``pid`` into the job's tree with its CPU time now (False: it cannot be read)."""
        stat = self._counters.process(pid)
        if stat is None:
            return False
        self._tree_cpu[pid] = (stat.cpu_s, stat.start, self._timer())
        self._names[pid] = stat.name
        return True

    def _tree(
        self, now: float, stats: Mapping[int, ProcStat | None]
    ) -> tuple[float, float, int, int | None, int, int]:
        """The tree's CPU, RSS and threads from each process's reading at ``now`` (a pid
        missing from ``stats`` was not read then; None: it ended or cannot be read)."""
        cpu = children_cpu = 0.0
        rss = threads = 0
        main_rss: int | None = None
        for pid, (cpu_s, start, when) in list(self._tree_cpu.items()):
            if pid not in stats:
                continue
            stat = stats[pid]
            if stat is None or stat.start != start:  # ended (or its pid was reused)
                if pid != self._root:
                    del self._tree_cpu[pid]
                    self._names.pop(pid, None)
                continue
            self._tree_cpu[pid] = (stat.cpu_s, start, now)
            pct = round(100.0 * (stat.cpu_s - cpu_s) / (now - when), 1) if now > when else 0.0
            rss += stat.rss_bytes
            threads += stat.threads
            cpu += pct
            if pid == self._root:
                main_rss = stat.rss_bytes
            else:
                children_cpu += pct
        return cpu, children_cpu, rss, main_rss, threads, len(self._tree_cpu)

    def _tree_of(
        self, walked: Mapping[int, tuple[int, str, float]], root: int | None = None
    ) -> set[int]:
        """``root`` (default: the job's) and its descendants, by the parents a walk read."""
        root = self._root if root is None else root
        tree = {root}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in walked.items():
            children.setdefault(ppid, []).append(pid)
        todo = [root]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
        return tree

    def _descendants(self, root: int | None = None) -> set[int]:
        """``root`` (default: the job's) and its descendants, by their children files."""
        assert self._children is not None
        root = self._root if root is None else root
        tree = {root}
        todo = [root]
        while todo:
            for child in self._children(todo.pop()) or ():
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
        return tree

    def _adopt(self, tree: set[int]) -> None:
        """Take new processes of ``tree`` into the job's, drop those no longer in it."""
        for pid in tree - set(self._tree_cpu):
            self._prime(pid)  # its CPU share counts from the next sample
        for pid in set(self._tree_cpu) - tree:
            if pid != self._root:
                del self._tree_cpu[pid]
                self._names.pop(pid, None)

    def _adopt_ranks(self, group: set[int]) -> None:
        """Follow the processes of the job's other ranks in ``group``, drop those gone."""
        for pid in group - set(self._rank_cpu):
            stat = self._counters.process(pid)
            if stat is not None:
                self._rank_cpu[pid] = (stat.cpu_s, stat.start, self._timer())
        for pid in set(self._rank_cpu) - group:
            del self._rank_cpu[pid]

    def _ranks(self, now: float, stats: Mapping[int, ProcStat | None]) -> float | None:
        """The CPU of the job's other ranks at ``now`` (None outside a distributed job)."""
        if self._ranks_root is None:
            return None
        cpu = 0.0
        for pid, (cpu_s, start, when) in list(self._rank_cpu.items()):
            stat = stats.get(pid)
            if pid not in stats:
                continue
            if stat is None or stat.start != start:
                del self._rank_cpu[pid]
                continue
            self._rank_cpu[pid] = (stat.cpu_s, start, now)
            cpu += round(100.0 * (stat.cpu_s - cpu_s) / (now - when), 1) if now > when else 0.0
        return cpu

    def _others(
        self,
        walked: Mapping[int, tuple[int, str, float]],
        tree: set[int],
        t_ns: int,
        *,
        report: bool,
    ) -> tuple[ProcessUsage, ...]:
        """The processes outside ``tree`` using the most CPU since the last walk (``report``;
        the first walk only primes their counters)."""
        usage: list[ProcessUsage] = []
        before = self._others_cpu
        self._others_cpu = {}
        for pid, (_, name, cpu) in walked.items():
            if pid in tree:
                continue
            self._others_cpu[pid] = (cpu, t_ns)
            last = before.get(pid)
            if report and last is not None and t_ns > last[1]:
                pct = 100.0 * (cpu - last[0]) / ((t_ns - last[1]) / 1e9)
            elif report and last is None and cpu > 0:
                pct = self._since_start(pid, cpu)  # started since the last walk
            else:
                continue
            if pct >= TOP_OTHERS_MIN_PCT:
                usage.append(ProcessUsage(pid=pid, name=name, cpu_pct=round(pct, 1)))
        usage.sort(key=lambda u: -u.cpu_pct)
        return tuple(
            dataclasses.replace(u, command=self._command_of(u.pid, u.name))
            for u in usage[:TOP_OTHERS]
        )

    def _since_start(self, pid: int, cpu_s: float) -> float:
        """The CPU (% of a core) of a process first seen at this walk, over its life: it
        started after the last walk (a busy process the job's own script started, or one
        started beside a run shorter than the walk's period); 0 where its start is unread."""
        boot = getattr(time, "CLOCK_BOOTTIME", None)
        if boot is None or not isinstance(self._counters, ProcFs):
            return 0.0  # psutil's start is another clock's (the epoch)
        stat = self._counters.process(pid)
        if stat is None:
            return 0.0
        age = time.clock_gettime(boot) - stat.start / CLK_TCK
        return 100.0 * cpu_s / age if age >= MIN_AGE_S else 0.0

    def _command_of(self, pid: int, name: str) -> str:
        """``pid``'s command line, read once per process (a pid reused by another program
        has another name, and is read again)."""
        key = (pid, name)
        command = self._commands.get(key)
        if command is None:
            command = self._commands[key] = self._command(pid)
        return command


def _cpu_freq() -> float | None:
    """The CPUs' mean current clock in MHz (~50 µs), or None where unreadable."""
    try:
        freq = psutil.cpu_freq()
    except (OSError, RuntimeError, NotImplementedError):
        return None
    current = getattr(freq, "current", None)
    return float(current) if current else None


def _main_thread_clock() -> int | None:
    """The CPU-time clock of this process's main thread, where the platform has one."""
    getter = getattr(time, "pthread_getcpuclockid", None)
    ident = threading.main_thread().ident
    if getter is None or ident is None:
        return None
    try:
        clock = int(getter(ident))
        time.clock_gettime(clock)
    except (OSError, OverflowError):
        return None
    return clock
