"""launch-bound: kernels are so short that launching them costs more than running them.

Detects: launch calls' summed CPU time at least the GPU time of what they launched, with
most kernels "short" (HTA: cpu_duration <= 50 µs and gpu_duration < cpu_duration).
Evidence: launches, short kernels, CPU vs GPU time, HTA's runtime (> 50 µs) and launch-delay
(> 100 µs) outliers.
Fix: larger batches, CUDA graphs, torch.compile (fewer, fused kernels).
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules._traces import traced_ranks
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["SHORT_SHARE", "launch_bound"]

#: Half the kernels short (HTA's definition) and launch time >= kernel time: the GPU mostly
#: waits for launches.
SHORT_SHARE = 0.5


@rule(
    id="launch-bound",
    title="Kernel launches cost more than kernels",
    requires=("trace",),
    scope="trace",
)
def launch_bound(ctx: RuleContext) -> list[Finding]:
    """Flag ranks where launching kernels costs at least as much as running them."""
    findings = []
    for r in traced_ranks(ctx):
        stats = r.launch
        if stats is None or not stats.launches:
            continue
        short = stats.short_kernels / stats.launches
        if short < SHORT_SHARE or r.launch_cpu_us < r.launch_gpu_us:
            continue
        findings.append(
            Finding(
                rule="launch-bound",
                ranks=(r.rank,),
                severity=Severity.WARNING,
                title=f"Rank {r.rank}: {short:.0%} of kernels are shorter than their launch",
                explanation=(
                    f"{stats.launches:,} launches took {r.launch_cpu_us:,} µs of CPU for "
                    f"{r.launch_gpu_us:,} µs of GPU work: the host's launch overhead, not the "
                    "GPU, sets the pace."
                ),
                evidence=(
                    Evidence(
                        metric="short kernels",
                        value=round(short, 3),
                        unit="share",
                        threshold=SHORT_SHARE,
                        source="HTA launch statistics",
                    ),
                    Evidence(metric="launch CPU time", value=r.launch_cpu_us, unit="µs"),
                    Evidence(metric="launched GPU time", value=r.launch_gpu_us, unit="µs"),
                    Evidence(metric="runtime outliers (> 50 µs)", value=stats.runtime_outliers),
                    Evidence(metric="launch-delay outliers (> 100 µs)", value=stats.delay_outliers),
                ),
                speedup=Speedup.none("not estimated: depends on how many launches fuse away"),
                fix=Fix(
                    summary="Give each kernel more work (larger batches), fuse kernels with "
                    "torch.compile, or capture the step in a CUDA graph.",
                    snippet="model = torch.compile(model, mode='reduce-overhead')",
                ),
            )
        )
    return findings
