"""The calibration benchmark's verdicts and page (benchmarks/calibration.py), from claims and
true gains built here (the benchmark itself runs the zoo's jobs, for minutes)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.benchmarks._load import benchmark


@pytest.fixture
def calibration() -> ModuleType:
    """benchmarks/calibration.py."""
    return benchmark("calibration")


def test_a_claim_holds_within_its_bound_either_way(calibration: ModuleType) -> None:
    claim = calibration.Claim
    assert calibration.within(claim(rule="r", factor=1.3), 1.0)
    assert calibration.within(claim(rule="r", factor=1.0), 1.3)
    assert not calibration.within(claim(rule="r", factor=1.31), 1.0)
    assert not calibration.within(claim(rule=None), 2.0)  # no finding: no claim to hold
    # A promise of more than 1.1x for a fix that gains under 1.05x.
    assert calibration.overclaims(claim(rule="r", factor=1.12), 1.04)
    assert not calibration.overclaims(claim(rule="r", factor=1.12), 1.06)
    assert not calibration.overclaims(claim(rule="r", factor=1.08), 1.0)


def test_the_page_summarises_each_way_of_running(calibration: ModuleType) -> None:
    claim = calibration.Claim
    rows = [
        calibration.Row(
            script="a.py", rule="input-bound", plants="Fault: a.", ratios=(2.0, 2.1, 1.9),
            error=None,
            claims=(("run", claim(rule="input-bound", factor=2.2, kind="modelled",
                                  basis="1 / (1 - 0.55)", top="input-bound")),
                    ("run --verify", claim(rule="input-bound", factor=2.0, kind="measured",
                                           basis="timed", top="input-bound"))),
        ),
        calibration.Row(
            script="b.py", rule="float64", plants="Fault: b.", ratios=(1.02, 1.0, 1.01),
            error=None,
            claims=(("run", claim(rule="float64", factor=1.9, kind="modelled", top="float64")),
                    ("run --verify", claim(rule=None, top="none"))),
        ),
    ]  # fmt: skip
    machine = calibration.Machine(command="python benchmarks/calibration.py", cores=2,
                                  cpu="Test CPU", torch="2.13.0", date="2026-01-02")  # fmt: skip
    page = calibration.render(machine, rows, ("run", "run --verify"))
    assert "| `run` | 1/2 (50%) |" in page and "| 1 (b.py) | 0 |" in page
    assert "| `run --verify` | 1/2 (50%) |" in page and "| 0 | 1 |" in page
    assert (
        "| `b.py` | `float64` | 1.01x (1.02, 1.00, 1.01) | `run` | 1.90x | modelled | 1.88 ✗"
        in (page)
    )
    assert "- `a.py` (`run`, modelled): 1 / (1 - 0.55)" in page
