"""gpu-idle: the GPU sits idle for a large share of the traced steps.

Detects: the temporal breakdown's idle share per rank (time with no kernel, copy or sync on
any stream), and attributes it with the per-stream idle breakdown: mostly waiting for the
host's launches (CPU- or launch-bound), or for synchronisations.
Evidence: idle µs and share, host-wait vs kernel-wait vs other idle, host sync time.
Fix: by the attribution: feed the GPU faster (input pipeline, fewer Python ops between
kernels, CUDA graphs / torch.compile), or remove synchronisations.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, RankTrace
from stepdoctor.rules._severity import grade
from stepdoctor.rules._traces import share_of_kernel_time, traced_ranks
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = ["CRITICAL_IDLE", "WARNING_IDLE", "gpu_idle"]

#: XProf grades device idle like input-bound: from 20% of step time the device is clearly
#: starved, from 50% it does less than half the work it could.
WARNING_IDLE = 0.20
CRITICAL_IDLE = 0.50


@rule(id="gpu-idle", title="The GPU waits idle", requires=("trace",), scope="trace")
def gpu_idle(ctx: RuleContext) -> list[Finding]:
    """Flag ranks whose GPU is idle for 20% of the kernel time or more."""
    return [f for r in traced_ranks(ctx) if (f := _rank(r)) is not None]


def _rank(r: RankTrace) -> Finding | None:
    t = r.temporal
    if t is None:
        return None
    share = t.idle_pct / 100
    rung = grade(share, warning=WARNING_IDLE, critical=CRITICAL_IDLE)
    if rung is None:
        return None
    host = sum(s.host_wait_us for s in r.idle_by_stream)
    kernel = sum(s.kernel_wait_us for s in r.idle_by_stream)
    other = sum(s.other_us for s in r.idle_by_stream)
    sync = share_of_kernel_time(r, r.sync_host_us)
    if sync >= 0.5 * t.idle_pct / 100:
        cause = "the host blocks in device synchronisations (see the finding on them)"
        fix = "Remove torch.cuda.synchronize(), .item() and .cpu() from the step."
    elif host >= max(kernel, other):
        cause = (
            "kernels are launched late: the host (Python, the input pipeline) cannot keep "
            "the GPU fed"
        )
        fix = (
            "Make the host side cheaper: DataLoader workers with pin_memory, fewer small ops "
            "between kernels, CUDA graphs or torch.compile to batch launches, larger batches."
        )
    else:
        cause = "gaps between kernels that were already queued (dependencies, other streams)"
        fix = "Overlap independent work on streams; check the timeline around the gaps."
    return Finding(
        rule="gpu-idle",
        ranks=(r.rank,),
        severity=rung.severity,
        title=f"Rank {r.rank}: the GPU is idle {t.idle_pct:.0f}% of the time",
        explanation=(
            f"For {t.idle_us:,} of {t.kernel_time_us:,} µs no GPU work ran; mostly {cause}."
        ),
        evidence=(
            Evidence(
                metric="idle share of GPU time",
                value=round(share, 4),
                unit="share",
                threshold=rung.threshold,
                source="temporal breakdown (HTA's definition)",
            ),
            Evidence(metric="idle waiting for the host", value=host, unit="µs"),
            Evidence(metric="idle between queued kernels", value=kernel, unit="µs"),
            Evidence(metric="other idle", value=other, unit="µs"),
            Evidence(metric="host time in synchronisations", value=r.sync_host_us, unit="µs"),
        ),
        speedup=removal_speedup(
            share,
            "all idle time removed (an upper bound)",
        ),
        fix=Fix(summary=fix),
    )
