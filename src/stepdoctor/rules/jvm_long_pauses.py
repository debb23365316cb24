"""jvm-long-pauses: single stop-the-world pauses long enough to stall a job on their own.

Detects: pauses of a second or more in a GC log (the DL4J guide: full collections of heaps
holding 10 million objects or more take "multiple seconds" each; 100,000-500,000 objects,
50-250 ms). Evidence: how many, the longest (when, kind and cause).
Fix: fewer objects on the heap, a collector with short pauses (G1's -XX:MaxGCPauseMillis).
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.jvm_gc_overhead import heap_flags, log_name
from stepdoctor.rules.registry import rule

__all__ = ["LONG_PAUSE_S", "jvm_long_pauses"]

#: A pause of a second: the DL4J guide's "multiple seconds" full collections start past it.
LONG_PAUSE_S = 1.0


@rule(
    id="jvm-long-pauses",
    title="Long garbage-collection pauses",
    requires=("jvm_gc",),
    scope="logs",
)
def jvm_long_pauses(ctx: RuleContext) -> list[Finding]:
    """Flag GC logs with pauses of a second or more."""
    findings = []
    for log in ctx.record.jvm_gc:
        long = [p for p in log.longest if p.pause_s >= LONG_PAUSE_S]
        if not long:
            continue
        worst = long[0]
        cause = f" ({worst.cause})" if worst.cause else ""
        # the longest few are kept: all of them long, and more pauses than kept
        more = " or more" if len(long) == len(log.longest) < log.pauses else ""
        findings.append(
            Finding(
                rule="jvm-long-pauses",
                severity=Severity.WARNING,
                title=(
                    f"{len(long)}{more} pause(s) of a second or more, the longest "
                    f"{worst.pause_s:.1f} s ({log_name(log)})"
                ),
                explanation=(
                    f"The longest, {_what(worst.kind)}{cause} at {worst.t_s:.1f} s, "
                    f"stopped the JVM for {worst.pause_s:.2f} s. The DL4J guide ties pauses of "
                    "seconds to heaps of millions of objects."
                ),
                evidence=(
                    Evidence(
                        metric="longest pause",
                        value=round(worst.pause_s, 3),
                        unit="s",
                        threshold=LONG_PAUSE_S,
                        source="GC log",
                    ),
                    Evidence(
                        metric="pauses of a second or more",
                        value=len(long),
                        unit="count",
                        source="GC log",
                    ),
                ),
                speedup=Speedup.none("their time is in the GC overhead's figure"),
                fix=Fix(
                    summary=(
                        "Find what fills the heap (a heap dump, Eclipse MAT's dominator tree) "
                        "and keep fewer objects; with G1, set a pause goal "
                        "(-XX:MaxGCPauseMillis=200) and give it head-room (-Xmx)."
                    ),
                    snippet=f"java -XX:+UseG1GC -XX:MaxGCPauseMillis=200 {heap_flags(log)} ...",
                ),
            )
        )
    return findings


def _what(kind: str) -> str:
    if kind == "safepoint":
        return "a stop at a safepoint"
    return f"a{'n' if kind[:1] in 'aeiou' else ''} {kind} collection"
