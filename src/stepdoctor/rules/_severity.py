"""Severity: the ladder a rule grades a value on, and the limits the report sets on it.

Most rules grade one number (a share of step time, of GPU time, of the memory limit; a batch
size) against two named thresholds: below the lower one nothing is reported, from it the finding
is a warning (or info), from the upper one it is critical (or a warning). ``grade`` is that
ladder, written once; the rung it returns also names the threshold reached, which the rules
show as their evidence's threshold.

That grade is relative (a share). Severity follows what the fix saves in wall time, relative
and absolute, so the report then caps it (``temper``): a fix that would give back less than
``MIN_SAVED_S`` over the measured steps is info, saying what the same share would save on an
hour's run; a finding graded from the run's timings is info when the steps measured less than
``THIN_SECONDS`` seconds, and at most a warning when fewer than ``THIN_STEPS`` steps
(``thin_evidence`` says how thin).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from stepdoctor.model import Evidence, Finding, Severity

__all__ = [
    "MIN_SAVED_S",
    "SAVED_METRIC",
    "THIN_SECONDS",
    "THIN_STEPS",
    "Rung",
    "at_most",
    "grade",
    "saved_seconds",
    "temper",
    "thin_evidence",
]

#: Fewer measured steps (after warm-up) than this are thin evidence. One unusual step (a
#: DataLoader worker starting, a garbage-collector pass, a first-epoch cache fill) lasting five
#: ordinary ones carries 5 / (n + 4) of n steps' time: 22% at 19 steps, past the share rules'
#: critical band (20%, XProf's "highly input bound") on a single accident; 17% at 25 steps.
THIN_STEPS = 25
#: Fewer measured seconds than this are thin evidence: the system sampler reads every 0.1 s
#: (``stepdoctor run --interval``), so under a second there are fewer than 10 readings of CPU,
#: memory and other processes, and one burst of another process is most of them.
THIN_SECONDS = 1.0
#: A fix that would give back less than this over the measured steps is info, whatever share
#: of the time it is (the critical band of the share rules, 20%, of a 5 s run): below a second
#: a person re-running the job would not notice the difference, and a warning says "worth
#: changing your code for", which needs time to win back (issue 39: a 0.18 s Lightning run's
#: input-bound warning, 17% of it).
MIN_SAVED_S = 1.0
#: The evidence a finding made info by ``MIN_SAVED_S`` carries: what its fix would have saved.
SAVED_METRIC = "time the fix would have saved over the measured steps"


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


def at_most(severity: Severity, ceiling: Severity) -> Severity:
    """Return ``severity``, lowered to ``ceiling`` when it is more severe."""
    return severity if severity.rank >= ceiling.rank else ceiling


def saved_seconds(factor: float, seconds: float) -> float:
    """Seconds a fix with speed-up ``factor`` would have saved over ``seconds`` of the job:
    ``seconds * (1 - 1 / factor)`` (0 for a factor of 1 or less)."""
    return seconds * (1.0 - 1.0 / factor) if factor > 1.0 else 0.0


def thin_evidence(steps: int, seconds: float) -> str:
    """The report's line when ``steps`` measured steps over ``seconds`` are too few to grade
    anything critical (below ``THIN_STEPS`` or ``THIN_SECONDS``); empty otherwise."""
    if steps >= THIN_STEPS and seconds >= THIN_SECONDS:
        return ""
    shown = f"{seconds:.1f}" if seconds >= 0.1 or not seconds else f"{seconds:.3f}"
    return (
        f"evidence is thin: {steps} step(s), {shown} s of training measured (fewer than "
        f"{THIN_STEPS} steps or {THIN_SECONDS:g} s): no finding about the job's timing is "
        "graded critical; run it longer for a firmer diagnosis"
    )


def temper(finding: Finding, *, measured_s: float, thin: bool, timed: bool) -> Finding:
    """Lower ``finding``'s severity where its evidence or its saving cannot carry it.

    Args:
        finding: A rule's finding, with its estimated (or measured) speed-up.
        measured_s: Seconds of the run's measured steps, over which the fix's saving counts.
        thin: The run's evidence is thin (``thin_evidence``).
        timed: The finding is graded from the run's timings (steps or system samples), not
            from a fact such as a model's structure or the machine's memory.

    Returns:
        The finding as info when its fix (with a speed-up estimated or measured above 1) would
        save less than ``MIN_SAVED_S`` over ``measured_s``, or when it is ``timed`` and the
        steps measured less than ``THIN_SECONDS``: its evidence and explanation say so; else
        at most a warning when ``thin`` and ``timed``.
    """
    if finding.severity is Severity.INFO:
        return finding
    factor = finding.speedup.factor
    saved = saved_seconds(factor, measured_s)
    if factor > 1.0 and saved < MIN_SAVED_S:
        share = 1.0 - 1.0 / factor
        return _as_info(
            finding,
            f"Its fix would save {_seconds(saved)} over this run's {_seconds(measured_s)} of "
            f"steps, too little to notice (info, not {finding.severity.value}); on a longer "
            f"run it saves the same share, {share:.0%} of the time: {_of_an_hour(share)}.",
            Evidence(
                metric=SAVED_METRIC,
                value=round(saved, 2),
                unit="s",
                threshold=MIN_SAVED_S,
                source="speed-up x measured time (a warning needs at least the threshold)",
            ),
        )
    if timed and measured_s < THIN_SECONDS:
        return _as_info(
            finding,
            f"The steps measured only {_seconds(measured_s)}: too little to grade (info, not "
            f"{finding.severity.value}); run the job longer to tell.",
            Evidence(
                metric="measured steps",
                value=round(measured_s, 3),
                unit="s",
                threshold=THIN_SECONDS,
                source="the run's steps after warm-up (a warning needs at least the threshold)",
            ),
        )
    if finding.severity is Severity.CRITICAL and thin and timed:
        return dataclasses.replace(finding, severity=Severity.WARNING)
    return finding


def _as_info(finding: Finding, why: str, evidence: Evidence) -> Finding:
    """``finding`` as info, its explanation ending with ``why`` and its evidence with
    ``evidence``."""
    return dataclasses.replace(
        finding,
        severity=Severity.INFO,
        explanation=f"{finding.explanation} {why}",
        evidence=(*finding.evidence, evidence),
    )


def _of_an_hour(share: float) -> str:
    """``share`` of an hour in words: ``15 minutes of an hour``, ``1 minute ...``,
    ``36 seconds ...``."""
    minutes = 60 * share
    if minutes < 0.95:
        return f"{60 * minutes:.0f} seconds of an hour"
    if minutes < 1.5:
        return "1 minute of an hour"
    return f"{minutes:.0f} minutes of an hour"


def _seconds(value: float) -> str:
    """``value`` seconds, to two digits past the point, or three under a tenth."""
    return f"{value:.2f} s" if value >= 0.1 or not value else f"{value:.3f} s"
