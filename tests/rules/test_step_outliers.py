from __future__ import annotations

from dataclasses import replace

import pytest

from stepdoctor.model import ProfiledSpan, Severity, StepTiming, SystemSample
from stepdoctor.rules import RuleContext
from stepdoctor.rules.step_outliers import step_outliers
from tests.builders import record, slowed, steps


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
