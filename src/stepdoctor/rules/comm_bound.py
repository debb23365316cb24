"""comm-bound: communication takes a large share of the step and computation does not hide it.

Detects: NCCL kernels' summed time over the rank's GPU time, with the share of it overlapped
by computation (HTA's comm/comp overlap).
Evidence: communication share, overlap.
Fix: overlap (bucketed gradients, DDP's bucket_cap_mb, no_sync for accumulation), fewer or
larger all-reduces, gradient compression.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity
from stepdoctor.rules._traces import share_of_kernel_time, traced_ranks
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = ["COMM_SHARE", "POOR_OVERLAP", "comm_bound"]

#: TBP's threshold: communication above 10% of the step matters...
COMM_SHARE = 0.10
#: ...when less than half of it is hidden behind computation.
POOR_OVERLAP = 50.0


@rule(id="comm-bound", title="Communication is not hidden", requires=("trace",), scope="trace")
def comm_bound(ctx: RuleContext) -> list[Finding]:
    """Flag ranks with > 10% communication that is less than half overlapped."""
    findings = []
    for r in traced_ranks(ctx):
        comm = dict(r.type_us).get("COMMUNICATION", 0)
        share = share_of_kernel_time(r, comm)
        overlap = r.comm_comp_overlap_pct
        if share <= COMM_SHARE or overlap is None or overlap >= POOR_OVERLAP:
            continue
        exposed = share * (1 - overlap / 100)
        findings.append(
            Finding(
                rule="comm-bound",
                ranks=(r.rank,),
                severity=Severity.WARNING,
                title=f"Rank {r.rank}: communication is {share:.0%} of GPU time, "
                f"{overlap:.0f}% hidden",
                explanation=(
                    f"NCCL kernels ran {comm:,} µs and computation overlapped only "
                    f"{overlap:.1f}% of it: the rest stalls the step."
                ),
                evidence=(
                    Evidence(
                        metric="communication share of GPU time",
                        value=round(share, 4),
                        unit="share",
                        threshold=COMM_SHARE,
                        source="kernel types",
                    ),
                    Evidence(
                        metric="overlapped by computation",
                        value=overlap,
                        unit="%",
                        threshold=POOR_OVERLAP,
                        source="comm/comp overlap (HTA)",
                    ),
                ),
                speedup=removal_speedup(
                    exposed,
                    "the exposed (not overlapped) communication hidden",
                ),
                fix=Fix(
                    summary="Let gradients all-reduce while backward runs (DDP buckets: tune "
                    "bucket_cap_mb), skip all-reduce during accumulation (no_sync), or reduce "
                    "less often / in lower precision."
                ),
            )
        )
    return findings
