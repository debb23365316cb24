"""tensor-core-precision: float32 matmuls and convolutions on a GPU with tensor cores.

Detects, on a job whose models run on CUDA with float32 weights and matmul or convolution
layers: the forward ran without autocast (noted at each model's first call), on a GPU with
tensor cores (compute capability 7.0+), and, on Ampere or newer, with float32 matmuls in full
precision (``torch.get_float32_matmul_precision() == "highest"``, torch's default: TF32 off).
Evidence: the autocast state and matmul precision at the model's first call, the GPU's busy
share during the steps (NVML), its peaks.
Fix: ``torch.autocast`` with bf16 (fp16 with a GradScaler before Ampere); or TF32 matmuls.

The speed-up is modelled from the run: of a step, the share ``u`` the GPU was busy (NVML);
of that, the share ``m`` in matmuls and convolutions (the dense layers' work at float32 where
the record sizes it, else ``UNSIZED_MATMUL_SHARE``), which run ``r`` times faster (the GPU's
peak ratio); the rest is unchanged: ``1 / ((1 - u) + u (m / r + 1 - m))``.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, ModelInfo, Severity, Speedup
from stepdoctor.rules._facts import fact_float, models_on
from stepdoctor.rules._gpu import GpuPeak, dense_flops_per_sample, gpu_busy, peak_of
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "ACHIEVED_SHARE",
    "AMPERE",
    "CRITICAL_GAIN",
    "TENSOR_CORES",
    "UNSIZED_MATMUL_SHARE",
    "WARNING_GAIN",
    "precision_known",
    "tensor_core_precision",
]

#: Compute capability of the first GPUs with tensor cores (Volta, 7.0) and of Ampere (8.0),
#: the first with TF32 and bf16 (NVIDIA's CUDA programming guide, compute capabilities).
TENSOR_CORES = 7.0
AMPERE = 8.0
#: Large float32 matmuls reach about three quarters of a data-centre GPU's peak (2026-11-28's
#: zoo on an H200: 51 TFLOP/s of its 67 on an 8,192-wide MLP).
ACHIEVED_SHARE = 0.75
#: Where the record cannot size a model's matmuls (convolutions, attention): the share of the
#: GPU's time they take. Ivanov et al., "Data Movement Is All You Need" (MLSys 2021): in BERT
#: training the tensor contractions take 61% of the runtime, the rest is data movement
#: (normalisations, element-wise ops) that tensor cores do not speed up.
UNSIZED_MATMUL_SHARE = 0.6
#: A modelled gain from 1.25x is worth a one-line change; from 3x the job leaves most of its
#: GPU's tensor-core throughput unused.
WARNING_GAIN = 1.25
CRITICAL_GAIN = 3.0

_MATMUL_KINDS = ("linear", "conv", "lstm", "gru", "rnn")


def precision_known(models: list[ModelInfo]) -> bool:
    """Whether the record noted the autocast state of these models' first calls."""
    return any(m.autocast is not None for m in models)


@rule(
    id="tensor-core-precision",
    title="float32 matmuls on a GPU with tensor cores",
    requires=("model",),
    scope="model",
)
def tensor_core_precision(ctx: RuleContext) -> list[Finding]:
    """Flag float32 matmul/conv models run without autocast (and TF32 off) on tensor cores."""
    record = ctx.record
    capability = fact_float(record, "gpu.capability")
    models = [
        m
        for m in models_on(record, "cuda")
        if m.param_dtypes == ("torch.float32",)
        and any(m.kinds.get(k) for k in _MATMUL_KINDS)
        and m.autocast == "off"
    ]
    if capability is None or capability < TENSOR_CORES or not models:
        return []
    if any(m.autocast not in (None, "off") for m in models_on(record, "cuda")):
        return []  # some of the job's models run under autocast: it knows the way
    busy = gpu_busy(ctx)
    peak = peak_of(busy[2]) if busy is not None else None
    step_ms = ctx.summary.mean_step_ms
    highest = all(m.float32_matmul == "highest" for m in models)
    findings = []
    half = "bfloat16" if capability >= AMPERE else "float16"
    if busy is None or peak is None or not step_ms:
        findings.append(_finding(models, capability, half, None))
        if highest and capability >= AMPERE:
            findings.append(_tf32(models, capability, None))
        return findings
    util = busy[0]
    m, sized = _matmul_share(ctx, models, util * step_ms, peak)
    base = peak.tf32 if not highest and peak.tf32 else peak.fp32
    gain = _gain(util, m, peak.half / base)
    model = (util, m, sized, busy[1], busy[2])
    findings.append(_finding(models, capability, half, (gain, peak.half / base, model)))
    if highest and capability >= AMPERE and peak.tf32:
        tf32 = _gain(util, m, peak.tf32 / peak.fp32)
        findings.append(_tf32(models, capability, (tf32, peak.tf32 / peak.fp32, model)))
    return findings


def _gain(util: float, matmul: float, ratio: float) -> float:
    return 1.0 / ((1.0 - util) + util * (matmul / ratio + 1.0 - matmul))


def _matmul_share(
    ctx: RuleContext, models: list[ModelInfo], gpu_ms: float, peak: GpuPeak
) -> tuple[float, bool]:
    """The share of the GPU's busy time in matmuls: the dense layers' work at
    ``ACHIEVED_SHARE`` of the float32 peak where every model is sized, else the default."""
    batch = ctx.summary.samples / len(ctx.steps) if ctx.steps and ctx.summary.samples else None
    flops = [dense_flops_per_sample(m) for m in models]
    if batch is None or any(f is None for f in flops) or gpu_ms <= 0:
        return UNSIZED_MATMUL_SHARE, False
    work_ms = sum(f or 0.0 for f in flops) * batch / (ACHIEVED_SHARE * peak.fp32 * 1e9)
    return min(1.0, work_ms / gpu_ms), True


def _evidence(
    models: list[ModelInfo], capability: float, model: tuple[float, float, bool, int, str] | None
) -> tuple[Evidence, ...]:
    names = ", ".join(sorted({m.class_name for m in models}))
    evidence = [
        Evidence(metric="GPU compute capability", value=capability, threshold=TENSOR_CORES),
        Evidence(metric="autocast at the first forward", value="off", source=names),
        Evidence(
            metric="float32 matmul precision",
            value=models[0].float32_matmul,
            source="torch.get_float32_matmul_precision() at the first forward",
        ),
    ]
    if model is not None:
        util, m, sized, readings, _ = model
        evidence += [
            Evidence(
                metric="GPU busy during the steps",
                value=round(util, 3),
                unit="share",
                source=f"NVML utilisation, {readings} readings",
            ),
            Evidence(
                metric="matmuls' share of the GPU's time",
                value=round(m, 3),
                unit="share",
                source="the dense layers' work at float32"
                if sized
                else "assumed (Ivanov et al. 2021): the layers' work is not sized",
            ),
        ]
    return tuple(evidence)


def _basis(model: tuple[float, float, bool, int, str], ratio: float, what: str) -> str:
    util, m, _, _, name = model
    return (
        f"the GPU was busy {util:.0%} of each step, {m:.0%} of that in matmuls and "
        f"convolutions, which {what} runs {ratio:.1f}x faster (the {name}'s peak ratio); "
        "the rest unchanged"
    )


def _graded(
    modelled: tuple[float, float, tuple[float, float, bool, int, str]] | None, what: str
) -> tuple[Severity, Speedup]:
    """A finding's severity and speed-up from its modelled gain (info, no figure: none)."""
    if modelled is None:
        return Severity.INFO, Speedup.none(
            "not estimated: NVML did not read the GPU during the steps"
        )
    gain, ratio, model = modelled
    rung = grade(gain, warning=WARNING_GAIN, critical=CRITICAL_GAIN)
    severity = rung.severity if rung is not None else Severity.INFO
    return severity, Speedup(factor=gain, basis=_basis(model, ratio, what))


def _finding(
    models: list[ModelInfo],
    capability: float,
    half: str,
    modelled: tuple[float, float, tuple[float, float, bool, int, str]] | None,
) -> Finding:
    severity, speedup = _graded(modelled, f"autocast to {half}")
    return Finding(
        rule="tensor-core-precision",
        severity=severity,
        title="float32 training without mixed precision on tensor cores",
        explanation=(
            f"{', '.join(sorted({m.class_name for m in models}))} runs its matmuls and "
            f"convolutions in float32 on a GPU of compute capability {capability:.1f}, whose "
            f"tensor cores run {half} many times faster; autocast was off at its first "
            "forward."
        ),
        evidence=_evidence(models, capability, modelled[2] if modelled else None),
        speedup=speedup,
        fix=Fix(
            summary=(
                f"Run the forward and the loss under torch.autocast('cuda', "
                f"dtype=torch.{half})"
                + (" with a torch.amp.GradScaler" if half == "float16" else "")
                + "; the weights and the optimizer stay float32."
            ),
            snippet=(
                f"with torch.autocast('cuda', dtype=torch.{half}):\n"
                "    loss = loss_fn(model(x), y)\nloss.backward()"
            ),
        ),
    )


def _tf32(
    models: list[ModelInfo],
    capability: float,
    modelled: tuple[float, float, tuple[float, float, bool, int, str]] | None,
) -> Finding:
    severity, speedup = _graded(modelled, "TF32")
    return Finding(
        rule="tensor-core-precision",
        severity=severity,
        title="float32 matmuls with TF32 off",
        explanation=(
            "torch's float32 matmul precision was 'highest' (its default) at the model's "
            f"first forward: on compute capability {capability:.1f} TF32 runs float32 matmuls "
            "on tensor cores, keeping float32's range with a 10-bit mantissa; one line, no "
            "change to the model."
        ),
        evidence=_evidence(models, capability, modelled[2] if modelled else None),
        speedup=speedup,
        fix=Fix(
            summary="Call torch.set_float32_matmul_precision('high') before training "
            "(and torch.backends.cudnn.allow_tf32 stays True for convolutions).",
            snippet="torch.set_float32_matmul_precision('high')",
        ),
    )
