"""slow-callbacks: time between steps outside the model (logging, metrics, post-processing).

Detects: the share of step time in ``other`` (time in no known phase: the user's callbacks,
logging, ``.item()`` calls, post-processing) plus an explicit ``callbacks`` phase, less the
garbage-collector pauses that fell in it (``gc-pauses`` reports those). Only info when several
threads call one model at once: a thread's time between its model calls then includes waiting
for the other threads' calls (``shared-model-threads`` is the finding to act on).
Skipped where the steps were not split into phases (a loop marked by ``doc.step()`` alone, a
framework whose calls the hooks do not see): all of such a step is ``other``, which tells
nothing of what runs between steps.
Evidence: that share and the mean per step.
Fix: do the work every N steps, asynchronously, or on the device.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule
from stepdoctor.rules.shared_model_threads import shared_model

__all__ = ["CRITICAL_SHARE", "WARNING_SHARE", "slow_callbacks"]

#: Healthy zoo runs (tests/scenarios/healthy_*.py) keep ``other`` — loop bookkeeping,
#: ``zero_grad``, the loss's ``.item()`` — under ~10% of a 2–5 ms step; 20% is well clear of that
#: noise. 40% means post-processing costs nearly as much as training (the TF
#: performance-analysis article's "heavy post-processing" case study).
WARNING_SHARE = 0.20
CRITICAL_SHARE = 0.40


@rule(
    id="slow-callbacks",
    title="Work between steps slows training",
    requires=("steps", "phases"),
    where=("other", "callbacks"),
)
def slow_callbacks(ctx: RuleContext) -> list[Finding]:
    """Flag a large share of step time outside data loading and the model."""
    names = (Phase.OTHER.value, Phase.CALLBACKS.value)
    # Collector pauses that interrupted this time are gc-pauses' finding, not ours.
    between_ns = sum(
        s.phase_ns.get(n, 0) - s.gc_phase_ns.get(n, 0) for s in ctx.steps for n in names
    )
    total_ns = sum(s.duration_ns for s in ctx.steps)
    share = between_ns / total_ns if total_ns else 0.0
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    per_step_ms = between_ns / len(ctx.steps) / 1e6
    shared = shared_model(ctx)
    explained = (
        f" Several threads call {shared} at once (see the finding on that): this time "
        "includes waiting for the other threads' calls, so it is that contention's symptom."
        if shared
        else ""
    )
    return [
        Finding(
            rule="slow-callbacks",
            severity=Severity.INFO if shared else rung.severity,
            title=f"Work between steps takes {share:.0%} of the time",
            explanation=(
                f"{per_step_ms:.1f} ms of every step is spent outside data loading, forward, "
                "backward and the optimizer: callbacks, logging, metrics, .item()/.cpu() "
                f"calls or post-processing of outputs. Nothing trains meanwhile.{explained}"
            ),
            evidence=(
                Evidence(
                    metric="share of step time between phases",
                    value=round(share, 4),
                    unit="share",
                    threshold=WARNING_SHARE,
                    source="step phases",
                ),
                Evidence(
                    metric="mean time between phases per step",
                    value=round(per_step_ms, 2),
                    unit="ms",
                    source="step phases",
                ),
            ),
            speedup=removal_speedup(
                share,
                f"1 / (1 - {share:.2f}): the between-step work removed",
            ),
            fix=Fix(
                summary=(
                    "Run logging, metrics and evaluation every N steps instead of every step; "
                    "accumulate metrics on the device and read them (.item()) rarely; move "
                    "heavy post-processing to a background thread or process."
                ),
                snippet=("if step % 100 == 0:\n    log(loss.item())  # not every step"),
            ),
        )
    ]
