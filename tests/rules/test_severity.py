from __future__ import annotations

import math

import pytest

from stepdoctor.model import Severity
from stepdoctor.rules._severity import Rung, grade

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
