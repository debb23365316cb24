"""hot-kernel: one kernel dominates the GPU's time (the TensorFlow article's inefficient op).

Detects: the largest kernel's share of the rank's summed kernel and memory time.
Evidence: its name, type, time and share.
Fix: look at that op first: a better algorithm (cudnn.benchmark), layout (channels_last),
precision (AMP) or a fused implementation.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Speedup
from stepdoctor.rules._severity import grade
from stepdoctor.rules._traces import traced_ranks
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["HOT_SHARE", "WARNING_SHARE", "hot_kernel"]

#: One name with a third of the GPU time is worth a look (info); half of it is where the
#: time goes (warning). Communication kernels are comm-bound's business.
HOT_SHARE = 33.0
WARNING_SHARE = 50.0


@rule(id="hot-kernel", title="One kernel dominates GPU time", requires=("trace",), scope="trace")
def hot_kernel(ctx: RuleContext) -> list[Finding]:
    """Flag the top compute kernel of each rank at a third of the GPU time or more."""
    findings = []
    for r in traced_ranks(ctx):
        top = next((k for k in r.kernels if k.kernel_type == "COMPUTATION"), None)
        if top is None:
            continue
        rung = grade(top.share_pct, info=HOT_SHARE, warning=WARNING_SHARE)
        if rung is None:
            continue
        findings.append(
            Finding(
                rule="hot-kernel",
                ranks=(r.rank,),
                severity=rung.severity,
                title=f"Rank {r.rank}: one kernel takes {top.share_pct:.0f}% of GPU time",
                explanation=(
                    f"{top.name} ran {top.count:,} times for {top.sum_us:,} µs, "
                    f"{top.share_pct:.1f}% of the rank's kernel time."
                ),
                evidence=(
                    Evidence(metric="kernel", value=top.name[:200], source="trace"),
                    Evidence(
                        metric="share of kernel time",
                        value=top.share_pct,
                        unit="%",
                        threshold=HOT_SHARE,
                    ),
                ),
                speedup=Speedup.none("not estimated: depends on the op's fix"),
                fix=Fix(
                    summary="Start with this op: try torch.backends.cudnn.benchmark, "
                    "channels_last memory format, mixed precision, or a fused implementation."
                ),
            )
        )
    return findings
