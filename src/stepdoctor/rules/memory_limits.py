"""memory-limits: the job is close to its memory limit, the machine swaps, /dev/shm is
too small for DataLoader workers, or its GPU's memory is nearly full or fragmented.

Detects: the job's peak RSS (process tree) against the memory it may use (the cgroup limit,
else RAM); at start (the doctor) little memory available; swap in use; /dev/shm smaller than
DataLoader workers need (Docker's 64 MiB default); a PyTorch job's GPU memory in use (NVML,
during its steps) near the GPU's total; torch's caching allocator freeing its cache to retry
an allocation (``num_alloc_retries``: fragmentation).
Evidence: RSS, limit, available memory, swap, /dev/shm size, workers; GPU memory used and
total; the allocator's retries, peak reserved and allocated bytes, PYTORCH_CUDA_ALLOC_CONF.
Fix: smaller batches or a larger limit; stop swapping; ``--shm-size``/``--ipc=host``; on the
GPU smaller batches, bf16, activation checkpointing, ``expandable_segments:True``.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, RunRecord, Severity, Speedup
from stepdoctor.rules._facts import fact_int, gpu_job
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
    if gpu_job(record):
        full = _gpu_full(ctx)
        if full is not None:
            findings.append(full)
        retries = fact_int(record, "cuda.alloc_retries")
        if retries:
            findings.append(_fragmented(record, retries))
    return findings


def _gpu_full(ctx: RuleContext) -> Finding | None:
    """The most of a GPU's memory in use at a reading during the steps, where the job's
    processes are on it, against its total (NVML counts torch's cached blocks as in use:
    what the job holds and keeps)."""
    start, end = (ctx.steps[0].start_ns, ctx.steps[-1].end_ns) if ctx.steps else (0, 2**63)
    worst: tuple[float, int, int, int] | None = None
    for s in ctx.record.gpu:
        if not (start <= s.t_ns <= end) or not any(p.is_job for p in s.processes):
            continue
        if s.mem_used_bytes is None or not s.mem_total_bytes:
            continue
        share = s.mem_used_bytes / s.mem_total_bytes
        if worst is None or share > worst[0]:
            worst = (share, s.index, s.mem_used_bytes, s.mem_total_bytes)
    if worst is None:
        return None
    share, index, used, total = worst
    rung = grade(share, warning=RSS_WARNING, critical=RSS_CRITICAL)
    if rung is None:
        return None
    return Finding(
        rule="memory-limits",
        severity=rung.severity,
        title=f"GPU {index}'s memory {share:.0%} full",
        explanation=(
            f"During the steps GPU {index} had {used / 2**30:.1f} of its {total / 2**30:.1f} GiB "
            "in use (torch's cache included): a longer batch, a checkpoint's buffers or "
            "fragmentation can run it out of memory."
        ),
        evidence=(
            Evidence(
                metric="GPU memory in use, peak",
                value=round(share, 4),
                unit="share",
                threshold=rung.threshold,
                source="NVML",
            ),
            Evidence(metric="GPU memory total", value=round(total / 2**30, 1), unit="GiB"),
        ),
        speedup=_NO_SPEEDUP,
        fix=Fix(
            summary="Smaller batches (with gradient accumulation to keep the effective "
            "batch), bf16 autocast, activation checkpointing; "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.",
            snippet="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True stepdoctor run train.py",
        ),
    )


def _fragmented(record: RunRecord, retries: int) -> Finding:
    """torch's caching allocator found no cached block for a request, freed its cache and
    retried: each retry synchronises the GPU (PyTorch's CUDA semantics notes, memory
    management)."""
    conf = record.env_value("env.PYTORCH_CUDA_ALLOC_CONF")
    reserved = fact_int(record, "cuda.peak_reserved_bytes")
    allocated = fact_int(record, "cuda.peak_allocated_bytes")
    evidence = [
        Evidence(
            metric="allocation retries (cache freed)",
            value=retries,
            source="torch.cuda.memory_stats()",
        ),
        Evidence(metric="PYTORCH_CUDA_ALLOC_CONF", value=conf, source="environment"),
    ]
    if reserved and allocated:
        evidence.append(
            Evidence(
                metric="peak reserved / peak allocated",
                value=f"{reserved / 2**30:.1f} / {allocated / 2**30:.1f}",
                unit="GiB",
                source="torch.cuda.memory_stats()",
            )
        )
    expandable = isinstance(conf, str) and "expandable_segments:True" in conf
    return Finding(
        rule="memory-limits",
        severity=Severity.WARNING,
        title=f"The GPU's memory is fragmented: {retries} allocation retries",
        explanation=(
            f"torch's caching allocator found no free block of the right size {retries} "
            "time(s), freed its whole cache and asked the driver again; each retry "
            "synchronises the GPU, and the next may end in an out-of-memory error."
        ),
        evidence=tuple(evidence),
        speedup=Speedup.none("not estimated: each retry's cost was not timed"),
        fix=Fix(
            summary=(
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow instead "
                "of fragmenting), or lower the batch size."
                if not expandable
                else "Expandable segments are on already: lower the batch size, or keep "
                "tensor sizes the same from step to step."
            ),
            snippet="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True stepdoctor run train.py",
        ),
    )


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
