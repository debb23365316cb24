"""h2d-bound: memory copies (host-to-device, device-to-host, memset) take a large share of the
GPU's time.

Detects: the MEMORY kernel type's summed time over the rank's GPU kernel time.
Evidence: that share, the memcpy/memset names on top.
Fix: pinned memory with non_blocking copies, fewer and larger transfers, keep data on the GPU.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix
from stepdoctor.rules._severity import grade
from stepdoctor.rules._traces import share_of_kernel_time, traced_ranks
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = ["CRITICAL_SHARE", "WARNING_SHARE", "h2d_bound"]

#: fournex's transfer thresholds: 15% of the step in copies is a warning, 30% critical.
WARNING_SHARE = 0.15
CRITICAL_SHARE = 0.30


@rule(id="h2d-bound", title="Memory copies take the GPU's time", requires=("trace",), scope="trace")
def h2d_bound(ctx: RuleContext) -> list[Finding]:
    """Flag ranks whose memcpy/memset time is 15% of the kernel time or more."""
    findings = []
    for r in traced_ranks(ctx):
        total = r.temporal.kernel_time_us if r.temporal else 0
        memory = dict(r.type_us).get("MEMORY", 0)
        share = share_of_kernel_time(r, memory)
        rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
        if rung is None:
            continue
        copies = [k for k in r.kernels if k.kernel_type == "MEMORY"][:3]
        findings.append(
            Finding(
                rule="h2d-bound",
                ranks=(r.rank,),
                severity=rung.severity,
                title=f"Rank {r.rank}: copies take {share:.0%} of GPU time",
                explanation=(
                    f"{memory:,} µs of memory copies and sets against {total:,} µs of GPU "
                    "time: " + ", ".join(f"{k.name} {k.sum_us:,} µs" for k in copies) + "."
                ),
                evidence=(
                    Evidence(
                        metric="memcpy/memset share of GPU time",
                        value=round(share, 4),
                        unit="share",
                        threshold=rung.threshold,
                        source="kernel types (HTA)",
                    ),
                ),
                speedup=removal_speedup(
                    share,
                    "all copy time overlapped with compute (an upper bound)",
                ),
                fix=Fix(
                    summary="Use DataLoader(pin_memory=True) and x.to(device, non_blocking=True); "
                    "move data once, not every step; avoid .cpu()/.numpy() round trips.",
                    snippet="x = x.to('cuda', non_blocking=True)",
                ),
            )
        )
    return findings
