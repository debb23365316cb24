"""gc-pauses: Python's garbage collector stops the job.

Detects: the share of step time inside collector pauses (``gc.callbacks``) and the longest one.
Evidence: share, collections, longest pause. Only info when one long pause makes most of it
(one collection is no rate: the collector's first full pass over what the job's imports left,
which a Lightning job met after its warm-up, costs little over a long run).
Fix: ``gc.freeze()`` after start-up, fewer long-lived Python objects, or ``gc.disable()`` with a
``gc.collect()`` at step boundaries.
"""

from __future__ import annotations

from stepdoctor.model import GC_PHASE, Evidence, Finding, Fix, Severity
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule
from stepdoctor.rules.where import allocation_sites

__all__ = ["CRITICAL_SHARE", "ONE_OFF_SHARE", "WARNING_SHARE", "gc_pauses"]

#: Graded like the other lost-time rules (XProf's 5% / 20% bands). For scale: a full
#: collection in a process that imported torch takes 136–216 ms on the reference machine, so
#: one per 3 s of training already costs 5%.
WARNING_SHARE = 0.05
CRITICAL_SHARE = 0.20
#: The pauses are one collection when a single step holds this share of their time and no
#: other step a pause of half the longest: measured on examples/frameworks/lightning_job.py, one
#: full pass of 290-310 ms after the warm-up was 14-19% of a 60-step run, and none followed.
ONE_OFF_SHARE = 0.8


@rule(id="gc-pauses", title="Garbage-collection pauses", where=(GC_PHASE,))
def gc_pauses(ctx: RuleContext) -> list[Finding]:
    """Flag collector pauses taking 5% of step time or more."""
    if ctx.record.from_logs:
        return []  # a JVM's collector: the jvm-* rules judge it, in the JVM's terms
    share = ctx.summary.gc_share
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    count = sum(s.gc_count for s in ctx.steps)
    longest_ns = max(s.gc_max_pause_ns for s in ctx.steps)
    longest_ms = longest_ns / 1e6
    total_ns = sum(s.gc_pause_ns for s in ctx.steps)
    total_ms = total_ns / 1e6
    long_steps = [s for s in ctx.steps if s.gc_max_pause_ns >= longest_ns / 2]
    one_off = len(long_steps) == 1 and long_steps[0].gc_pause_ns >= ONE_OFF_SHARE * total_ns
    once = (
        f" One collection of {longest_ms:.0f} ms (at step {long_steps[0].index}) makes most "
        "of it: one is no rate. A one-off, such as the collector's first full pass over the "
        "objects your imports left, costs little over a long run; gc.freeze() after start-up "
        "spares it."
        if one_off
        else ""
    )
    return [
        Finding(
            rule="gc-pauses",
            allocated_at=allocation_sites(ctx.record, "gc"),
            severity=Severity.INFO if one_off else rung.severity,
            title=f"Garbage collection pauses take {share:.0%} of the time",
            explanation=(
                f"Python's garbage collector ran {count} times for {total_ms:.0f} ms "
                f"(longest pause {longest_ms:.0f} ms). Every collection walks all tracked "
                "Python objects, and a process that holds many (a big list of samples, "
                f"caches of dicts) pays for them again and again.{once}"
            ),
            evidence=(
                Evidence(
                    metric="GC pause share of step time",
                    value=round(share, 4),
                    unit="share",
                    threshold=WARNING_SHARE,
                    source="gc.callbacks",
                ),
                Evidence(metric="collections", value=count, source="gc.callbacks"),
                Evidence(
                    metric="longest pause",
                    value=round(longest_ms, 1),
                    unit="ms",
                    source="gc.callbacks",
                ),
                Evidence(
                    metric="total pause", value=round(total_ms, 1), unit="ms", source="gc.callbacks"
                ),
            ),
            speedup=removal_speedup(
                share,
                f"1 / (1 - {share:.2f}): the pauses removed",
            ),
            fix=Fix(
                summary=(
                    "Call gc.freeze() once after start-up (model, data set and caches built) "
                    "so those objects are never scanned again; keep fewer long-lived Python "
                    "objects (store samples in arrays/tensors, not lists of dicts); or "
                    "gc.disable() and call gc.collect() yourself every N steps."
                ),
                snippet="import gc\n# after building the model and the data set:\ngc.freeze()",
            ),
        )
    ]
