"""step-outliers defers to shared-model-threads when threads contend for one model."""

from __future__ import annotations

from stepdoctor.model import ConcurrencyStat, Severity
from stepdoctor.rules import RuleContext
from stepdoctor.rules.step_outliers import step_outliers
from tests.builders import record, steps


def test_outliers_from_threads_sharing_a_model_are_info_with_the_cause() -> None:
    s = steps(300, phases_ms={"forward": 10}, every={20: {"forward": 100}})
    (alone,) = step_outliers(RuleContext(record(s)))
    assert alone.severity is Severity.WARNING
    shared = ConcurrencyStat(
        model_id=1, class_name="Net", calls=300, threads=4, max_concurrent=4, concurrent_calls=200
    )
    (f,) = step_outliers(RuleContext(record(s, concurrency=(shared,))))
    assert f.severity is Severity.INFO and "Several threads call Net at once" in f.explanation
