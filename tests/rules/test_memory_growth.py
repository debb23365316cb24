from __future__ import annotations

import dataclasses
from collections.abc import Callable

from stepdoctor.model import GpuSample, Severity
from stepdoctor.rules import RuleContext
from stepdoctor.rules.memory_growth import memory_growth
from tests.builders import record, samples, steps

MIB = 2**20


def test_steady_rss_rise_fires_with_rate_per_step() -> None:
    s = steps(200, phases_ms={"forward": 50})
    rss = [400 * MIB + i * 4 * MIB for i in range(100)]
    (f,) = memory_growth(RuleContext(record(s, system=samples(s, rss=rss))))
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["rise"] > 300
    assert ev["rate per step"] > 1000
    assert f.span_ns is not None and f.span_ns[1] > f.span_ns[0]  # marked on the timelines
    # ~400 MiB of 16 GiB is 2.4 points, not 5, but at ~2.4 GiB/min memory ends within the hour
    assert f.severity is Severity.CRITICAL


def test_growth_that_levels_off_is_not_a_leak() -> None:
    s = steps(200, phases_ms={"forward": 50})
    rss = [400 * MIB + min(i, 30) * 10 * MIB for i in range(100)]
    assert memory_growth(RuleContext(record(s, system=samples(s, rss=rss)))) == []


def test_flat_or_noisy_rss_is_silent() -> None:
    s = steps(200, phases_ms={"forward": 50})
    noisy = [500 * MIB + (i % 7) * 8 * MIB for i in range(100)]
    assert memory_growth(RuleContext(record(s, system=samples(s, rss=noisy)))) == []


def test_gpu_memory_growth_uses_five_points_of_gpu_memory() -> None:
    s = steps(200, phases_ms={"forward": 50})
    total = 80 * 2**30
    gpu = tuple(
        GpuSample(
            t_ns=i * 50_000_000,
            index=0,
            mem_used_bytes=10 * 2**30 + i * 64 * MIB,
            mem_total_bytes=total,
            util_pct=90.0,
        )
        for i in range(200)
    )
    findings = memory_growth(RuleContext(record(s, system=samples(s), gpu=gpu)))
    (f,) = [f for f in findings if "GPU" in f.title]
    assert f.severity is Severity.CRITICAL


def test_gpu_memory_filled_before_the_steps_is_not_growth() -> None:
    # A healthy GPU job (the H200 zoo's h01): its memory rose by steps over the 10 s it took
    # to start (CUDA, cuDNN, the model, the data), then stayed flat through its 2 s of steps;
    # read over the whole run, the start was "8 GiB/min of growth".
    s = steps(40, phases_ms={"forward": 50}, start_ms=10_000)
    gpu = tuple(
        GpuSample(
            t_ns=i * 100_000_000,
            index=0,
            mem_used_bytes=(600 + 18 * min(i, 100)) * MIB,
            mem_total_bytes=80 * 2**30,
        )
        for i in range(120)
    )
    findings = memory_growth(RuleContext(record(s, system=samples(s), gpu=gpu)))
    assert [f for f in findings if "GPU" in f.title] == []


def test_rss_rising_as_workers_join_the_tree_is_not_a_leak() -> None:
    import dataclasses

    s = steps(200, phases_ms={"forward": 50})
    rss = [400 * MIB + i * 4 * MIB for i in range(100)]
    # The same rise, but made by DataLoader workers starting one after another (the tree
    # grows from 1 to 5 processes), then flat once they all run.
    grown = [
        dataclasses.replace(x, job_processes=min(5, 1 + i // 20), job_rss_bytes=rss[min(i, 80)])
        for i, x in enumerate(samples(s, rss=rss))
    ]
    assert memory_growth(RuleContext(record(s, system=tuple(grown)))) == []
    # A leak that goes on after the workers started is still found.
    leaking = [
        dataclasses.replace(x, job_processes=5 if i >= 10 else 1 + i // 3) for i, x in
        enumerate(samples(s, rss=rss))
    ]  # fmt: skip
    (f,) = memory_growth(RuleContext(record(s, system=tuple(leaking))))
    assert f.rule == "memory-growth"


def split(s: list, main: Callable[[int], int], workers: Callable[[int], int]) -> tuple:
    """Samples over steps ``s`` with the main process's and the workers' RSS apart; the
    worker starts at 0.3 s."""
    return tuple(
        dataclasses.replace(
            x,
            job_processes=1 if i < 3 else 2,
            main_rss_bytes=main(i),
            job_rss_bytes=main(i) + (workers(i) if i >= 3 else 0),
        )
        for i, x in enumerate(samples(s))
    )


def test_main_process_is_judged_apart_from_its_workers() -> None:
    short = steps(120, phases_ms={"forward": 50})  # 6 s, like tests/scenarios/healthy_workers
    long = steps(300, phases_ms={"forward": 50})  # 15 s

    def flat(i: int) -> int:
        return 600 * MIB

    def importing(i: int) -> int:  # a spawned worker still importing torch on a slow machine
        return 100 * MIB + i * 4 * MIB

    def leaking(i: int) -> int:
        return 400 * MIB + i * 3 * MIB

    # The worker climbs through the whole short run: start-up, not a leak (the main process
    # is flat; workers are judged only from 10 s after the tree last changed size).
    assert memory_growth(RuleContext(record(short, system=split(short, flat, importing)))) == []
    # Judged as one tree (the old way), the same samples looked like a leak.
    tree_only = [dataclasses.replace(x, main_rss_bytes=None) for x in split(short, flat, importing)]
    assert memory_growth(RuleContext(record(short, system=tree_only)))
    # The main process leaking is found whatever its workers do.
    (f,) = memory_growth(RuleContext(record(short, system=split(short, leaking, importing))))
    assert f.title.startswith("process RSS")
    # Workers that keep growing long after they started are a leak of their own.
    (w,) = memory_growth(RuleContext(record(long, system=split(long, flat, leaking))))
    assert w.title.startswith("DataLoader workers' RSS")


def _with_heap(
    s: tuple, rss: Callable[[int], int], heap: Callable[[int], int], every: int = 5
) -> tuple:
    """Samples over steps ``s`` with the main process's RSS and, every ``every``-th sample
    (10 Hz: 2 Hz by default, as the reader reads it), its heap in use."""
    return tuple(
        dataclasses.replace(x, main_rss_bytes=rss(i), job_rss_bytes=rss(i), main_heap_bytes=(
            heap(i) if i % every == 0 else None))
        for i, x in enumerate(samples(s))
    )  # fmt: skip


def _rss(i: int) -> int:
    return 390 * MIB + i * 2 * MIB


def test_rss_rise_without_heap_rise_is_the_allocator_not_a_leak() -> None:
    s = steps(120, phases_ms={"forward": 50})
    # healthy_workers.py: RSS +~100 MiB while the heap in use stays at ~180 MiB (+-4 MiB).
    flat = _with_heap(s, _rss, lambda i: 180 * MIB + (i % 3) * 4 * MIB)
    (f,) = memory_growth(RuleContext(record(s, system=flat)))
    assert f.severity is Severity.INFO and "not the memory in use" in f.title
    ev = {e.metric: e.value for e in f.evidence}
    assert abs(ev["memory in use (malloc heap), trend over the same time"]) < 8
    # memory_growth.py: the heap rises with RSS: a leak, with the heap as evidence.
    rising = _with_heap(s, _rss, lambda i: 190 * MIB + i * MIB)
    (leak,) = memory_growth(RuleContext(record(s, system=rising)))
    assert leak.severity is not Severity.INFO
    assert any(e.source == "mallinfo2" for e in leak.evidence)


def test_small_steady_heap_rise_under_a_large_rss_rise_is_a_leak() -> None:
    # Losses kept with their graphs (measured): the heap rises ~10% as fast as RSS, zigzagging
    # by +-4 MiB; the small objects kept pin the freed activations' pages, so RSS climbs.
    s = steps(120, phases_ms={"forward": 50})
    heap = _with_heap(s, _rss, lambda i: 150 * MIB + i * MIB // 4 + (i % 2) * 4 * MIB)
    (f,) = memory_growth(RuleContext(record(s, system=heap)))
    assert f.severity is not Severity.INFO
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["memory in use (malloc heap), trend over the same time"] >= 8
    assert ev["memory in use, rise per step"] > 0


def test_not_a_leak_only_when_the_heap_was_shown_flat() -> None:
    # The heap read too seldom (once a second, 5 readings) to show it flat, or a run too
    # short to read it 6 times (a job of 4 DataLoader workers: 2.5 s of steps, RSS +96 MiB on a
    # CI host, its heap flat): RSS's rise alone is no verdict either way. Info, saying why.
    for s, every in ((steps(120, phases_ms={"forward": 50}), 12), (steps(50, phases_ms={
            "forward": 50}), 5)):  # fmt: skip
        seldom = _with_heap(s, lambda i: 390 * MIB + i * 5 * MIB, lambda i: 180 * MIB, every)
        (f,) = memory_growth(RuleContext(record(s, system=seldom)))
        assert f.severity is Severity.INFO and "too few times to tell" in f.title
        assert "not a leak" not in f.explanation
        ev = {e.metric: e.value for e in f.evidence}
        assert ev["memory in use, readings over the rise"] == 5
        assert f.fix.summary.startswith("Run more steps")
    # With no heap to read at all (not glibc), RSS is all there is: it judges alone.
    none = tuple(dataclasses.replace(x, main_heap_bytes=None) for x in seldom)
    (alone,) = memory_growth(RuleContext(record(s, system=none)))
    assert alone.severity is not Severity.INFO


def test_a_small_trend_through_large_swings_is_no_evidence_of_no_leak() -> None:
    """A held-out job that kept every step's graph (a 2,048-wide MLP at batch 256) read "not
    a leak" from a trend of +3 MiB through readings that swing by a step's activations: the
    trend must be shown flat (its bound under 8 MiB) for that; otherwise no verdict."""
    s = steps(120, phases_ms={"forward": 50})
    swinging = [154, 263, 265, 150, 156, 262, 264, 151, 155, 263, 262, 152]
    system = _with_heap(s, _rss, lambda i: swinging[min(max(0, i // 5 - 3), 11)] * MIB)
    (f,) = memory_growth(RuleContext(record(s, system=system)))
    ev = {e.metric: e.value for e in f.evidence}
    assert abs(ev["memory in use (malloc heap), trend over the same time"]) < 8
    assert f.severity is Severity.INFO and "too uneven to tell" in f.title
    assert "not a leak" not in f.explanation and "may have risen by up to" in f.explanation
    assert ev["memory in use, upper bound of its trend's rise"] >= 8
    # the same readings without the swing: flat, shown so
    system = _with_heap(s, _rss, lambda i: (180 + (i // 5) % 2) * MIB)
    (g,) = memory_growth(RuleContext(record(s, system=system)))
    assert "not the memory in use" in g.title and "it is not a leak" in g.explanation


def test_heap_rising_steadily_is_a_leak_while_rss_is_noisy() -> None:
    # A list of outputs kept with their graphs: the heap climbs ~1 MiB a step; RSS swings as
    # the allocator trims and grows, so RSS alone is no steady rise.
    s = steps(120, phases_ms={"forward": 50})
    noisy = _with_heap(
        s, lambda i: 600 * MIB + (i % 7) * 80 * MIB, lambda i: 200 * MIB + i * 2 * MIB
    )
    (f,) = memory_growth(RuleContext(record(s, system=noisy)))
    assert f.title.startswith("Memory the job holds grows every step")
    assert f.severity is not Severity.INFO
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["rate per step"] > 0
    assert all(e.source != "sampler" for e in f.evidence)


def test_a_heap_that_swings_is_not_a_leak() -> None:
    # Measured on healthy_workers.py: RSS +117 MiB while the heap in use swung down and back
    # (a batch's buffers): no steady rise, so the allocator's, not a leak.
    s = steps(100, phases_ms={"forward": 50})
    swing = [174, 156, 156, 156, 156, 154, 154, 170, 172, 174]
    system = _with_heap(s, _rss, lambda i: swing[min(i // 5, len(swing) - 1)] * MIB)
    (f,) = memory_growth(RuleContext(record(s, system=system)))
    assert f.severity is Severity.INFO


def test_a_heap_that_flips_between_two_levels_is_not_a_leak() -> None:
    # A job of one DataLoader worker (an MLP 2,048 wide): the heap reads 172 or 188 MiB
    # as a reading falls before or after a step's 16 MiB gradient. Five chunk means of these
    # readings rise 3 times in 4 by chance; the trend through them is not significant.
    s = steps(120, phases_ms={"forward": 50})
    flips = [172, 173, 172, 189, 188, 189, 172, 173, 188, 189]
    # the samples start 1 s before the steps: the readings in them are samples 15, 20 ... 60
    system = _with_heap(s, _rss, lambda i: flips[min(max(0, i // 5 - 3), len(flips) - 1)] * MIB)
    ctx = RuleContext(record(s, system=system))
    readings = [x.main_heap_bytes // MIB for x in ctx.system if x.main_heap_bytes]
    assert readings == flips
    (f,) = memory_growth(ctx)
    assert f.severity is Severity.INFO and "too uneven to tell" in f.title


def test_a_flat_heap_whose_readings_creep_by_kilobytes_is_not_a_leak() -> None:
    # Measured on healthy_workers.py in a fresh clone: 156, 156, 158, 158, 174, 158, 158, 158,
    # 174 MiB, each reading a few KiB above the last one of the same MiB.
    s = steps(90, phases_ms={"forward": 50})
    flat = [156, 156, 158, 158, 174, 158, 158, 158, 174]
    system = _with_heap(s, _rss, lambda i: flat[min(i // 5, len(flat) - 1)] * MIB + i * 4096)
    (f,) = memory_growth(RuleContext(record(s, system=system)))
    assert f.severity is Severity.INFO


def test_memory_read_only_before_the_steps_is_not_judged() -> None:
    """A short job's system samples all fell in its start-up (imports, a process group's
    set-up) before its first measured step: what rose then is no leak of its training."""
    s = steps(100, phases_ms={"forward": 50}, start_ms=20_000.0)
    rising = samples(s, rss=[300 * 2**20 + i * 20 * 2**20 for i in range(30)])
    assert memory_growth(RuleContext(record(s, system=rising)))  # in the steps: a leak
    early = [dataclasses.replace(x, t_ns=x.t_ns - 10 * 10**9) for x in rising]  # before them
    ctx = RuleContext(record(s, system=early))
    assert ctx.system == () and memory_growth(ctx) == []


def test_a_heap_rising_along_a_noisy_trend_is_a_leak_while_rss_stalls() -> None:
    """Measured on memory_growth.py's mild dose beside two busy processes: each reading falls
    anywhere in a step (a 16 MiB gradient held from backward to zero_grad), so successive
    readings need not rise; RSS stood still for seconds after the allocation window (the job
    reused what tracemalloc freed). The trend of the heap is the leak."""
    s = steps(150, phases_ms={"forward": 50})
    read = [192, 195, 199, 188, 193, 216, 220, 208, 224, 214, 220, 242, 232, 255, 242]
    system = _with_heap(s, lambda i: 480 * MIB, lambda i: read[min(i // 5, len(read) - 1)] * MIB)
    (f,) = memory_growth(RuleContext(record(s, system=system)))
    assert f.title.startswith("Memory the job holds grows every step")
    assert f.severity is not Severity.INFO
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["trend t-statistic"] >= 4 and ev["rise"] >= 32


def test_a_heap_that_rose_and_stopped_or_rose_a_little_is_no_leak() -> None:
    """A cache filled in the first half (then flat), or a steady rise under 32 MiB: the heap
    alone names no leak."""
    s = steps(150, phases_ms={"forward": 50})
    filled = _with_heap(s, lambda i: 480 * MIB, lambda i: (150 + 2 * min(i, 35)) * MIB)
    assert memory_growth(RuleContext(record(s, system=filled))) == []
    little = _with_heap(s, lambda i: 480 * MIB, lambda i: 150 * MIB + i * MIB // 4)
    assert memory_growth(RuleContext(record(s, system=little))) == []
    swinging = _with_heap(  # readings anywhere in a step: +-16 MiB around a flat heap
        s, lambda i: 480 * MIB, lambda i: (150 + 16 * (i * 7 % 3 == 0)) * MIB
    )
    assert memory_growth(RuleContext(record(s, system=swinging))) == []


def test_a_swing_read_low_early_and_high_late_is_not_a_leak() -> None:
    """tests/scenarios/oversized_network.py's mild dose: a 3,072-unit layer's 36 MiB gradient
    is in or out as a reading falls, and its readings may fall low early and high late. The
    trend through them is significant (t >= 4) and rises past the 32 MiB floor, but no more
    than the swing between readings can fake: no leak. The same readings with a leak twice
    the swing under them are one."""
    s = steps(132, phases_ms={"forward": 50})
    swing = [204, 206, 205, 204, 242, 206, 242, 242, 242, 241, 242]

    def reading(i: int) -> int:  # the readings in the steps are samples 15, 20 ... (as above)
        return swing[min(max(0, i // 5 - 3), len(swing) - 1)] * MIB

    system = _with_heap(s, lambda i: 480 * MIB, reading)
    ctx = RuleContext(record(s, system=system))
    assert [x.main_heap_bytes // MIB for x in ctx.system if x.main_heap_bytes] == swing
    assert memory_growth(ctx) == []

    leak = _with_heap(s, lambda i: 480 * MIB, lambda i: reading(i) + i * MIB)
    (f,) = memory_growth(RuleContext(record(s, system=leak)))
    assert f.title.startswith("Memory the job holds grows every step")
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["rise"] >= 1.5 * ev["largest swing between readings"]
