from __future__ import annotations

from tests.builders import record, steps
from traindoctor.model import Severity
from traindoctor.rules import RuleContext
from traindoctor.rules.step_outliers import step_outliers


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
