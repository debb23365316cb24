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

__all__ = ["HeapReader", "PsutilReader", "Reader"]

#: How often the costlier parts are read. One psutil sample of CPU+memory+disk+net costs
#: ~0.5 ms here (disk_io_counters alone 0.2 ms): disk/net are read once a second.
IO_EVERY_NS = 1_000_000_000
#: A walk of /proc (every process's stat: ~3-5 ms here) finds new child processes (DataLoader
#: workers) and the CPU of the other processes in one pass, every 2 s: workers live for an
#: epoch, and the competing-processes rule judges minutes, not seconds. (Finding children
#: alone with /proc/<pid>/task/*/children needs CONFIG_PROC_CHILDREN, off on this machine.)
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

    Args:
        pid: root of the job's process tree (DataLoader workers are its children).
        heap: reads the root's malloc heap in use (default: when the root is this process).
        io_every_ns / scan_every_ns: how often disk/net and the /proc walk are read.
    """

    name = "psutil"

    def __init__(
        self,
        pid: int | None = None,
        *,
        io_every_ns: int = IO_EVERY_NS,
        scan_every_ns: int = SCAN_EVERY_NS,
        process_iter: Callable[..., object] = psutil.process_iter,
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
        self._process_iter = process_iter
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
        parents: dict[int, int] = {}
        others: dict[int, tuple[str, float]] = {}
        walk = self._process_iter(["pid", "ppid", "name", "cpu_times"])
        for proc in walk:  # type: ignore[attr-defined]
            info = proc.info
            times = info.get("cpu_times")
            parents[proc.pid] = info.get("ppid") or 0
            cpu = times.user + times.system if times is not None else 0.0
            others[proc.pid] = (info.get("name") or "?", cpu)
        tree = {self._root.pid}
        children: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
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
        for pid, (name, cpu) in others.items():
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
