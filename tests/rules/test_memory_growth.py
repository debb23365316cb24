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


def test_rss_rise_without_heap_rise_is_the_allocator_not_a_leak() -> None:
    s = steps(120, phases_ms={"forward": 50})

    def rss(i: int) -> int:
        return 390 * MIB + i * 2 * MIB

    def with_heap(heap: Callable[[int], int]) -> tuple:
        # The heap is read once a second, with the disk and network counters.
        return tuple(
            dataclasses.replace(x, main_rss_bytes=rss(i), job_rss_bytes=rss(i), main_heap_bytes=(
                heap(i) if i % 10 == 0 else None))
            for i, x in enumerate(samples(s))
        )  # fmt: skip

    # healthy_workers.py: RSS +~100 MiB while the heap in use stays at ~180 MiB.
    (f,) = memory_growth(RuleContext(record(s, system=with_heap(lambda i: 180 * MIB + i % 3))))
    assert f.severity is Severity.INFO and "not the memory in use" in f.title
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["malloc heap in use, rise over the same time"] == 0.0
    # memory_growth.py: the heap rises with RSS: a leak, with the heap as evidence.
    (leak,) = memory_growth(RuleContext(record(s, system=with_heap(lambda i: 190 * MIB + i * MIB))))
    assert leak.severity is not Severity.INFO
    assert any(e.source == "mallinfo2" for e in leak.evidence)
