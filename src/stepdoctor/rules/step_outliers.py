"""step-outliers: some steps take far longer than the rest.

Detects: steps above mean + 3σ of the measured step times (SageMaker Debugger's StepOutlier
rule), leaving out steps that saved a checkpoint (``checkpoint-stalls`` covers those; the
rules never see those stepdoctor's own profiler capture slowed, ``run --trace``). The cut is
``model.outlier_cut``, which the HTML report's timeline marks too. Only info when several
threads call one model at once (the outliers are that contention's symptom:
``shared-model-threads`` is the finding to act on), when the job's own helper processes took
its CPUs while most outliers ran (``helper-processes``), or when other processes took a
quarter of the machine more while the outliers ran than during the other steps (the slow steps
came from outside the job: ``competing-processes``).
Evidence: how many, how long against the median, when they happen, the phase that grew, and
the rule of the finding on their cause (``CAUSE_BY_GROWN``, or the three above): where the
report has that finding at least as severe, the outliers are folded into it as its evidence
(``rules.symptoms``) and never rank above it.
Fix: depends on the phase that grew; the finding names it.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections.abc import Sequence

from stepdoctor.model import (
    OUTLIER_SIGMAS,
    Evidence,
    Finding,
    Fix,
    Phase,
    Severity,
    Speedup,
    StepTiming,
    outlier_cut,
)
from stepdoctor.rules.competing_processes import WARNING_SHARE as OTHERS_WARNING_SHARE
from stepdoctor.rules.context import RuleContext, speedup_if_removed
from stepdoctor.rules.helper_processes import contention
from stepdoctor.rules.registry import rule
from stepdoctor.rules.shared_model_threads import shared_model
from stepdoctor.rules.symptoms import symptom_evidence

__all__ = [
    "HELPERS_SHARE",
    "MIN_OUTLIERS",
    "MIN_STEPS",
    "OTHERS_EXCESS_SHARE",
    "SIGMAS",
    "WARNING_LOST_SHARE",
    "step_outliers",
]

#: SageMaker Debugger's StepOutlier: a step is an outlier above mean + 3 standard deviations
#: (``model.OUTLIER_SIGMAS``, the cut the report's timeline shares); the rule fires once more
#: than 10 outliers are seen, and only after 100 steps.
SIGMAS = OUTLIER_SIGMAS
MIN_OUTLIERS = 10
MIN_STEPS = 100
#: Below this share of time lost to outliers the finding is informational: a few slow steps
#: from a noisy neighbour are not worth a change.
WARNING_LOST_SHARE = 0.05
#: ...and only when outliers are more than 1% of steps: a normal distribution puts 0.13% of
#: steps above 3σ, and CPU-sharing noise on the 2-core reference machine put 0.3% there.
WARNING_OUTLIER_SHARE = 0.01

_HINTS = {
    Phase.DATA_WAIT.value: "the data wait grew: a slow file or shard, worker restarts at each "
    "epoch (persistent_workers=True), or an uneven per-sample cost",
    Phase.FORWARD.value: "the forward pass grew: varying input shapes (pad or bucket to fixed "
    "sizes) or periodic evaluation inside the step",
    Phase.OTHER.value: "time between steps grew: periodic logging, evaluation or metric "
    "computation (spread it out or run it asynchronously)",
    "gc": "a garbage collection ran (see gc.freeze())",
}

#: The finding on the outliers' cause by what grew in them (``_grown_phase``): a garbage
#: collection, evaluation, or work between steps. The outliers fold into that finding where
#: the report has it at least as severe (``rules.symptoms``); a grown data wait or forward
#: pass has no rule of its own (an epoch's worker restart, varying shapes): the outliers are
#: the finding.
CAUSE_BY_GROWN = {
    "gc": "gc-pauses",
    Phase.EVALUATION.value: "frequent-evaluation",
    Phase.CALLBACKS.value: "slow-callbacks",
    Phase.OTHER.value: "slow-callbacks",
}


#: The outliers are the symptom of the job's own helper processes taking its CPUs
#: (``helper-processes``' condition) when at least this share of them ended while the helpers
#: were busy, and they do not come at a period (a periodic cause is the loop's own).
HELPERS_SHARE = 0.5


#: The outliers are the machine's, not the job's, when other processes took at least this much
#: more of the machine's CPUs while they ran than during the other steps: competing-processes'
#: warning share (a quarter of the machine, what ``top`` shows as a clear competitor), as a
#: rise that coincides with the slow steps.
OTHERS_EXCESS_SHARE = OTHERS_WARNING_SHARE


def _covering(step: StepTiming, times: Sequence[int]) -> range:
    """Indexes of the samples (at ``times``) that cover ``step``: those taken while it ran and
    the first one after it, whose interval holds its end (one taken at its start is before)."""
    return range(
        bisect.bisect_right(times, step.start_ns), bisect.bisect_left(times, step.end_ns) + 1
    )


def _outside_load(
    ctx: RuleContext, outliers: Sequence[StepTiming], steps: Sequence[StepTiming]
) -> tuple[float, float] | None:
    """(others' share of the machine's CPUs in the samples covering the outliers, in the other
    samples of the judged steps) when the first is ``OTHERS_EXCESS_SHARE`` above the second;
    else None."""
    samples = [s for s in ctx.record.system if s.other_cpu_pct is not None]
    if not samples or not steps:
        return None
    times = [s.t_ns for s in samples]
    capacity = 100.0 * (ctx.record.meta.cpu_count or ctx.cores)
    slow = {i for step in outliers for i in _covering(step, times) if i < len(samples)}
    span = range(_covering(steps[0], times).start, _covering(steps[-1], times).stop)
    rest = [i for i in span if i < len(samples) and i not in slow]
    if not slow or not rest:
        return None
    during = statistics.fmean((samples[i].other_cpu_pct or 0.0) / capacity for i in slow)
    usual = statistics.fmean((samples[i].other_cpu_pct or 0.0) / capacity for i in rest)
    return (during, usual) if during - usual >= OTHERS_EXCESS_SHARE else None


@rule(id="step-outliers", title="Outlier steps")
def step_outliers(ctx: RuleContext) -> list[Finding]:
    """Flag more than 10 steps above mean + 3σ after 100 steps."""
    cut = outlier_cut(ctx.steps)  # profiled steps are out of ctx.steps, checkpoints of the cut
    steps, limit, outliers = cut.judged, cut.limit_ns, cut.outliers
    if len(steps) < MIN_STEPS or limit is None or len(outliers) <= MIN_OUTLIERS:
        return []
    median = statistics.median(s.duration_ns for s in steps)
    total = sum(s.duration_ns for s in ctx.steps)
    lost = sum(s.duration_ns - median for s in outliers)
    lost_share = lost / total if total else 0.0
    cause = _grown_phase(outliers, steps)
    gaps = [b.index - a.index for a, b in itertools.pairwise(outliers)]
    period = statistics.median(gaps) if gaps else None
    periodic = period is not None and sum(1 for g in gaps if g == period) >= 0.6 * len(gaps)
    when = (
        f"every {period:g} steps"
        if periodic and period
        else (
            "at steps "
            + ", ".join(str(s.index) for s in outliers[:8])
            + (" ..." if len(outliers) > 8 else "")
        )
    )
    left_out = sum(1 for i in ctx.profiled_steps if i >= ctx.summary.warmup_steps)
    profiler_note = (
        f" {left_out} steps under stepdoctor's own torch.profiler capture were left out."
        if left_out
        else ""
    )
    shared = shared_model(ctx)
    helpers = None if shared or periodic else _helpers_share(ctx, outliers)
    outside = None if shared or helpers else _outside_load(ctx, outliers, steps)
    explained, cause_rule = "", CAUSE_BY_GROWN.get(cause)
    if helpers:
        cause_rule = "helper-processes"
        explained = (
            f" Processes your job started took {helpers:.0%} of its CPU while it trained, and "
            "the outliers came while they were busy (see the finding on them): the CPUs they "
            "take make step times vary, so these outliers are their symptom."
        )
    elif shared:
        cause_rule = "shared-model-threads"
        explained = (
            f" Several threads call {shared} at once (see the finding on that): contention "
            "between them makes step times vary, so these outliers are its symptom."
        )
    elif outside:
        cause_rule = "competing-processes"
        explained = (
            f" Other processes took {outside[0]:.0%} of the machine's CPUs while they ran, "
            f"against {outside[1]:.0%} during the other steps: the slow steps came from "
            "outside the job (see the finding on other processes)."
        )
    return [
        Finding(
            rule="step-outliers",
            severity=Severity.WARNING
            if lost_share >= WARNING_LOST_SHARE
            and len(outliers) > WARNING_OUTLIER_SHARE * len(steps)
            and not shared
            and not helpers
            and not outside
            else Severity.INFO,
            title=f"{len(outliers)} outlier steps ({when})",
            explanation=(
                f"{len(outliers)} of {len(steps)} steps took longer than mean + 3σ "
                f"({limit / 1e6:.1f} ms; median step {median / 1e6:.1f} ms), {when}. In them "
                f"{_HINTS.get(cause, f'the {cause} phase grew')}.{explained}{profiler_note}"
            ),
            evidence=(
                Evidence(
                    metric="outlier steps",
                    value=len(outliers),
                    threshold=MIN_OUTLIERS,
                    source="step durations (SageMaker StepOutlier)",
                ),
                Evidence(
                    metric="outlier threshold (mean + 3σ)",
                    value=round(limit / 1e6, 2),
                    unit="ms",
                    source="step durations",
                ),
                Evidence(
                    metric="median step",
                    value=round(median / 1e6, 2),
                    unit="ms",
                    source="step durations",
                ),
                Evidence(
                    metric="mean outlier step",
                    value=round(statistics.fmean(s.duration_ns for s in outliers) / 1e6, 2),
                    unit="ms",
                    source="step durations",
                ),
                Evidence(
                    metric="time lost to outliers",
                    value=round(lost_share, 4),
                    unit="share",
                    threshold=WARNING_LOST_SHARE,
                    source="step durations",
                ),
                Evidence(metric="phase that grew", value=cause, source="step phases"),
                Evidence(metric="when", value=when, source="step indices"),
                *(
                    (
                        Evidence(
                            metric="your helper processes' share of the job's CPU",
                            value=round(helpers, 4),
                            unit="share",
                            source="/proc (the job's child processes, DataLoader workers left out)",
                        ),
                    )
                    if helpers
                    else ()
                ),
                *(
                    (
                        Evidence(
                            metric="other processes' CPU during the outliers",
                            value=round(outside[0], 3),
                            unit="share",
                            threshold=round(outside[1] + OTHERS_EXCESS_SHARE, 3),
                            source="system samples (other processes, per step)",
                        ),
                    )
                    if outside
                    else ()
                ),
                *(
                    (symptom_evidence(cause_rule, "what grew in the outlier steps, or ran then"),)
                    if cause_rule
                    else ()
                ),
            ),
            speedup=Speedup(
                factor=speedup_if_removed(lost_share),
                basis="outlier steps brought down to the median step",
            ),
            fix=Fix(summary=f"Look at what runs {when}: {_HINTS.get(cause, cause)}."),
        )
    ]


def _helpers_share(ctx: RuleContext, outliers: Sequence[StepTiming]) -> float | None:
    """The job's helper processes' share of its CPU when they contend for the CPUs and at least
    ``HELPERS_SHARE`` of ``outliers`` ended while they were busy; else None."""
    found = contention(ctx)
    if found is None or not outliers:
        return None
    during = sum(any(a <= s.end_ns <= b for a, b in found.busy_spans) for s in outliers)
    return found.share if during >= HELPERS_SHARE * len(outliers) else None


def _grown_phase(outliers: Sequence[StepTiming], steps: Sequence[StepTiming]) -> str:
    """Return the phase (or ``gc``) whose time grew most in the outliers against the median."""
    names = {name for s in outliers for name in s.phase_ns}
    excess: dict[str, float] = {}
    for name in names:
        typical = statistics.median(s.phase(name) for s in steps)
        excess[name] = statistics.fmean(s.phase(name) for s in outliers) - typical
    grown = max(excess, key=lambda k: excess[k]) if excess else Phase.OTHER.value
    typical_gc = statistics.median(s.gc_pause_ns for s in steps)
    gc_excess = statistics.fmean(s.gc_pause_ns for s in outliers) - typical_gc
    # GC pauses overlap the phases: a pause that explains half the growth is the cause.
    if excess and gc_excess > 0 and gc_excess >= 0.5 * excess[grown]:
        return "gc"
    return grown
