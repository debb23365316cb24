"""small-batch: per-step fixed overhead dominates because batches are tiny.

Detects: a batch size of a few samples while the hardware is under-used.
Evidence: batch size, samples/s, step time, CPU or GPU utilisation.
Fix: a larger batch (scale the learning rate), or batch inference requests.
"""

from __future__ import annotations

import statistics

from traindoctor.model import Evidence, Finding, Fix, Severity, Speedup
from traindoctor.rules.context import RuleContext
from traindoctor.rules.registry import rule

__all__ = ["MAX_SPEEDUP", "SMALL_BATCH", "UNDERUSED", "small_batch"]

#: DL4J's guide (step 5): minibatches of 32–128 are common; training or inference with one
#: example at a time gives poor utilisation. We flag 8 or fewer samples a step.
SMALL_BATCH = 8
#: Utilisation (0-1 of the usable CPUs, or GPU busy share) under which the hardware is idle
#: enough for a larger batch to fill it. The TF article's small-batch case study saw GPU
#: utilisation drop to ~60% at batch 2.
UNDERUSED = 0.6
#: Cap on the estimate: beyond filling the idle hardware we do not extrapolate.
MAX_SPEEDUP = 10.0


@rule(id="small-batch", title="Batches too small to use the hardware")
def small_batch(ctx: RuleContext) -> list[Finding]:
    """Flag a median batch of 8 or fewer samples on under-used hardware."""
    sizes = [s.batch_size for s in ctx.steps if s.batch_size]
    if not sizes:
        return []
    batch = statistics.median(sizes)
    if batch > SMALL_BATCH:
        return []
    util, where = _utilisation(ctx)
    if util is None or util >= UNDERUSED:
        return []
    step_ms = ctx.summary.mean_step_ms or 0.0
    factor = min(MAX_SPEEDUP, 1.0 / max(util, 1.0 / MAX_SPEEDUP))
    rate = ctx.summary.samples_per_sec
    return [
        Finding(
            rule="small-batch",
            severity=Severity.CRITICAL if batch <= 1 else Severity.WARNING,
            title=f"Batch of {batch:g} leaves the {where} {1 - util:.0%} idle",
            explanation=(
                f"Each step handles {batch:g} sample(s) in {step_ms:.2f} ms"
                + (f" ({rate:.0f} samples/s)" if rate else "")
                + f", and the {where} is busy only {util:.0%} of the time: per-step costs "
                "(Python, kernel launches, optimizer, synchronisation) dominate the work. "
                "Larger batches spread them over more samples."
            ),
            evidence=(
                Evidence(
                    metric="median batch size",
                    value=batch,
                    threshold=SMALL_BATCH,
                    source="batch leading dimension",
                ),
                Evidence(
                    metric="samples/s", value=round(rate, 1) if rate else None, source="steps"
                ),
                Evidence(
                    metric="mean step time", value=round(step_ms, 3), unit="ms", source="steps"
                ),
                Evidence(
                    metric=f"{where} utilisation",
                    value=round(util, 3),
                    unit="share",
                    threshold=UNDERUSED,
                    source="sampler",
                ),
            ),
            speedup=Speedup(
                factor=factor,
                method=f"1 / {where} utilisation ({util:.2f}), capped at {MAX_SPEEDUP:g}x: "
                "a larger batch fills the idle capacity",
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
    gpu = [g.util_pct for g in ctx.record.gpu if g.util_pct is not None]
    if gpu:
        return statistics.fmean(gpu) / 100, "GPU"
    jobs = [s.job_cpu_pct for s in ctx.system if s.job_cpu_pct is not None]
    if not jobs:
        return None, "CPU"
    return min(1.0, statistics.fmean(jobs) / 100 / ctx.cores), "CPU"
