"""The rank the others wait for (the least-wait logic), with its cause and what it costs the
job.

In synchronous data parallelism (DDP) every rank's gradient all-reduce ends when the last
rank joins it, so a rank that is late makes every other rank wait inside its all-reduces. The
rank that spends the *least* time in them is the one the others wait for (the same logic as
the trace rule ``stragglers``). Each rank's time in them is DDP's own measurement
(``probes/ddp.py``); the cause is the phase in which the straggler spends more time a step
than the other ranks do (its data wait, its computation, a callback, GC...), its clock, or
other processes on its host.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from stepdoctor.jobs.rows import RankRow
from stepdoctor.model import (
    STRAGGLER_CAUSE,
    STRAGGLER_LOST,
    Evidence,
    Finding,
    Fix,
    Severity,
    Speedup,
)
from stepdoctor.rules.competing_processes import WARNING_SHARE as COMPETING_SHARE

__all__ = [
    "CAUSE_SHARE",
    "COMPUTE_PHASES",
    "CONTENDED_SHARE",
    "CRITICAL_WAIT_SHARE",
    "MIN_CRITICAL_STEPS",
    "OTHERS_NOTED",
    "UNEXPLAINED_SHARE",
    "WAIT_SHARE",
    "job_findings",
]

#: The other ranks losing this share of their step waiting for one rank is worth naming: the
#: trace rule's threshold (comm-bound's TBP share: communication above 10% of the step).
WAIT_SHARE = 0.10
#: ...and critical from XProf's "highly" band for time spent waiting (input-bound's 20%)...
CRITICAL_WAIT_SHARE = 0.20
#: ...with at least this many steps per rank: a short run's waits are its start-up's.
MIN_CRITICAL_STEPS = 20
#: A phase names the cause when the straggler spends more time in it a step than the other
#: ranks' median by at least this share of the time they wait for it.
CAUSE_SHARE = 0.5
#: Phases that are the rank's computation: slower there while other processes take its host's
#: CPUs (competing-processes' warning share or more), by less than ``CRITICAL_WAIT_SHARE`` of
#: the step, the rank fell behind where they happened to take its cores, not for anything of
#: the job's: said as info (measured: two healthy ranks of tests/distributed/ddp_job.py beside
#: two busy processes on the 2 cores, one rank's backward 1.4x the other's, 16% of the step
#: lost). Beyond that the other processes single it out (a hog on its cores): graded as usual.
COMPUTE_PHASES = frozenset({"forward", "backward_compute", "optimizer"})
CONTENDED_SHARE = COMPETING_SHARE
#: Other processes using this share of the straggler's host are named beside a cause in its
#: computation (one on its cores slows it; with ``CONTENDED_SHARE`` or more it is info).
OTHERS_NOTED = 0.10
#: A wait no phase explains is named only from this share of the step: two healthy ranks of
#: tests/distributed/ddp_job.py on the 2-core reference machine came out 0-8% of the step
#: apart in their all-reduce times (DDP timing every iteration on the CPU; on a GPU it times
#: few, and the spread is wider).
UNEXPLAINED_SHARE = 0.20

#: Phases that can make one rank late, with what to look at (the job's own words).
_CAUSES: Mapping[str, tuple[str, str]] = {
    "data_wait": (
        "its data loading",
        "Its data loading is slower than the other ranks': look at its shard (larger or "
        "slower-to-read samples, data on slower storage) and its DataLoader (num_workers, "
        "prefetching); every rank should read alike.",
    ),
    "forward": (
        "its forward computation",
        "Its computation is slower than the other ranks': another process on its cores (pin "
        "each rank's threads to cores of its own), a slower device or clock, or larger "
        "batches on that rank (sequences padded longer).",
    ),
    "backward_compute": (
        "its backward computation",
        "Its computation is slower than the other ranks': another process on its cores (pin "
        "each rank's threads to cores of its own), a slower device or clock, or larger "
        "batches on that rank (sequences padded longer).",
    ),
    "optimizer": (
        "its optimizer step",
        "Its optimizer step is slower than the other ranks': state or work only it has "
        "(a rank-0-only scheduler or EMA), or a slower device.",
    ),
    "other": (
        "work between its phases",
        "It does work between steps the others do not (logging, metrics or progress bars on "
        "rank 0 alone): do it every N steps, or asynchronously, or on every rank alike.",
    ),
    "callbacks": (
        "its callbacks",
        "Its callbacks take longer than the other ranks' (logging or metrics on rank 0 "
        "alone): run them every N steps, or asynchronously.",
    ),
    "checkpoint": (
        "its checkpoints",
        "It saves checkpoints while the others wait: save asynchronously "
        "(torch.distributed.checkpoint.async_save) or less often.",
    ),
    "evaluation": (
        "its evaluation",
        "It evaluates while the others wait: evaluate on every rank (a shard each), or less often.",
    ),
    "gc": (
        "its garbage-collector pauses",
        "Its garbage collector pauses longer than the other ranks': gc.freeze() after "
        "start-up, fewer Python objects per step.",
    ),
}


def job_findings(rows: list[RankRow]) -> list[Finding]:
    """The straggler, by the least-wait logic, when the others lose ``WAIT_SHARE`` of their
    step waiting for it; none with fewer than two ranks with DDP's timings."""
    timed = [r for r in rows if r.comm_ms is not None and r.mean_step_ms]
    if len(timed) < 2:
        return []
    slow = min(timed, key=lambda r: (r.comm_ms or 0.0, r.rank))
    others = [r for r in timed if r is not slow]
    waited = statistics.median(r.comm_ms or 0.0 for r in others)
    step = statistics.median(r.mean_step_ms or 0.0 for r in others)
    gap = waited - (slow.comm_ms or 0.0)
    lost = gap / step if step else 0.0
    if lost < WAIT_SHARE:
        return []
    excess = {
        phase: slow.phase_ms.get(phase, 0.0)
        - statistics.median(r.phase_ms.get(phase, 0.0) for r in others)
        for phase in _CAUSES
    }
    phase, extra = max(excess.items(), key=lambda item: item[1])
    found = extra >= CAUSE_SHARE * gap
    clock = _clock_cause(slow, others, gap) if not found or phase in COMPUTE_PHASES else None
    if not found and clock is None and lost < UNEXPLAINED_SHARE:
        return []
    critical = lost >= CRITICAL_WAIT_SHARE and min(r.steps for r in timed) >= MIN_CRITICAL_STEPS
    contended = (
        clock is None
        and (not found or phase in COMPUTE_PHASES)
        and slow.others_cpu_share is not None
        and slow.others_cpu_share >= CONTENDED_SHARE
        and lost < CRITICAL_WAIT_SHARE
    )
    everyone = f"{len(others)} other ranks" if len(others) > 1 else "the other rank"
    # what made it late, as a word a tool can match (the job's JSON: ``straggler.cause``)
    kind = clock[2] if clock else phase if found else ""
    if clock is not None:
        cause, advice, _ = clock
    elif found:
        what, advice = _CAUSES[phase]
        cause = (
            f"{what}: {slow.phase_ms.get(phase, 0.0):.1f} ms a step against the others' "
            f"{slow.phase_ms.get(phase, 0.0) - extra:.1f} ms."
        )
    else:
        cause = (
            "none of its phases stands out (each is within half the wait of the others'): its "
            "whole step is slower, as when another process shares its cores or its clock is "
            "lower."
        )
        advice = (
            "Look at what runs beside this rank (processes on its cores, its CPU frequency) "
            "and pin each rank's threads to cores of its own."
        )
    return [
        Finding(
            rule="stragglers",
            ranks=(slow.rank,),
            severity=(
                Severity.INFO if contended else Severity.CRITICAL if critical else Severity.WARNING
            ),
            title=(f"Rank {slow.rank} holds back {everyone}: {lost:.0%} of each step lost waiting"),
            explanation=(
                "Every rank's gradient all-reduce ends when the last rank joins it. Rank "
                f"{slow.rank} spent {slow.comm_ms:.1f} ms a step in its all-reduces, the "
                f"others {waited:.1f} ms (median): they wait {gap:.1f} ms for it, {lost:.0%} "
                f"of their {step:.1f} ms step. Rank {slow.rank} is late because of {cause}"
                + _others_note(
                    slow,
                    contended=contended,
                    computing=clock is None and (not found or phase in COMPUTE_PHASES),
                )
            ),
            evidence=(
                Evidence(
                    metric="straggler's all-reduce time a step",
                    value=round(slow.comm_ms or 0.0, 2),
                    unit="ms",
                    source="DDP logging data",
                ),
                Evidence(
                    metric="other ranks' all-reduce time a step (median)",
                    value=round(waited, 2),
                    unit="ms",
                    source="DDP logging data",
                ),
                Evidence(
                    metric=STRAGGLER_LOST,
                    value=round(lost, 3),
                    unit="share",
                    threshold=WAIT_SHARE,
                    source="DDP logging data, steps",
                ),
                Evidence(
                    metric=STRAGGLER_CAUSE,
                    value=kind or "none stands out",
                    source="step phases, clocks",
                ),
                Evidence(
                    metric=f"straggler's {phase} a step beyond the others'",
                    value=round(extra, 2),
                    unit="ms",
                    threshold=round(CAUSE_SHARE * gap, 2),
                    source="step phases",
                ),
            ),
            speedup=Speedup(
                factor=1 / (1 - min(lost, 0.95)),
                basis=(
                    f"1 / (1 - {lost:.2f}): the others' wait for rank {slow.rank} gone (every "
                    "rank at the others' pace)"
                ),
            ),
            fix=Fix(summary=advice),
        )
    ]


def _others_note(slow: RankRow, *, contended: bool, computing: bool) -> str:
    """What other processes on the straggler's host did, where its computation is late."""
    share = slow.others_cpu_share
    if share is None or not computing or share < OTHERS_NOTED:
        return ""
    busiest = f" (the busiest: {slow.busiest_others})" if slow.busiest_others else ""
    if contended:
        return (
            f" Other processes used {share:.0%} of its host's CPUs meanwhile{busiest}: it fell "
            "behind where they took its cores (see the finding on other processes), not for "
            "anything of the job's."
        )
    return (
        f" Other processes used {share:.0%} of its host's CPUs meanwhile{busiest}: one that "
        "runs on its cores slows its computation."
    )


def _clock_cause(slow: RankRow, others: list[RankRow], gap: float) -> tuple[str, str, str] | None:
    """The straggler's lower clock as its cause, when its computation at the others' clock
    would save at least ``CAUSE_SHARE`` of the wait: its GPU's SM clock (a share of its
    maximum over its busy readings, with the throttling reasons NVML gave), else its host's
    CPU clock against other hosts'. (the cause, its advice, ``gpu_clock`` or ``cpu_clock``)"""
    compute = sum(slow.phase_ms.get(p, 0.0) for p in COMPUTE_PHASES)
    theirs = [r.gpu_clock for r in others if r.gpu_clock]
    if (
        slow.gpu_clock
        and theirs
        and compute * (statistics.median(theirs) / slow.gpu_clock - 1) >= CAUSE_SHARE * gap
    ):
        why = f" ({', '.join(slow.gpu_throttled)})" if slow.gpu_throttled else ""
        return (
            f"its GPU's clock: {slow.gpu_clock:.0%} of its maximum against the others' "
            f"{statistics.median(theirs):.0%}{why}.",
            "Its GPU runs slower than the others': look at its power limit and cooling "
            "(nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE); a node whose GPUs throttle "
            "holds back the whole job, so fix or drain it.",
            "gpu_clock",
        )
    # ranks on one host share its CPUs' clock: only other hosts' compare
    mhz = [r.cpu_mhz for r in others if r.cpu_mhz and r.host != slow.host]
    if (
        slow.cpu_mhz
        and mhz
        and compute * (statistics.median(mhz) / slow.cpu_mhz - 1) >= CAUSE_SHARE * gap
    ):
        return (
            f"its host's CPU clock: {slow.cpu_mhz:.0f} MHz against the others' "
            f"{statistics.median(mhz):.0f} MHz.",
            "Its host's CPUs run at a lower clock than the others': look at its frequency "
            "governor (cpupower frequency-info), power limits and cooling.",
            "cpu_clock",
        )
    return None
