"""stragglers: ranks whose GPU time or idle share stands out from the others'.

Detects: with two ranks or more, a rank whose GPU kernel time is 20% above the median rank's,
or whose idle share is 10 points above the median's.
Evidence: the rank's and the median's kernel time and idle share.
Fix: look at what that rank does differently (data, placement, a slow GPU or link).
"""

from __future__ import annotations

import statistics

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules._traces import traced_ranks
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["IDLE_POINTS", "SLOWER", "stragglers"]

#: In synchronous data-parallel training every rank waits for the slowest: 20% slower than
#: the median, or 10 points more idle, is a straggler worth naming.
SLOWER = 1.20
IDLE_POINTS = 10.0


@rule(id="stragglers", title="Some ranks lag the others", requires=("trace",), scope="trace")
def stragglers(ctx: RuleContext) -> list[Finding]:
    """Flag ranks well above the median rank's GPU time or idle share."""
    ranks = traced_ranks(ctx)
    if len(ranks) < 2 or (ctx.trace is not None and ctx.trace.mixed_jobs):
        return []  # ranks of different jobs are not comparable
    times = [r.temporal.kernel_time_us for r in ranks if r.temporal]
    idles = [r.temporal.idle_pct for r in ranks if r.temporal]
    median_time, median_idle = statistics.median(times), statistics.median(idles)
    findings = []
    for r in ranks:
        t = r.temporal
        assert t is not None
        slower = t.kernel_time_us / median_time if median_time else 1.0
        if slower < SLOWER and t.idle_pct - median_idle < IDLE_POINTS:
            continue
        findings.append(
            Finding(
                rule="stragglers",
                ranks=(r.rank,),
                severity=Severity.WARNING,
                title=f"Rank {r.rank}: behind the median rank",
                explanation=(
                    f"Rank {r.rank}'s GPU time is {slower:.2f}x the median rank's and its idle "
                    f"share {t.idle_pct:.1f}% (median {median_idle:.1f}%): the other ranks wait "
                    "for it at every collective."
                ),
                evidence=(
                    Evidence(
                        metric="kernel time / median", value=round(slower, 3), threshold=SLOWER
                    ),
                    Evidence(metric="idle share", value=t.idle_pct, unit="%"),
                    Evidence(metric="median idle share", value=median_idle, unit="%"),
                ),
                speedup=Speedup(
                    factor=max(1.0, slower), basis="every rank at the median rank's pace"
                ),
                fix=Fix(
                    summary="Compare this rank's data shard, GPU (clocks, temperature, "
                    "nvidia-smi) and network link with the others'."
                ),
            )
        )
    return findings
