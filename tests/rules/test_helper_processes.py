from __future__ import annotations

import dataclasses

from stepdoctor.model import LoaderWorker, ProcessUsage, Severity, SpeedupKind
from stepdoctor.rules import RuleContext
from stepdoctor.rules.helper_processes import helper_processes
from tests.builders import record, samples, steps

HELPER, WORKER = 4242, 4343


def _run(
    *,
    helper_pct: float,
    busy_cores: float = 2.0,
    main_pct: float = 60.0,
    workers: tuple[int, ...] = (),
    slow_while_busy: bool = False,
) -> RuleContext:
    """Steps of 20 ms on 2 cores; every 20th sample (2 s) reads the job's children: a helper
    at ``helper_pct`` (or, with ``slow_while_busy``, busy in the first half only, when steps
    take twice as long) and a DataLoader worker at 50%."""
    s = steps(400, phases_ms={"forward": 20})
    if slow_while_busy:
        t, laid = s[0].start_ns, []
        for st in s:
            ns = 40_000_000 if st.index < 200 else 20_000_000
            laid.append(
                dataclasses.replace(st, start_ns=t, end_ns=t + ns, phase_ns={"forward": ns})
            )
            t += ns
        s = tuple(laid)
    half = (s[0].start_ns + s[-1].end_ns) // 2
    out = []
    for i, x in enumerate(samples(s)):
        children = ()
        if i % 20 == 19:
            pct = helper_pct if not slow_while_busy or x.t_ns <= half else 0.0
            children = (
                ProcessUsage(pid=HELPER, name="python", cpu_pct=pct),
                ProcessUsage(pid=WORKER, name="python", cpu_pct=50.0),
            )
        out.append(
            dataclasses.replace(
                x,
                cpu_pct_per_core=(100.0 * busy_cores / 2,) * 2,
                job_cpu_pct=main_pct + helper_pct + 50.0,
                children_cpu_pct=helper_pct + 50.0,
                job_children=children,
            )
        )
    loader_workers = tuple(LoaderWorker(pid=pid, loader_id=1) for pid in workers)
    return RuleContext(record(s, cores=2, system=out, loader_workers=loader_workers))


def test_helpers_taking_the_jobs_cpu_on_saturated_cores_are_named() -> None:
    (f,) = helper_processes(_run(helper_pct=120.0, workers=(WORKER,)))
    assert f.severity is Severity.CRITICAL  # 120 of the 180% the job's processes got
    ev = {e.metric: e.value for e in f.evidence}
    assert "pid 4242" in str(ev["helper processes"])
    assert "pid 4343" not in str(ev["helper processes"])  # the DataLoader worker is not one
    assert f.speedup.factor > 1.0 and f.speedup.kind is SpeedupKind.MODELLED


def test_a_dataloader_worker_is_no_helper() -> None:
    # The same job without the helper: the worker alone is the input pipeline at work.
    assert helper_processes(_run(helper_pct=0.0, workers=(WORKER,))) == []
    # Unknown to the loaders, the worker's 50% of the job's CPU would count as a helper's.
    (f,) = helper_processes(_run(helper_pct=0.0))
    assert "pid 4343" in f.explanation


def test_helpers_on_cores_with_room_to_spare_are_silent() -> None:
    assert helper_processes(_run(helper_pct=120.0, busy_cores=1.2, workers=(WORKER,))) == []


def test_small_helpers_are_silent() -> None:
    assert helper_processes(_run(helper_pct=10.0, workers=(WORKER,))) == []


def test_step_time_while_helpers_ran_is_the_measured_effect() -> None:
    (f,) = helper_processes(_run(helper_pct=150.0, workers=(WORKER,), slow_while_busy=True))
    assert f.speedup.kind is SpeedupKind.MEASURED
    assert 1.8 < f.speedup.factor < 2.2  # 40 ms steps while busy against 20 ms
