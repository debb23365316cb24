"""cpu-fallback-ops: a GPU job that leaves part of its work on the CPU.

Detects: a model whose parameters or buffers are split between the CPU and an accelerator
(every step copies them across, or runs those layers on the CPU); on GPU/MPS jobs, tensors
created on the CPU and copied to the device inside the model's forward at every step; time in
``.item()`` / ``.tolist()`` / ``.cpu()`` of device tensors inside steps (the ``sync`` phase:
each waits for the device to finish); ops the MPS backend ran on the CPU (its fallback
warnings).
Evidence: the model's devices, the sync share of step time, the fallback ops.
Fix: move the whole model (``model.to(device)``), keep metrics on the device and read them
every N steps, implement or avoid the fallback ops.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules._facts import GPU_DEVICES, distinct_models, same_models
from stepdoctor.rules._severity import Rung, grade
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = ["MOVES_PER_STEP", "SYNC_CRITICAL", "SYNC_WARNING", "cpu_fallback_ops"]

#: Share of step time the host waits in device-to-host reads: XProf's bands for time the
#: device waits on the host (5% warning, 20% critical), which is what these waits cause.
SYNC_WARNING = 0.05
SYNC_CRITICAL = 0.20
#: Host-to-device copies made inside the model's forward, per step, from which a GPU job is
#: flagged: one per step means a tensor is rebuilt on the CPU at every call.
MOVES_PER_STEP = 1.0


@rule(
    id="cpu-fallback-ops",
    title="Part of a GPU model stays on the CPU",
    requires=("model",),
    scope="model",
)
def cpu_fallback_ops(ctx: RuleContext) -> list[Finding]:
    """Flag split models, device-to-host syncs inside steps and MPS CPU fallbacks."""
    findings = _split(ctx)
    if ctx.record.steps:
        sync = ctx.share(Phase.SYNC)
        rung = grade(sync, warning=SYNC_WARNING, critical=SYNC_CRITICAL)
        if rung is not None:
            calls = ctx.record.env_value("torch.sync_calls")
            per_step = calls / len(ctx.record.steps) if isinstance(calls, int) else None
            findings.append(_syncs(sync, rung, per_step))
    moved = ctx.record.env_value("torch.h2d_in_forward")
    if isinstance(moved, int) and ctx.record.steps:
        per_step = moved / len(ctx.record.steps)
        if per_step >= MOVES_PER_STEP:
            findings.append(_moves(per_step, ctx.share(Phase.H2D)))
    fallback = ctx.record.env_value("torch.mps_fallback_ops")
    if isinstance(fallback, str) and fallback:
        findings.append(_mps(fallback))
    return findings


def _split(ctx: RuleContext) -> list[Finding]:
    findings = []
    for model, copies in distinct_models(ctx.record.models):
        devices = set(model.devices)
        accelerators = sorted(devices & set(GPU_DEVICES))
        if not accelerators or "cpu" not in devices:
            continue
        findings.append(
            Finding(
                rule="cpu-fallback-ops",
                severity=Severity.WARNING,
                title=f"{model.class_name} is split between the CPU and {accelerators[0]}",
                explanation=(
                    f"Some parameters or buffers of {model.class_name} are on the CPU while "
                    f"the rest is on {', '.join(accelerators)}: those layers run on the CPU, "
                    "or their tensors are copied to the device and back at every step, and "
                    "each copy synchronises the GPU." + same_models(copies)
                ),
                evidence=(
                    Evidence(
                        metric="devices of parameters and buffers",
                        value=", ".join(sorted(devices)),
                        source="model",
                    ),
                ),
                speedup=Speedup.none("not estimated: depends on the layers"),
                fix=Fix(
                    summary="Move the whole model with model.to(device) after building it, and "
                    "register constant tensors with self.register_buffer(...) so they move "
                    "with it.",
                    snippet="model.to('cuda')",
                ),
            )
        )
    return findings


def _syncs(share: float, rung: Rung, per_step: float | None) -> Finding:
    return Finding(
        rule="cpu-fallback-ops",
        severity=rung.severity,
        title=f"Device-to-host reads take {share:.0%} of each step",
        explanation=(
            ".item(), .tolist() and .cpu() on device tensors inside the loop wait for every "
            "queued kernel to finish before the host can go on: the GPU idles while the next "
            "work is prepared."
        ),
        evidence=(
            Evidence(
                metric="sync share of step time",
                value=round(share, 4),
                unit="share",
                threshold=rung.threshold,
                source="timed .item()/.tolist()/.cpu() of device tensors",
            ),
            Evidence(
                metric="device-to-host reads per step",
                value="unknown" if per_step is None else round(per_step, 1),
                source="counted .item()/.tolist()/.cpu() of device tensors",
            ),
        ),
        speedup=removal_speedup(
            share,
            "the waiting removed (an upper bound: some of it is the device's own work)",
        ),
        fix=Fix(
            summary="Accumulate losses and metrics on the device (total += loss.detach()) and "
            "read them every N steps; avoid data-dependent Python control flow on tensors.",
            snippet=(
                "running = running + loss.detach()\nif step % 100 == 0:\n    print(running.item())"
            ),
        ),
    )


def _mps(ops: str) -> Finding:
    return Finding(
        rule="cpu-fallback-ops",
        severity=Severity.WARNING,
        title="Ops fall back from MPS to the CPU",
        explanation=(
            f"The MPS backend does not implement {ops}; with PYTORCH_ENABLE_MPS_FALLBACK=1 "
            "they run on the CPU, copying their inputs and outputs across every call."
        ),
        evidence=(Evidence(metric="ops run on the CPU", value=ops, source="MPS warnings"),),
        speedup=Speedup.none("not estimated: depends on the ops' share"),
        fix=Fix(
            summary="Replace those ops with ones MPS implements, move them out of the step, "
            "or update torch (MPS coverage grows with each release)."
        ),
    )


def _moves(per_step: float, h2d_share: float) -> Finding:
    return Finding(
        rule="cpu-fallback-ops",
        severity=Severity.WARNING,
        title=f"{per_step:.1f} tensors a step are built on the CPU inside forward and copied",
        explanation=(
            "The model's forward creates tensors on the CPU (torch.tensor(...), arange, masks) "
            "and moves them to the device at every call: each copy is a host-to-device "
            "transfer on the critical path, often with a synchronisation."
        ),
        evidence=(
            Evidence(
                metric="copies inside forward per step",
                value=round(per_step, 2),
                threshold=MOVES_PER_STEP,
                source="Tensor.to/.cuda inside the outermost model call",
            ),
            Evidence(
                metric="host-to-device share of step time", value=round(h2d_share, 4), unit="share"
            ),
        ),
        speedup=removal_speedup(
            h2d_share,
            "all host-to-device time removed (an upper bound: batches still move)",
        ),
        fix=Fix(
            summary="Create such tensors on the device (torch.arange(n, device=x.device)) or "
            "once in __init__ with self.register_buffer(...)."
        ),
    )
