"""The report's honesty: how the job ended comes first, a short run's evidence is said to be
thin and grades nothing critical, a fix that saves little is no critical finding, and one cause
gives one finding."""

from __future__ import annotations

import dataclasses

import pytest

from stepdoctor.model import (
    Evidence,
    Finding,
    Fix,
    LayerInfo,
    ModelInfo,
    RunEnd,
    RunRecord,
    Severity,
    Speedup,
)
from stepdoctor.render import render_text
from stepdoctor.report import build_report, merge_duplicates, outcome
from stepdoctor.rules import RuleContext
from stepdoctor.rules._severity import MIN_SAVED_S, THIN_SECONDS, THIN_STEPS
from tests.builders import env, record, steps


def _ended(rec: RunRecord, end: RunEnd | None) -> RunRecord:
    return dataclasses.replace(rec, end=end, meta=dataclasses.replace(rec.meta, cwd="/job"))


def _run(n: int = 100) -> RunRecord:
    return record(steps(n, phases_ms={"forward": 10, "backward": 20}))


@pytest.mark.parametrize(
    "end",
    [
        RunEnd(t_ns=1, status="ok"),
        RunEnd(t_ns=1, status="exit", exit_code=0),
        RunEnd(t_ns=1, status="stopped", error="step limit reached"),  # a tuning trial
    ],
)
def test_a_normal_end_is_no_failure(end: RunEnd) -> None:
    rec = _ended(_run(), end)
    assert outcome(rec, RuleContext(rec).summary) == (False, "")
    report = build_report(rec)
    assert (report.failed, report.outcome) == (False, "")


@pytest.mark.parametrize(
    ("end", "first"),
    [
        (
            RunEnd(
                t_ns=1,
                status="exception",
                exit_code=1,
                error="ValueError: boom\nsecond line",
                error_at="/job/src/train.py:12",
            ),
            "The job failed (exit code 1): ValueError: boom, raised at src/train.py:12. ",
        ),
        (
            RunEnd(t_ns=1, status="exit", exit_code=3, error_at="/elsewhere/run.py:4"),
            "The job failed (exit code 3): sys.exit(3), raised at /elsewhere/run.py:4. ",
        ),
        (
            RunEnd(t_ns=1, status="exit", exit_code=1, error="bad config"),
            "The job failed (exit code 1): SystemExit: bad config. ",
        ),
        (
            RunEnd(t_ns=1, status="interrupted", exit_code=130, error="KeyboardInterrupt"),
            "The job was interrupted (exit code 130): KeyboardInterrupt (Ctrl-C or SIGINT). ",
        ),
        (None, "The job did not finish: its record has no end"),
    ],
)
def test_a_failed_job_says_how_it_ended_first(end: RunEnd | None, first: str) -> None:
    report = build_report(_ended(_run(), end))
    assert report.failed
    assert report.outcome.startswith(first)
    assert "part of the job that ran (100 step(s)" in report.outcome
    text = render_text(report, width=200)
    assert text.startswith(first)
    assert "No problems found" not in text
    assert "No finding about the part of the job that ran" in text  # a healthy part: no verdict
    if end is not None and end.error_at.startswith("/job/"):
        assert report.error_at == "src/train.py:12"  # relative to the job's folder


def test_old_records_without_error_at_load() -> None:
    from stepdoctor.model import from_jsonable

    end = from_jsonable(RunEnd, {"t_ns": 5, "status": "exception", "exit_code": 1, "error": "X"})
    assert end.error_at == ""
    report = build_report(_ended(_run(), end))
    assert report.outcome.startswith("The job failed (exit code 1): X. ")


def _waiting(n: int, step_ms: float, wait_share: float) -> RunRecord:
    wait = step_ms * wait_share
    return record(steps(n, phases_ms={"data_wait": wait, "forward": step_ms - wait}))


def test_a_long_run_keeps_its_critical_finding() -> None:
    report = build_report(_waiting(200, 50, 0.3))  # 160 measured steps, 8 s, 30% waiting
    (f,) = report.findings
    assert (f.rule, f.severity) == ("input-bound", Severity.CRITICAL)
    assert report.evidence_note == ""


def test_a_short_run_says_its_evidence_is_thin_and_grades_nothing_critical() -> None:
    rec = _waiting(12, 20, 0.5)
    ctx = RuleContext(rec)
    assert len(ctx.steps) < THIN_STEPS and ctx.summary.measured_s < THIN_SECONDS
    report = build_report(rec)
    (f,) = report.findings
    assert (f.rule, f.severity) == ("input-bound", Severity.INFO)  # 50%: 0.1 s to win back
    assert report.evidence_note.startswith(f"evidence is thin: {len(ctx.steps)} step(s), 0.2 s")
    text = render_text(report, width=200)
    assert text.splitlines()[0].startswith("Evidence is thin: ")


def test_few_steps_alone_are_thin_evidence() -> None:
    report = build_report(_waiting(20, 500, 0.5))  # 16 steps over 8 s
    assert report.evidence_note and report.findings[0].severity is Severity.WARNING


def test_a_fix_saving_under_a_second_is_info() -> None:
    # 100 steps of 20 ms (80 measured, 1.6 s), a quarter waiting: 0.4 s to win back.
    report = build_report(_waiting(100, 20, 0.25))
    assert report.evidence_note == ""
    (f,) = report.findings
    assert f.severity is Severity.INFO
    assert "25% of the time: 15 minutes of an hour" in f.explanation
    saved = {e.metric: e for e in f.evidence}[
        "time the fix would have saved over the measured steps"
    ]
    assert saved.value == pytest.approx(0.4, abs=0.01)
    assert saved.threshold == MIN_SAVED_S


def test_a_short_job_with_nothing_found_is_not_called_healthy() -> None:
    report = build_report(record(steps(10, phases_ms={"forward": 10})))
    text = render_text(report, width=200)
    assert "No problems found" not in text
    assert "too few to call the job healthy" in text


def _finding(title: str, explanation: str = "x", factor: float = 1.5) -> Finding:
    return Finding(
        rule="oversized-network",
        severity=Severity.WARNING,
        title=title,
        explanation=explanation,
        evidence=(Evidence(metric="m", value=1),),
        speedup=Speedup(factor=factor, basis="m"),
        fix=Fix(summary="f"),
    )


def test_one_finding_per_rule_and_subject() -> None:
    same = _finding("Net is past 1 size limit(s)")
    assert merge_duplicates([same, same]) == [same]
    other = _finding("Net is past 1 size limit(s)", explanation="y", factor=2.0)
    (merged,) = merge_duplicates([same, other])
    assert merged.explanation == "y"  # the larger speed-up stands for both
    assert merged.evidence[-1] == Evidence(metric="times found in this run", value=2)
    apart = _finding("Head is past 1 size limit(s)")
    assert merge_duplicates([same, apart]) == [same, apart]


def _big(model_id: int) -> ModelInfo:
    layers = (
        LayerInfo(name="fc", kind="linear", params=10, in_features=8, out_features=4096),
        LayerInfo(name="out", kind="linear", params=10, in_features=4096, out_features=10),
    )
    return ModelInfo(
        model_id=model_id, class_name="Net", param_count=20, param_bytes=80, layers=layers
    )


def test_models_built_twice_give_one_finding() -> None:
    rec = record(steps(100, phases_ms={"forward": 10}), models=(_big(1), _big(2)))
    found = [f for f in build_report(rec).findings if f.rule == "oversized-network"]
    assert len(found) == 1
    assert "2 models of this structure" in found[0].explanation


def test_the_command_that_measures_modelled_figures_is_for_torch_jobs_only() -> None:
    """tune and --verify try the fixes on the job's torch model and loader: a Keras job on
    TensorFlow is given no such command."""
    rec = record(steps(100, phases_ms={"data_wait": 30, "forward": 10, "backward": 10}))
    command = ("stepdoctor", "run", "train.py")
    rec = dataclasses.replace(rec, meta=dataclasses.replace(rec.meta, command=command))
    assert build_report(rec).measure_with.startswith("stepdoctor ")
    tf = dataclasses.replace(rec, env=(*rec.env, *env(keras__backend="tensorflow")))
    assert build_report(tf).measure_with == ""
