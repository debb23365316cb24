"""What profiler-trace analysis produces, per rank (Holistic Trace Analysis's numbers)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "KernelStat",
    "LaunchStats",
    "RankTrace",
    "StreamIdle",
    "TemporalBreakdown",
    "TraceSummary",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TemporalBreakdown:
    """GPU time of a rank split into idle, compute and non-compute (µs; % of kernel time)."""

    kernel_time_us: int
    idle_us: int
    compute_us: int
    non_compute_us: int
    idle_pct: float
    compute_pct: float
    non_compute_pct: float


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelStat:
    """The summed durations of one kernel (or memcpy/memset) name on a rank."""

    name: str
    kernel_type: str
    """COMPUTATION, COMMUNICATION or MEMORY."""
    sum_us: int
    count: int
    share_pct: float
    """Of the rank's summed kernel and memory durations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamIdle:
    """Idle time of one stream by cause."""

    stream: int
    host_wait_us: int
    kernel_wait_us: int
    other_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchStats:
    """Kernel launches matched to their GPU events (HTA's cut-offs)."""

    launches: int
    cpu_median_us: float | None
    gpu_median_us: float | None
    delay_median_us: float | None
    short_kernels: int
    """cpu_duration <= 50 µs and gpu_duration < cpu_duration."""
    runtime_outliers: int
    """cpu_duration > 50 µs."""
    delay_outliers: int
    """launch delay > 100 µs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankTrace:
    """One rank's analysis."""

    rank: int
    path: str
    device: str | None
    steps_kept: tuple[int, ...]
    events: int
    gpu_events: int
    temporal: TemporalBreakdown | None
    """None when the rank has no GPU events."""
    comm_comp_overlap_pct: float | None
    """Share of communication time overlapped by computation; None without NCCL kernels."""
    kernels: tuple[KernelStat, ...] = ()
    """Every kernel name, largest summed time first."""
    idle_by_stream: tuple[StreamIdle, ...] = ()
    launch: LaunchStats | None = None
    type_us: tuple[tuple[str, int], ...] = ()
    """Summed µs per kernel type (COMPUTATION, COMMUNICATION, MEMORY)."""
    type_overlap_us: tuple[tuple[str, int], ...] = ()
    """HTA's kernel-type table for this rank: µs during which exactly these types run
    (``"COMPUTATION overlapping COMMUNICATION"``...), largest first, zero rows left out."""
    sync_host_us: int = 0
    """Host time inside cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize
    calls (window applied)."""
    launch_cpu_us: int = 0
    """Summed durations of the launch calls matched to GPU events."""
    launch_gpu_us: int = 0
    """Summed durations of the GPU events those calls launched."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSummary:
    """The analysis of one job's traces (one file per rank)."""

    ranks: tuple[RankTrace, ...]
    warnings: tuple[str, ...] = ()
    mixed_jobs: bool = False
    """The files look like more than one job (world sizes differ, or ranks that do not
    overlap in time): ranks are not compared with each other."""

    def kernel_type_table(self) -> list[tuple[str, int, float]]:
        """HTA's kernel-type breakdown over all ranks: ``(types, µs, % of the total)``,
        largest first (percentages rounded to 0.1 as HTA does)."""
        sums: dict[str, int] = {}
        for rank in self.ranks:
            for label, us in rank.type_overlap_us:
                sums[label] = sums.get(label, 0) + us
        total = sum(sums.values())
        rows = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(k, v, round(100 * v / total, 1) if total else 0.0) for k, v in rows]
