"""cpu-fallback-ops: a GPU job that leaves part of its work on the CPU.

Detects (static part): a model whose parameters or buffers are split between the CPU and an
accelerator (every step copies them across, or runs those layers on the CPU); batches that
stay on the CPU while the model is on the GPU is the input pipeline's copy (the ``h2d``
phase). Counting ``.item()``/``.cpu()`` synchronisations per step and MPS fallback warnings
at run time is not done yet.
Evidence: the model's devices and which dtypes live where.
Fix: move the whole model (``model.to(device)``) and register tensors as buffers.
"""

from __future__ import annotations

from traindoctor.model import Evidence, Finding, Fix, Severity, Speedup
from traindoctor.rules._facts import GPU_DEVICES
from traindoctor.rules.context import RuleContext
from traindoctor.rules.registry import rule

__all__ = ["cpu_fallback_ops"]


@rule(
    id="cpu-fallback-ops",
    title="Part of a GPU model stays on the CPU",
    requires=("model",),
    scope="model",
)
def cpu_fallback_ops(ctx: RuleContext) -> list[Finding]:
    """Flag models whose parameters/buffers are split between CPU and an accelerator."""
    findings = []
    for model in ctx.record.models:
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
                    "each copy synchronises the GPU."
                ),
                evidence=(
                    Evidence(
                        metric="devices of parameters and buffers",
                        value=", ".join(sorted(devices)),
                        source="model",
                    ),
                ),
                speedup=Speedup(factor=1.0, method="not estimated: depends on the layers"),
                fix=Fix(
                    summary="Move the whole model with model.to(device) after building it, and "
                    "register constant tensors with self.register_buffer(...) so they move "
                    "with it.",
                    snippet="model.to('cuda')",
                ),
            )
        )
    return findings
