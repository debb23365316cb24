"""competing-processes, thread-oversubscription, small-batch: rules on machine readings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stepdoctor.model import GpuProcess, GpuSample, LoaderInfo, ProcessUsage, Severity
from stepdoctor.rules import RuleContext
from stepdoctor.rules.competing_processes import competing_processes
from stepdoctor.rules.small_batch import small_batch
from stepdoctor.rules.thread_oversubscription import thread_oversubscription
from tests.builders import env, record, samples, steps


def test_competing_processes_names_the_top_ones() -> None:
    s = steps(50, phases_ms={"forward": 100})
    hog = (ProcessUsage(pid=42, name="stress", cpu_pct=190.0),)
    system = tuple(replace(x, top_others=hog) for x in samples(s, job_cpu=100.0, other_cpu=200.0))
    (f,) = competing_processes(RuleContext(record(s, system=system)))
    assert f.severity is Severity.CRITICAL  # 200 of 400 %: half the machine
    assert "stress (pid 42" in str({e.metric: e.value for e in f.evidence}["top other processes"])
    assert f.speedup.factor == 3.0  # min(400, 100 + 200) / 100
    # A job running one thread gains one core at most: min(400, 100, 100 + 200) / 60.
    one = tuple(replace(x, top_others=hog) for x in samples(s, job_cpu=60.0, other_cpu=200.0))
    rec = record(s, system=one, facts=env(torch__num_threads=1))
    (g,) = competing_processes(RuleContext(rec))
    assert g.speedup.factor == pytest.approx(100 / 60)


def test_competing_processes_silent_on_a_quiet_machine() -> None:
    s = steps(50, phases_ms={"forward": 100})
    assert competing_processes(RuleContext(record(s, system=samples(s, other_cpu=20.0)))) == []


def test_competing_processes_on_the_gpu() -> None:
    s = steps(50, phases_ms={"forward": 100})
    procs = (
        GpuProcess(pid=1, name="python", mem_bytes=2**30, is_job=True),
        GpuProcess(pid=2, name="other", mem_bytes=2**31, is_job=False),
    )
    gpu = (GpuSample(t_ns=0, index=0, processes=procs),)
    (f,) = competing_processes(RuleContext(record(s, system=samples(s), gpu=gpu)))
    assert "other (pid 2 on GPU 0, 2048 MiB)" in f.explanation


def test_thread_oversubscription_fires_at_twice_the_cores() -> None:
    s = steps(50, phases_ms={"forward": 100})
    facts = env(cpu__affinity=2, torch__num_threads=16, env__OMP_NUM_THREADS=None)
    (f,) = thread_oversubscription(RuleContext(record(s, cores=2, facts=facts)))
    assert f.fix.snippet == "torch.set_num_threads(2)"
    assert {e.metric: e.value for e in f.evidence}["compute threads per core"] == 8.0


def test_thread_oversubscription_counts_workers_and_omp() -> None:
    s = steps(50, phases_ms={"forward": 100})
    facts = env(cpu__affinity=4, env__OMP_NUM_THREADS="4")
    loader = LoaderInfo(loader_id=1, num_workers=4)
    (f,) = thread_oversubscription(RuleContext(record(s, cores=4, facts=facts, loaders=[loader])))
    assert f.title == "8 compute threads on 4 cores"


def test_thread_oversubscription_silent_when_sized_to_cores() -> None:
    s = steps(50, phases_ms={"forward": 100})
    facts = env(cpu__affinity=4, torch__num_threads=4)
    assert thread_oversubscription(RuleContext(record(s, cores=4, facts=facts))) == []


def test_small_batch_when_per_step_costs_dominate() -> None:
    s = steps(100, phases_ms={"forward": 0.5, "optimizer": 0.5}, batch=1)
    (f,) = small_batch(RuleContext(record(s, cores=2, system=samples(s, job_cpu=190.0))))
    assert f.severity is Severity.CRITICAL
    assert abs(f.speedup.factor - 1 / (0.5 / 32 + 0.5)) < 1e-9


def test_small_batch_silent_for_big_batches_or_compute_bound_steps() -> None:
    s = steps(100, phases_ms={"forward": 0.5, "optimizer": 0.5}, batch=64)
    assert small_batch(RuleContext(record(s, system=samples(s)))) == []
    compute = steps(100, phases_ms={"forward": 10, "optimizer": 0.1}, batch=4)
    assert small_batch(RuleContext(record(compute, system=samples(compute)))) == []


def test_small_batch_on_an_idle_gpu() -> None:
    s = steps(100, phases_ms={"forward": 10}, batch=2)
    gpu = tuple(GpuSample(t_ns=i, index=0, util_pct=25.0) for i in range(10))
    (f,) = small_batch(RuleContext(record(s, system=samples(s), gpu=gpu)))
    assert f.speedup.factor == 4.0
