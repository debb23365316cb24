"""A GC log's lines for its parser, with the C fast path (``_gcscan.c``) taking, between
them, the lines it can: the parser then reads only the lines it must.

The file after its first lines (``LogSource.head``) is read in chunks; the fast path reads
whole lines of a chunk into the parser's ``GcStats`` for as long as it can, and the line where
it stops is decoded and given to the parser, as every line is where the C part is not built
or is switched off (``STEPDOCTOR_PURE_PYTHON=1``). Both give the same figures: the C part
does what the parser does with each line it takes (tests/logs/test_fast.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stepdoctor.logs.gc_stats import GcStats
from stepdoctor.logs.sources import LogSource, ends_early
from stepdoctor.native import c_part

__all__ = ["CHUNK_BYTES", "Feed", "fast_path"]

#: Bytes read at a time (a chunk holds thousands of lines; memory stays at a few chunks).
CHUNK_BYTES = 1 << 20


def fast_path() -> Any:
    """The ``_gcscan`` C module, or None: not built or switched off (``native.c_part``)."""
    return c_part("stepdoctor.logs._gcscan")


class Feed:
    """The lines of a GC log ``source``, for one parser, which may ``attach`` its running
    sums so that the C fast path takes the lines it can."""

    def __init__(self, source: LogSource) -> None:
        self.source = source
        self._scanner: Any = None
        self._ready: Callable[[], bool] = lambda: True
        self.handed = 0
        """Lines given to the parser (the others, the fast path took)."""

    def attach(
        self,
        stats: GcStats,
        family: str,
        ready: Callable[[], bool],
        min_events: int = 0,
        span_phases: frozenset[str] = frozenset(),
    ) -> None:
        """Let the fast path take lines into ``stats`` (``family``: ``jdk8`` or
        ``unified``) whenever ``ready()``: the parser is between events; events only after
        the first ``min_events`` (the parser looks at those for more); ``span_phases``: the
        concurrent phases that count for the log's span."""
        part = fast_path()
        if part is None or self.source.rest is None:
            return
        self._scanner = stats.scanner(part, family, min_events, span_phases)
        self._ready = ready

    def __iter__(self) -> Iterator[str]:
        source = self.source
        if self._scanner is None or source.rest is None:
            for line in source.lines:
                self.handed += 1
                yield line
            return
        self.handed += len(source.head)
        yield from source.head
        scan, ready = self._scanner.scan, self._ready
        read = source.rest.read1  # type: ignore[attr-defined]  # buffered: at most one read
        buffer = b""
        while True:
            try:
                chunk = read(CHUNK_BYTES)
            except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
                source.warnings.append(ends_early(source.name, exc))
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            pos = 0
            while True:
                if ready():
                    pos = scan(buffer, pos)
                end = buffer.find(b"\n", pos)
                if end < 0:
                    break
                self.handed += 1
                yield buffer[pos:end].decode("utf-8", "replace").rstrip("\r\n")
                pos = end + 1
            buffer = buffer[pos:]
        if buffer:
            self.handed += 1
            yield buffer.decode("utf-8", "replace").rstrip("\r\n")
