"""wrong-backend: an accelerator is there but the job does not use it.

Detects: NVIDIA GPUs visible (NVML, or /dev/nvidia* device nodes) while torch has no CUDA build
or cannot reach them (driver, CUDA_VISIBLE_DEVICES), or the job's models stay on the CPU; an
Apple MPS or Intel XPU device available while the models stay on the CPU.
Evidence: GPUs seen and how, torch's build, where the models' parameters are.
Fix: install the CUDA build of torch, make the GPUs visible, move the model and batches.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, RunRecord, Severity, Speedup
from stepdoctor.rules._facts import fact_bool, fact_int, models_on
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["wrong_backend"]

_NO_ESTIMATE = Speedup.none(
    "not estimated: how much faster the GPU trains depends on the model; DL4J's "
    "benchmark page shows GPUs ahead by an order of magnitude on large dense work",
)


@rule(id="wrong-backend", title="An accelerator is not used", requires=("env",), scope="env")
def wrong_backend(ctx: RuleContext) -> list[Finding]:
    """Flag a visible GPU (or MPS/XPU device) that torch cannot reach or the job ignores."""
    record = ctx.record
    version = record.env_value("torch.version")
    if version is None:
        return []  # torch not described: nothing to compare the hardware with
    finding = _nvidia(record)
    if finding is not None:
        return [finding]
    for device, key in (("mps", "torch.mps_available"), ("xpu", "torch.xpu_available")):
        if fact_bool(record, key) and record.models and not models_on(record, device):
            return [_unused(record, device)]
    return []


def _nvidia(record: RunRecord) -> Finding | None:
    nvml = fact_int(record, "gpu.count") or 0
    nodes = fact_int(record, "gpu.device_nodes") or 0
    gpus = max(nvml, nodes)
    if gpus == 0:
        return None
    names = record.env_value("gpu.names")
    build = record.env_value("torch.cuda_build")
    available = fact_bool(record, "torch.cuda_available")
    seen = Evidence(
        metric="NVIDIA GPUs visible",
        value=gpus,
        unit="GPUs",
        source="NVML" if nvml else "/dev/nvidia* device nodes",
    )
    evidence = [seen]
    if isinstance(names, str):
        evidence.append(Evidence(metric="GPU models", value=names, source="NVML"))
    evidence.append(
        Evidence(metric="torch CUDA build", value=build or "none (CPU-only)", source="torch")
    )
    if not build:
        return Finding(
            rule="wrong-backend",
            severity=Severity.CRITICAL,
            title=f"CPU-only torch on a machine with {gpus} NVIDIA GPU(s)",
            explanation=(
                f"torch {record.env_value('torch.version')} was built without CUDA, so every "
                "operation runs on the CPU while the GPUs sit idle."
            ),
            evidence=tuple(evidence),
            speedup=_NO_ESTIMATE,
            fix=Fix(
                summary="Install a CUDA build of torch matching the driver (see "
                "pytorch.org/get-started), then move the model and batches with .to('cuda').",
                snippet="pip install torch --index-url https://download.pytorch.org/whl/cu124",
            ),
        )
    if available is False:
        visible = record.env_value("env.CUDA_VISIBLE_DEVICES")
        evidence.append(Evidence(metric="torch.cuda.is_available()", value=False, source="torch"))
        evidence.append(
            Evidence(
                metric="CUDA_VISIBLE_DEVICES",
                value="unset" if visible is None else repr(visible),
                source="environment",
            )
        )
        return Finding(
            rule="wrong-backend",
            severity=Severity.CRITICAL,
            title="torch cannot reach the GPUs",
            explanation=(
                f"torch is built for CUDA {build} and {gpus} GPU(s) are visible, but "
                "torch.cuda.is_available() is False: the driver is too old for this CUDA "
                "build, the GPUs are hidden by CUDA_VISIBLE_DEVICES, or the container was "
                "started without GPU access."
            ),
            evidence=tuple(evidence),
            speedup=_NO_ESTIMATE,
            fix=Fix(
                summary="Check `nvidia-smi`, unset or correct CUDA_VISIBLE_DEVICES, run the "
                "container with --gpus all, or install the torch build for the installed "
                "driver's CUDA version."
            ),
        )
    if record.models and not models_on(record, "cuda"):
        return _unused(record, "cuda", evidence)
    return None


def _unused(record: RunRecord, device: str, evidence: list[Evidence] | None = None) -> Finding:
    devices = sorted({d for m in record.models for d in m.devices})
    evidence = list(evidence or [])
    evidence.append(
        Evidence(metric="model devices", value=", ".join(devices) or "none", source="model")
    )
    return Finding(
        rule="wrong-backend",
        severity=Severity.CRITICAL,
        title=f"The model runs on the CPU; a {device} device is available",
        explanation=(
            f"torch can use a {device} device here, but the job's model parameters stay on "
            f"{', '.join(devices) or 'the CPU'}: the training runs on the CPU."
        ),
        evidence=tuple(evidence),
        speedup=_NO_ESTIMATE,
        fix=Fix(
            summary=f"Move the model and every batch to the device: model.to('{device}') "
            f"and x.to('{device}', non_blocking=True) in the loop.",
            snippet=f"device = torch.device('{device}')\nmodel.to(device)",
        ),
    )
