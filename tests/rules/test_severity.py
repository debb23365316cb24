from __future__ import annotations

import dataclasses
import math

import pytest

from stepdoctor.model import Finding, Fix, Severity, Speedup
from stepdoctor.rules._severity import (
    MIN_SAVED_S,
    THIN_SECONDS,
    THIN_STEPS,
    Rung,
    at_most,
    grade,
    saved_seconds,
    temper,
    thin_evidence,
)

WARNING = 0.05
CRITICAL = 0.20


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, None),
        (0.049, None),
        (0.05, Rung(severity=Severity.WARNING, threshold=WARNING)),  # exactly at: reached
        (0.10, Rung(severity=Severity.WARNING, threshold=WARNING)),
        (0.20, Rung(severity=Severity.CRITICAL, threshold=CRITICAL)),
        (0.95, Rung(severity=Severity.CRITICAL, threshold=CRITICAL)),
    ],
)
def test_higher_is_worse(value: float, expected: Rung | None) -> None:
    assert grade(value, warning=WARNING, critical=CRITICAL) == expected


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (0, Severity.CRITICAL),
        (1, Severity.CRITICAL),  # exactly at: reached
        (1.5, Severity.WARNING),
        (8, Severity.WARNING),
        (8.5, None),
        (64, None),
    ],
)
def test_lower_is_worse(batch: float, expected: Severity | None) -> None:
    rung = grade(batch, warning=8, critical=1, lower_is_worse=True)
    assert (rung and rung.severity) == expected


def test_info_and_warning_rungs() -> None:
    assert grade(32.9, info=33.0, warning=50.0) is None
    assert grade(33.0, info=33.0, warning=50.0) == Rung(severity=Severity.INFO, threshold=33.0)
    assert grade(50.0, info=33.0, warning=50.0) == Rung(severity=Severity.WARNING, threshold=50.0)


def test_three_rungs_and_one() -> None:
    ladder = {"info": 1.0, "warning": 2.0, "critical": 3.0}
    assert [grade(v, **ladder) for v in (0.5, 1.0, 2.5, 3.0)] == [
        None,
        Rung(severity=Severity.INFO, threshold=1.0),
        Rung(severity=Severity.WARNING, threshold=2.0),
        Rung(severity=Severity.CRITICAL, threshold=3.0),
    ]
    assert grade(0.4, warning=0.5) is None
    assert grade(0.5, warning=0.5) == Rung(severity=Severity.WARNING, threshold=0.5)


def test_nan_grades_as_the_lowest_rung_as_the_rules_did() -> None:
    rung = grade(math.nan, warning=WARNING, critical=CRITICAL)
    assert rung == Rung(severity=Severity.WARNING, threshold=WARNING)


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one threshold"):
        grade(0.5)
    with pytest.raises(ValueError, match="out of order"):
        grade(0.5, warning=CRITICAL, critical=WARNING)
    with pytest.raises(ValueError, match="must be smaller"):
        grade(4, warning=1, critical=8, lower_is_worse=True)


def _critical(factor: float, measured: float | None = None) -> Finding:
    finding = Finding(
        rule="input-bound",
        severity=Severity.CRITICAL,
        title="t",
        explanation="e",
        evidence=(),
        speedup=Speedup(factor=factor, basis="m"),
        fix=Fix(summary="f"),
    )
    return finding if measured is None else finding.measured_as(Speedup.measured(measured, "m"))


def test_at_most_and_saved_seconds() -> None:
    assert at_most(Severity.CRITICAL, Severity.WARNING) is Severity.WARNING
    assert at_most(Severity.INFO, Severity.WARNING) is Severity.INFO
    assert saved_seconds(2.0, 10.0) == 5.0
    assert saved_seconds(1.0, 10.0) == saved_seconds(0.5, 10.0) == 0.0


def test_temper_caps_what_the_evidence_cannot_carry() -> None:
    big = _critical(2.0)  # halves the time
    assert temper(big, measured_s=10.0, thin=False, timed=True) is big  # saves 5 s
    assert temper(big, measured_s=10.0, thin=True, timed=True).severity is Severity.WARNING
    assert temper(big, measured_s=10.0, thin=True, timed=False) is big  # a fact, not a timing
    small = temper(big, measured_s=1.5, thin=False, timed=False)  # saves 0.75 s
    assert small.severity is Severity.INFO
    assert small.evidence[-1].value == 0.75
    assert small.evidence[-1].threshold == MIN_SAVED_S
    assert small.explanation.endswith(
        "Its fix would save 0.75 s over this run's 1.50 s of steps, too little to notice (info, "
        "not critical); on a longer run it saves the same share, 50% of the time: 30 minutes "
        "of an hour."
    )
    for factor, said in ((1.02, "1 minute of an hour"), (1.005, "18 seconds of an hour")):
        tiny = temper(_critical(factor), measured_s=2.0, thin=False, timed=True)
        assert tiny.explanation.endswith(f"of the time: {said}."), tiny.explanation
    warning = dataclasses.replace(big, severity=Severity.WARNING)
    assert temper(warning, measured_s=1.9, thin=False, timed=True).severity is Severity.INFO
    assert temper(warning, measured_s=2.0, thin=False, timed=True) is warning  # saves 1 s
    # A measured speed-up counts over the estimate.
    assert temper(_critical(1.1, 3.0), measured_s=3.0, thin=False, timed=True).severity is (
        Severity.CRITICAL
    )
    # Not estimated (a crash prevented, a GPU unused): the saving is unknown, not small.
    unknown = dataclasses.replace(_critical(1.0), speedup=Speedup.none("not estimated"))
    assert temper(unknown, measured_s=0.1, thin=False, timed=False) is unknown
    # ... but from under a second of steps no timing is graded above info.
    short = temper(unknown, measured_s=0.18, thin=True, timed=True)
    assert short.severity is Severity.INFO
    assert (short.evidence[-1].metric, short.evidence[-1].value) == ("measured steps", 0.18)
    assert "The steps measured only 0.18 s" in short.explanation
    assert temper(unknown, measured_s=5.0, thin=True, timed=True).severity is Severity.WARNING


def test_thin_evidence_line() -> None:
    assert thin_evidence(THIN_STEPS, THIN_SECONDS) == ""
    assert thin_evidence(12, 0.2).startswith("evidence is thin: 12 step(s), 0.2 s of training")
    assert thin_evidence(30, 0.004).startswith("evidence is thin: 30 step(s), 0.004 s")
    assert thin_evidence(THIN_STEPS - 1, 100.0)
