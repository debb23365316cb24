"""Compare two runs: is AFTER faster than BEFORE beyond the noise of their step times, which
phase changed, which findings came or went (``stepdoctor compare``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from stepdoctor.model import RunRecord, StepTiming
from stepdoctor.model.comparison import Comparison, FindingChange, PhaseChange
from stepdoctor.report import build_report
from stepdoctor.rules import RuleContext

__all__ = ["ALPHA", "MIN_STEPS", "compare_runs", "mann_whitney_u"]

#: Significance level of the step-time test: 1%, strict because steps within one run are not
#: independent (a noisy neighbour slows many in a row), which makes p-values optimistic.
ALPHA = 0.01
#: Steps after warm-up each run needs for the test to mean anything.
MIN_STEPS = 10


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity
    corrections (as ``scipy.stats.mannwhitneyu(x, y, method="asymptotic")``; the core does not
    depend on scipy). Returns ``(U of x, p-value)``."""
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        raise ValueError("both samples need values")
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    n = n1 + n2
    rank_sum_x = 0.0
    ties = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1  # average rank of the tie group
        count = j - i + 1
        ties += count**3 - count
        rank_sum_x += rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        i = j + 1
    u1 = rank_sum_x - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    mu = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u1, 1.0  # every value equal
    z = (max(u1, u2) - mu - 0.5) / math.sqrt(var)
    p = min(1.0, math.erfc(z / math.sqrt(2)))  # 2 * normal survival at z
    return u1, p


def _times(steps: Sequence[StepTiming], per_sample: bool) -> list[float]:
    if per_sample:
        return [s.duration_ns / 1e6 / s.batch_size for s in steps if s.batch_size]
    return [s.duration_ns / 1e6 for s in steps]


def _phases(steps: Sequence[StepTiming], per_sample: bool) -> dict[str, float]:
    totals: dict[str, float] = {}
    for s in steps:
        scale = 1e6 * (s.batch_size if per_sample and s.batch_size else 1)
        for phase, ns in s.phase_ns.items():
            totals[phase] = totals.get(phase, 0.0) + ns / scale
        if s.gc_pause_ns:
            totals["gc"] = totals.get("gc", 0.0) + s.gc_pause_ns / scale
    return {p: v / len(steps) for p, v in totals.items()} if steps else {}


def compare_runs(before: RunRecord, after: RunRecord, *, threshold: float = 0.05) -> Comparison:
    """Compare two runs' steps after warm-up.

    Args:
        threshold: a slowdown (of the median time per sample or step) above this share, found
            beyond noise, is a regression.
    """
    ctx_b, ctx_a = RuleContext(before), RuleContext(after)
    steps_b, steps_a = ctx_b.steps, ctx_a.steps
    warnings = []
    per_sample = all(s.batch_size for s in (*steps_b, *steps_a)) and bool(steps_b and steps_a)
    if not per_sample and steps_b and steps_a:
        warnings.append("batch sizes unknown in a run: comparing time per step, not per sample")
    unit = "ms per sample" if per_sample else "ms per step"
    times_b, times_a = _times(steps_b, per_sample), _times(steps_a, per_sample)
    if len(times_b) < MIN_STEPS or len(times_a) < MIN_STEPS:
        warnings.append(
            f"too few steps after warm-up to compare ({len(times_b)} and {len(times_a)}; "
            f"{MIN_STEPS} needed)"
        )
    enough = len(times_b) >= MIN_STEPS and len(times_a) >= MIN_STEPS
    med_b = statistics.median(times_b) if times_b else None
    med_a = statistics.median(times_a) if times_a else None
    change = med_a / med_b - 1 if med_a is not None and med_b else 0.0
    p = mann_whitney_u(times_a, times_b)[1] if enough else 1.0
    if p < ALPHA and change < 0:
        verdict = "faster"
    elif p < ALPHA and change > 0:
        verdict = "slower"
    else:
        verdict = "no significant change"
    phases_b, phases_a = _phases(steps_b, per_sample), _phases(steps_a, per_sample)
    phases = sorted(
        (
            PhaseChange(phase=p_, before_ms=phases_b.get(p_, 0.0), after_ms=phases_a.get(p_, 0.0))
            for p_ in {*phases_b, *phases_a}
        ),
        key=lambda c: (-abs(c.change_ms), c.phase),
    )
    report_b, report_a = build_report(before, ctx_b), build_report(after, ctx_a)
    sev_b = {f.rule: f for f in report_b.findings}
    sev_a = {f.rule: f for f in report_a.findings}
    changes = []
    for rule in sorted({*sev_b, *sev_a}):
        fb, fa = sev_b.get(rule), sev_a.get(rule)
        if fb is not None and fa is not None and fb.severity == fa.severity:
            continue
        changes.append(
            FindingChange(
                rule=rule,
                before=None if fb is None else fb.severity.value,
                after=None if fa is None else fa.severity.value,
                title=(fa or fb).title,  # type: ignore[union-attr]
            )
        )
    return Comparison(
        before_run=before.meta.run_id,
        after_run=after.meta.run_id,
        before=ctx_b.summary,
        after=ctx_a.summary,
        unit=unit,
        before_median=med_b,
        after_median=med_a,
        change=change,
        p_value=p,
        verdict=verdict,
        regression=verdict == "slower" and change > threshold,
        threshold=threshold,
        phases=tuple(phases),
        findings=tuple(changes),
        warnings=tuple(warnings),
    )
