"""tensor-core-alignment: half-precision GPU layers whose sizes tensor cores cannot tile.

Detects, on a model on CUDA with float16/bfloat16 weights (or half-precision batches under
autocast): dense layers whose in/out features and conv layers whose channels are not
multiples of 8.
Evidence: the misaligned layers (qualified names, sizes) and their share of the parameters.
Fix: pad the sizes to multiples of 8 (vocabulary, hidden sizes, channels).
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, LayerInfo, Severity, Speedup
from stepdoctor.rules._facts import distinct_models, models_on, same_models
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["ALIGNMENT", "MAJOR_SHARE", "tensor_core_alignment"]

#: NVIDIA's "Matrix Multiplication Background" / "Tensor Core Requirements" guide: fp16/bf16
#: GEMM and conv dimensions should be multiples of 8 for tensor cores to be used fully.
ALIGNMENT = 8
#: Misaligned layers holding at least half the parameters make it a warning, not info.
MAJOR_SHARE = 0.5
_HALF = ("torch.float16", "torch.bfloat16")


@rule(
    id="tensor-core-alignment",
    title="Layer sizes not multiples of 8",
    requires=("model",),
    scope="model",
)
def tensor_core_alignment(ctx: RuleContext) -> list[Finding]:
    """Flag fp16/bf16 CUDA models with dense/conv sizes not multiples of 8."""
    record = ctx.record
    half_batches = any(d in _HALF for d in record.batch_dtypes)
    findings = []
    for model, copies in distinct_models(models_on(record, "cuda")):
        half = any(d in _HALF for d in model.param_dtypes) or half_batches
        if not half:
            continue
        bad = [x for x in model.layers if _misaligned(x)]
        if not bad:
            continue
        params = sum(x.params for x in bad)
        share = params / model.param_count if model.param_count else 0.0
        names = ", ".join(f"{x.name} ({x.in_features}->{x.out_features})" for x in bad[:5])
        findings.append(
            Finding(
                rule="tensor-core-alignment",
                severity=Severity.WARNING if share >= MAJOR_SHARE else Severity.INFO,
                title=f"{len(bad)} layer(s) of {model.class_name} not multiples of {ALIGNMENT}",
                explanation=(
                    f"In half precision, tensor cores tile matrix sizes in multiples of "
                    f"{ALIGNMENT}; {names}"
                    + (" and more" if len(bad) > 5 else "")
                    + " fall back to slower kernels or padded work."
                    + same_models(copies)
                ),
                evidence=(
                    Evidence(metric="misaligned layers", value=len(bad), source="model"),
                    Evidence(
                        metric="their share of the parameters",
                        value=round(share, 3),
                        unit="share",
                        threshold=MAJOR_SHARE,
                    ),
                    Evidence(metric="examples", value=names),
                ),
                speedup=Speedup.none("not estimated: measure padded sizes"),
                fix=Fix(
                    summary=f"Pad feature, hidden, vocabulary and channel sizes up to "
                    f"multiples of {ALIGNMENT} (e.g. vocabulary 50257 -> 50264)."
                ),
            )
        )
    return findings


def _misaligned(layer: LayerInfo) -> bool:
    if layer.kind not in ("linear", "conv"):
        return False
    # The first conv of an image model takes 1-4 channels: cuDNN pads those itself.
    if layer.kind == "conv" and (layer.in_features or 0) <= 4:
        sizes = [layer.out_features]
    else:
        sizes = [layer.in_features, layer.out_features]
    return any(s is not None and s % ALIGNMENT for s in sizes)
