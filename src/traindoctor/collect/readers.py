"""Readers the monitor thread samples: the machine and the job's process tree.

A reader is anything with ``name`` and ``read(t_ns) -> list[SystemSample | GpuSample]``; tests
and users pass their own (the ``readers=`` seam of ``Session``). GPU readers live in
``collect/nvml.py``.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from typing import Protocol

import psutil

from traindoctor.collect.procfs import ProcessCounters, Walk, default_counters, default_walk
from traindoctor.model import GpuSample, ProcessUsage, SystemSample

__all__ = ["HeapReader", "PsutilReader", "Reader"]

#: How often the costlier parts are read. psutil's disk_io_counters alone costs 0.2 ms here
#: (it looks up which block devices are partitions): disk/net are read once a second.
IO_EVERY_NS = 1_000_000_000
#: A walk of /proc (every process's stat) finds new child processes (DataLoader workers) and
#: the CPU of the other processes in one pass, every 2 s: workers live for an epoch, and the
#: competing-processes rule judges minutes, not seconds. (Finding children alone with
#: /proc/<pid>/task/*/children needs CONFIG_PROC_CHILDREN, off on this machine.)
SCAN_EVERY_NS = 2_000_000_000
#: The heap in use is read with the disk/net counters (once a second): mallinfo2 walks every
#: malloc arena under its lock, 45-300 us here (a few ms during imports).
#: Allocators that replace glibc's malloc (LD_PRELOAD): with one of them mapped, glibc's
#: numbers say nothing about the job's memory and the heap is not read.
OTHER_MALLOCS = ("jemalloc", "tcmalloc", "mimalloc", "hoard", "snmalloc")
#: Other processes listed per sample, and the least CPU (% of one core) to be listed.
TOP_OTHERS = 5
TOP_OTHERS_MIN_PCT = 5.0


class Reader(Protocol):
    """Something the monitor thread samples."""

    name: str

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        """Return the readings taken now (``t_ns`` on the session clock)."""
        ...


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc >= 2.33), all ``size_t``."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


class HeapReader:
    """Bytes this process holds allocated from glibc's malloc: ``uordblks + hblkhd`` of
    ``mallinfo2()`` (chunks in use in the arenas plus mmapped chunks).

    RSS also counts what the allocator keeps after ``free`` (fragmented arenas, a raised mmap
    threshold), which swings by 100 MiB in a healthy job; the heap in use rises only when the
    job keeps more objects: what a leak is. ``read()`` is None where it cannot be known: not
    glibc, glibc < 2.33, or another malloc mapped into the process (``maps`` seam).
    """

    def __init__(self, maps: str | None = None) -> None:
        self._call = None
        if maps is None:
            try:
                with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                    maps = f.read()
            except OSError:
                maps = ""
        if any(name in maps for name in OTHER_MALLOCS):
            return
        try:
            call = ctypes.CDLL(None).mallinfo2
        except (OSError, AttributeError):
            return
        call.restype = _MallInfo2
        call.argtypes = []
        self._call = call

    @property
    def available(self) -> bool:
        """Whether the heap can be read in this process."""
        return self._call is not None

    def read(self) -> int | None:
        """Return the bytes in use now (None: unknown)."""
        if self._call is None:
            return None
        info = self._call()
        return int(info.uordblks + info.hblkhd)


class PsutilReader:
    """Per-core CPU, the job's process tree (CPU, RSS, threads), disk/net I/O, other processes.

    The CPU percentages are psutil's (``cpu_percent``: of one core, rounded to 0.1), read
    from ``/proc`` directly on Linux (``collect/procfs.py``); disk and network through psutil.

    Args:
        pid: root of the job's process tree (DataLoader workers are its children).
        heap: reads the root's malloc heap in use (default: when the root is this process).
        io_every_ns / scan_every_ns: how often disk/net and the process walk are read.
        walk: lists every process (default: ``walk_proc`` where /proc can be read, else
            ``walk_psutil``).
        counters: per-core CPU and one process's counters (default: ``ProcFs`` where /proc
            can be read, else ``PsutilCounters``).
        timer: seconds for CPU rates (``time.monotonic``; the session clock may be a test's).
    """

    name = "psutil"

    def __init__(
        self,
        pid: int | None = None,
        *,
        io_every_ns: int = IO_EVERY_NS,
        scan_every_ns: int = SCAN_EVERY_NS,
        walk: Walk | None = None,
        heap: HeapReader | None = None,
        counters: ProcessCounters | None = None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = pid or os.getpid()
        # The heap can be read only from inside the job's process (where the monitor runs).
        if heap is None and self._root == os.getpid():
            heap = HeapReader()
        self._heap = heap
        self._counters = counters or default_counters()
        self._timer = timer
        self._io_every = io_every_ns
        self._scan_every = scan_every_ns
        self._walk = walk or default_walk()
        self._last_io: int | None = None
        self._last_scan: int | None = None
        self._others_cpu: dict[int, tuple[float, int]] = {}
        """pid -> (CPU seconds, t_ns) of each other process at the last walk."""
        self._cores = self._counters.cores()
        self._tree_cpu: dict[int, tuple[float, int, float]] = {}
        """pid -> (CPU seconds, start, timer) of each process of the job's tree when last read."""
        if not self._prime(self._root):
            raise psutil.NoSuchProcess(self._root)

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        """Take one sample."""
        per_core = self._per_core()
        top: tuple[ProcessUsage, ...] = ()
        if self._last_scan is None or t_ns - self._last_scan >= self._scan_every:
            first = self._last_scan is None
            self._last_scan = t_ns
            top = self._scan(t_ns, report=not first)
        job_cpu, children_cpu, rss, main_rss, threads, procs = self._tree()
        other = max(0.0, sum(per_core) - job_cpu)
        disk_r = disk_w = net_s = net_r = heap = None
        if self._last_io is None or t_ns - self._last_io >= self._io_every:
            self._last_io = t_ns
            heap = None if self._heap is None else self._heap.read()
            disk = psutil.disk_io_counters()
            net = psutil.net_io_counters()
            if disk is not None:
                disk_r, disk_w = disk.read_bytes, disk.write_bytes
            if net is not None:
                net_s, net_r = net.bytes_sent, net.bytes_recv
        return [
            SystemSample(
                t_ns=t_ns,
                cpu_pct_per_core=per_core,
                job_cpu_pct=job_cpu,
                children_cpu_pct=children_cpu,
                job_rss_bytes=rss,
                main_rss_bytes=main_rss,
                main_heap_bytes=heap,
                job_threads=threads,
                job_processes=procs,
                other_cpu_pct=other,
                disk_read_bytes=disk_r,
                disk_write_bytes=disk_w,
                net_sent_bytes=net_s,
                net_recv_bytes=net_r,
                top_others=top,
            )
        ]

    def _per_core(self) -> tuple[float, ...]:
        """Each core's busy share since the last sample, as ``psutil.cpu_percent``."""
        now = self._counters.cores()
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
        return True

    def _tree(self) -> tuple[float, float, int, int | None, int, int]:
        cpu = children_cpu = 0.0
        rss = threads = 0
        main_rss: int | None = None
        now = self._timer()
        for pid, (cpu_s, start, when) in list(self._tree_cpu.items()):
            stat = self._counters.process(pid)
            if stat is None or stat.start != start:  # ended (or its pid was reused)
                if pid != self._root:
                    del self._tree_cpu[pid]
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

    def _scan(self, t_ns: int, *, report: bool) -> tuple[ProcessUsage, ...]:
        """Walk every process once: adopt new descendants of the root, drop ended ones, and
        return the other processes using the most CPU since the last walk (``report``)."""
        walked = self._walk()
        tree = {self._root}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in walked.items():
            children.setdefault(ppid, []).append(pid)
        todo = [self._root]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
        for pid in tree - set(self._tree_cpu):
            self._prime(pid)  # its CPU share counts from the next sample
        for pid in set(self._tree_cpu) - tree:
            if pid != self._root:
                del self._tree_cpu[pid]
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
                if pct >= TOP_OTHERS_MIN_PCT:
                    usage.append(ProcessUsage(pid=pid, name=name, cpu_pct=round(pct, 1)))
        usage.sort(key=lambda u: -u.cpu_pct)
        return tuple(usage[:TOP_OTHERS])
