"""jvm-gc-overhead: a JVM job spends a large share of its time in garbage-collection pauses.

Detects: the share of a GC log's span spent in stop-the-world pauses (100% less GCViewer's
throughput), per log given to ``stepdoctor logs``; with a DL4J log of the same job whose
iterations could be placed in time, the iterations' time in those pauses too (evidence).
Evidence: pauses, their total and share, the longest, the causes that took the most.
Fix: in the JVM's and DL4J's terms: a larger heap, fewer objects on it (DL4J's workspaces keep
arrays off-heap), no periodic System.gc(), a collector fit for throughput.
"""

from __future__ import annotations

import math
from pathlib import Path

from stepdoctor.model import Evidence, Finding, Fix, Severity
from stepdoctor.model.jvm import JvmGcLog
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = [
    "CRITICAL_SHARE",
    "HEAP_GROWTH",
    "MIN_PAUSES",
    "WARNING_SHARE",
    "heap_flags",
    "jvm_gc_overhead",
    "log_name",
]

#: Warning past the most lenient pause-time goal HotSpot sets itself: G1's default
#: -XX:GCTimeRatio=12 aims at no more than 1/(1+12) = 7.7% of the time in GC (the Parallel
#: collector's default, 99, at 1%; Oracle's HotSpot GC Tuning Guide, "Behavior-Based Tuning").
WARNING_SHARE = 1 / 13
#: Critical at a fifth, as for the other lost-time rules (XProf's "highly" bound, 20%).
CRITICAL_SHARE = 0.20
#: A share of the log's span needs a span: a log of a few collections (an excerpt, a job
#: that ended) spans little more than its pauses and would read as all GC. As the step rules'
#: 20 steps for a rate, halved: pauses come seconds apart.
MIN_PAUSES = 10
#: A heap "given room" in the fixes' snippets: half again the largest heap the log shows
#: (a guess to try, said as one: the fix is to measure with it).
HEAP_GROWTH = 1.5


@rule(
    id="jvm-gc-overhead",
    title="The JVM spends its time in garbage collection",
    requires=("jvm_gc",),
    scope="logs",
)
def jvm_gc_overhead(ctx: RuleContext) -> list[Finding]:
    """Flag a GC log whose pauses take 7.7% of its span or more."""
    findings = []
    for log in ctx.record.jvm_gc:
        if log.pauses < MIN_PAUSES or log.duration_s <= 0:
            continue
        share = min(1.0, log.total_pause_s / log.duration_s)
        rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
        if rung is None:
            continue
        findings.append(_finding(ctx, log, share, rung.severity))
    return findings


def _finding(ctx: RuleContext, log: JvmGcLog, share: float, severity: Severity) -> Finding:
    top = log.causes[0] if log.causes else None
    top_text = (
        f" Most of it: {top.count} {top.kind} pause(s){_cause(top.cause)}, "
        f"{top.total_s:.1f} s ({top.total_s / log.total_pause_s:.0%})."
        if top is not None and log.total_pause_s > 0
        else ""
    )
    dl4j = ctx.record.env_value("framework") == "dl4j"
    periodic = ctx.record.env_value("nd4j.periodic_gc") is True
    fixes = [
        "Give the heap room: a larger -Xmx (with -Xms equal to it) when it is full after "
        "collections, or find what fills it (a heap dump: jmap -dump:live,format=b,file=h.hprof "
        "<pid>, then Eclipse MAT's dominator tree)."
    ]
    if dl4j:
        fixes.append(
            "DL4J keeps arrays off-heap: the heap fills with Java objects (the DL4J guide: "
            "GC time grows with their count, multi-second full GCs from 10 million); keep "
            "workspaces on (the default) and cache DataSets off-heap."
        )
    if periodic:
        fixes.append(
            "ND4J calls System.gc() periodically: with workspaces on it is not needed: "
            "Nd4j.getMemoryManager().togglePeriodicGc(false)."
        )
    snippet = f"java {heap_flags(log)} ..."
    if log.collector in ("CMS", "Serial"):
        fixes.append(f"{log.collector} is a poor fit for a throughput job: -XX:+UseParallelGC.")
        snippet = f"java {heap_flags(log)} -XX:+UseParallelGC ..."
    return Finding(
        rule="jvm-gc-overhead",
        severity=severity,
        title=f"GC pauses take {share:.0%} of the JVM's time ({_name(log)})",
        explanation=(
            f"{log.pauses} stop-the-world pauses took {log.total_pause_s:.1f} s of the "
            f"{log.duration_s:.1f} s the log spans (GC throughput {100 - share * 100:.1f}%; "
            f"the longest {log.max_pause_s * 1000:.0f} ms). Nothing else runs during a pause: "
            f"training stops with it.{top_text}"
        ),
        evidence=(
            Evidence(
                metric="share of the log's span in pauses",
                value=round(share, 4),
                unit="share",
                threshold=round(WARNING_SHARE, 4),
                source=f"GC log {log.source}",
            ),
            Evidence(metric="pauses", value=log.pauses, unit="count", source="GC log"),
            Evidence(
                metric="longest pause",
                value=round(log.max_pause_s * 1000, 1),
                unit="ms",
                source="GC log",
            ),
            Evidence(metric="full collections", value=log.full_gcs, unit="count", source="GC log"),
            *_iterations(ctx),
        ),
        speedup=removal_speedup(
            share,
            f"1 / (1 - {share:.2f}): every pause removed (an upper bound)",
        ),
        fix=Fix(summary=" ".join(fixes), snippet=snippet),
    )


def _iterations(ctx: RuleContext) -> tuple[Evidence, ...]:
    """The DL4J iterations' time in GC pauses, where their log and the GC log line up."""
    steps = ctx.steps
    hit = [s for s in steps if s.gc_pause_ns]
    total = sum(s.duration_ns for s in steps)
    if not hit or not total:
        return ()
    return (
        Evidence(
            metric="share of the iterations' time in GC pauses",
            value=round(sum(s.gc_pause_ns for s in steps) / total, 4),
            unit="share",
            source="DL4J log and GC log, by wall clock",
        ),
        Evidence(
            metric="iterations a pause fell in",
            value=len(hit),
            unit="count",
            source="DL4J log and GC log, by wall clock",
        ),
    )


def _cause(cause: str) -> str:
    return f" ({cause})" if cause else ""


def _name(log: JvmGcLog) -> str:
    return f"{log.collector} collector, {log_name(log)}" if log.collector else log_name(log)


def heap_flags(log: JvmGcLog) -> str:
    """-Xms/-Xmx half again the largest heap the log shows (``-Xmx<larger>`` when it shows
    none)."""
    if not log.heap_max_bytes:
        return "-Xms<larger> -Xmx<larger>"
    mib = math.ceil(log.heap_max_bytes * HEAP_GROWTH / 2**20)
    size = f"{math.ceil(mib / 1024)}g" if mib >= 2048 else f"{mib}m"
    return f"-Xms{size} -Xmx{size}"


def log_name(log: JvmGcLog) -> str:
    """The log's file name, as a finding's title names it (its path is in the evidence)."""
    return Path(log.source).name or log.source
