"""Readers the monitor thread samples: the machine and the job's process tree (psutil).

A reader is anything with ``name`` and ``read(t_ns) -> list[SystemSample | GpuSample]``; tests
and users pass their own (the ``readers=`` seam of ``Session``). GPU readers live in
``collect/nvml.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable
from typing import Protocol

import psutil

from traindoctor.model import GpuSample, ProcessUsage, SystemSample

__all__ = ["HeapReader", "PsutilReader", "Reader", "Walk", "walk_proc", "walk_psutil"]

#: How often the costlier parts are read. One psutil sample of CPU+memory+disk+net costs
#: ~0.5 ms here (disk_io_counters alone 0.2 ms): disk/net are read once a second.
IO_EVERY_NS = 1_000_000_000
#: A walk of /proc (every process's stat) finds new child processes (DataLoader workers) and
#: the CPU of the other processes in one pass, every 2 s: workers live for an epoch, and the
#: competing-processes rule judges minutes, not seconds. (Finding children alone with
#: /proc/<pid>/task/*/children needs CONFIG_PROC_CHILDREN, off on this machine.)
SCAN_EVERY_NS = 2_000_000_000
#: Clock ticks per second of /proc/<pid>/stat's utime and stime.
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

Walk = Callable[[], dict[int, tuple[int, str, float]]]
"""A walk of every process: ``pid -> (ppid, name, CPU seconds)``."""
#: The heap in use is read with the disk/net counters (once a second): mallinfo2 walks every
#: malloc arena under its lock, 45-300 us here (a few ms during imports).
#: Allocators that replace glibc's malloc (LD_PRELOAD): with one of them mapped, glibc's
#: numbers say nothing about the job's memory and the heap is not read.
OTHER_MALLOCS = ("jemalloc", "tcmalloc", "mimalloc", "hoard", "snmalloc")
#: Other processes listed per sample, and the least CPU (% of one core) to be listed.
TOP_OTHERS = 5
TOP_OTHERS_MIN_PCT = 5.0


def walk_proc(proc: str = "/proc") -> dict[int, tuple[int, str, float]]:
    """Every process's parent, name and CPU seconds from ``/proc/<pid>/stat`` alone (Linux).

    What ``psutil.process_iter(["ppid", "name", "cpu_times"])`` gives, read 5x cheaper
    (measured here: 0.43 ms vs 2.3 ms for 63 processes, on the job's CPU every 2 s), as one
    file per process instead of psutil's objects. Names are the kernel's (15 characters at
    most, where psutil may read a longer one from the command line). A process that ends
    during the walk is left out.

    Raises:
        OSError: ``proc`` cannot be listed (not Linux): use ``walk_psutil``.
    """
    found: dict[int, tuple[int, str, float]] = {}
    with os.scandir(proc) as entries:
        for entry in entries:
            pid = entry.name
            if not pid.isdigit():
                continue
            try:
                with open(f"{proc}/{pid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue  # ended, or not ours to read
            # "pid (comm) state ppid ... utime stime ...": comm may hold spaces and parens.
            close = stat.rfind(b")")
            fields = stat[close + 2 :].split()
            if close < 0 or len(fields) < 13:
                continue
            try:
                ppid, ticks = int(fields[1]), int(fields[11]) + int(fields[12])
            except ValueError:
                continue
            name = stat[stat.find(b"(") + 1 : close].decode("utf-8", "replace")
            found[int(pid)] = (ppid, name, ticks / _CLK_TCK)
    return found


def walk_psutil() -> dict[int, tuple[int, str, float]]:
    """``walk_proc`` through psutil (any OS)."""
    found: dict[int, tuple[int, str, float]] = {}
    for proc in psutil.process_iter(["ppid", "name", "cpu_times"]):
        info = proc.info
        times = info.get("cpu_times")
        cpu = times.user + times.system if times is not None else 0.0
        found[proc.pid] = (info.get("ppid") or 0, info.get("name") or "?", cpu)
    return found


def _default_walk() -> Walk:
    """``walk_proc`` where this process can read its own ``/proc`` entry, else psutil's."""
    return walk_proc if os.access("/proc/self/stat", os.R_OK) else walk_psutil


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

    Args:
        pid: root of the job's process tree (DataLoader workers are its children).
        heap: reads the root's malloc heap in use (default: when the root is this process).
        io_every_ns / scan_every_ns: how often disk/net and the /proc walk are read.
        walk: lists every process (default: ``walk_proc`` where /proc can be read, else
            ``walk_psutil``).
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
    ) -> None:
        self._root = psutil.Process(pid or os.getpid())
        # The heap can be read only from inside the job's process (where the monitor runs).
        if heap is None and self._root.pid == os.getpid():
            heap = HeapReader()
        self._heap = heap
        self._procs: dict[int, psutil.Process] = {self._root.pid: self._root}
        self._io_every = io_every_ns
        self._scan_every = scan_every_ns
        self._walk = walk or _default_walk()
        self._last_io: int | None = None
        self._last_scan: int | None = None
        self._others_cpu: dict[int, tuple[float, int]] = {}
        """pid -> (CPU seconds, t_ns) of each other process at the last walk."""
        psutil.cpu_percent(percpu=True)
        self._root.cpu_percent()

    def read(self, t_ns: int) -> list[SystemSample | GpuSample]:
        """Take one sample."""
        per_core = tuple(psutil.cpu_percent(percpu=True))
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

    def _tree(self) -> tuple[float, float, int, int | None, int, int]:
        cpu = children_cpu = 0.0
        rss = threads = 0
        main_rss: int | None = None
        for pid, proc in list(self._procs.items()):
            try:
                with proc.oneshot():
                    pct = proc.cpu_percent()
                    own = proc.memory_info().rss
                    threads += proc.num_threads()
            except psutil.Error:
                if proc is not self._root:
                    del self._procs[pid]  # a worker that ended between scans
                continue
            rss += own
            cpu += pct
            if proc is self._root:
                main_rss = own
            else:
                children_cpu += pct
        return cpu, children_cpu, rss, main_rss, threads, len(self._procs)

    def _scan(self, t_ns: int, *, report: bool) -> tuple[ProcessUsage, ...]:
        """Walk /proc once: adopt new descendants of the root, drop ended ones, and return
        the other processes using the most CPU since the last walk (``report``)."""
        walked = self._walk()
        tree = {self._root.pid}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in walked.items():
            children.setdefault(ppid, []).append(pid)
        todo = [self._root.pid]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
        for pid in tree - set(self._procs):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                proc.cpu_percent()
                self._procs[pid] = proc
        for pid in set(self._procs) - tree:
            if pid != self._root.pid:
                del self._procs[pid]
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
