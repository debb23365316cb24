"""autograd-in-inference: an inference loop that records autograd graphs or runs in train mode.

Detects, in a job that never steps an optimizer and never runs backward: model calls made with
autograd enabled (every activation is kept for a backward that never comes: a speed-up
figure), and calls made in train mode on a model with dropout or batch-norm layers (its
outputs are randomised and its statistics drift: a fault of the results, with no figure, so
no short run makes it info). One finding each.
Evidence: calls with grad on, calls in train mode, the layer kinds.
Fix: ``torch.inference_mode()`` and ``model.eval()`` around the loop.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["GRAD_COST", "autograd_in_inference"]

#: Measured on the reference machine (2026-11-22): forward of a small CNN and an MLP at batch
#: 64 with autograd on took 1.03-1.05x the time under torch.inference_mode(); the larger cost
#: is memory (activations held until the outputs are freed).
GRAD_COST = 1.04
_MODE_SENSITIVE = ("dropout", "batchnorm")


@rule(id="autograd-in-inference", title="Inference with autograd or train mode on")
def autograd_in_inference(ctx: RuleContext) -> list[Finding]:
    """Flag an inference-only job whose model calls run with grad or in train mode."""
    record = ctx.record
    steps = ctx.steps
    if any(s.boundary == "optimizer" for s in steps):
        return []
    if ctx.share(Phase.BACKWARD) > 0:
        return []
    findings = []
    kinds = {m.model_id: m for m in record.models}
    for stat in record.concurrency:
        if stat.calls == 0:
            continue
        info = kinds.get(stat.model_id)
        sensitive = sorted(k for k in _MODE_SENSITIVE if info and info.kinds.get(k))
        grad = stat.grad_calls / stat.calls
        train = stat.train_mode_calls / stat.calls
        evidence = (
            Evidence(metric="model calls", value=stat.calls, source="forward hook"),
            Evidence(
                metric="calls with grad enabled",
                value=stat.grad_calls,
                source="torch.is_grad_enabled()",
            ),
            Evidence(
                metric="calls in train mode", value=stat.train_mode_calls, source="model.training"
            ),
            Evidence(
                metric="mode-sensitive layers",
                value=", ".join(sensitive) or "none",
                source="model",
            ),
        )
        if sensitive and train >= 0.5:
            findings.append(_train_mode(stat.class_name, train, sensitive, evidence))
        if grad >= 0.5:
            forward = ctx.share(Phase.FORWARD)
            factor = 1.0 / (1.0 - forward * (1 - 1 / GRAD_COST))
            findings.append(_grad_on(stat.class_name, grad, factor, evidence))
    return findings


def _train_mode(
    name: str, train: float, sensitive: list[str], evidence: tuple[Evidence, ...]
) -> Finding:
    """Calls in train mode with dropout or batch-norm: outputs that are not the model's (a
    fault of the results, whatever the run's length: no speed-up figure)."""
    return Finding(
        rule="autograd-in-inference",
        severity=Severity.WARNING,
        title=f"{name} runs inference in train mode",
        explanation=(
            f"The job never runs backward or an optimizer step, yet {train:.0%} of {name}'s "
            f"calls run in train mode with {', '.join(sensitive)} layers: dropout drops and "
            "batch-norm updates its statistics, so the outputs are not the model's eval "
            "outputs."
        ),
        evidence=evidence,
        speedup=Speedup.none(
            "no speed figure: the fault is in the outputs (train mode's dropout and batch-norm)"
        ),
        fix=Fix(
            summary="Call model.eval() before inference.",
            snippet="model.eval()\nwith torch.inference_mode():\n    for x in loader:\n"
            "        y = model(x)",
        ),
    )


def _grad_on(name: str, grad: float, factor: float, evidence: tuple[Evidence, ...]) -> Finding:
    """Calls that record autograd graphs for a backward that never comes."""
    return Finding(
        rule="autograd-in-inference",
        severity=Severity.WARNING,
        title=f"{name} runs inference with autograd on",
        explanation=(
            f"The job never runs backward or an optimizer step, yet {grad:.0%} of {name}'s "
            "calls record autograd graphs: autograd keeps every activation alive for a "
            "backward that never comes."
        ),
        evidence=evidence,
        speedup=Speedup(
            factor=factor,
            basis=f"forward share x {GRAD_COST}x autograd cost measured on the reference CPU; "
            "the memory saved is larger",
        ),
        fix=Fix(
            summary="Run the loop under torch.inference_mode().",
            snippet="with torch.inference_mode():\n    for x in loader:\n        y = model(x)",
        ),
    )
