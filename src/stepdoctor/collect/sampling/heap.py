"""The bytes the job's process holds allocated from glibc's malloc (``mallinfo2``), read by
``readers.PsutilReader`` with each system sample: what the memory rule judges a leak by."""

from __future__ import annotations

import ctypes

__all__ = ["HEAP_EVERY_NS", "OTHER_MALLOCS", "HeapReader"]

#: The heap in use is read at the first read of the system in each 0.5 s slot of the clock (the
#: monitor's reads come at random points of their own slots, ``reduce.monitor.WakeSchedule``,
#: so the readings fall at independent points of the job's steps): mallinfo2 walks every malloc
#: arena under its lock, 45-300 us here (a few ms during imports), so at most 0.06% of the
#: job's time. A leak shows as a steady rise of the heap; a short job (a few seconds) then
#: still gives the memory rule enough readings to tell it from a swing of RSS.
HEAP_EVERY_NS = 500_000_000
#: Allocators that replace glibc's malloc (LD_PRELOAD): with one of them mapped, glibc's
#: numbers say nothing about the job's memory and the heap is not read.
#: (Sanitizers replace malloc too: under ASan, mallinfo2 reads 0.)
OTHER_MALLOCS = ("jemalloc", "tcmalloc", "mimalloc", "hoard", "snmalloc", "libasan", "libtsan")


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
