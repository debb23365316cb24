"""DL4J training logs and JVM garbage-collection logs, read as they stream past
(``stepdoctor logs``).

``read_gc_log(path)`` gives one GC log's figures (``model.jvm.JvmGcLog``); ``read_logs``
reads any mix of files, folders, ``.gz`` and stdin, telling each file's kind from its lines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from stepdoctor.errors import LogError
from stepdoctor.logs.dl4j import parse_dl4j
from stepdoctor.logs.feed import Feed
from stepdoctor.logs.gc_jdk8 import parse_jdk8
from stepdoctor.logs.gc_unified import parse_unified
from stepdoctor.logs.record import to_record
from stepdoctor.logs.sources import LogSource, gc_kind_of, open_sources
from stepdoctor.model import RunRecord
from stepdoctor.model.jvm import Dl4jLog, JvmGcLog

__all__ = ["LogsRead", "read_gc_log", "read_gc_source", "read_logs"]


@dataclass(frozen=True, slots=True)
class LogsRead:
    """What ``read_logs`` found: the record for the rules, each GC log's figures, the DL4J
    logs, and what could not be read (a line each)."""

    record: RunRecord
    gc_logs: tuple[JvmGcLog, ...]
    dl4j_logs: tuple[Dl4jLog, ...]
    warnings: tuple[str, ...]


def read_logs(paths: Sequence[str], command: tuple[str, ...] = ()) -> LogsRead:
    """Read every log of ``paths`` (files, folders, ``.gz``, ``-``), each by its kind.

    Raises ``LogError`` when no path holds a log this reads."""
    gc_logs: list[JvmGcLog] = []
    dl4j_logs: list[Dl4jLog] = []
    warnings: list[str] = []
    for source in open_sources(list(paths)):
        try:
            if source.kind == "dl4j":
                kinds: list[str] = []
                dl4j_logs.append(parse_dl4j(source.name, _noting_gc(source.lines, kinds)))
                if kinds:  # the JVM's GC lines in the same output
                    beside = _gc_beside(source.name, kinds[0], warnings)
                    if beside is not None:
                        gc_logs.append(beside)
            elif source.kind in ("jdk8-gc", "unified-gc"):
                gc_logs.append(read_gc_source(source))
            elif source.kind == "unreadable":
                warnings.extend(source.warnings)
                continue
            else:
                warnings.append(f"{source.name}: neither a DL4J log nor a JVM GC log; skipped")
                continue
        finally:
            source.close()
        warnings.extend(source.warnings)
    if not gc_logs and not dl4j_logs:
        raise LogError(
            "no DL4J or JVM GC log among " + ", ".join(paths) + " (" + "; ".join(warnings) + ")"
        )
    if len(dl4j_logs) > 1:
        warnings.append(
            f"{len(dl4j_logs)} DL4J logs: the first ({dl4j_logs[0].source}) is the job's steps"
        )
    dl4j = dl4j_logs[0] if dl4j_logs else None
    every: list[JvmGcLog | Dl4jLog] = [*gc_logs, *dl4j_logs]
    for log in every:
        if log.unparsed:
            warnings.append(
                f"{log.source}: {log.unparsed} line(s) looked like events but could not be "
                f"read, e.g. {log.unparsed_samples[0]!r}"
            )
    record = to_record(dl4j, gc_logs, command or ("stepdoctor", "logs", *paths))
    record = dataclasses.replace(record, warnings=tuple(warnings))
    return LogsRead(
        record=record, gc_logs=tuple(gc_logs), dl4j_logs=tuple(dl4j_logs), warnings=tuple(warnings)
    )


def _noting_gc(lines: Iterable[str], kinds: list[str]) -> Iterator[str]:
    """``lines``, noting in ``kinds`` the kind of the first GC log line among them."""
    for line in lines:
        if not kinds:
            kind = gc_kind_of(line)
            if kind is not None:
                kinds.append(kind)
        yield line


def _gc_beside(name: str, kind: str, warnings: list[str]) -> JvmGcLog | None:
    """The GC lines of a training log (the JVM's -verbose:gc or -Xlog:gc on the same
    output), read again as a GC log of ``kind``; None from stdin, which cannot be read twice."""
    if name == "-":
        warnings.append(
            "-: the training log holds the JVM's GC lines too; they are read from a file "
            "(stepdoctor logs FILE), not from stdin"
        )
        return None
    (source,) = open_sources([name])
    try:
        if kind == "jdk8-gc":  # its parser passes over other lines
            return read_gc_source(dataclasses.replace(source, kind=kind))
        # the unified parser counts any other line as one it could not read: the logger's
        # lines are left out
        ours = (line for line in source.lines if line.startswith(("[", "GC(", "Using ")))
        return parse_unified(source.name, ours)
    finally:
        source.close()


def read_gc_source(source: LogSource) -> JvmGcLog:
    """The figures of a GC log ``source`` (its kind told already)."""
    if source.kind == "unified-gc":
        return parse_unified(source.name, Feed(source))
    if source.kind == "jdk8-gc":
        return parse_jdk8(source.name, Feed(source))
    raise LogError(f"{source.name}: not a JVM GC log (kind: {source.kind})")


def read_gc_log(path: str | Path) -> JvmGcLog:
    """The figures of the GC log at ``path`` (plain or ``.gz``)."""
    (source,) = open_sources([str(path)])
    try:
        return read_gc_source(source)
    finally:
        source.close()
