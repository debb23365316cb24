"""Per-rank breakdowns of a trace set, computed the way Holistic Trace Analysis 0.5.0 does
(shared/traces/README.md lists the rules; the tests hold every number to HTA's).

- Window: with two or more distinct ``ProfilerStep#N`` names over all ranks, each rank keeps
  the host events before the start of its last step and the GPU events whose launch was kept.
- GPU events are everything on a stream (kernels, memcpy, memset, stream syncs).
- Kernel type from the name: COMMUNICATION (``nccl…Kernel…``), MEMORY (``Memcpy``/``Memset``/
  ``dma`` prefix), COMPUTATION (none of those, no ``Sync`` in it), else OTHER.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from stepdoctor.model import (
    KernelStat,
    LaunchStats,
    RankTrace,
    StreamIdle,
    TemporalBreakdown,
    TraceSummary,
)
from stepdoctor.traces.loader import GpuEvent, Launch, RankEvents

__all__ = [
    "COMMUNICATION",
    "COMPUTATION",
    "KERNEL_WAIT_US",
    "MEMORY",
    "OTHER",
    "analyse",
    "kernel_type",
]

COMMUNICATION = "COMMUNICATION"
COMPUTATION = "COMPUTATION"
MEMORY = "MEMORY"
OTHER = "OTHER"

#: HTA's idle-time classification: a gap shorter than this between two events on a stream,
#: whose launch came before the previous event ended, is the GPU waiting on its own queue.
KERNEL_WAIT_US = 30
#: HTA's launch-statistics cut-offs.
SHORT_CPU_US = 50
RUNTIME_OUTLIER_US = 50
DELAY_OUTLIER_US = 100
#: The CUDA runtime/driver calls HTA counts as launches (ROCm's hip* calls are not).
_LAUNCH_NAMES = ("LaunchKernel", "LaunchCooperativeKernel", "MemcpyAsync", "MemsetAsync")
_STREAM_KINDS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"})


def kernel_type(name: str) -> str:
    """HTA's kernel type of a GPU event name."""
    if name.startswith("nccl") and "Kernel" in name[4:]:
        return COMMUNICATION
    if name.startswith(("Memcpy", "Memset", "dma")):
        return MEMORY
    if "Memcpy" in name or name.startswith("Memset") or "Sync" in name:
        return OTHER
    return COMPUTATION


def analyse(ranks: Sequence[RankEvents], *, include_last_step: bool = False) -> TraceSummary:
    """Analyse one job's ranks (one ``RankEvents`` per file)."""
    step_names = {name for r in ranks for name, _ in r.steps}
    filtered = not include_last_step and len(step_names) >= 2
    out = []
    warnings: list[str] = []
    for index, events in enumerate(ranks):
        rank = events.rank if events.rank is not None else index
        out.append(_rank(events, rank, filtered))
        warnings += [f"{events.path}: {w}" for w in events.warnings]
        if not events.gpu:
            warnings.append(f"{events.path}: no GPU events (a CPU-only trace?)")
    seen: dict[int, str] = {}
    for r in out:
        if r.rank in seen:
            warnings.append(f"{r.path} and {seen[r.rank]} are both rank {r.rank}")
        seen[r.rank] = r.path
    mixed = _mixed_jobs(ranks, [r.rank for r in out])
    warnings += mixed
    return TraceSummary(
        ranks=tuple(sorted(out, key=lambda r: r.rank)),
        warnings=tuple(warnings),
        mixed_jobs=bool(mixed),
    )


#: Ranks of one job are profiled at the same time; hosts' clocks may differ by up to a second
#: (NTP), so spans closer than this still count as overlapping.
CLOCK_SLACK_US = 1_000_000


def _mixed_jobs(ranks: Sequence[RankEvents], numbers: list[int]) -> list[str]:
    """Why the files look like more than one job ([] when they do not)."""
    if len(ranks) < 2:
        return []
    why = []
    sizes = {r.world_size for r in ranks if r.world_size is not None}
    if len(sizes) > 1:
        why.append(
            "the files come from jobs of different sizes (world_size "
            + ", ".join(str(s) for s in sorted(sizes))
            + "): ranks are not compared"
        )
    elif sizes and len(ranks) > min(sizes):
        why.append(f"{len(ranks)} files for a job of world_size {min(sizes)}")
    spans = []
    for events, number in zip(ranks, numbers, strict=True):
        times = [e.ts for e in events.gpu] + [e.ts + e.dur for e in events.gpu]
        times += [x.ts for x in events.launches.values()]
        if times:
            spans.append((min(times), max(times), number))
    spans.sort()
    groups: list[list[tuple[int, int, int]]] = []
    for span in spans:
        if groups and span[0] <= max(s[1] for s in groups[-1]) + CLOCK_SLACK_US:
            groups[-1].append(span)
        else:
            groups.append([span])
    if len(groups) > 1:
        parts = [
            f"ranks {', '.join(str(n) for _, _, n in sorted(g, key=lambda s: s[2]))}"
            for g in groups
        ]
        why.append(
            "the files do not overlap in time (different jobs or profiling windows?): "
            + " / ".join(parts)
            + "; ranks are not compared"
        )
    return why


def _rank(events: RankEvents, rank: int, filtered: bool) -> RankTrace:
    gpu, launches, steps = _window(events, filtered)
    typed = [(e, kernel_type(e.name)) for e in gpu]
    temporal = _temporal(typed)
    pairs = _launch_pairs(gpu, launches)
    return RankTrace(
        rank=rank,
        path=events.path,
        device=events.device,
        steps_kept=steps,
        events=events.events,
        gpu_events=len(gpu),
        temporal=temporal,
        comm_comp_overlap_pct=_overlap(typed),
        kernels=_kernels(typed),
        idle_by_stream=_idle(gpu, launches, events.first_ts),
        launch=_launch_stats(pairs),
        type_us=_type_sums(typed),
        type_overlap_us=_type_overlap(typed),
        sync_host_us=sum(x.dur for x in launches.values() if "Synchronize" in x.name),
        launch_cpu_us=sum(launch.dur for launch, _ in pairs),
        launch_gpu_us=sum(e.dur for _, e in pairs),
    )


def _window(
    events: RankEvents, filtered: bool
) -> tuple[list[GpuEvent], dict[int, Launch], tuple[int, ...]]:
    if not filtered or not events.steps:
        return events.gpu, events.launches, _numbers(n for n, _ in events.steps)
    last = max(ts for _, ts in events.steps)
    launches = {c: launch for c, launch in events.launches.items() if launch.ts < last}
    gpu = [e for e in events.gpu if e.correlation is not None and e.correlation in launches]
    return gpu, launches, _numbers(n for n, ts in events.steps if ts < last)


def _numbers(names: Iterable[str]) -> tuple[int, ...]:
    return tuple(sorted({n for n in map(_step_number, names) if n is not None}))


def _step_number(name: str) -> int | None:
    tail = name.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _length(intervals: Iterable[tuple[int, int]]) -> int:
    return sum(end - start for start, end in intervals)


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _temporal(typed: list[tuple[GpuEvent, str]]) -> TemporalBreakdown | None:
    if not typed:
        return None
    first = min(e.ts for e, _ in typed)
    last = max(e.ts + e.dur for e, _ in typed)
    kernel_time = last - first
    busy = _length(_union((e.ts, e.ts + e.dur) for e, _ in typed))
    compute = _length(_union((e.ts, e.ts + e.dur) for e, t in typed if t == COMPUTATION))
    idle = kernel_time - busy
    non_compute = kernel_time - idle - compute

    def pct(x: int) -> float:
        return round(100 * x / kernel_time, 2) if kernel_time else 0.0

    return TemporalBreakdown(
        kernel_time_us=kernel_time,
        idle_us=idle,
        compute_us=compute,
        non_compute_us=non_compute,
        idle_pct=pct(idle),
        compute_pct=pct(compute),
        non_compute_pct=pct(non_compute),
    )


def _overlap(typed: list[tuple[GpuEvent, str]]) -> float | None:
    comm = _union((e.ts, e.ts + e.dur) for e, t in typed if t == COMMUNICATION)
    if not _length(comm):
        return None  # HTA: NaN (no NCCL kernel, or only zero-length ones)
    comp = _union((e.ts, e.ts + e.dur) for e, t in typed if t == COMPUTATION)
    return round(100 * _intersection(comm, comp) / _length(comm), 2)


def _kernels(typed: list[tuple[GpuEvent, str]]) -> tuple[KernelStat, ...]:
    sums: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    types: dict[str, str] = {}
    for e, t in typed:
        if t == OTHER:
            continue
        sums[e.name] += e.dur
        counts[e.name] += 1
        types[e.name] = t
    total = sum(sums.values())
    stats = [
        KernelStat(
            name=name,
            kernel_type=types[name],
            sum_us=value,
            count=counts[name],
            share_pct=round(100 * value / total, 2) if total else 0.0,
        )
        for name, value in sums.items()
    ]
    return tuple(sorted(stats, key=lambda k: (-k.sum_us, k.name)))


def _type_sums(typed: list[tuple[GpuEvent, str]]) -> tuple[tuple[str, int], ...]:
    sums: dict[str, int] = defaultdict(int)
    for e, t in typed:
        if t != OTHER:
            sums[t] += e.dur
    return tuple(sorted(sums.items(), key=lambda kv: -kv[1]))


#: HTA's order of the kernel types in an overlap label ("COMPUTATION overlapping MEMORY").
_OVERLAP_TYPES = (COMPUTATION, COMMUNICATION, MEMORY)


def _type_overlap(typed: list[tuple[GpuEvent, str]]) -> tuple[tuple[str, int], ...]:
    """µs during which each combination of kernel types runs: each type's intervals are
    merged (touching ones too), then swept together; zero-length states (ties) left out."""
    edges: list[tuple[int, int]] = []
    for bit, kind in enumerate(_OVERLAP_TYPES):
        for start, end in _union((e.ts, e.ts + e.dur) for e, t in typed if t == kind):
            edges.append((start, 1 << bit))
            edges.append((end, -(1 << bit)))
    edges.sort(key=lambda edge: edge[0])
    sums: dict[int, int] = defaultdict(int)
    running = 0
    for (t, delta), (following, _) in itertools.pairwise(edges):
        running += delta
        if running > 0 and following > t:
            sums[running] += following - t
    labels = {
        state: " overlapping ".join(k for b, k in enumerate(_OVERLAP_TYPES) if state >> b & 1)
        for state in sums
    }
    return tuple(sorted(((labels[s], v) for s, v in sums.items()), key=lambda kv: -kv[1]))


def _idle(
    gpu: list[GpuEvent], launches: dict[int, Launch], first_ts: int | None
) -> tuple[StreamIdle, ...]:
    """HTA's idle time per stream. A GPU event whose launch is not in the file (launched
    before profiling began) is compared, as HTA's join on row 0 does, with the start of the
    file's first event."""
    by_stream: dict[int, list[GpuEvent]] = defaultdict(list)
    for e in gpu:
        if e.category in _STREAM_KINDS:
            by_stream[e.stream].append(e)
    out = []
    for stream, events in by_stream.items():
        events.sort(key=lambda e: (e.ts, e.ts + e.dur))
        host = kernel = other = 0
        for prev, cur in itertools.pairwise(events):
            prev_end = prev.ts + prev.dur
            gap = cur.ts - prev_end  # negative where events overlap: HTA sums those too
            launched: int | None = None
            if cur.correlation is not None:
                launch = launches.get(cur.correlation)
                launched = launch.ts if launch is not None else first_ts
            if launched is not None and launched > prev_end:
                host += gap
            elif gap < KERNEL_WAIT_US:
                kernel += gap
            else:
                other += gap
        out.append(
            StreamIdle(stream=stream, host_wait_us=host, kernel_wait_us=kernel, other_us=other)
        )
    return tuple(sorted(out, key=lambda s: s.stream))


def _launch_pairs(
    gpu: list[GpuEvent], launches: dict[int, Launch]
) -> list[tuple[Launch, GpuEvent]]:
    """Each GPU event with the CUDA launch call (kernel launch, async memcpy/memset) that
    queued it, matched by correlation id."""
    pairs = []
    for e in gpu:
        launch = launches.get(e.correlation) if e.correlation is not None else None
        if (
            launch is not None
            and launch.name.startswith("cu")
            and any(k in launch.name for k in _LAUNCH_NAMES)
        ):
            pairs.append((launch, e))
    return pairs


def _launch_stats(pairs: list[tuple[Launch, GpuEvent]]) -> LaunchStats | None:
    if not pairs:
        return None
    cpu = [launch.dur for launch, _ in pairs]
    dev = [e.dur for _, e in pairs]
    delay = [max(0, e.ts - (launch.ts + launch.dur)) for launch, e in pairs]
    return LaunchStats(
        launches=len(cpu),
        cpu_median_us=float(statistics.median(cpu)),
        gpu_median_us=float(statistics.median(dev)),
        delay_median_us=float(statistics.median(delay)),
        short_kernels=sum(1 for c, g in zip(cpu, dev, strict=True) if c <= SHORT_CPU_US and g < c),
        runtime_outliers=sum(1 for c in cpu if c > RUNTIME_OUTLIER_US),
        delay_outliers=sum(1 for d in delay if d > DELAY_OUTLIER_US),
    )
