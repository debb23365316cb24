"""JDK 5-8 GC logs (``-verbose:gc``, ``-XX:+PrintGCDetails``, with or without
``-XX:+PrintGCDateStamps`` / ``PrintGCTimeStamps``): Serial, Parallel, CMS and G1, in one
streaming pass.

An event starts where a line (or, in lines the JVM's threads wrote into each other, a
place in it) has ``[GC``, ``[Full GC``, ``[GC pause`` ... after its time stamps; its pause is
its outermost ``, N secs]`` (G1 writes its details on the lines after it; a young collection
that failed and went on in the old generation, ``[DefNew ...][Tenured ...]``, is one full
pause, as GCViewer counts it). Concurrent phases (``CMS-concurrent-*``, ``GC
concurrent-*``) are not pauses. Decimal commas (a JVM in a locale that writes them) read as
points.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from stepdoctor.logs.feed import Feed
from stepdoctor.logs.gc_stats import GcStats
from stepdoctor.logs.gc_stats import log_number as _num
from stepdoctor.model.jvm import JvmGcLog

__all__ = ["COLLECTOR_EVENTS", "parse_jdk8"]

#: The collector is told from the first events' generations (it does not change in a run).
COLLECTOR_EVENTS = 1000

_NUM = r"\d+[.,]\d+"
_DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[.,]\d{3}[+-]\d{4}"
# the stamps before an event: "2012-04-26T23:59:50.253+0200: 3.344: " or "#12: " (GC id)
_STAMPS = rf"(?:(?P<date>{_DATE}): )?(?:(?P<up>{_NUM}): )?(?:#\d+: )?"
_EVENT = re.compile(
    _STAMPS + r"\[(?P<type>Full GC|GC pause|GC remark|GC cleanup|GC concurrent-[\w-]+|"
    r"CMS-concurrent-[\w-]+|GC(?=\s*[\[(\d]|\s*$|--)|"
    # Shenandoah in JDK 8 builds: "[Pause Init Mark, 1.2 ms]", "[Concurrent marking ...]"
    r"Pause [A-Z][\w ]*?(?=[,\s(\d])|Concurrent [a-z][\w ]*?(?=[,\s(\d]))"
)
# a concurrent phase, with its time where it ended: "[CMS-concurrent-mark: 0.010/0.012 secs]"
# (CPU/wall), "[GC concurrent-mark-end, 0.0011728 secs]"
_NESTED_CONCURRENT = re.compile(
    _STAMPS + rf"\[(?:CMS-concurrent-[\w-]+|GC concurrent-[\w-]+)"
    rf"(?:(?::\s*(?:{_NUM}/)?|,\s*)(?P<secs>{_NUM})\s*secs)?"
)
_BRACKET = re.compile(r"[\[\]]")
_INNER_GC = re.compile(r"\[GC(?=\s*[\[(\d]|\s*$)")
_PAUSE_END = re.compile(rf", ({_NUM}) (secs|ms)\s*$")
_STOPPED = re.compile(
    _STAMPS + rf"Total time for which application threads were stopped: ({_NUM}) seconds"
)
_CAUSE = re.compile(r"\(((?:[^()]|\(\))+)\)")
_HEAP = re.compile(r"(\d+)([KMG])->(\d+)([KMG])\((\d+)([KMG])\)")
_HEAP_G1 = re.compile(
    r"Heap: ([\d.]+)([BKMG])\([\d.]+[BKMG]\)->([\d.]+)([BKMG])\(([\d.]+)([BKMG])\)"
)
_METASPACE = re.compile(r"\[(?:Metaspace|PSPermGen|CMS Perm |Perm ): (\d+)K->(\d+)K\((\d+)K\)")
_YOUNG_GENS = ("[DefNew", "[ParNew", "[PSYoungGen", "[ASParNew")
_OLD_GEN = re.compile(r"\[(?:Tenured|CMS(?!-concurrent| Perm)|ParOldGen|PSOldGen|ASCMS)")
_UNIT = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_COLLECTORS = (
    ("G1", ("[GC pause", "G1 Evacuation", "[GC remark", "garbage-first heap")),
    ("Shenandoah", ("[Pause Init Mark", "[Pause Final Mark", "Shenandoah")),
    ("CMS", ("CMS", "[ParNew", "concurrent mode failure")),
    ("Parallel", ("[PSYoungGen", "[ParOldGen", "[PSOldGen")),
    ("Serial", ("[DefNew", "[Tenured")),
)
#: Causes by the name later JDKs give them: JDK 6 and 7 logged a ``System.gc()`` call as
#: ``Full GC (System)`` (GCViewer's ``FULL_GC_SYSTEM``).
_CAUSE_NAMES = {"System": "System.gc()"}
_PROBLEMS = (
    ("to-space exhausted", "(to-space exhausted)"),
    ("to-space exhausted", "(to-space overflow)"),
    ("promotion failed", "promotion failed"),
    ("concurrent mode failure", "concurrent mode failure"),
    ("concurrent mode failure", "concurrent mode interrupted"),
    ("humongous allocation", "G1 Humongous Allocation"),
)


@dataclass(slots=True)
class _Open:
    """An event whose closing bracket is on a later line."""

    t_s: float | None
    unix_s: float | None
    text: str
    depth: int
    inner: float = 0.0
    """The pauses of collections inside it, so far."""


def parse_jdk8(source: str, lines: Iterable[str]) -> JvmGcLog:
    """Read a JDK 5-8 GC log's ``lines`` (without line ends) into its summary."""
    stats = GcStats(source=source, format="jdk8")
    collectors: dict[str, int] = {}
    pending: _Open | None = None
    if isinstance(lines, Feed):
        lines.attach(stats, "jdk8", lambda: pending is None, COLLECTOR_EVENTS)
    for line in lines:
        stats.lines += 1
        if pending is not None:
            starts = _EVENT.match(line)
            stamped = starts is not None and (starts.group("date") or starts.group("up"))
            if starts is not None and stamped and "concurrent" in starts.group("type"):
                _concurrent(stats, line)  # another thread's line, between the event's lines
                continue
            if not stamped:
                # the event goes on: G1's tenuring distribution or adaptive-size lines, or the
                # rest of a line another thread's output cut into
                _concurrent(stats, line)
                pending.text += " " + line
                inner: list[float] = []
                pending.depth, pause_s = _close(line, pending.depth, inner)
                _inner(stats, pending.t_s, pending.unix_s, inner)
                pending.inner += _added(inner)
                if pause_s is not None:
                    # the collection inside it is its own pause (GCViewer subtracts it too)
                    pause_s = max(0.0, pause_s - pending.inner)
                    _finish(stats, pending.t_s, pending.unix_s, pending.text, pause_s)
                    pending = None
                continue
            stats.bad_line(pending.text[:300])
            pending = None
        if "[" not in line and "Total time" not in line:
            continue
        stopped = _STOPPED.search(line)
        if stopped is not None:
            unix_s = stats.date_seconds(stopped.group("date"))
            up = stopped.group("up")
            t_s = stats.timestamp(None if up is None else _num(up), unix_s)
            stats.stopped(t_s, _num(stopped.group(3)), unix_s)
            continue
        if line[:1].isspace():
            continue  # G1's details: "   [Parallel Time: ...", " [Times: ..."
        event = _first_event(line)
        if event is None:
            if "secs]" in line:
                stats.bad_line(line)
            continue  # the JVM's heading, heap printouts
        if stats.events < COLLECTOR_EVENTS:
            _count_collector(line, collectors)
        kind = event.group("type")
        unix_s = stats.date_seconds(event.group("date"))
        up = event.group("up")
        t_s = stats.timestamp(None if up is None else _num(up), unix_s)
        rest = line[event.start("type") - 1 :]
        if kind.startswith("Concurrent "):
            stats.concurrent(t_s)  # Shenandoah's (JDK 8 builds): no pause
            continue
        if "concurrent" in kind:
            _concurrent(stats, line)
            # a pause may follow on the same line, its thread's text cut into by this one
            later = _EVENT.search(rest, 1)
            if later is None or "concurrent" in later.group("type"):
                continue
            rest = rest[later.start("type") - 1 :]
        else:
            _concurrent(stats, rest)
        inner = []
        depth, pause_s = _close(rest, 0, inner)
        _inner(stats, t_s, unix_s, inner)
        if pause_s is None:
            if rest.endswith(", start]"):
                continue  # Shenandoah's start line
            if depth > 0:
                pending = _Open(t_s=t_s, unix_s=unix_s, text=rest, depth=depth, inner=_added(inner))
            else:
                stats.bad_line(line)
            continue
        _finish(stats, t_s, unix_s, rest, max(0.0, pause_s - _added(inner)))
    if pending is not None:
        stats.bad_line(pending.text[:300])  # the log ends inside an event
    if collectors:
        stats.collector = max(collectors, key=lambda c: collectors[c])
    return stats.result()


def _close(text: str, depth: int, inner: list[float] | None = None) -> tuple[int, float | None]:
    """Follow the brackets of ``text`` from ``depth``: where the event's own bracket
    closes, its pause (the ``, N secs`` before it); else the depth reached. A collection
    inside it (CMS's young collection before its remark: ``[GC[YG occupancy...][GC [ParNew
    ...], N secs]``) is a pause of its own, added to ``inner``."""
    opened: list[int] = []  # the depths at which inner collections opened
    for bracket in _BRACKET.finditer(text):
        if bracket.group() == "[":
            depth += 1
            if depth > 1 and inner is not None and _INNER_GC.match(text, bracket.start()):
                opened.append(depth)
            continue
        depth -= 1
        if opened and depth == opened[-1] - 1:
            opened.pop()
            found = _PAUSE_END.search(text, 0, bracket.start())
            if found is not None and inner is not None:
                inner.append(_seconds(found))
        if depth == 0:
            found = _PAUSE_END.search(text, 0, bracket.start())
            return 0, (None if found is None else _seconds(found))
    return depth, None


def _added(values: list[float]) -> float:
    """The values added one by one, in order (``sum`` of floats is compensated from Python
    3.12 on: the C fast path adds as this does, on every version)."""
    total = 0.0
    for value in values:
        total += value
    return total


def _inner(stats: GcStats, t_s: float | None, unix_s: float | None, pauses: list[float]) -> None:
    for pause_s in pauses:
        stats.pause(t_s, pause_s, "young", "before remark", unix_s=unix_s)


def _seconds(found: re.Match[str]) -> float:
    value = _num(found.group(1))
    return value / 1000 if found.group(2) == "ms" else value


def _concurrent(stats: GcStats, text: str) -> None:
    """Count the concurrent phases that ended in ``text`` (their time is not a pause)."""
    if "concurrent-" not in text:
        return
    for found in _NESTED_CONCURRENT.finditer(text):
        unix_s = stats.date_seconds(found.group("date"))
        up = found.group("up")
        seconds = found.group("secs")
        t_s = stats.timestamp(None if up is None else _num(up), unix_s)
        stats.concurrent(t_s, 0.0 if seconds is None else _num(seconds))


def _first_event(line: str) -> re.Match[str] | None:
    event = _EVENT.match(line)
    if event is not None and event.group("date") is None and event.group("up") is None:
        # "[GC ..." with no stamps: -verbose:gc alone, or a line cut into by another
        return event
    return event or _EVENT.search(line)


def _count_collector(line: str, collectors: dict[str, int]) -> None:
    for name, marks in _COLLECTORS:
        if any(m in line for m in marks):
            collectors[name] = collectors.get(name, 0) + 1
            return


def _finish(
    stats: GcStats, t_s: float | None, unix_s: float | None, text: str, pause_s: float
) -> None:
    """Add the event whose text (from its ``[``) is ``text``."""
    head = text[1:]
    cause_text = ""
    if head.startswith(("Full GC", "Pause Full")):
        kind = "full"
        cause_text = head[7:] if head.startswith("Full GC") else ""
    elif head.startswith("Pause Degenerated"):
        kind = "degenerated"  # Shenandoah finishing its cycle stop-the-world
        stats.problem("degenerated GC", t_s)
    elif head.startswith("Pause "):
        kind = "concurrent-pause"  # Shenandoah's init/final pauses
    elif head.startswith("GC pause"):
        cause_text = head[8:]
        kind = "mixed" if "(mixed)" in head[:120] or "(partial)" in head[:120] else "young"
    elif head.startswith("GC remark") or "CMS-remark" in text or "CMS Final Remark" in text:
        kind = "remark"
    elif head.startswith("GC cleanup"):
        kind = "cleanup"
    elif "CMS-initial-mark" in text or "CMS Initial Mark" in text:
        kind = "initial-mark"
    else:
        kind = "young"
        cause_text = head[2:]
        if any(g in text for g in _YOUNG_GENS) and _OLD_GEN.search(text):
            kind = "full"  # a young collection that went on in the old generation
    cause = ""
    found = _CAUSE.match(cause_text.lstrip())
    if found is not None and found.group(1) not in ("young", "mixed", "partial", "initial-mark"):
        cause = _CAUSE_NAMES.get(found.group(1), found.group(1))
    for name, mark in _PROBLEMS:
        if mark in text:
            stats.problem(name, t_s)
            if kind == "full" and not cause:
                cause = name  # a young collection that failed into a full one
    if "Metadata GC Threshold" in text or "Metaspace" in cause:
        stats.problem("metaspace", t_s)
    # the heap only for the pauses the timeline keeps (each costs two searches)
    before, after, total = _heap(text) if stats.keeps_next else (None, None, None)
    meta = _METASPACE.search(text) if "Meta" in text or "Perm" in text else None
    if meta is not None:
        stats.metaspace_after_bytes = int(meta.group(2)) * 1024
        stats.metaspace_total_bytes = int(meta.group(3)) * 1024
    stats.pause(t_s, pause_s, kind, cause, heap=(before, after, total), unix_s=unix_s)


def _heap(text: str) -> tuple[int | None, int | None, int | None]:
    """The whole heap's bytes before and after the event, and its size."""
    heap = _HEAP_G1.search(text)
    if heap is not None:
        before = int(float(heap.group(1)) * _UNIT[heap.group(2)])
        after = int(float(heap.group(3)) * _UNIT[heap.group(4)])
        return before, after, int(float(heap.group(5)) * _UNIT[heap.group(6)])
    outer = list(_HEAP.finditer(text.split("[Times:", 1)[0]))
    if not outer:
        return None, None, None
    m = outer[-1] if "Metaspace" not in text and "Perm" not in text else _last_heap(text)
    if m is None:
        return None, None, None
    before = int(m.group(1)) * _UNIT[m.group(2)]
    after = int(m.group(3)) * _UNIT[m.group(4)]
    return before, after, int(m.group(5)) * _UNIT[m.group(6)]


def _last_heap(text: str) -> re.Match[str] | None:
    """The whole heap's ``before->after(total)``: the last one outside the permanent
    generation's or metaspace's brackets."""
    cut = re.sub(r"\[(?:Metaspace|PSPermGen|CMS Perm |Perm ): [^\]]*\]", "", text)
    return next(reversed(list(_HEAP.finditer(cut.split("[Times:", 1)[0]))), None)
