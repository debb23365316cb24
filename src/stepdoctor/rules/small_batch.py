"""small-batch: per-step fixed overhead dominates because batches are tiny.

Detects: a median batch of a few samples whose step time is mostly per-step costs that do not
grow with the batch (optimizer step, data-loader call, work between steps), or, on a GPU,
a batch that leaves the GPU idle.
Evidence: batch size, samples/s, step time, the per-step share, CPU or GPU utilisation.
Fix: a larger batch (scale the learning rate), or batch inference requests.
"""

from __future__ import annotations

import statistics

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules import input_bound
from stepdoctor.rules._facts import gpu_job
from stepdoctor.rules._gpu import dense_flops_per_sample, gpu_busy, peak_of
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule
from stepdoctor.rules.summary import batch_from_model

__all__ = [
    "ACHIEVED_SHARE",
    "CRITICAL_BATCH",
    "CRITICAL_GPU_GAIN",
    "GPU_TARGET_BATCH",
    "INPUT_SHARE",
    "MIN_GPU_GAIN",
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

#: On a GPU: the batch the speed-up is modelled at. A GPU's matmuls fill its SMs from a few
#: hundred rows (NVIDIA's matrix-multiplication performance guide: tile quantization and wave
#: quantization), and 512 fits in memory for the small models where small batches are seen.
GPU_TARGET_BATCH = 512
#: The share of the GPU's plain-float32 peak a larger batch's dense layers are assumed to reach
#: (large matmuls reach 70-80% of peak on NVIDIA's data-centre GPUs; half keeps the estimate
#: low).
ACHIEVED_SHARE = 0.5
#: A modelled gain under 1.5x from a larger batch is not worth retuning the learning rate for;
#: from 4x the batch leaves most of the GPU unused.
MIN_GPU_GAIN = 1.5
CRITICAL_GPU_GAIN = 4.0
#: A GPU job that waits for its data this share of the step or more idles for its input, which
#: a larger batch does not feed faster (input-bound's critical share).
INPUT_SHARE = input_bound.CRITICAL_SHARE
#: Phases whose time grows with the batch on a GPU (the host's work on each sample); the rest
#: of a step's host time (launching the kernels, the optimizer's launches) does not.
_PER_SAMPLE_GPU = (Phase.DATA_WAIT, Phase.H2D)
#: Phases whose cost per step does not grow with the batch size.
_PER_STEP = (Phase.OPTIMIZER, Phase.DATA_WAIT, Phase.OTHER, Phase.CALLBACKS)


@rule(id="small-batch", title="Batches too small to use the hardware")
def small_batch(ctx: RuleContext) -> list[Finding]:
    """Flag a median batch of 8 or fewer samples whose per-step costs dominate (on a GPU: a
    batch under 512 that leaves the GPU idle, with the gain of batch 512 modelled)."""
    sizes = [s.batch_size for s in ctx.steps if s.batch_size]
    source = "batch leading dimension"
    if not sizes:
        fallback, _ = batch_from_model(ctx.record) if ctx.steps else (None, "")
        if fallback is None:
            return []
        sizes, source = [fallback], "the model's first input (no DataLoader batch was seen)"
    batch = statistics.median(sizes)
    busy = gpu_busy(ctx) if gpu_job(ctx.record) else None
    if busy is not None:
        found = _on_gpu(ctx, batch, source, busy)
        return [found] if found is not None else []
    # On the CPU, or a GPU that NVML did not read: the per-step costs the host measured
    rung = grade(batch, warning=SMALL_BATCH, critical=CRITICAL_BATCH, lower_is_worse=True)
    if rung is None:
        return []
    fixed = ctx.share(*_PER_STEP)
    scaling = max(0.0, 1.0 - fixed)
    factor = 1.0 / (fixed * batch / TARGET_BATCH + scaling)
    if factor < MIN_SPEEDUP:
        return []
    step_ms = ctx.summary.mean_step_ms or 0.0
    rate = ctx.summary.samples_per_sec
    evidence = [
        Evidence(metric="median batch size", value=batch, threshold=SMALL_BATCH, source=source),
        Evidence(metric="samples/s", value=round(rate, 1) if rate else None, source="steps"),
        Evidence(metric="mean step time", value=round(step_ms, 3), unit="ms", source="steps"),
        Evidence(
            metric="per-step costs (optimizer, data call, between steps)",
            value=round(fixed, 4),
            unit="share",
            source="step phases",
        ),
    ]
    util = _cpu_utilisation(ctx)
    if util is not None:
        evidence.append(
            Evidence(metric="CPU utilisation", value=round(util, 3), unit="share", source="psutil")
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
                "batches spread it over more samples."
            ),
            evidence=tuple(evidence),
            speedup=Speedup(
                factor=factor,
                basis=f"batch {batch:g} -> {TARGET_BATCH}: per-step costs amortised, forward "
                "and backward assumed to grow linearly with the batch (a lower bound)",
            ),
            fix=Fix(
                summary=(
                    "Use batches of 32-128 (DL4J's guide) and scale the learning rate with "
                    "the batch; for inference, group requests into batches."
                ),
                snippet="loader = DataLoader(dataset, batch_size=64, shuffle=True)",
            ),
        )
    ]


def _on_gpu(
    ctx: RuleContext, batch: float, source: str, busy: tuple[float, int, str]
) -> Finding | None:
    """A batch under ``GPU_TARGET_BATCH`` on a GPU that NVML saw mostly idle during the steps.

    The model, batch ``b`` -> ``GPU_TARGET_BATCH`` (``k`` times larger), from the step's own
    measurements: a step of ``T`` ms is the host's per-step work ``F`` (launching the kernels:
    it does not grow with the batch while the GPU runs them asynchronously) and its per-sample
    work ``D`` (waiting for data, copying it: grows ``k`` times); the GPU's time is at least
    the busy time NVML saw (``u T``) and at least the dense layers' work at ``k b`` at
    ``ACHIEVED_SHARE`` of the GPU's float32 peak (where the record sizes it; else ``k u T``,
    the GPU's time grown with the batch). The step at ``k b`` takes the longer of the host's
    ``F + k D`` and the GPU's, and the gain is ``k T`` over it.
    """
    step_ms = ctx.summary.mean_step_ms
    if not step_ms or batch >= GPU_TARGET_BATCH:
        return None
    util, readings, name = busy
    if util >= UNDERUSED_GPU or ctx.share(*_PER_SAMPLE_GPU) >= INPUT_SHARE:
        return None  # a GPU waiting for its input: input-bound's, not the batch's
    k = GPU_TARGET_BATCH / batch
    per_sample = ctx.share(*_PER_SAMPLE_GPU) * step_ms
    host = (step_ms - per_sample) + k * per_sample
    peak = peak_of(name)
    flops = [f for m in ctx.record.models if (f := dense_flops_per_sample(m))]
    if peak is not None and flops:
        gpu_ms = max(
            util * step_ms, GPU_TARGET_BATCH * max(flops) / (ACHIEVED_SHARE * peak.fp32 * 1e9)
        )
        gpu_basis = (
            f"the dense layers' {max(flops) / 1e6:,.1f} MFLOP a sample at "
            f"{ACHIEVED_SHARE:.0%} of the {name}'s {peak.fp32:g} TFLOP/s float32 peak"
        )
    else:
        gpu_ms = k * util * step_ms
        gpu_basis = "the GPU's busy time grown with the batch (its layers' work is not sized)"
    factor = k * step_ms / max(host, gpu_ms)
    rung = grade(factor, warning=MIN_GPU_GAIN, critical=CRITICAL_GPU_GAIN)
    if rung is None:
        return None
    rate = ctx.summary.samples_per_sec
    return Finding(
        rule="small-batch",
        severity=rung.severity if rung.severity is Severity.CRITICAL else Severity.WARNING,
        title=f"Batches of {batch:g} leave the GPU {1 - util:.0%} idle",
        explanation=(
            f"Each step handles {batch:g} sample(s) in {step_ms:.2f} ms"
            + (f" ({rate:,.0f} samples/s)" if rate else "")
            + f", and NVML saw the {name} busy {util:.0%} of the time during the steps: the "
            "host's work of launching each step's kernels, not the GPU, sets the pace, and a "
            "larger batch does more work for the same launches."
        ),
        evidence=(
            Evidence(
                metric="median batch size", value=batch, threshold=GPU_TARGET_BATCH, source=source
            ),
            Evidence(
                metric="GPU busy during the steps",
                value=round(util, 3),
                unit="share",
                threshold=UNDERUSED_GPU,
                source=f"NVML utilisation, {readings} readings",
            ),
            Evidence(metric="mean step time", value=round(step_ms, 3), unit="ms", source="steps"),
            Evidence(metric="samples/s", value=round(rate, 1) if rate else None, source="steps"),
        ),
        speedup=Speedup(
            factor=factor,
            basis=f"batch {batch:g} -> {GPU_TARGET_BATCH}: the step takes the longer of the "
            f"host's per-step work ({step_ms - per_sample:.2f} ms, launches) plus its "
            f"per-sample work x{k:g} ({per_sample:.2f} ms now), and the GPU's ({gpu_basis}: "
            f"{gpu_ms:.2f} ms)",
        ),
        fix=Fix(
            summary=(
                f"Train on batches of {GPU_TARGET_BATCH} (as large as the GPU's memory "
                "allows) and scale the learning rate with the batch (linearly, with a "
                "warm-up); for inference, group requests into batches."
            ),
            snippet=f"loader = DataLoader(dataset, batch_size={GPU_TARGET_BATCH}, shuffle=True)",
        ),
    )


def _cpu_utilisation(ctx: RuleContext) -> float | None:
    """The job's CPU share of the cores it may use (inflated by spinning threads)."""
    jobs = [s.job_cpu_pct for s in ctx.system if s.job_cpu_pct is not None]
    if not jobs:
        return None
    return min(1.0, statistics.fmean(jobs) / 100 / ctx.cores)
