"""The one table of display names (phases, severities)."""

from __future__ import annotations

from typing import Final

from stepdoctor.model import Phase, Severity, Speedup, SpeedupKind

__all__ = ["PHASE_LABELS", "SEVERITY_LABELS", "phase_label", "speedup_words"]

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


def speedup_words(speedup: Speedup, modelled: Speedup | None = None) -> str:
    """A finding's speed-up in one line: its figure, whether it was measured or modelled and
    on what basis (with the model it replaced, when a measurement did)."""
    if speedup.kind is SpeedupKind.NONE:
        return speedup.basis
    if speedup.kind is SpeedupKind.MODELLED:
        return f"up to {speedup.factor:.2f}x, modelled: {speedup.basis}"
    spread = (
        f" (repeats {speedup.spread[0]:.2f}-{speedup.spread[1]:.2f}x)" if speedup.spread else ""
    )
    slower = " — slower than the job as it is" if speedup.factor < 1 else ""
    said = f"{speedup.factor:.2f}x{spread}, measured{slower}: {speedup.basis}"
    if modelled is not None and modelled.kind is not SpeedupKind.NONE:
        said += f" (the model said up to {modelled.factor:.2f}x)"
    return said
