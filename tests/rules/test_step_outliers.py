from __future__ import annotations

from dataclasses import replace

import pytest

from stepdoctor.model import ProcessUsage, ProfiledSpan, Severity, StepTiming, SystemSample
from stepdoctor.rules import RuleContext
from stepdoctor.rules.step_outliers import step_outliers
from tests.builders import record, samples, slowed, steps


def test_periodic_outliers_found_with_their_phase() -> None:
    s = steps(300, phases_ms={"forward": 10, "other": 1}, every={20: {"other": 40}})
    (f,) = step_outliers(RuleContext(record(s)))
    assert f.severity is Severity.WARNING
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["phase that grew"] == "other"
    assert ev["when"] == "every 20 steps"
    assert ev["outlier steps"] >= 11


def test_checkpoint_steps_are_left_to_checkpoint_stalls() -> None:
    s = steps(300, phases_ms={"forward": 10}, every={20: {"checkpoint": 40}})
    assert step_outliers(RuleContext(record(s))) == []


def test_needs_100_steps_and_more_than_10_outliers() -> None:
    few = steps(90, phases_ms={"forward": 10}, every={9: {"other": 40}})
    assert step_outliers(RuleContext(record(few))) == []
    rare = steps(300, phases_ms={"forward": 10}, every={50: {"other": 40}})
    assert step_outliers(RuleContext(record(rare))) == []


def test_gc_is_named_when_pauses_explain_the_outliers() -> None:
    base = steps(300, phases_ms={"forward": 10}, every={20: {"forward": 40}})
    s = tuple(
        type(st)(
            **{
                **{f: getattr(st, f) for f in st.__dataclass_fields__},
                "gc_pause_ns": 40_000_000 if st.duration_ns > 20_000_000 else 0,
            }
        )
        for st in base
    )
    (f,) = step_outliers(RuleContext(record(s)))
    assert {e.metric: e.value for e in f.evidence}["phase that grew"] == "gc"


def test_steps_under_stepdoctors_own_profiler_are_left_out() -> None:
    # 12 steps slowed by a --trace capture: outliers of the profiler's making, not the job's
    s = slowed(steps(300, phases_ms={"forward": 10}), range(120, 132), forward_ms=40)
    (f,) = step_outliers(RuleContext(record(s)))  # without the span: all 12 are outliers
    assert {e.metric: e.value for e in f.evidence}["outlier steps"] == 12
    span = ProfiledSpan(start_ns=s[120].start_ns + 1, end_ns=s[131].end_ns - 1)
    ctx = RuleContext(record(s, profiled=(span,)))
    assert ctx.profiled_steps == frozenset(range(120, 132))
    assert step_outliers(ctx) == []
    # nor are they the job's in the summary, nor in what the other rules read
    assert ctx.summary.mean_step_ms == pytest.approx(10.0)
    assert RuleContext(record(s)).summary.mean_step_ms > 11.0
    assert not ctx.profiled_steps & {st.index for st in ctx.steps}
    assert ctx.summary.profiled_note.startswith("steps 120-131 ran under stepdoctor's")
    # outliers elsewhere are still found, and the finding says what it left out
    s = slowed(s, range(150, 300, 10), forward_ms=40)
    (f,) = step_outliers(RuleContext(record(s, profiled=(span,))))
    assert {e.metric: e.value for e in f.evidence}["outlier steps"] == 15
    assert "12 steps under stepdoctor's own torch.profiler capture were left out" in (f.explanation)


def _others(step_list: tuple[StepTiming, ...], busy: set[int], cpus: int) -> list[SystemSample]:
    """A sample at the end of every step: others take ``cpus`` cores in the ``busy`` steps."""
    return [
        SystemSample(
            t_ns=s.end_ns,
            job_cpu_pct=100.0,
            other_cpu_pct=100.0 * cpus if s.index in busy else 0.0,
        )
        for s in step_list
    ]


def test_outliers_while_other_processes_took_the_cpus_are_theirs() -> None:
    # every 20th step slow, and another process ran on 2 of the 4 cores exactly then
    s = steps(300, phases_ms={"forward": 10}, every={20: {"forward": 40}})
    slow = {st.index for st in s if st.duration_ns > 20 * 10**6}
    (f,) = step_outliers(RuleContext(record(s, system=_others(s, slow, cpus=2))))
    assert f.severity is Severity.INFO
    assert "outside the job" in f.explanation and "other processes" in f.explanation
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["other processes' CPU during the outliers"] == pytest.approx(0.5)


def test_other_processes_that_ran_all_along_or_took_little_explain_nothing() -> None:
    s = steps(300, phases_ms={"forward": 10}, every={20: {"forward": 40}})
    slow = {st.index for st in s if st.duration_ns > 20 * 10**6}
    everywhere = {st.index for st in s}
    for system in (
        _others(s, everywhere, cpus=2),  # the same during every step: no rise with the outliers
        _others(s, slow, cpus=0),  # nothing else ran
        [  # a rise of a fifth of the machine: less than competing-processes' quarter
            replace(x, other_cpu_pct=80.0 if x.other_cpu_pct else 0.0)
            for x in _others(s, slow, cpus=1)
        ],
    ):
        (f,) = step_outliers(RuleContext(record(s, system=system)))
        assert f.severity is Severity.WARNING, f.explanation
        assert "outside the job" not in f.explanation


def _beside_helpers(outliers: frozenset[int], *, helpers_busy_until: int) -> RuleContext:
    """300 steps of 10 ms on 2 saturated cores, 40 ms more in ``outliers``; the job's helper
    process (a ``multiprocessing`` pool, not a DataLoader worker) busy at 120% until step
    ``helpers_busy_until``, read every 2 s as the reader does."""
    s = slowed(steps(300, phases_ms={"forward": 10}), outliers, forward_ms=40)
    until = s[helpers_busy_until].end_ns
    out = []
    for i, x in enumerate(samples(s, job_cpu=180.0, children_cpu=120.0)):
        busy = x.t_ns <= until
        children = (ProcessUsage(pid=4242, name="python", cpu_pct=120.0 if busy else 0.0),)
        out.append(
            replace(
                x,
                cpu_pct_per_core=(100.0, 100.0),
                job_children=children if i % 20 == 19 else (),
            )
        )
    return RuleContext(record(s, cores=2, system=tuple(out)))


# uneven steps apart, as the scheduler makes them: no period
_SCATTERED = frozenset({13, 17, 31, 38, 52, 59, 71, 86, 88, 97, 104, 119, 123, 141})


def test_outliers_while_the_jobs_helpers_take_its_cpus_are_their_symptom() -> None:
    (f,) = step_outliers(_beside_helpers(_SCATTERED, helpers_busy_until=299))
    assert f.severity is Severity.INFO
    assert "Processes your job started took" in f.explanation
    ev = {e.metric: e.value for e in f.evidence}
    assert ev["your helper processes' share of the job's CPU"] > 0.25


def test_outliers_after_the_helpers_stopped_are_the_jobs_own() -> None:
    late = frozenset(i + 150 for i in _SCATTERED)
    (f,) = step_outliers(_beside_helpers(late, helpers_busy_until=120))
    assert f.severity is Severity.WARNING
    assert "Processes your job started" not in f.explanation


def test_periodic_outliers_beside_helpers_are_the_loops_own() -> None:
    every_20 = frozenset(range(10, 300, 20))
    (f,) = step_outliers(_beside_helpers(every_20, helpers_busy_until=299))
    assert f.severity is Severity.WARNING
