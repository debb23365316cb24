"""Two runs side by side (``stepdoctor compare``)."""

from __future__ import annotations

from dataclasses import dataclass

from stepdoctor.model.findings import Summary

__all__ = ["Comparison", "FindingChange", "PhaseChange"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseChange:
    """One phase's mean time per step (or per sample) before and after."""

    phase: str
    before_ms: float
    after_ms: float

    @property
    def change_ms(self) -> float:
        """After minus before."""
        return self.after_ms - self.before_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class FindingChange:
    """A rule whose finding appeared, went away or changed severity."""

    rule: str
    before: str | None
    """Its severity before (None: no finding)."""
    after: str | None
    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """BEFORE vs AFTER: throughput, the step-time test, phases and findings."""

    before_run: str
    after_run: str
    before: Summary
    after: Summary
    unit: str
    """What the test compares: ``ms per sample`` (both runs know their batch sizes) or
    ``ms per step``."""
    before_median: float | None
    after_median: float | None
    """Median time (in ``unit``) of the steps after warm-up; None without steps."""
    change: float
    """``after_median / before_median - 1``: negative is faster."""
    p_value: float
    """Two-sided Mann-Whitney U test of the per-step (or per-sample) times after warm-up."""
    verdict: str
    """``faster``, ``slower`` or ``no significant change``."""
    regression: bool
    """Slower beyond noise by more than the threshold (``compare`` exits 1)."""
    threshold: float
    phases: tuple[PhaseChange, ...]
    """Largest change first."""
    findings: tuple[FindingChange, ...]
    warnings: tuple[str, ...] = ()
