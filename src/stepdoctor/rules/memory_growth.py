"""memory-growth: the job's memory keeps rising.

Detects: a steady rise of RSS (or of GPU memory) over the run, from the moving average of the
samples (SageMaker Debugger's GPUMemoryIncrease idea). RSS of the job's own process, and
separately of its DataLoader workers once they have settled (workers starting are no leak).
Evidence: start and end of the moving average, the rise, its rate per step and per minute, and
when memory would run out at that rate.
Fix: find what keeps references alive (losses kept with their graphs, growing lists/caches).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Sequence

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules._trend import Trend, moving_average
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule
from stepdoctor.rules.where import allocation_sites

__all__ = [
    "HEAP_MIN_RISE_BYTES",
    "HEAP_SWING_MARGIN",
    "HEAP_TREND_T",
    "MIN_RISE_BYTES",
    "MIN_RISE_SHARE",
    "MIN_SAMPLES",
    "RISING_WINDOWS",
    "memory_growth",
]

#: Samples needed (10 Hz: 2 s of steps after warm-up).
MIN_SAMPLES = 20
#: Moving-average window: a tenth of the samples (at least 3).
WINDOW_SHARE = 0.1
#: The rise must be steady: at least 3 of 4 successive window means go up.
RISING_WINDOWS = 0.75
#: And large: 10% over the start and 64 MiB, so allocator warm-up and noise stay silent (larger
#: allocator swings are told apart by the heap in use: HEAP_SHARE_OF_RISE).
MIN_RISE_SHARE = 0.10
MIN_RISE_BYTES = 64 * 2**20
#: SageMaker Debugger's GPUMemoryIncrease fires when the moving average of GPU memory use rises
#: by more than 5 percentage points; we use it for GPU memory, and as "critical" for RSS
#: against the machine's memory.
CRITICAL_POINTS = 5.0
#: Also critical when memory would run out within the hour at the measured rate: the job will
#: crash before most training runs end.
CRITICAL_RUNWAY_MIN = 60.0
#: Growth that stops (imports and allocator warm-up in a new worker) is not a leak: the second
#: half of the samples must hold at least this share of the rise.
LATE_RISE_SHARE = 0.3


#: RSS can rise with no leak (glibc keeps freed memory: measured on
#: tests/scenarios/healthy_workers.py, the main process's RSS climbs 390 -> 460 MiB in 4 s while
#: its heap in use stays at 180 MiB; the planted leak of memory_growth.py raises both). An RSS
#: rise counts as a leak when the heap in use (read twice a second; it is not noisy: +-4 MiB
#: there) rose by at least this share of it between its first and last readings.
HEAP_SHARE_OF_RISE = 0.25
#: "Not a leak" must be shown: the heap read at least this often over the RSS rise (3 s at
#: 2 Hz), and its least-squares trend over that time under ``HEAP_FLAT_BYTES``, twice its
#: measured noise, by the most it can have risen (``FLAT_BOUND_T``). A leak of small objects
#: (losses kept with their graphs: ~9 KiB a step of heap measured, while freed activations
#: around them leave RSS rising ~190 KiB a step) is a leak even when the heap rises far less
#: than RSS.
HEAP_MIN_READINGS = 6
#: How often the heap is read on average (``collect.sampling.heap.HEAP_EVERY_NS``), in seconds.
HEAP_READ_S = 0.5
HEAP_FLAT_BYTES = 8 * 2**20
#: ...and rising steadily: ``RISING_WINDOWS`` of the successive means of this many chunks of
#: its readings go up (a swing down and back up is no rise), along a significant trend
#: (``HEAP_TREND_T``): a fixed twin's heap reads 173, 188, 172, 171, 189 ... MiB, a step's
#: gradient in or out, and the means of 5 chunks of so few readings rise 3 times in 4 by chance
#: (a busy CI host's run of a job of one DataLoader worker, an MLP 2,048 wide, was called a
#: leak).
HEAP_CHUNKS = 5
#: A chunk's mean counts as higher than the one before from this much more: a flat heap's
#: readings differ by kilobytes (measured on healthy_workers.py: 156.1 -> 156.3 MiB read as a
#: rise without it); losses kept with their graphs (9 KiB a step) add 0.7-4.7 MiB a chunk.
HEAP_CHUNK_RISE_BYTES = 2**19
#: The heap in use is what the job holds: tensors' storage (torch's CPU allocator takes it
#: from malloc) and Python objects. A leak of tensors (losses kept with their autograd graphs,
#: a list of outputs) raises it step after step even while RSS, which the allocator pads and
#: trims, rises unevenly (and stays flat for seconds after the allocation window, while the
#: job reuses what tracemalloc freed). It is judged on its own from this many readings (3 s at
#: 2 Hz), by the least-squares trend of its readings: a reading falls anywhere in a step, so
#: it swings by what a step holds for a while (a 2048x2048 layer's 16 MiB gradient, from
#: backward to ``zero_grad``: tests/scenarios/memory_growth.py read 192, 195, 199, 188, 193,
#: 216 ... MiB on a busy machine), and successive readings need not rise.
HEAP_MIN_LEAK_READINGS = 6
#: The trend counts when its slope is this many standard errors above zero (Student's t; with
#: 6 readings, 4 degrees of freedom, chance gives it under 1% of the time)...
HEAP_TREND_T = 4.0
#: ...and it rose by 10% (``MIN_RISE_SHARE``) and this much. Half RSS's floor: the heap has
#: no allocator warm-up, and a trend averages its swings out. Measured trends over a run:
#: healthy jobs' heaps at most 23 MiB (tests/scenarios/healthy_workers.py: a batch's buffers
#: landing late, flat in the second half; memory_growth.py's fixed twin 19 MiB, t = 3.3), the
#: leak of memory_growth.py's mild dose 56-71 MiB (t = 7.7-13.8; 4 runs beside two busy
#: processes, 4 without).
HEAP_MIN_RISE_BYTES = 32 * 2**20
#: ...and it rose past what a step's swing can fake: readings that happen to fall where a step
#: holds little early and where it holds much late (a step's gradient in or out) draw a trend
#: through them, and the least-squares line through a step of height G rises 1.5 G over the
#: run. The swing G is the largest change between successive readings less the trend's share
#: of it. Measured: leaks rise 2.7-3.8 times their swing (tests/scenarios/memory_growth.py
#: mild: 67 MiB over 25; leak_outputs.py mild: 76 over 20); tests/scenarios/
#: oversized_network.py (a 3,072-unit layer's 36 MiB gradient) rose 47 MiB on 11 readings
#: with t = 4.1 and was called a leak on a CI host.
HEAP_SWING_MARGIN = 1.5
#: "Not a leak" needs the heap's trend shown flat: its rise plus this many standard errors
#: (about 95% one-sided from 10 readings on, Student's t) under ``HEAP_FLAT_BYTES``. A trend
#: of +3 MiB through readings that swing by a step's activations (a 2,048-wide MLP at batch
#: 256) is no evidence that nothing was kept: a held-out job that kept every step's graph read
#: "not a leak" so.
FLAT_BOUND_T = 2.0


#: After the tree changes size, a new (spawned) DataLoader worker imports torch and fills its
#: caches: measured on tests/scenarios/healthy_workers.py, a worker's RSS climbs for 2-4 s
#: after it appears (longer on a loaded machine). Workers' memory is judged from 10 s after the
#: tree last changed size: a leak in a worker shows over a long run, start-up never does.
WORKERS_SETTLE_NS = 10_000_000_000
#: Records without the main process's RSS (older readers) have only the tree's: judged from
#: 2 s after the tree last changed size (the main process's allocator warm-up is over by then).
TREE_SETTLE_NS = 2_000_000_000


@rule(id="memory-growth", title="Memory keeps growing", requires=("steps", "system"))
def memory_growth(ctx: RuleContext) -> list[Finding]:
    """Flag a steady, large rise of RSS or GPU memory."""
    findings = []
    total = ctx.record.meta.total_memory_bytes or None
    rss_finding = _rss_finding(ctx, total)
    if rss_finding is not None:
        growth = (
            allocation_sites(ctx.record, "tensors")
            + allocation_sites(ctx.record, "growth")
            + allocation_sites(ctx.record, "types", top=2)
        )
        findings.append(dataclasses.replace(rss_finding, allocated_at=growth))
    by_gpu: dict[int, list[tuple[int, int]]] = {}
    gpu_total: dict[int, int] = {}
    # During the measured steps only, as the system samples: before them the job loads its
    # model and data onto the GPU (a 2 s healthy run's load read as 8 GiB/min of growth).
    start, end = (ctx.steps[0].start_ns, ctx.steps[-1].end_ns) if ctx.steps else (0, 0)
    for g in ctx.record.gpu:
        if g.mem_used_bytes is not None and start <= g.t_ns <= end:
            by_gpu.setdefault(g.index, []).append((g.t_ns, g.mem_used_bytes))
            gpu_total[g.index] = g.mem_total_bytes or 0
    for index, points in sorted(by_gpu.items()):
        gpu_finding = _check(ctx, points, f"GPU {index} memory", gpu_total[index] or None)
        if gpu_finding is not None:
            findings.append(gpu_finding)
    return findings


def _weigh_heap(ctx: RuleContext, rss: list[tuple[int, int]], finding: Finding) -> Finding:
    """Check an RSS rise of the main process against its malloc heap in use over the same
    time: a leak keeps objects, so the heap rises with RSS; RSS rising alone is the allocator
    keeping freed memory (a swing that comes back), not a leak (downgraded to info)."""
    start, end = rss[0][0], rss[-1][0]
    heap = [
        (s.t_ns, s.main_heap_bytes)
        for s in ctx.system
        if s.main_heap_bytes is not None and start <= s.t_ns <= end
    ]
    if len(heap) < HEAP_MIN_READINGS or heap[-1][0] - heap[0][0] < (end - start) / 2:
        if not any(s.main_heap_bytes is not None for s in ctx.record.system):
            return finding  # no heap to read (not glibc, older records): RSS is all there is
        return _untold(finding, heap, (end - start) / 1e9)
    trend = Trend.of(heap)
    heap_rise = trend.rise
    averages = moving_average([float(v) for _, v in rss], _window(rss))
    rise = averages[-1] - averages[0]
    between = sum(start <= st.end_ns <= end for st in ctx.steps) or 1
    evidence = Evidence(
        metric="memory in use (malloc heap), trend over the same time",
        value=round(heap_rise / 2**20, 1),
        unit="MiB",
        threshold=round(HEAP_FLAT_BYTES / 2**20, 1),
        source="mallinfo2",
    )
    steady = (
        _rising_share([v for _, v in heap]) >= RISING_WINDOWS
        and trend.t >= HEAP_TREND_T
        and trend.beyond_swing(HEAP_SWING_MARGIN)
    )
    if steady and (heap_rise >= HEAP_FLAT_BYTES or heap_rise >= HEAP_SHARE_OF_RISE * rise):
        per_step = Evidence(
            metric="memory in use, rise per step",
            value=round(heap_rise / between / 2**10, 1),
            unit="KiB",
            source="mallinfo2 and steps",
        )
        significance = Evidence(
            metric="memory in use, trend t-statistic",
            value=round(min(trend.t, 1e6), 1),
            unit="standard errors",
            threshold=HEAP_TREND_T,
            source="mallinfo2",
        )
        return dataclasses.replace(
            finding, evidence=(*finding.evidence, evidence, per_step, significance)
        )
    upper = trend.rise_bound(FLAT_BOUND_T)
    if heap_rise >= HEAP_FLAT_BYTES or upper >= HEAP_FLAT_BYTES:
        # it rose, but not steadily, or it was not shown flat: no verdict either way
        bound = Evidence(
            metric="memory in use, upper bound of its trend's rise",
            value=round(upper / 2**20, 1),
            unit="MiB",
            threshold=round(HEAP_FLAT_BYTES / 2**20, 1),
            source=f"mallinfo2 (trend + {FLAT_BOUND_T:g} standard errors)",
        )
        return dataclasses.replace(
            finding,
            severity=Severity.INFO,
            title=f"process RSS grew {rise / 2**20:.0f} MiB; memory in use too uneven to tell",
            explanation=(
                f"RSS rose by {rise / 2**20:.0f} MiB and the memory the job holds allocated "
                f"(glibc malloc's heap in use) by {heap_rise / 2**20:+.0f} MiB along its trend "
                f"(t = {trend.t:.1f}; a leak needs a steady rise, t >= {HEAP_TREND_T:g}, past "
                f"the {trend.swing / 2**20:.0f} MiB the readings swing by), and it may have "
                f"risen by up to {upper / 2**20:.0f} MiB: neither a leak nor flat "
                "enough to rule one out. Readings swing by what a step holds; a longer run "
                "tells."
            ),
            evidence=(*finding.evidence, evidence, bound),
        )
    return dataclasses.replace(
        finding,
        severity=Severity.INFO,
        title=f"process RSS grew {rise / 2**20:.0f} MiB, but not the memory in use",
        explanation=(
            f"RSS rose by {rise / 2**20:.0f} MiB while the memory the job holds allocated "
            f"(glibc malloc's heap in use) changed by {heap_rise / 2**20:+.0f} MiB: the "
            "allocator keeps memory the job freed (fragmented arenas, a raised mmap threshold "
            "after large tensors are freed). It usually levels off or comes back; it is not a "
            "leak."
        ),
        evidence=(*finding.evidence, evidence),
        fix=Fix(
            summary=(
                "Nothing to fix unless memory is tight. If it is: MALLOC_ARENA_MAX=2, "
                "MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ set to a fixed size, or a "
                "different allocator (jemalloc, tcmalloc via LD_PRELOAD)."
            ),
            snippet="MALLOC_MMAP_THRESHOLD_=1048576 stepdoctor run train.py",
        ),
    )


def _untold(finding: Finding, heap: Sequence[tuple[int, int]], seconds: float) -> Finding:
    """An RSS rise over too short a time for the heap in use to weigh it: no verdict (info).
    RSS rising alone is as often the allocator keeping memory or batches mapped from shared
    memory as a leak (a job of 3 DataLoader workers, an MLP 2,048 wide: main RSS +96 MiB
    in 2.5 s of steps on a CI host, its heap flat at each of its 5 readings), and a rate
    taken over seconds says nothing of the next hour."""
    rise = next(e.value for e in finding.evidence if e.metric == "rise")
    return dataclasses.replace(
        finding,
        severity=Severity.INFO,
        title=f"process RSS grew {rise:.0f} MiB; memory in use read too few times to tell",
        explanation=(
            f"RSS rose by {rise:.0f} MiB over {seconds:.1f} s of steps, but the memory the job "
            f"holds allocated (glibc malloc's heap in use) was read {len(heap)} time(s) in "
            f"that time, too few to tell a leak from the allocator keeping freed memory "
            f"(at least {HEAP_MIN_READINGS} readings over half the rise). A longer run "
            f"({max(2 * seconds, HEAP_MIN_READINGS * HEAP_READ_S):.0f} s of steps or more) "
            "tells."
        ),
        evidence=(
            *finding.evidence,
            Evidence(
                metric="memory in use, readings over the rise",
                value=len(heap),
                unit="readings",
                threshold=HEAP_MIN_READINGS,
                source="mallinfo2",
            ),
        ),
        fix=dataclasses.replace(
            finding.fix,
            summary=f"Run more steps to tell. If it keeps rising: {finding.fix.summary}",
        ),
    )


def _rss_finding(ctx: RuleContext, total: int | None) -> Finding | None:
    """Judge the job's own process's RSS (its leaks are the common ones), weighed against its
    heap in use; when it is flat, the workers' from ``WORKERS_SETTLE_NS`` after the tree last
    changed size; the whole tree's where the reader gave no split (older records)."""
    every = ctx.record.system
    changes = [b.t_ns for a, b in itertools.pairwise(every) if a.job_processes != b.job_processes]
    last_change = changes[-1] if changes else None
    heap = [(s.t_ns, s.main_heap_bytes) for s in ctx.system if s.main_heap_bytes is not None]
    held = _heap_leak(ctx, heap, total)
    if held is not None:
        return held
    main = [(s.t_ns, s.main_rss_bytes) for s in ctx.system if s.main_rss_bytes is not None]
    if main and len(main) == sum(s.job_rss_bytes is not None for s in ctx.system):
        found = _check(ctx, main, "process RSS", total)
        if found is not None:
            return _weigh_heap(ctx, main, found)
        workers = [
            (s.t_ns, s.job_rss_bytes - s.main_rss_bytes)
            for s in ctx.system
            if s.job_rss_bytes is not None
            and s.main_rss_bytes is not None
            and (s.job_processes or 1) > 1
            and (last_change is None or s.t_ns >= last_change + WORKERS_SETTLE_NS)
        ]
        return _check(ctx, workers, "DataLoader workers' RSS", total)
    # Processes joining or leaving the tree move its RSS in steps that are no leak.
    tree = [
        (s.t_ns, s.job_rss_bytes)
        for s in ctx.system
        if s.job_rss_bytes is not None
        and (last_change is None or s.t_ns >= last_change + TREE_SETTLE_NS)
    ]
    found = _check(ctx, tree, "process RSS", total)
    return None if found is None else _weigh_heap(ctx, tree, found)


def _rising_share(values: Sequence[int]) -> float:
    """The share of successive means of ``HEAP_CHUNKS`` equal chunks of ``values`` that rise:
    a leak climbs from chunk to chunk; a swing (a larger batch's buffers, freed later) does
    not (measured on tests/scenarios/healthy_workers.py: 174, 156 x4, 154 x2, 170, 172, 174
    MiB)."""
    size = max(1, len(values) // HEAP_CHUNKS)
    means = [statistics.fmean(values[i : i + size]) for i in range(0, len(values), size)]
    rises = [b > a + HEAP_CHUNK_RISE_BYTES for a, b in itertools.pairwise(means)]
    return sum(rises) / len(rises) if rises else 0.0


def _held(finding: Finding) -> Finding:
    """A rise of the heap in use, told as what it is: the job keeps what it allocates."""
    rate = next(e.value for e in finding.evidence if e.metric == "rate per step")
    return dataclasses.replace(
        finding,
        title=f"Memory the job holds grows every step ({rate} KiB a step)",
        explanation=(
            f"{finding.explanation} This is memory in use (glibc malloc's heap, where "
            "tensors' storage and Python objects live), not memory the allocator merely "
            "keeps: your code holds on to tensors or objects from every step."
        ),
        evidence=tuple(
            dataclasses.replace(e, source="mallinfo2") if e.source == "sampler" else e
            for e in finding.evidence
        ),
    )


def _window(points: Sequence[object]) -> int:
    return max(3, int(len(points) * WINDOW_SHARE))


def _check(
    ctx: RuleContext,
    points: list[tuple[int, int]],
    what: str,
    capacity: int | None,
) -> Finding | None:
    """A steady, large rise of ``points`` (moving averages of a tenth of them), or None."""
    if len(points) < MIN_SAMPLES:
        return None
    window = _window(points)
    averages = moving_average([float(v) for _, v in points], window)
    chunks = averages[::window]
    rises = [b > a for a, b in itertools.pairwise(chunks)]
    if not rises:
        return None
    steady = sum(rises) / len(rises)
    first, last = averages[0], averages[-1]
    rise = last - first
    if steady < RISING_WINDOWS or rise < max(MIN_RISE_BYTES, MIN_RISE_SHARE * first):
        return None
    middle = averages[len(averages) // 2]
    if last - middle < LATE_RISE_SHARE * rise:
        return None
    steadiness = Evidence(
        metric="windows rising",
        value=round(steady, 2),
        unit="share",
        threshold=RISING_WINDOWS,
        source="sampler",
    )
    return _growth(
        ctx,
        points,
        what,
        capacity,
        ends=(first, last),
        steadiness=steadiness,
        floor=MIN_RISE_BYTES,
    )


def _heap_leak(
    ctx: RuleContext, heap: list[tuple[int, int]], capacity: int | None
) -> Finding | None:
    """The heap in use rising along a significant trend, through the run (``_trend.Trend``), or
    None."""
    if len(heap) < HEAP_MIN_LEAK_READINGS:
        return None
    trend = Trend.of(heap)
    floor = max(HEAP_MIN_RISE_BYTES, MIN_RISE_SHARE * trend.start)
    if trend.t < HEAP_TREND_T or trend.rise < floor or not trend.beyond_swing(HEAP_SWING_MARGIN):
        return None
    if trend.late_rise < LATE_RISE_SHARE * trend.rise:
        return None
    steadiness = Evidence(
        metric="trend t-statistic",
        value=round(min(trend.t, 1e6), 1),
        unit="standard errors",
        threshold=HEAP_TREND_T,
        source="sampler",
    )
    swing = Evidence(
        metric="largest swing between readings",
        value=round(trend.swing / 2**20, 1),
        unit="MiB",
        source="mallinfo2",
    )
    found = _growth(
        ctx,
        heap,
        "memory in use",
        capacity,
        ends=(trend.start, trend.start + trend.rise),
        steadiness=steadiness,
        floor=HEAP_MIN_RISE_BYTES,
    )
    return _held(dataclasses.replace(found, evidence=(*found.evidence, swing)))


def _growth(
    ctx: RuleContext,
    points: list[tuple[int, int]],
    what: str,
    capacity: int | None,
    *,
    ends: tuple[float, float],
    steadiness: Evidence,
    floor: int,
) -> Finding:
    """The finding for a rise of ``points`` from ``ends[0]`` to ``ends[1]``."""
    first, last = ends
    rise = last - first
    seconds = (points[-1][0] - points[0][0]) / 1e9 or 1.0
    per_min = rise / seconds * 60
    between = sum(points[0][0] <= st.end_ns <= points[-1][0] for st in ctx.steps)
    per_step = rise / max(1, between or len(ctx.steps))
    points_rise = 100 * rise / capacity if capacity else None
    runway_min = (capacity - last) / per_min if capacity and per_min > 0 else None
    critical = (points_rise is not None and points_rise > CRITICAL_POINTS) or (
        runway_min is not None and runway_min < CRITICAL_RUNWAY_MIN
    )
    evidence = [
        Evidence(
            metric=f"{what} at start (moving average)",
            value=round(first / 2**20, 1),
            unit="MiB",
            source="sampler",
        ),
        Evidence(
            metric=f"{what} at end (moving average)",
            value=round(last / 2**20, 1),
            unit="MiB",
            source="sampler",
        ),
        Evidence(
            metric="rise",
            value=round(rise / 2**20, 1),
            unit="MiB",
            threshold=round(max(floor, MIN_RISE_SHARE * first) / 2**20, 1),
            source="sampler",
        ),
        Evidence(
            metric="rate per step",
            value=round(per_step / 2**10, 1),
            unit="KiB",
            source="sampler and steps",
        ),
        Evidence(
            metric="rate per minute", value=round(per_min / 2**20, 1), unit="MiB", source="sampler"
        ),
        steadiness,
    ]
    runway = ""
    if capacity:
        evidence.append(
            Evidence(
                metric="rise in points of total memory",
                value=round(points_rise or 0.0, 2),
                unit="points",
                threshold=CRITICAL_POINTS,
                source="sampler",
            )
        )
        if runway_min is not None:
            runway = f" At this rate memory runs out in about {runway_min:.0f} minutes."
    return Finding(
        rule="memory-growth",
        span_ns=(points[0][0], points[-1][0]),
        severity=Severity.CRITICAL if critical else Severity.WARNING,
        title=f"{what} keeps growing ({per_min / 2**20:.0f} MiB/min)",
        explanation=(
            f"The {what} rose steadily from {first / 2**20:.0f} MiB to {last / 2**20:.0f} MiB "
            f"(about {per_step / 2**10:.0f} KiB per step).{runway} Something keeps references "
            "to per-step data."
        ),
        evidence=tuple(evidence),
        speedup=Speedup.none(
            "no speed-up: fixing it prevents an out-of-memory "
            "failure and swapping later in the run",
        ),
        fix=Fix(
            summary=(
                "Look for per-step objects kept alive: losses or outputs appended to a list "
                "with their autograd graphs (use loss.item() or loss.detach()), growing "
                "caches or history lists, tensors stored on self. tracemalloc snapshots or "
                "torch.cuda.memory_snapshot() show what grows."
            ),
            snippet="running_loss += loss.item()   # not: running_loss += loss",
        ),
    )
