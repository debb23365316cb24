"""small-batch: per-step fixed overhead dominates because batches are tiny.

Detects: a median batch of a few samples whose step time is mostly per-step costs that do not
grow with the batch (optimizer step, data-loader call, work between steps), or, on a GPU,
a batch that leaves the GPU idle.
Evidence: batch size, samples/s, step time, the per-step share, CPU or GPU utilisation.
Fix: a larger batch (scale the learning rate), or batch inference requests.
"""

from __future__ import annotations

import statistics

from stepdoctor.model import Evidence, Finding, Fix, Phase, Speedup
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "CRITICAL_BATCH",
    "MIN_SPEEDUP",
    "SMALL_BATCH",
    "TARGET_BATCH",
    "UNDERUSED_GPU",
    "small_batch",
]

#: DL4J's guide (step 5): minibatches of 32-128 are common; training or inference with one
#: example at a time gives poor utilisation. We flag 8 or fewer samples a step, and estimate
#: against a batch of 32, the low end of DL4J's range.
SMALL_BATCH = 8
TARGET_BATCH = 32
#: One example at a time, DL4J's worst case, is critical.
CRITICAL_BATCH = 1
#: Below this estimated gain the per-step costs are already small: stay silent.
MIN_SPEEDUP = 1.1
#: GPU busy share under which a small batch leaves the GPU idle (the TF performance-analysis
#: article's small-batch case study saw utilisation fall to ~60% at batch 2).
UNDERUSED_GPU = 0.6

#: Phases whose cost per step does not grow with the batch size.
_PER_STEP = (Phase.OPTIMIZER, Phase.DATA_WAIT, Phase.OTHER, Phase.CALLBACKS)


@rule(id="small-batch", title="Batches too small to use the hardware")
def small_batch(ctx: RuleContext) -> list[Finding]:
    """Flag a median batch of 8 or fewer samples whose per-step costs dominate."""
    sizes = [s.batch_size for s in ctx.steps if s.batch_size]
    if not sizes:
        return []
    batch = statistics.median(sizes)
    rung = grade(batch, warning=SMALL_BATCH, critical=CRITICAL_BATCH, lower_is_worse=True)
    if rung is None:
        return []
    fixed = ctx.share(*_PER_STEP)
    scaling = max(0.0, 1.0 - fixed)
    factor = 1.0 / (fixed * batch / TARGET_BATCH + scaling)
    util, where = _utilisation(ctx)
    gpu_idle = where == "GPU" and util is not None and util < UNDERUSED_GPU
    if factor < MIN_SPEEDUP and not gpu_idle:
        return []
    if gpu_idle and util is not None:
        factor = max(factor, 1.0 / max(util, 0.1))
    step_ms = ctx.summary.mean_step_ms or 0.0
    rate = ctx.summary.samples_per_sec
    evidence = [
        Evidence(
            metric="median batch size",
            value=batch,
            threshold=SMALL_BATCH,
            source="batch leading dimension",
        ),
        Evidence(metric="samples/s", value=round(rate, 1) if rate else None, source="steps"),
        Evidence(metric="mean step time", value=round(step_ms, 3), unit="ms", source="steps"),
        Evidence(
            metric="per-step costs (optimizer, data call, between steps)",
            value=round(fixed, 4),
            unit="share",
            source="step phases",
        ),
    ]
    if util is not None:
        evidence.append(
            Evidence(
                metric=f"{where} utilisation", value=round(util, 3), unit="share", source="sampler"
            )
        )
    return [
        Finding(
            rule="small-batch",
            severity=rung.severity,
            title=f"Batches of {batch:g} sample(s): per-step costs dominate",
            explanation=(
                f"Each step handles {batch:g} sample(s) in {step_ms:.2f} ms"
                + (f" ({rate:.0f} samples/s)" if rate else "")
                + f", and {fixed:.0%} of it is spent on work done once per step whatever the "
                "batch (optimizer update, data-loader call, Python between steps). Larger "
                "batches spread it over more samples"
                + (
                    f"; the GPU is busy only {util:.0%} of the time."
                    if gpu_idle and util is not None
                    else "."
                )
            ),
            evidence=tuple(evidence),
            speedup=Speedup(
                factor=factor,
                basis=f"batch {batch:g} -> {TARGET_BATCH}: per-step costs amortised, forward "
                "and backward assumed to grow linearly with the batch (a lower bound)",
            ),
            fix=Fix(
                summary=(
                    "Use batches of 32-128 (DL4J's guide; as large as memory allows on a GPU) "
                    "and scale the learning rate with the batch; for inference, group "
                    "requests into batches."
                ),
                snippet="loader = DataLoader(dataset, batch_size=64, shuffle=True)",
            ),
        )
    ]


def _utilisation(ctx: RuleContext) -> tuple[float | None, str]:
    """Return the GPU busy share, else the job's CPU share (inflated by spinning threads)."""
    gpu = [g.util_pct for g in ctx.record.gpu if g.util_pct is not None]
    if gpu:
        return statistics.fmean(gpu) / 100, "GPU"
    jobs = [s.job_cpu_pct for s in ctx.system if s.job_cpu_pct is not None]
    if not jobs:
        return None, "CPU"
    return min(1.0, statistics.fmean(jobs) / 100 / ctx.cores), "CPU"
