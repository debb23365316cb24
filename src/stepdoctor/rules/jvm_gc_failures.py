"""jvm-gc-failures: the collector failed at its job and fell back to a slower one.

Detects, in a GC log: ZGC's allocation stalls (threads waiting for memory), G1's to-space
exhausted / evacuation failure (no free region to copy
survivors into), Shenandoah's degenerated cycles (a concurrent cycle finished stop-the-world:
allocation outran it), CMS's promotion failed and concurrent mode failure (the old generation
filled before the concurrent cycle ended: a full, single-threaded, stop-the-world
collection), G1 humongous allocations (objects of half a region or more, allocated straight
into the old generation), and collections forced by a full metaspace (Metadata GC
Threshold).
Evidence: each sign, how often and when first.
Fix: the collector's own settings for each (heap head-room, region size, the concurrent
cycle's start, metaspace size).
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.model.jvm import GcProblem, JvmGcLog
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.jvm_gc_overhead import log_name
from stepdoctor.rules.registry import rule

__all__ = ["FIXES", "jvm_gc_failures"]

#: What each sign means and how to remove it (Oracle's HotSpot GC Tuning Guide: "Garbage-First
#: Garbage Collector Tuning" for G1's, "Concurrent Mark Sweep (CMS) Collector" for CMS's;
#: the JVM's metaspace options for the last).
FIXES: dict[str, tuple[Severity, str, str, str]] = {
    "to-space exhausted": (
        Severity.WARNING,
        "G1 found no free region to copy survivors into and had to keep them in place (an "
        "evacuation failure), a pause far longer than a young collection's; a full "
        "collection often follows.",
        "Give G1 head-room: a larger heap (-Xmx), more reserve (-XX:G1ReservePercent=20), or "
        "an earlier concurrent cycle (-XX:InitiatingHeapOccupancyPercent=35).",
        "-Xmx<larger> -XX:G1ReservePercent=20",
    ),
    "evacuation failure": (
        Severity.WARNING,
        "G1 could not copy the survivors of a collection (an evacuation failure): a long "
        "pause, often followed by a full collection.",
        "Give G1 head-room: a larger heap (-Xmx), more reserve (-XX:G1ReservePercent=20).",
        "-Xmx<larger> -XX:G1ReservePercent=20",
    ),
    "promotion failed": (
        Severity.WARNING,
        "A young collection could not move survivors into the old generation (no room, or "
        "too fragmented): the collection turned into a full one.",
        "Enlarge the old generation (-Xmx, or a smaller -Xmn), or start CMS's cycle earlier "
        "(-XX:CMSInitiatingOccupancyFraction=60 -XX:+UseCMSInitiatingOccupancyOnly); on JDK "
        "9+, move to G1.",
        "-XX:CMSInitiatingOccupancyFraction=60 -XX:+UseCMSInitiatingOccupancyOnly",
    ),
    "concurrent mode failure": (
        Severity.WARNING,
        "The old generation filled before CMS's concurrent cycle ended: the JVM stopped "
        "everything for a single-threaded full collection.",
        "Start CMS's cycle earlier (-XX:CMSInitiatingOccupancyFraction=60 "
        "-XX:+UseCMSInitiatingOccupancyOnly), give the heap room (-Xmx), or move to G1.",
        "-XX:CMSInitiatingOccupancyFraction=60 -XX:+UseCMSInitiatingOccupancyOnly",
    ),
    "humongous allocation": (
        Severity.INFO,
        "Objects of half a G1 region or more were allocated straight into the old "
        "generation, and collections were started to make room for them.",
        "Larger regions make them ordinary objects: -XX:G1HeapRegionSize=32m (a power of two, "
        "1-32 MB); or allocate such arrays less often (reuse buffers).",
        "-XX:G1HeapRegionSize=32m",
    ),
    "degenerated GC": (
        Severity.WARNING,
        "Shenandoah could not finish a concurrent cycle before the free memory ran out (the "
        "program allocated faster than the cycle freed) and finished it with every thread "
        "stopped (a degenerated cycle); where that frees too little, a full collection "
        "follows.",
        "Give Shenandoah head-room: a larger heap (-Xmx), more concurrent GC threads "
        "(-XX:ConcGCThreads) so its cycles end sooner; allocate less.",
        "-Xmx<larger> -XX:ConcGCThreads=4",
    ),
    "allocation stall": (
        Severity.WARNING,
        "Threads stopped to wait for ZGC to free memory (allocation stalls): ZGC could not "
        "keep up with the allocation rate, and those threads stood still however short its "
        "pauses are.",
        "Give ZGC head-room: a larger heap (-Xmx), or more concurrent GC threads "
        "(-XX:ConcGCThreads); allocate less.",
        "-Xmx<larger> -XX:ConcGCThreads=4",
    ),
    "metaspace": (
        Severity.INFO,
        "Collections were forced because class metadata filled the metaspace (Metadata GC "
        "Threshold): common while classes load, a problem if it goes on.",
        "Start with a larger metaspace: -XX:MetaspaceSize=256m; if it keeps growing, "
        "something keeps loading classes (generated code, class loaders kept alive).",
        "-XX:MetaspaceSize=256m",
    ),
}


@rule(
    id="jvm-gc-failures",
    title="The JVM's collector failed and fell back",
    requires=("jvm_gc",),
    scope="logs",
)
def jvm_gc_failures(ctx: RuleContext) -> list[Finding]:
    """One finding per sign of a failing collector in each GC log."""
    return [
        _finding(log, problem)
        for log in ctx.record.jvm_gc
        for problem in log.problems
        if problem.name in FIXES
    ]


def _finding(log: JvmGcLog, problem: GcProblem) -> Finding:
    severity, meaning, fix, snippet = FIXES[problem.name]
    return Finding(
        rule="jvm-gc-failures",
        severity=severity,
        title=f"{problem.name[:1].upper()}{problem.name[1:]}: {problem.count} time(s) "
        f"({log_name(log)})",
        explanation=f"{meaning} First at {problem.first_t_s:.3f} s of the JVM's uptime.",
        evidence=(
            Evidence(metric=problem.name, value=problem.count, unit="count", source="GC log"),
            Evidence(
                metric="first seen",
                value=round(problem.first_t_s, 3),
                unit="s",
                source="GC log",
            ),
        ),
        speedup=Speedup.none("the pauses it adds are in the GC overhead's figure"),
        fix=Fix(summary=fix, snippet=snippet),
    )
