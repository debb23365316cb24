"""A GC log read both ways: by the C fast path from its first line on (``logs.feed``), and by
its parser alone, for the tests that check the two agree."""

from __future__ import annotations

import io

from stepdoctor.logs.feed import Feed
from stepdoctor.logs.gc_jdk8 import parse_jdk8
from stepdoctor.logs.gc_unified import parse_unified
from stepdoctor.logs.sources import LogSource
from stepdoctor.model.jvm import JvmGcLog

__all__ = ["PARSERS", "family_of", "read_both"]

PARSERS = {"jdk8": parse_jdk8, "unified": parse_unified}


def family_of(data: bytes) -> str:
    return "unified" if data.lstrip()[:1] == b"[" and b"][" in data[:2000] else "jdk8"


def read_both(
    data: bytes, family: str | None = None, name: str = "f"
) -> tuple[JvmGcLog, JvmGcLog, Feed]:
    """The log read by the fast path from its first line on, and by the parser alone."""
    family = family or family_of(data)
    parse = PARSERS[family]
    lines = [raw.decode("utf-8", "replace").rstrip("\r\n") for raw in io.BytesIO(data)]
    source = LogSource(name=name, kind=f"{family}-gc", lines=iter(()), rest=io.BytesIO(data))
    fed = Feed(source)
    return parse(name, fed), parse(name, lines), fed
