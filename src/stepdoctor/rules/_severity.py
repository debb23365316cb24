"""The severity ladder: grade one value against a rule's named thresholds.

Most rules grade one number (a share of step time, of GPU time, of the memory limit; a batch
size) against two named thresholds: below the lower one nothing is reported, from it the finding
is a warning (or info), from the upper one it is critical (or a warning). ``grade`` is that
ladder, written once; the rung it returns also names the threshold reached, which the rules
show as their evidence's threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepdoctor.model import Severity

__all__ = ["Rung", "grade"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rung:
    """The rung of a severity ladder a value reached."""

    severity: Severity
    threshold: float
    """The threshold of that rung, in the value's unit."""


def grade(
    value: float,
    *,
    info: float | None = None,
    warning: float | None = None,
    critical: float | None = None,
    lower_is_worse: bool = False,
) -> Rung | None:
    """Return the most severe rung ``value`` reaches, or None below the lowest one.

    A value exactly at a threshold reaches it. Give the thresholds of the rungs the rule has
    (two or more as a rule: ``warning`` and ``critical``, or ``info`` and ``warning``).

    Args:
        value: What is graded, in the thresholds' unit.
        info: Threshold of the info rung (None: no such rung).
        warning: Threshold of the warning rung (None: no such rung).
        critical: Threshold of the critical rung (None: no such rung).
        lower_is_worse: The smaller the value, the worse (a batch size): a threshold is reached
            at or below it, and a more severe threshold must be smaller.

    Returns:
        The rung reached, None when the value is below the lowest threshold (above it, when
        ``lower_is_worse``).

    Raises:
        ValueError: No threshold given, or the thresholds are out of order (a more severe one
            must be larger, or smaller when ``lower_is_worse``).
    """
    rungs = [
        (severity, threshold)
        for severity, threshold in (
            (Severity.CRITICAL, critical),
            (Severity.WARNING, warning),
            (Severity.INFO, info),
        )
        if threshold is not None
    ]
    if not rungs:
        raise ValueError("grade() needs at least one threshold (info, warning or critical)")
    limits = [threshold for _, threshold in rungs]
    if limits != sorted(limits, reverse=not lower_is_worse):
        raise ValueError(
            f"grade(): thresholds out of order {limits} (most severe first): a more severe "
            f"threshold must be {'smaller' if lower_is_worse else 'larger'}"
        )
    *upper, (lowest_severity, lowest) = rungs
    # "Not past the lowest threshold" rather than "at or beyond it": the rules graded a value
    # that compares false with everything (NaN) as the lowest rung, and still do.
    if (value > lowest) if lower_is_worse else (value < lowest):
        return None
    for severity, threshold in upper:
        if (value <= threshold) if lower_is_worse else (value >= threshold):
            return Rung(severity=severity, threshold=threshold)
    return Rung(severity=lowest_severity, threshold=lowest)
