"""cudnn-disabled: a CUDA job without cuDNN, or with its fast paths switched off.

Detects, on a job whose model runs on CUDA (or any CUDA machine, for the doctor):
cuDNN unavailable or ``torch.backends.cudnn.enabled = False`` with conv/recurrent layers
(warning); ``cudnn.benchmark`` off with conv layers and fixed input shapes (info); TF32 matmul
off on Ampere or newer with float32 weights (info); float32 weights on a tensor-core GPU
without mixed precision (info); the last two only where the record did not note autocast at
the model's first forward (tensor-core-precision judges them then).
Evidence: the switches, the GPU's compute capability, the layer kinds.
Fix: the switch to turn on, or torch.autocast.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, RunRecord, Severity, Speedup
from stepdoctor.rules._facts import fact_bool, fact_float, models_on
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule
from stepdoctor.rules.tensor_core_precision import AMPERE, TENSOR_CORES, precision_known

__all__ = ["AMPERE", "TENSOR_CORES", "cudnn_disabled"]


_CONV_RNN = ("conv", "lstm", "gru", "rnn")


@rule(
    id="cudnn-disabled", title="cuDNN or tensor-core paths are off", requires=("env",), scope="env"
)
def cudnn_disabled(ctx: RuleContext) -> list[Finding]:
    """Flag cuDNN off for conv/RNN work, and (info) benchmark/TF32/AMP left off."""
    record = ctx.record
    if not fact_bool(record, "torch.cuda_available"):
        return []
    cuda_models = models_on(record, "cuda")
    if record.models and not cuda_models:
        return []  # the model is not on the GPU: wrong-backend says so
    kinds = {k for m in cuda_models for k, n in m.kinds.items() if n}
    findings = []
    available = fact_bool(record, "torch.cudnn_available")
    enabled = fact_bool(record, "torch.cudnn_enabled")
    heavy = kinds & set(_CONV_RNN) or not record.models
    if heavy and (available is False or enabled is False):
        findings.append(_off(record, kinds, available, enabled))
    elif "conv" in kinds and fact_bool(record, "torch.cudnn_benchmark") is False:
        findings.append(_benchmark(kinds))
    capability = fact_float(record, "gpu.capability")
    fp32 = all(m.param_dtypes == ("torch.float32",) for m in cuda_models) and bool(cuda_models)
    # Where the record noted autocast at the first forward, tensor-core-precision judges
    # TF32 and mixed precision with the run's figures.
    if capability is not None and fp32 and not precision_known(cuda_models):
        if capability >= AMPERE and fact_bool(record, "torch.tf32_matmul") is False:
            findings.append(_tf32(capability))
        if capability >= TENSOR_CORES and not _low_precision_batches(record):
            findings.append(_amp(capability))
    return findings


def _low_precision_batches(record: RunRecord) -> bool:
    return any(d in ("torch.float16", "torch.bfloat16") for d in record.batch_dtypes)


def _off(
    record: RunRecord, kinds: set[str], available: bool | None, enabled: bool | None
) -> Finding:
    layers = ", ".join(sorted(kinds & set(_CONV_RNN))) or "unknown (no model seen)"
    return Finding(
        rule="cudnn-disabled",
        severity=Severity.WARNING,
        title="cuDNN is " + ("not available" if available is False else "switched off"),
        explanation=(
            "Convolutions and recurrent layers on CUDA run through cuDNN's tuned kernels; "
            "without it torch falls back to much slower native implementations (DL4J's guide, "
            "'Use cuDNN')."
        ),
        evidence=(
            Evidence(metric="torch.backends.cudnn.is_available()", value=available),
            Evidence(metric="torch.backends.cudnn.enabled", value=enabled),
            Evidence(metric="conv/recurrent layers", value=layers, source="model"),
        ),
        speedup=Speedup.none("not estimated: depends on the layers; measure with it on"),
        fix=Fix(
            summary="Remove torch.backends.cudnn.enabled = False, or install a torch build "
            "with cuDNN (the pip/conda CUDA builds bundle it).",
            snippet="torch.backends.cudnn.enabled = True",
        ),
    )


def _benchmark(kinds: set[str]) -> Finding:
    return Finding(
        rule="cudnn-disabled",
        severity=Severity.INFO,
        title="cudnn.benchmark is off for a convolutional model",
        explanation=(
            "With fixed input shapes, torch.backends.cudnn.benchmark = True lets cuDNN time "
            "its convolution algorithms once and keep the fastest."
        ),
        evidence=(
            Evidence(metric="torch.backends.cudnn.benchmark", value=False),
            Evidence(metric="layer kinds", value=", ".join(sorted(kinds)), source="model"),
        ),
        speedup=Speedup.none("not estimated: measure with it on"),
        fix=Fix(
            summary="Set torch.backends.cudnn.benchmark = True when input shapes do not vary.",
            snippet="torch.backends.cudnn.benchmark = True",
        ),
    )


def _tf32(capability: float) -> Finding:
    return Finding(
        rule="cudnn-disabled",
        severity=Severity.INFO,
        title="TF32 matmul is off on an Ampere-or-newer GPU",
        explanation=(
            "float32 matrix multiplications can run on tensor cores in TF32 on compute "
            "capability 8.0 and newer, at a small precision cost."
        ),
        evidence=(
            Evidence(metric="GPU compute capability", value=capability, threshold=AMPERE),
            Evidence(metric="torch.backends.cuda.matmul.allow_tf32", value=False),
        ),
        speedup=Speedup.none("not estimated: measure with it on"),
        fix=Fix(
            summary="torch.set_float32_matmul_precision('high') (or 'medium').",
            snippet="torch.set_float32_matmul_precision('high')",
        ),
    )


def _amp(capability: float) -> Finding:
    return Finding(
        rule="cudnn-disabled",
        severity=Severity.INFO,
        title="float32 training on a GPU with tensor cores",
        explanation=(
            "The model's weights and batches are float32; on tensor-core GPUs mixed precision "
            "(torch.autocast) runs matmuls and convolutions in float16/bfloat16."
        ),
        evidence=(
            Evidence(metric="GPU compute capability", value=capability, threshold=TENSOR_CORES),
            Evidence(metric="parameter dtype", value="torch.float32", source="model"),
        ),
        speedup=Speedup.none("not estimated: measure with autocast on"),
        fix=Fix(
            summary="Wrap forward and loss in torch.autocast('cuda', dtype=torch.bfloat16) "
            "(or float16 with a GradScaler).",
            snippet="with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = model(x)",
        ),
    )
