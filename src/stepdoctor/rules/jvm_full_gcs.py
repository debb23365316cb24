"""jvm-full-gcs: full collections, and what called them.

Detects: full (whole-heap, stop-the-world) collections in a GC log, grouped by cause:
``System.gc()`` (the program asked: ND4J's periodic GC does), ``Allocation Failure`` /
``Ergonomics`` (the old generation was full), ``Metadata GC Threshold``, ``Heap Dump``...
Warning when they take 1% of the log's span or more, or when the program calls them itself;
the longest full collection and its cause are named.
Fix: by cause: ND4J's periodic GC off, -XX:+DisableExplicitGC, a larger heap.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity
from stepdoctor.model.jvm import GcCause, JvmGcLog
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.jvm_gc_overhead import MIN_PAUSES, heap_flags, log_name
from stepdoctor.rules.registry import rule

__all__ = ["WARNING_SHARE", "jvm_full_gcs"]

#: Full collections are the Parallel collector's whole GC-time goal's worth at 1% (its default
#: -XX:GCTimeRatio=99; Oracle's HotSpot GC Tuning Guide): past it, they alone cost more than
#: the JVM's own target for all collections.
WARNING_SHARE = 0.01
#: Causes the program itself called.
EXPLICIT = ("System.gc()", "Heap Dump Initiated GC", "Heap Inspection Initiated GC")


@rule(
    id="jvm-full-gcs",
    title="Full garbage collections",
    requires=("jvm_gc",),
    scope="logs",
)
def jvm_full_gcs(ctx: RuleContext) -> list[Finding]:
    """Flag full collections: by their share, or called by the program itself."""
    findings = []
    for log in ctx.record.jvm_gc:
        full = [c for c in log.causes if c.kind == "full"]
        if not full:
            continue
        # a log of a few collections (or with no time stamps) spans too little for a share
        timed = log.pauses >= MIN_PAUSES and log.duration_s > 0
        share = log.full_pause_s / log.duration_s if timed else 0.0
        explicit = [c for c in full if c.cause in EXPLICIT]
        if share < WARNING_SHARE and not explicit:
            continue
        findings.append(_finding(ctx, log, full, share, sum(c.count for c in explicit)))
    return findings


def _finding(
    ctx: RuleContext, log: JvmGcLog, full: list[GcCause], share: float, explicit: int
) -> Finding:
    causes = ", ".join(
        f"{c.count} x {c.cause or 'no cause logged'} ({c.total_s:.2f} s)" for c in full
    )
    fixes = []
    if explicit:
        if ctx.record.env_value("nd4j.periodic_gc") is True:
            every = ctx.record.env_value("nd4j.periodic_gc_ms")
            window = f" every {every} ms" if every is not None else ""
            fixes.append(
                f"ND4J calls System.gc(){window} (periodic GC): with workspaces on "
                "(the default) it is not needed: Nd4j.getMemoryManager().togglePeriodicGc(false), "
                "or a longer window: setAutoGcWindow(10000)."
            )
        fixes.append(
            "The program calls System.gc(): remove the calls, or make the JVM ignore them "
            "(-XX:+DisableExplicitGC)."
        )
    if any(c.cause not in EXPLICIT for c in full):
        fixes.append(
            "The old generation filled: a larger heap (-Xmx), and with G1 an earlier "
            "concurrent cycle (-XX:InitiatingHeapOccupancyPercent=35)."
        )
    snippet = "java -XX:+DisableExplicitGC ..." if explicit else f"java {heap_flags(log)} ..."
    severity = Severity.WARNING if share >= WARNING_SHARE or explicit else Severity.INFO
    return Finding(
        rule="jvm-full-gcs",
        severity=severity,
        title=(
            f"{log.full_gcs} full collection(s) took {share:.1%} of the time ({log_name(log)})"
            if share
            else f"{explicit} full collection(s) called by the program ({log_name(log)})"
        ),
        explanation=(
            f"A full collection stops the JVM while it walks the whole heap. By cause: {causes}."
        ),
        evidence=(
            Evidence(metric="full collections", value=log.full_gcs, unit="count", source="GC log"),
            Evidence(
                metric="share of the log's span in full collections",
                value=round(share, 4),
                unit="share",
                threshold=WARNING_SHARE,
                source="GC log",
            ),
            Evidence(
                metric="full collections' total pause",
                value=round(log.full_pause_s, 3),
                unit="s",
                source="GC log",
            ),
        ),
        speedup=removal_speedup(
            share,
            f"1 / (1 - {share:.3f}): the full collections' pauses removed",
        ),
        fix=Fix(summary=" ".join(fixes), snippet=snippet),
    )
