"""A symptom (outlier steps) is folded into the finding on its cause, never ranked above it."""

from __future__ import annotations

import dataclasses

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup, SpeedupKind, StepTiming
from stepdoctor.report import build_report
from stepdoctor.rules import RuleContext
from stepdoctor.rules.step_outliers import step_outliers
from stepdoctor.rules.symptoms import SYMPTOM_OF, fold_symptoms, symptom_evidence
from tests.builders import record, steps


def _gc_in(s: tuple[StepTiming, ...], slow_ms: float) -> tuple[StepTiming, ...]:
    """``s`` with a collection of ``slow_ms`` in each step that took longer than 20 ms."""
    return tuple(
        dataclasses.replace(
            st,
            gc_count=1,
            gc_pause_ns=int(slow_ms * 1e6),
            gc_max_pause_ns=int(slow_ms * 1e6),
        )
        if st.duration_ns > 20_000_000
        else st
        for st in s
    )


def _finding(rule: str, severity: Severity, factor: float, *evidence: Evidence) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        title=f"{rule} title",
        explanation=f"{rule} explained.",
        evidence=evidence,
        speedup=Speedup(factor=factor, basis="b", kind=SpeedupKind.MODELLED),
        fix=Fix(summary=f"fix {rule}"),
    )


def test_outliers_a_collection_ran_in_are_the_gc_findings_evidence() -> None:
    """Every 20th step a 60 ms collection (1.7 s to win back): gc-pauses is the finding, the
    outliers its evidence; the outlier rule alone names it as their cause."""
    s = _gc_in(steps(600, phases_ms={"forward": 10}, every={20: {"forward": 60}}), 60)
    ctx = RuleContext(record(s))
    (alone,) = step_outliers(ctx)
    said = {e.metric: e.value for e in alone.evidence}
    assert said[SYMPTOM_OF] == "gc-pauses" and said["outlier steps"] >= 11
    report = build_report(record(s), ctx)
    rules = [f.rule for f in report.findings]
    assert "gc-pauses" in rules and "step-outliers" not in rules, rules
    (gc,) = (f for f in report.findings if f.rule == "gc-pauses")
    evidence = {e.metric: e.value for e in gc.evidence}
    assert evidence["symptom: outlier steps"] == said["outlier steps"]
    assert evidence["symptom: when"] == "every 20 steps"
    assert SYMPTOM_OF not in evidence and "symptom: " + SYMPTOM_OF not in evidence
    assert f"Its symptom: {said['outlier steps']} outlier steps (every 20 steps)" in gc.explanation
    assert gc.severity.rank <= alone.severity.rank


def test_outliers_without_a_finding_on_their_cause_stay_and_point_nowhere() -> None:
    """A grown data wait has no rule of its own (an epoch's worker restart): the outliers are
    the finding, and carry no pointer."""
    s = steps(300, phases_ms={"forward": 10, "data_wait": 1}, every={20: {"data_wait": 40}})
    report = build_report(record(s))
    (outliers,) = (f for f in report.findings if f.rule == "step-outliers")
    assert SYMPTOM_OF not in {e.metric for e in outliers.evidence}
    assert {e.metric: e.value for e in outliers.evidence}["phase that grew"] == "data_wait"


def test_a_symptom_folds_into_a_cause_as_severe_keeping_its_figure_and_fix() -> None:
    cause = _finding("gc-pauses", Severity.WARNING, 1.2, Evidence(metric="gc share", value=0.2))
    symptom = _finding(
        "step-outliers",
        Severity.WARNING,
        1.3,
        Evidence(metric="outlier steps", value=12),
        symptom_evidence("gc-pauses", "what grew"),
    )
    other = _finding("input-bound", Severity.WARNING, 1.2)
    (gc, inputs) = fold_symptoms([cause, symptom, other])
    assert (gc.rule, inputs) == ("gc-pauses", other)
    assert (gc.severity, gc.speedup, gc.fix) == (cause.severity, cause.speedup, cause.fix)
    assert [e.metric for e in gc.evidence] == ["gc share", "symptom: outlier steps"]
    # no finding on the cause: the symptom stays, without the pointer
    (alone,) = fold_symptoms([symptom])
    assert alone.rule == "step-outliers" and [e.metric for e in alone.evidence] == ["outlier steps"]
    # a cause its rule judged milder is not overruled, nor the symptom silenced
    mild = dataclasses.replace(cause, severity=Severity.INFO)
    (kept_cause, kept_symptom) = fold_symptoms([mild, symptom])
    assert kept_cause == mild and kept_symptom == alone


def test_a_symptom_folds_into_the_most_severe_finding_of_its_causes_rule() -> None:
    pointer = symptom_evidence("competing-processes", "others' CPU")
    symptom = _finding("step-outliers", Severity.INFO, 1.2, pointer)
    gpu = _finding("competing-processes", Severity.INFO, 1.0)
    cpu = _finding("competing-processes", Severity.CRITICAL, 2.0)
    folded = fold_symptoms([gpu, symptom, cpu])
    assert [f.severity for f in folded] == [Severity.INFO, Severity.CRITICAL]
    assert "Its symptom" in folded[1].explanation and "Its symptom" not in folded[0].explanation
