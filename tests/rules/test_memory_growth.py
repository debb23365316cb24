from __future__ import annotations

from tests.builders import record, samples, steps
from traindoctor.model import GpuSample, Severity
from traindoctor.rules import RuleContext
from traindoctor.rules.memory_growth import memory_growth

MIB = 2**20


def test_steady_rss_rise_fires_with_rate_per_step() -> None:
    s = steps(200, phases_ms={"forward": 50})
    rss = [400 * MIB + i * 4 * MIB for i in range(100)]
    (f,) = memory_growth(RuleContext(record(s, system=samples(s, rss=rss))))
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["rise"] > 300
    assert ev["rate per step"] > 1000
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
