"""The one table of display names (phases, severities)."""

from __future__ import annotations

from typing import Final

from stepdoctor.model import Phase, Severity

__all__ = ["PHASE_LABELS", "SEVERITY_LABELS", "phase_label"]

PHASE_LABELS: Final[dict[str, str]] = {
    Phase.DATA_WAIT.value: "data wait (ETL)",
    Phase.H2D.value: "host→device",
    Phase.FORWARD.value: "forward",
    Phase.BACKWARD.value: "backward",
    Phase.OPTIMIZER.value: "optimizer",
    Phase.SYNC.value: "sync",
    Phase.CALLBACKS.value: "callbacks",
    Phase.CHECKPOINT.value: "checkpoint",
    Phase.OTHER.value: "other (between phases)",
}

SEVERITY_LABELS: Final[dict[Severity, str]] = {
    Severity.CRITICAL: "CRITICAL",
    Severity.WARNING: "WARNING",
    Severity.INFO: "info",
}


def phase_label(name: str) -> str:
    """Return the display label of a phase (user phases show as named)."""
    return PHASE_LABELS.get(name, name)
