"""memory-limits: the job is close to its memory limit, the machine swaps, or /dev/shm is
too small for DataLoader workers.

Detects: the job's peak RSS (process tree) against the memory it may use (the cgroup limit,
else RAM); at start (the doctor) little memory available; swap in use; /dev/shm smaller than
DataLoader workers need (Docker's 64 MiB default).
Evidence: RSS, limit, available memory, swap, /dev/shm size, workers.
Fix: smaller batches or a larger limit; stop swapping; ``--shm-size``/``--ipc=host``.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, RunRecord, Severity, Speedup
from stepdoctor.rules._facts import fact_int
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "AVAILABLE_MIN_SHARE",
    "RSS_CRITICAL",
    "RSS_WARNING",
    "SHM_MIN_BYTES",
    "SWAP_USED_BYTES",
    "memory_limits",
]

#: Share of the limit the job's RSS may reach. The kernel's OOM killer ends the job at the
#: limit; past 90% one spike (a checkpoint's buffers, a longer batch) does it.
RSS_WARNING = 0.75
RSS_CRITICAL = 0.90
#: At start, less than a tenth of the memory available leaves the job to swap or be killed.
AVAILABLE_MIN_SHARE = 0.10
#: Swap in use above this means the machine is paging (a little swap is often stale pages).
SWAP_USED_BYTES = 256 * 2**20
#: DataLoader workers hand batches over in shared memory (/dev/shm); Docker's default is
#: 64 MiB and PyTorch's own Docker notes ask for --ipc=host or a larger --shm-size. Below
#: 512 MiB a few workers with image batches fail with "bus error" or "insufficient shared
#: memory".
SHM_MIN_BYTES = 512 * 2**20

_MIB = 2**20
_NO_SPEEDUP = Speedup.none("no speed-up: fixing it prevents a crash or swapping, not a slowdown")


@rule(
    id="memory-limits",
    title="Memory, swap or /dev/shm near their limits",
    requires=("env",),
    scope="env",
)
def memory_limits(ctx: RuleContext) -> list[Finding]:
    """Flag RSS near the limit, swapping, and /dev/shm too small for loader workers."""
    record = ctx.record
    findings = []
    rss = _rss(ctx)
    if rss is not None:
        finding = _near_limit(record, rss)
        if finding:
            findings.append(finding)
    else:
        finding = _little_available(record)
        if finding:
            findings.append(finding)
    swap = fact_int(record, "mem.swap_used_bytes")
    if swap is not None and swap >= SWAP_USED_BYTES:
        findings.append(_swapping(swap))
    shm = fact_int(record, "shm.total_bytes")
    workers = max((lo.num_workers for lo in record.loaders), default=0)
    if shm is not None and shm < SHM_MIN_BYTES and (workers > 0 or not record.loaders):
        findings.append(_small_shm(shm, workers, known=bool(record.loaders)))
    return findings


def _limit(record: RunRecord) -> tuple[int | None, str]:
    cgroup = fact_int(record, "mem.cgroup_limit_bytes")
    total = fact_int(record, "mem.total_bytes") or record.meta.total_memory_bytes
    if cgroup and (not total or cgroup < total):
        return cgroup, "cgroup memory limit"
    return total, "RAM"


def _rss(ctx: RuleContext) -> int | None:
    values = [s.job_rss_bytes for s in ctx.record.system if s.job_rss_bytes is not None]
    return max(values) if values and ctx.record.steps else None


def _near_limit(record: RunRecord, rss: int) -> Finding | None:
    limit, what = _limit(record)
    if not limit:
        return None
    share = rss / limit
    rung = grade(share, warning=RSS_WARNING, critical=RSS_CRITICAL)
    if rung is None:
        return None
    return Finding(
        rule="memory-limits",
        severity=rung.severity,
        title=f"The job uses {share:.0%} of its memory limit",
        explanation=(
            f"The job's processes reached {rss / _MIB:,.0f} MiB of the {limit / _MIB:,.0f} MiB "
            f"{what}. At the limit the kernel kills the job (or it swaps)."
        ),
        evidence=(
            Evidence(metric="peak RSS (process tree)", value=rss // _MIB, unit="MiB"),
            Evidence(metric=what, value=limit // _MIB, unit="MiB"),
            Evidence(
                metric="share of the limit",
                value=round(share, 3),
                unit="share",
                threshold=rung.threshold,
            ),
        ),
        speedup=_NO_SPEEDUP,
        fix=Fix(
            summary="Lower the batch size or DataLoader prefetching (prefetch_factor, "
            "workers), free cached data sets, or raise the memory limit."
        ),
    )


def _little_available(record: RunRecord) -> Finding | None:
    limit, what = _limit(record)
    available = fact_int(record, "mem.available_bytes")
    if not limit or available is None or available / limit >= AVAILABLE_MIN_SHARE:
        return None
    return Finding(
        rule="memory-limits",
        severity=Severity.WARNING,
        title=f"Only {available / _MIB:,.0f} MiB of memory available",
        explanation=(
            f"Only {available / limit:.0%} of the {limit / _MIB:,.0f} MiB {what} is available: "
            "a training job started now will swap or be killed."
        ),
        evidence=(
            Evidence(metric="available memory", value=available // _MIB, unit="MiB"),
            Evidence(metric=what, value=limit // _MIB, unit="MiB"),
            Evidence(
                metric="share available",
                value=round(available / limit, 3),
                unit="share",
                threshold=AVAILABLE_MIN_SHARE,
            ),
        ),
        speedup=_NO_SPEEDUP,
        fix=Fix(summary="Stop what holds the memory (see the competing processes) first."),
    )


def _swapping(swap: int) -> Finding:
    return Finding(
        rule="memory-limits",
        severity=Severity.WARNING,
        title=f"{swap / _MIB:,.0f} MiB of swap in use",
        explanation=(
            "Pages of running processes are on disk: whenever the job touches one it waits "
            "for the disk, and its step times become erratic."
        ),
        evidence=(
            Evidence(
                metric="swap used",
                value=swap // _MIB,
                unit="MiB",
                threshold=SWAP_USED_BYTES // _MIB,
                source="psutil.swap_memory()",
            ),
        ),
        speedup=Speedup.none("not estimated: depends on what is paged out"),
        fix=Fix(summary="Free memory (smaller batches, fewer workers, stop other jobs)."),
    )


def _small_shm(shm: int, workers: int, *, known: bool) -> Finding:
    if known:
        severity = Severity.CRITICAL
        who = f"The job's DataLoader uses {workers} worker(s)"
    else:
        severity = Severity.WARNING
        who = "DataLoader workers (num_workers > 0)"
    return Finding(
        rule="memory-limits",
        severity=severity,
        title=f"/dev/shm is only {shm / _MIB:,.0f} MiB",
        explanation=(
            f"{who} pass every batch through shared memory in /dev/shm; at "
            f"{shm / _MIB:,.0f} MiB they fail with 'bus error' or 'insufficient shared "
            "memory' as soon as a few batches are in flight (Docker's default is 64 MiB)."
        ),
        evidence=(
            Evidence(
                metric="/dev/shm size",
                value=shm // _MIB,
                unit="MiB",
                threshold=SHM_MIN_BYTES // _MIB,
                source="statvfs",
            ),
            Evidence(metric="DataLoader workers", value=workers if known else "unknown"),
        ),
        speedup=_NO_SPEEDUP,
        fix=Fix(
            summary="Start the container with --ipc=host or --shm-size=8g (Kubernetes: an "
            "emptyDir with medium: Memory mounted at /dev/shm).",
            snippet="docker run --ipc=host ...",
        ),
    )
