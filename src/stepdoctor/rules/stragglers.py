"""stragglers: the rank the others wait for, found by who waits least in collectives.

In synchronous data-parallel training a collective ends on every rank when the last rank
arrives, and NCCL's kernels (``ncclKernel_*``, ``ncclDevKernel_*`` since NCCL 2.19) run, and
count as GPU time, while they wait for it. The slow rank is therefore the one that spends the
*least* time in communication kernels: comparing ranks' total kernel time, which includes that
waiting, points at the ranks that wait most (measured on the 8-rank DLRM trace in
``shared/traces``: ranks 1 and 3 had the most GPU time, 18.8 ms against a median of 14.9 ms,
all of the excess in communication kernels, while rank 7 spent 1.7 ms in them against the
others' 6.3 ms: the others were waiting for rank 7).

Detects: with two ranks or more, the rank with the least communication time, when the others'
median communication time exceeds it by ``WAIT_SHARE`` of their GPU time or more.
Evidence: the straggler's and the others' communication time, the share lost, its computation
against theirs, its idle share.
Cause: its GPU computes longer than the others' (a slower or throttled GPU, more work on that
rank), or not (the rank's host side is late: data loading, CPU contention, Python or GC
between launches).
Fix: for the cause found.
"""

from __future__ import annotations

import statistics

from stepdoctor.model import Evidence, Finding, Fix, RankTrace, Severity, Speedup
from stepdoctor.rules._traces import traced_ranks
from stepdoctor.rules.comm_bound import COMM_SHARE
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["COMPUTE_SLOWER", "WAIT_SHARE", "comm_us", "stragglers"]

#: Time the other ranks lose waiting for the straggler, as a share of their GPU time, that is
#: worth naming: comm-bound's threshold (TBP: communication above 10% of the step matters),
#: here for the part of the communication that is waiting for one rank.
WAIT_SHARE = COMM_SHARE
#: The straggler's computation (union of its compute kernels) this much above the others'
#: median is its GPU being slower or given more work; below it, the GPU did the same work and
#: the rank was late to launch it (the host side).
COMPUTE_SLOWER = 1.10


def comm_us(rank: RankTrace) -> int:
    """The rank's time in communication kernels (``ncclKernel_*``, ``ncclDevKernel_*``)."""
    return dict(rank.type_us).get("COMMUNICATION", 0)


@rule(id="stragglers", title="Some ranks lag the others", requires=("trace",), scope="trace")
def stragglers(ctx: RuleContext) -> list[Finding]:
    """Name the rank that waits least in collectives while the others wait for it."""
    ranks = traced_ranks(ctx)
    if len(ranks) < 2 or (ctx.trace is not None and ctx.trace.mixed_jobs):
        return []  # ranks of different jobs are not comparable
    if not any(comm_us(r) for r in ranks):
        return []  # no collectives: nothing makes one rank wait for another
    slow = min(ranks, key=lambda r: (comm_us(r), r.rank))
    others = [r for r in ranks if r is not slow]
    waited = statistics.median(comm_us(r) for r in others)
    gpu_time = statistics.median(r.temporal.kernel_time_us for r in others if r.temporal)
    lost = (waited - comm_us(slow)) / gpu_time if gpu_time else 0.0
    if lost < WAIT_SHARE:
        return []
    assert slow.temporal is not None
    compute = slow.temporal.compute_us
    their_compute = statistics.median(r.temporal.compute_us for r in others if r.temporal)
    ratio = compute / their_compute if their_compute else 1.0
    gpu_bound = ratio >= COMPUTE_SLOWER
    everyone = f"{len(others)} other ranks" if len(others) > 1 else "the other rank"
    if gpu_bound:
        cause = (
            f"its GPU computes for {ratio:.2f}x as long as the others' median: a slower or "
            "throttled GPU, or more work on that rank."
        )
        fix = Fix(
            summary=(
                f"Rank {slow.rank}'s GPU does its work slower or has more of it. Check its "
                "clocks, temperature and power limit against the other GPUs' "
                "(nvidia-smi -q -d CLOCK,TEMPERATURE,POWER), and whether its data shard holds "
                "larger samples (longer sequences padded, bigger images): balance the shards "
                "or bucket samples by size."
            ),
            snippet="nvidia-smi -q -d CLOCK,TEMPERATURE,POWER,PERFORMANCE",
        )
    else:
        cause = (
            f"its GPU computed no longer than the others' ({ratio:.2f}x) and sat idle "
            f"{slow.temporal.idle_pct:.0f}% of the time: the rank was late to launch its work, "
            "so its host side is slow (data loading, CPU contention, Python or GC between "
            "launches)."
        )
        fix = Fix(
            summary=(
                f"Look at rank {slow.rank}'s process rather than its GPU: its data loading "
                "(its shard, its DataLoader workers), other processes on its CPUs, and its "
                "Python between steps."
            ),
        )
    return [
        Finding(
            rule="stragglers",
            ranks=(slow.rank,),
            severity=Severity.WARNING,
            title=(
                f"Rank {slow.rank} holds back {everyone}: {lost:.0%} of their GPU time lost waiting"
            ),
            explanation=(
                f"In collectives every rank waits for the last one, inside the communication "
                f"kernels. Rank {slow.rank} spent {comm_us(slow) / 1000:.1f} ms in them, the "
                f"others {waited / 1000:.1f} ms (median): they wait for rank {slow.rank}, "
                f"{lost:.0%} of their GPU time. The cause is on rank {slow.rank}: {cause}"
            ),
            evidence=(
                Evidence(
                    metric="straggler's time in communication kernels",
                    value=round(comm_us(slow) / 1000, 2),
                    unit="ms",
                    source="trace (NCCL kernels)",
                ),
                Evidence(
                    metric="other ranks' time in communication kernels (median)",
                    value=round(waited / 1000, 2),
                    unit="ms",
                    source="trace (NCCL kernels)",
                ),
                Evidence(
                    metric="other ranks' GPU time lost waiting",
                    value=round(lost, 3),
                    unit="share",
                    threshold=WAIT_SHARE,
                    source="trace",
                ),
                Evidence(
                    metric="straggler's computation / the others' median",
                    value=round(ratio, 3),
                    threshold=COMPUTE_SLOWER,
                    source="trace (compute kernels)",
                ),
                Evidence(
                    metric="straggler's GPU idle share",
                    value=slow.temporal.idle_pct,
                    unit="%",
                    source="trace",
                ),
            ),
            speedup=Speedup(
                factor=1 / (1 - min(lost, 0.95)),
                basis=(
                    f"1 / (1 - {lost:.2f}): the others' wait for rank {slow.rank} gone "
                    "(every rank at the others' pace)"
                ),
            ),
            fix=fix,
        )
    ]
