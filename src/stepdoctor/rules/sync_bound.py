"""sync-bound: the host blocks in device synchronisations.

Detects: host time inside cudaDeviceSynchronize / cudaStreamSynchronize /
cudaEventSynchronize calls (``.item()``, ``.cpu()`` and ``torch.cuda.synchronize()`` end up
there) over the rank's GPU kernel time.
Evidence: that time and share.
Fix: read values from the GPU every N steps, not every step; remove explicit synchronize calls.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix
from stepdoctor.rules._severity import grade
from stepdoctor.rules._traces import share_of_kernel_time, traced_ranks
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = ["CRITICAL_SHARE", "WARNING_SHARE", "sync_bound"]

#: The same bands as cpu-fallback-ops' device-to-host reads (XProf's 5% / 20%).
WARNING_SHARE = 0.05
CRITICAL_SHARE = 0.20


@rule(id="sync-bound", title="The host waits on the GPU", requires=("trace",), scope="trace")
def sync_bound(ctx: RuleContext) -> list[Finding]:
    """Flag ranks whose host spends 5% of the GPU time or more in synchronise calls."""
    findings = []
    for r in traced_ranks(ctx):
        share = share_of_kernel_time(r, r.sync_host_us)
        rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
        if rung is None:
            continue
        findings.append(
            Finding(
                rule="sync-bound",
                ranks=(r.rank,),
                severity=rung.severity,
                title=f"Rank {r.rank}: the host waits in synchronisations {share:.0%} of the time",
                explanation=(
                    f"{r.sync_host_us:,} µs in cuda*Synchronize calls: while the host waits, no "
                    "new work is queued, so the GPU drains and idles after each one."
                ),
                evidence=(
                    Evidence(
                        metric="host sync time over GPU time",
                        value=round(share, 4),
                        unit="share",
                        threshold=rung.threshold,
                        source="cuda_runtime events",
                    ),
                ),
                speedup=removal_speedup(
                    share,
                    "all synchronisation waits removed (an upper bound)",
                ),
                fix=Fix(
                    summary="Accumulate metrics on the GPU and read them every N steps; drop "
                    "torch.cuda.synchronize() outside of timing code."
                ),
            )
        )
    return findings
