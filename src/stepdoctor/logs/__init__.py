"""DL4J training logs and JVM garbage-collection logs, read as they stream past
(``stepdoctor logs``).

``read_gc_log(path)`` gives one GC log's figures (``model.jvm.JvmGcLog``); ``read_logs``
reads any mix of files, folders, ``.gz`` and stdin, telling each file's kind from its lines.
"""

from __future__ import annotations

from pathlib import Path

from stepdoctor.errors import LogError
from stepdoctor.logs.gc_jdk8 import parse_jdk8
from stepdoctor.logs.gc_unified import parse_unified
from stepdoctor.logs.sources import LogSource, open_sources
from stepdoctor.model.jvm import JvmGcLog

__all__ = ["read_gc_log", "read_gc_source"]


def read_gc_source(source: LogSource) -> JvmGcLog:
    """The figures of a GC log ``source`` (its kind told already)."""
    if source.kind == "unified-gc":
        return parse_unified(source.name, source.lines)
    if source.kind == "jdk8-gc":
        return parse_jdk8(source.name, source.lines)
    raise LogError(f"{source.name}: not a JVM GC log (kind: {source.kind})")


def read_gc_log(path: str | Path) -> JvmGcLog:
    """The figures of the GC log at ``path`` (plain or ``.gz``)."""
    (source,) = open_sources([str(path)])
    return read_gc_source(source)
