from __future__ import annotations

import pytest

from stepdoctor.model import ProfiledSpan, Severity
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
