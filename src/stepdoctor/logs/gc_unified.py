"""JDK 9+ unified GC logs (``-Xlog:gc``, ``-Xlog:gc*``, with any decorations: uptime,
uptime in ms, dates, level and tags or none): G1, Parallel, Serial, CMS, ZGC and Shenandoah,
in one streaming pass.

A pause is a ``GC(n) Pause ... N.NNNms`` line (the summary line at ``gc`` level; the
``gc,start`` line before it has no time): its decoration is the time it ended, as GCViewer
takes it. A ZGC cycle's pauses (``Pause Mark Start``, ``Pause Mark End``, ``Pause Relocate
Start``, at ``gc,phases``) are one pause, their sum, at the cycle's ``Garbage Collection``
line (GCViewer's reading). Concurrent phases (``Concurrent Cycle``, ``Concurrent Mark`` ...)
are not pauses. Safepoint lines (``Total time for which application threads were stopped``)
add their time beyond the GC pause before them (``gc_stats.GcStats.stopped``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stepdoctor.logs.feed import Feed
from stepdoctor.logs.gc_stats import GcStats
from stepdoctor.logs.gc_stats import log_number as _num
from stepdoctor.model.jvm import JvmGcLog

__all__ = ["parse_unified"]

_NUM = r"\d+[.,]\d+"
# the decorations: "[0.123s][info][gc,start   ] ", "[2020-06-24T18:13:47.695-0700][173690ms] "
_PREFIX = re.compile(r"(?:\[[^\]]*\]\s*)+")
_UPTIME = re.compile(rf"{_NUM}s")
_PAUSE = re.compile(
    rf"^GC\((?P<id>\d+)\) (?:[yoYO]: )?Pause (?P<what>[A-Z][\w ]*?)(?P<rest>(?: \(.*?\))*)"
    rf"(?: (?P<heap>\S+->\S+))? (?P<ms>{_NUM})ms$"
)
_ZGC_PHASE = re.compile(
    rf"^GC\((?P<id>\d+)\) (?:[yoYO]: )?Pause (?P<what>Mark Start|Mark End|Relocate Start)"
    rf"(?: \([^)]*\))? (?P<ms>{_NUM})ms$"
)
_ZGC_CYCLE_END = re.compile(
    r"^GC\((?P<id>\d+)\) (?:Garbage Collection|Major Collection|Minor Collection) "
    r"\((?P<cause>[^)]*(?:\(\))?)\) \S+->\S+"
)
_CONCURRENT = re.compile(
    rf"^GC\((?P<id>\d+)\) (?:[yoYO]: )?(?P<name>Concurrent [\w -]+?)(?: \(.*?\))?"
    rf"(?: (?P<ms>{_NUM})ms)?$"
)
#: The concurrent phases that count for the log's span: those GCViewer reads (its UJL event
#: types), so that a log's span, and its throughput, are GCViewer's.
_SPAN_PHASES = frozenset(
    {
        "Concurrent Cycle",
        "Concurrent Mark Cycle",
        "Concurrent Undo Cycle",
        "Concurrent Mark",
        "Concurrent Preclean",
        "Concurrent Abortable Preclean",
        "Concurrent Sweep",
        "Concurrent Reset",
        "Concurrent reset",
        "Concurrent marking roots",
        "Concurrent marking",
        "Concurrent precleaning",
        "Concurrent thread roots",
        "Concurrent weak references",
        "Concurrent weak roots",
        "Concurrent cleanup",
        "Concurrent class unloading",
        "Concurrent strong roots",
        "Concurrent evacuation",
        "Concurrent update references",
        "Concurrent update thread roots",
        "Concurrent uncommit",
        "Concurrent Mark Free",
        "Concurrent Process Non-Strong References",
        "Concurrent Reset Relocation Set",
        "Concurrent Destroy Detached Pages",
        "Concurrent Select Relocation Set",
        "Concurrent Prepare Relocation Set",
        "Concurrent Relocate",
    }
)
# what a pause's name has in parentheses: "(Normal) (G1 Evacuation Pause)", "(System.gc())"
_PAREN = re.compile(r"\(((?:[^()]|\(\))*)\)")
_STOPPED = re.compile(rf"Total time for which application threads were stopped: ({_NUM}) seconds")
_STALL = re.compile(rf"(?:Allocation|Relocation) Stall \(.*\) ({_NUM})ms$")
_HEAP = re.compile(
    r"(\d+)([BKMGT])(?:\(\d+%\))?->(\d+)([BKMGT])(?:\(\d+%\))?(?:\((\d+)([BKMGT])\))?"
)
_METASPACE = re.compile(r"Metaspace: (\d+)([KMG])(?:\(\d+[KMG]\))?->(\d+)([KMG])\((\d+)([KMG])\)")
_UNIT = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_USING = re.compile(
    r"^Using (G1|Parallel|Serial|Concurrent Mark Sweep|The Z Garbage Collector|Shenandoah)"
)
_COLLECTOR = {
    "G1": "G1",
    "Parallel": "Parallel",
    "Serial": "Serial",
    "Concurrent Mark Sweep": "CMS",
    "The Z Garbage Collector": "ZGC",
    "Shenandoah": "Shenandoah",
}
#: What unified logging puts in parentheses after a pause's name that is no cause: G1's and
#: Shenandoah's kinds of pause.
_NOT_CAUSES = frozenset(
    {
        "Normal",
        "Concurrent Start",
        "Prepare Mixed",
        "Mixed",
        "unload classes",
        "update refs",
        "process weakrefs",
    }
)
_KINDS = {
    "Young": "young",
    "Full": "full",
    "Remark": "remark",
    "Cleanup": "cleanup",
    "Initial Mark": "initial-mark",
    "Mixed": "mixed",
}


def parse_unified(source: str, lines: Iterable[str]) -> JvmGcLog:
    """Read a unified GC log's ``lines`` (without line ends) into its summary."""
    stats = GcStats(source=source, format="unified")
    if isinstance(lines, Feed):
        lines.attach(stats, "unified", lambda: True, span_phases=_SPAN_PHASES)
    for line in lines:
        stats.lines += 1
        if line.startswith("["):
            t_s, unix_s, body = _decorations(line, stats)
        elif line.startswith(("GC(", "Using ")):
            t_s = unix_s = None  # -Xlog:gc:...:none: no decorations
            body = line
        else:
            if line.strip():
                stats.bad_line(line)
            continue
        if body is None:
            stats.bad_line(line)
            continue
        if not body.startswith("GC("):
            using = _USING.match(body)
            if using is not None:
                stats.collector = _COLLECTOR[using.group(1)]
                continue
            stopped = _STOPPED.search(body)
            if stopped is not None:
                stats.stopped(stats.timestamp(t_s, unix_s), _num(stopped.group(1)), unix_s)
                continue
            stall = _STALL.search(body)
            if stall is not None:
                # one thread waited for memory: no pause of the world (GCViewer counts one)
                when = stats.timestamp(t_s, unix_s)
                stats.problem("allocation stall", when)
                stats.concurrent(when)
            continue
        phase = _ZGC_PHASE.match(body)
        if phase is not None:
            when = stats.timestamp(t_s, unix_s)
            stats.collector = stats.collector or "ZGC"
            pause_s = _num(phase.group("ms")) / 1000
            stats.pause(when, pause_s, "concurrent-pause", phase.group("what"), unix_s=unix_s)
            stats.zgc_phases += 1
            continue
        pause = _PAUSE.match(body)
        if pause is not None:
            when = stats.timestamp(t_s, unix_s)
            gc_id = int(pause.group("id"))
            what = pause.group("what").strip()
            kind = _KINDS.get(what.split(" ")[0] if what not in _KINDS else what, "")
            if not kind:
                full = what.startswith("Full")
                degenerated = what.startswith("Degenerated")
                kind = "full" if full else "degenerated" if degenerated else "concurrent-pause"
            pause_s = _num(pause.group("ms")) / 1000
            last = stats.last_collection
            if kind == "young" and last[1] == "full" and last[0] > gc_id:
                # Serial: a full collection ran inside this failed young one, whose time
                # includes it
                pause_s = max(0.0, pause_s - last[2])
            rest = pause.group("rest")
            causes = _PAREN.findall(rest)
            # a degenerated cycle's parentheses say where it degenerated (Mark, Outside of
            # Cycle...), as the JDK 8 builds' reader leaves unsaid: no cause
            cause = (
                ""
                if kind == "degenerated"
                else next((c for c in causes if c not in _NOT_CAUSES), "")
            )
            _problems(stats, body, when)
            heap = _heap(pause.group("heap"))
            stats.pause(when, pause_s, kind, cause, heap=heap, unix_s=unix_s)
            stats.last_collection = (gc_id, kind, pause_s if kind == "full" else 0.0)
            continue
        cycle = _ZGC_CYCLE_END.match(body)
        if cycle is not None:
            when = stats.timestamp(t_s, unix_s)
            stats.collector = stats.collector or "ZGC"
            stats.zgc_cycles += 1
            _problems(stats, body, when)
            stats.concurrent(when)
            continue
        concurrent = _CONCURRENT.match(body)
        if concurrent is not None:
            ms = concurrent.group("ms")
            seconds = 0.0 if ms is None else _num(ms) / 1000
            # a phase's start line counts where GCViewer reads it: at gc level, not gc,start
            started = ms is None and "gc,start" in line[: len(line) - len(body)]
            if concurrent.group("name") in _SPAN_PHASES and not started:
                stats.concurrent(stats.timestamp(t_s, unix_s), seconds)
            else:
                stats.concurrent_s += seconds
            continue
        if "To-space exhausted" in body or "Evacuation Failure" in body:
            _problems(stats, body, stats.timestamp(t_s, unix_s))
            continue
        meta = _METASPACE.search(body)
        if meta is not None:
            stats.metaspace_after_bytes = int(meta.group(3)) * _UNIT[meta.group(4)]
            stats.metaspace_total_bytes = int(meta.group(5)) * _UNIT[meta.group(6)]
    if stats.zgc_cycles and not stats.zgc_phases:
        stats.pause_times_known = False  # ZGC logged with -Xlog:gc: cycles, no pauses
    stats.collector = stats.collector or collector_of(stats.pause_kinds_and_causes)
    return stats.result()


#: Causes only G1 logs (its evacuation, humongous, compaction and preventive collections).
_G1_CAUSES = ("G1 ",)


def collector_of(pauses: Iterable[tuple[str, str]]) -> str:
    """The collector of a unified log without its "Using ..." line (an excerpt, a log
    started later), from what only one collector logs among its pauses' (kind, cause):
    Shenandoah's degenerated cycles and its init/final pauses (ZGC's own pauses name it as
    they are read), G1's mixed collections, cleanups and causes; "" where the pauses could be
    several collectors' (a ``Pause Young (Allocation Failure)`` is Serial's or Parallel's)."""
    kinds, causes = set(), set()
    for kind, cause in pauses:
        kinds.add(kind)
        causes.add(cause)
    if {"degenerated", "concurrent-pause"} & kinds:
        return "Shenandoah"
    if {"mixed", "cleanup"} & kinds or any(c.startswith(_G1_CAUSES) for c in causes):
        return "G1"
    return ""


def _decorations(line: str, stats: GcStats) -> tuple[float | None, float | None, str | None]:
    """The uptime (s), the date (Unix s) and the message of a unified log line."""
    prefix = _PREFIX.match(line)
    if prefix is None:
        return None, None, None
    t_s = unix_s = None
    for part in prefix.group(0).strip()[1:-1].split("]["):
        text = part.strip()
        if not text or not text[0].isdigit():
            continue  # level, tags, pid...
        if text[-1] == "s":
            if text[-2] == "m":
                if text[:-2].isdigit() and len(text) < 13:  # uptimemillis, not timemillis
                    t_s = int(text[:-2]) / 1000
            elif _UPTIME.fullmatch(text):
                t_s = _num(text[:-1])
        elif len(text) > 10 and text[4] == "-":
            unix_s = stats.date_seconds(text)
    return t_s, unix_s, line[prefix.end() :]


def _heap(text: str | None) -> tuple[int | None, int | None, int | None]:
    if not text:
        return None, None, None
    found = _HEAP.search(text)
    if found is None:
        return None, None, None
    before = int(found.group(1)) * _UNIT[found.group(2)]
    after = int(found.group(3)) * _UNIT[found.group(4)]
    total = None if found.group(5) is None else int(found.group(5)) * _UNIT[found.group(6)]
    return before, after, total


def _problems(stats: GcStats, body: str, when: float | None) -> None:
    if "Pause Degenerated GC" in body:
        stats.problem("degenerated GC", when)
    if "To-space exhausted" in body:
        stats.problem("to-space exhausted", when)
    if "Evacuation Failure" in body:
        stats.problem("evacuation failure", when)
    if "Humongous" in body:
        stats.problem("humongous allocation", when)
    if "Metadata GC" in body:
        stats.problem("metaspace", when)
