"""The files ``stepdoctor logs`` reads: paths, folders, ``.gz`` and ``-`` (stdin), each as a
stream of text lines, with what kind of log it is told from its first lines.

Lines are read as bytes and decoded one by one (UTF-8, undecodable bytes replaced): a log cut
off mid-line or holding binary garbage still reads to its end, and memory stays at one line.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from stepdoctor.errors import LogError

__all__ = [
    "DETECT_LINES",
    "KINDS",
    "LogSource",
    "detect",
    "ends_early",
    "gc_kind_of",
    "open_sources",
]

#: Lines looked at to tell a file's kind: a JVM's GC log starts with its own lines within a
#: few lines (unified logging's ``Using G1`` is the first; JDK 8's heading is 3 lines); a
#: training log's start-up (ND4J's backend lines) can come after a page of the program's own
#: output (dl4j-benchmark's outputs: 40-70 lines).
DETECT_LINES = 400

#: What a file can be: a JDK 8 (and older) ``-XX:+PrintGCDetails`` log, a JDK 9+ unified
#: ``-Xlog:gc*`` log, a DL4J training log, none of them, or a file of a folder that could not
#: be opened.
KINDS = ("jdk8-gc", "unified-gc", "dl4j", "unknown", "unreadable")

# unified logging: a line's decorations in brackets (uptime, date, level, tags: any of them, or
# none with -Xlog:gc::none), then its GC id or the collector in use.
_UNIFIED = re.compile(
    r"^(?:\[[^\]]*\]\s*)*(?:GC\(\d+\) \S|Using (?:G1|Parallel|Serial|Concurrent Mark Sweep|"
    r"The Z Garbage|Shenandoah))"
)
# JDK 8: "12.345: [GC", "2012-04-26T23:59:50.253+0200: 3.344: [Full GC", "[GC pause (G1 ..."
_JDK8 = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\S+: )?(?:\d+[.,]\d+: )?(?:#\d+: )?"
    r"\[(?:GC|Full GC|CMS-concurrent|GC concurrent|GC pause|GC remark|GC cleanup|Pause [A-Z])"
)
_JDK8_HEADER = re.compile(r"^(?:Java HotSpot|OpenJDK).*\(\d|^CommandLine flags: ")
_DL4J = re.compile(
    r"PerformanceListener|ScoreIterationListener|Score at iteration \d|"
    r"Loaded \[\w+\] backend|Blas vendor: \[|iteration time: \d+ ms|ETL: \d+ ms"
)


@dataclass(frozen=True, slots=True)
class LogSource:
    """One file to read: its name as given, its kind and its lines (an iterator that can be
    read once, from the first line); ``warnings`` gains a line when the file ends early (a
    truncated ``.gz``): the lines before stand."""

    name: str
    kind: str
    lines: Iterator[str]
    warnings: list[str] = field(default_factory=list)
    closing: list[BinaryIO] = field(default_factory=list)
    head: list[str] = field(default_factory=list)
    """The first lines, read to tell its kind (``lines`` starts with them)."""
    rest: BinaryIO | None = None
    """The file after ``head`` as bytes, for a reader of its own (``feed.Feed``) in place
    of ``lines``; None where ``head`` holds the whole file."""

    def close(self) -> None:
        """Close the file (reading its lines to the end does too)."""
        for stream in self.closing:
            stream.close()


def detect(head: list[str]) -> str:
    """The kind of log whose first lines are ``head`` (``KINDS``)."""
    unified = jdk8 = dl4j = 0
    for line in head:
        if _UNIFIED.match(line):
            unified += 1
        elif _JDK8.match(line) or _JDK8_HEADER.match(line):
            jdk8 += 1
        elif _DL4J.search(line):
            dl4j += 1
    # two lines at least: a document quoting one listener line is not a training log; a
    # training log that holds the JVM's -verbose:gc lines too (both on its stdout) is read as
    # one, and its GC lines again (``gc_kind_of``)
    if dl4j >= 2:
        return "dl4j"
    if unified or jdk8:
        return "unified-gc" if unified >= jdk8 else "jdk8-gc"
    return "unknown"


def gc_kind_of(line: str) -> str | None:
    """``jdk8-gc`` or ``unified-gc`` where ``line`` is a GC log's event line, else None."""
    if "GC" not in line and "Pause" not in line:
        return None
    if _UNIFIED.match(line):
        return "unified-gc"
    if _JDK8.match(line):
        return "jdk8-gc"
    return None


def open_sources(paths: list[str]) -> Iterator[LogSource]:
    """Each file of ``paths`` (a folder: its files, sorted; ``-``: stdin) as a ``LogSource``.

    Raises ``LogError`` for a path that does not exist or cannot be read."""
    for given in paths:
        if given == "-":
            yield _source("-", sys.stdin.buffer)
            continue
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            if not files:
                raise LogError(f"{given}: the folder holds no files")
        elif path.exists():
            files = [path]
        else:
            raise LogError(f"{given}: no such file or folder")
        for file in files:
            try:
                stream: BinaryIO = file.open("rb")
            except OSError as exc:
                if path.is_dir():  # one file of a folder: the others are read
                    yield LogSource(
                        name=str(file),
                        kind="unreadable",
                        lines=iter(()),
                        warnings=[f"{file}: cannot be read ({exc.strerror}); skipped"],
                    )
                    continue
                raise LogError(f"{file}: cannot be read ({exc.strerror})") from exc
            yield _source(str(file), stream)


def _source(name: str, raw: BinaryIO) -> LogSource:
    stream = _maybe_gzip(name, raw)
    closing = [stream, raw] if name != "-" else [stream]
    warnings: list[str] = []
    head: list[str] = []
    ended = False
    try:
        while len(head) < DETECT_LINES:
            line = stream.readline()
            if not line:
                ended = True
                break
            head.append(line.decode("utf-8", "replace").rstrip("\r\n"))
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        warnings.append(ends_early(name, exc))
        ended = True
    if ended:  # read whole: closed as the lines' reader closes it at their end
        for each in closing:
            each.close()
    rest = iter(()) if ended else _lines(name, stream, warnings, closing)
    return LogSource(
        name=name,
        kind=detect(head),
        lines=_chain(head, rest),
        warnings=warnings,
        closing=closing,
        head=head,
        rest=None if ended else stream,
    )


def ends_early(name: str, exc: BaseException) -> str:
    """The warning for a compressed file that ends early: its lines before stand."""
    return f"{name}: the compressed stream ends early or is corrupt ({exc}); read up to there"


def _maybe_gzip(name: str, raw: BinaryIO) -> BinaryIO:
    """``raw``, or its gunzipped stream when it starts with gzip's magic bytes."""
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(filename=name, fileobj=buffered)  # type: ignore[return-value]
    return buffered


def _lines(
    name: str, stream: BinaryIO, warnings: list[str], closing: list[BinaryIO]
) -> Iterator[str]:
    try:
        for raw in stream:
            yield raw.decode("utf-8", "replace").rstrip("\r\n")
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        warnings.append(ends_early(name, exc))
    finally:
        for each in closing:
            each.close()


def _chain(head: list[str], rest: Iterator[str]) -> Iterator[str]:
    yield from head
    yield from rest
