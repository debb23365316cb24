"""A run's timelines, bucketed for plotting: what the HTML report draws.

A one-hour run has 100,000 steps and 36,000 system samples; a page stays small and fast by
drawing at most ``MAX_POINTS`` buckets per plot. Bucketing keeps what matters for a diagnosis:
the mean of each phase (so the stack still adds up to the mean step), and the longest and the
shortest step of each bucket (so an outlier step is never averaged away). System readings keep
each bucket's mean and maximum. The outlier steps marked are the step-outliers rule's
(``model.outlier_cut`` over the steps the rules judge), so the plot and the finding agree.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from stepdoctor.model import (
    OUTLIER_SIGMAS,
    GpuSample,
    RunRecord,
    SystemSample,
    measured_steps,
    outlier_cut,
    profiled_steps,
)

__all__ = ["MAX_POINTS", "OUTLIER_SIGMAS", "StepSeries", "SystemSeries", "Timelines", "timelines"]

#: Points per plot: enough for a 1,000-2,000 px wide chart, small enough that a one-hour run's
#: page stays far under 5 MB (issue 6).
MAX_POINTS = 1500
MIB = 2**20

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSeries:
    """Steps in buckets of ``bucket`` consecutive steps (1: every step)."""

    bucket: int
    first_step: list[int]
    """Index of each bucket's first step."""
    phase_ms: dict[str, list[float]]
    """Mean milliseconds per step of each phase in each bucket, less the GC pauses that
    interrupted it, and of those pauses (``gc``): stacked, they make the step."""
    max_ms: list[float]
    min_ms: list[float]
    samples_per_sec: list[float | None]
    """Samples over the bucket's time (None when batch sizes are unknown)."""
    t_s: list[float]
    """Start of each bucket, seconds from the first step."""
    outliers: list[tuple[int, float]]
    """``(step index, ms)`` of the step-outliers rule's outlier steps (``model.outlier_cut``:
    above mean + 3 sigma of the steps after warm-up, less those stepdoctor's profiler slowed
    and those that saved a checkpoint)."""
    warmup_steps: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemSeries:
    """System readings in buckets of ``bucket`` consecutive samples."""

    bucket: int
    t_s: list[float]
    series: dict[str, list[float | None]] = field(default_factory=dict)
    """Name -> value per bucket (CPU in % of one core, memory in MiB)."""
    cores: int = 0
    io_t_s: list[float] = field(default_factory=list)
    io: dict[str, list[float | None]] = field(default_factory=dict)
    """Disk and network MB/s, between successive readings of the counters (read once a
    second, not at every sample), bucketed apart (mean)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timelines:
    """Everything the report's plots draw."""

    steps: StepSeries | None
    system: SystemSeries | None
    gpu: dict[int, SystemSeries]
    origin_ns: int = 0
    """Where the plots' time axis starts (record clock)."""


def _chunks(items: Sequence[T], max_points: int) -> tuple[int, list[Sequence[T]]]:
    size = max(1, -(-len(items) // max_points))
    return size, [items[i : i + size] for i in range(0, len(items), size)]


def timelines(record: RunRecord, warmup_steps: int, *, max_points: int = MAX_POINTS) -> Timelines:
    """Bucket the record's steps, system and GPU samples for plotting."""
    starts = [record.steps[0].start_ns] if record.steps else []
    starts += [x.t_ns for x in record.system[:1]] + [g.t_ns for g in record.gpu[:1]]
    origin = min(starts, default=0)
    return Timelines(
        steps=_steps(record, warmup_steps, max_points, origin) if record.steps else None,
        system=_system(record.system, origin, max_points) if record.system else None,
        gpu=_gpus(record.gpu, origin, max_points),
        origin_ns=origin,
    )


def _steps(record: RunRecord, warmup: int, max_points: int, origin: int) -> StepSeries:
    steps = record.steps
    size, chunks = _chunks(steps, max_points)
    phases = sorted({p for s in steps for p in s.phase_ns})
    phase_ms: dict[str, list[float]] = {p: [] for p in phases}
    gc: list[float] = []
    max_ms, min_ms, throughput, first, t_s = [], [], [], [], []
    for chunk in chunks:
        n = len(chunk)
        for p in phases:
            # a GC pause is drawn as its own series: the phase it interrupted less its time,
            # so that the stack is the step
            ns = sum(max(0, s.phase_ns.get(p, 0) - s.gc_phase_ns.get(p, 0)) for s in chunk)
            phase_ms[p].append(round(ns / n / 1e6, 4))
        gc.append(round(sum(s.gc_pause_ns for s in chunk) / n / 1e6, 4))
        durations = [s.duration_ns / 1e6 for s in chunk]
        max_ms.append(round(max(durations), 4))
        min_ms.append(round(min(durations), 4))
        span = (chunk[-1].end_ns - chunk[0].start_ns) / 1e9
        samples = [s.batch_size for s in chunk]
        known = all(b is not None for b in samples) and span > 0
        throughput.append(round(sum(b or 0 for b in samples) / span, 2) if known else None)
        first.append(chunk[0].index)
        t_s.append(round((chunk[0].start_ns - origin) / 1e9, 3))
    if any(gc):
        phase_ms["gc"] = gc
    measured = measured_steps(steps, warmup, profiled_steps(record))
    outliers = [(s.index, round(s.duration_ns / 1e6, 3)) for s in outlier_cut(measured).outliers]
    return StepSeries(
        bucket=size,
        first_step=first,
        phase_ms=phase_ms,
        max_ms=max_ms,
        min_ms=min_ms,
        samples_per_sec=throughput,
        t_s=t_s,
        outliers=outliers,
        warmup_steps=warmup,
    )


def _io(samples: Sequence[SystemSample], origin: int, max_points: int
        ) -> tuple[list[float], dict[str, list[float | None]]]:  # fmt: skip
    readings = [s for s in samples if s.disk_read_bytes is not None or s.net_sent_bytes is not None]
    names = {"disk read": "disk_read_bytes", "disk write": "disk_write_bytes",
             "net sent": "net_sent_bytes", "net received": "net_recv_bytes"}  # fmt: skip
    rates: dict[str, list[float | None]] = {n: [] for n in names}
    times: list[int] = []
    for a, b in itertools.pairwise(readings):
        if b.t_ns <= a.t_ns:
            continue
        times.append(b.t_ns)
        for name, attr in names.items():
            va, vb = getattr(a, attr), getattr(b, attr)
            ok = isinstance(va, int) and isinstance(vb, int)
            rates[name].append((vb - va) / 1e6 / ((b.t_ns - a.t_ns) / 1e9) if ok else None)
    _, chunks = _chunks(range(len(times)), max_points)
    t_s = [round((times[c[0]] - origin) / 1e9, 3) for c in chunks]
    out = {n: [_mean([v[i] for i in c]) for c in chunks] for n, v in rates.items()}
    return t_s, out


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 2) if known else None


def _max(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(max(known), 2) if known else None


def _mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def _system(samples: Sequence[SystemSample], origin: int, max_points: int) -> SystemSeries:
    size, chunks = _chunks(samples, max_points)
    cores = max((len(s.cpu_pct_per_core) for s in samples), default=0)
    out: dict[str, list[float | None]] = {
        k: []
        for k in ("job CPU", "workers CPU", "other processes CPU", "machine CPU",
                  "machine CPU max", "RSS", "RSS max", "main process RSS",
                  "malloc heap in use")
    }  # fmt: skip
    t_s = []
    for chunk in chunks:
        t_s.append(round((chunk[0].t_ns - origin) / 1e9, 3))
        out["job CPU"].append(_mean([s.job_cpu_pct for s in chunk]))
        out["workers CPU"].append(_mean([s.children_cpu_pct for s in chunk]))
        out["other processes CPU"].append(_mean([s.other_cpu_pct for s in chunk]))
        totals = [sum(s.cpu_pct_per_core) if s.cpu_pct_per_core else None for s in chunk]
        out["machine CPU"].append(_mean(totals))
        out["machine CPU max"].append(_max(totals))
        out["RSS"].append(_mean([_mib(s.job_rss_bytes) for s in chunk]))
        out["RSS max"].append(_max([_mib(s.job_rss_bytes) for s in chunk]))
        out["main process RSS"].append(_mean([_mib(s.main_rss_bytes) for s in chunk]))
        out["malloc heap in use"].append(_max([_mib(s.main_heap_bytes) for s in chunk]))
    io_t, io = _io(samples, origin, max_points)
    return SystemSeries(bucket=size, t_s=t_s, series=out, cores=cores, io_t_s=io_t, io=io)


def _gpus(samples: Sequence[GpuSample], origin: int, max_points: int) -> dict[int, SystemSeries]:
    by_index: dict[int, list[GpuSample]] = {}
    for g in samples:
        by_index.setdefault(g.index, []).append(g)
    out = {}
    for index, points in sorted(by_index.items()):
        size, chunks = _chunks(points, max_points)
        series: dict[str, list[float | None]] = {"utilisation": [], "utilisation max": [],
                                                 "memory used": []}  # fmt: skip
        for chunk in chunks:
            series["utilisation"].append(_mean([g.util_pct for g in chunk]))
            series["utilisation max"].append(_max([g.util_pct for g in chunk]))
            series["memory used"].append(_max([_mib(g.mem_used_bytes) for g in chunk]))
        t_s = [round((c[0].t_ns - origin) / 1e9, 3) for c in chunks]
        out[index] = SystemSeries(bucket=size, t_s=t_s, series=series)
    return out
