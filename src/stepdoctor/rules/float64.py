"""float64: parameters or batches in double precision.

Detects: model parameters, buffers or batch tensors of dtype float64, or torch's default
dtype set to float64.
Evidence: the dtypes seen and the share of time in compute phases.
Fix: use float32 (or lower) for the model and the data.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity, Speedup
from stepdoctor.rules.context import RuleContext, speedup_if_removed
from stepdoctor.rules.registry import rule

__all__ = ["DOUBLE_COST", "float64"]

#: DL4J's guide ("Check data types"): double precision runs at half or less of single
#: precision on data-centre GPUs, far less on consumer ones, and costs twice the memory
#: bandwidth on CPUs. We assume compute phases run twice as fast in float32 (a lower bound on
#: GPUs).
DOUBLE_COST = 2.0
#: Double-precision dtypes as torch and Keras name them.
_DOUBLE = ("torch.float64", "torch.complex128", "float64", "complex128")


@rule(id="float64", title="Double precision in use", requires=(), scope="model")
def float64(ctx: RuleContext) -> list[Finding]:
    """Flag float64 parameters or batches."""
    models = [
        m
        for m in ctx.record.models
        if any(d in _DOUBLE for d in (*m.param_dtypes, *m.buffer_dtypes))
    ]
    batches = sorted({d for d in ctx.record.batch_dtypes if d in _DOUBLE})
    default = ctx.record.env_value("torch.default_dtype")
    default_double = default in _DOUBLE
    if not models and not batches and not default_double:
        return []
    where = []
    if models:
        names = ", ".join(sorted({m.class_name for m in models}))
        where.append(f"parameters or buffers of {names}")
    if batches:
        where.append("batches from the data loader")
    if default_double:
        where.append("torch's default dtype (torch.set_default_dtype)")
    # Only the batches double, with the models seen all single precision: the model computes
    # in float32 (the job casts each batch on the way in), so float32 data saves the cast.
    data_only = bool(batches) and not models and not default_double and bool(ctx.record.models)
    compute = (
        ctx.share(Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER, Phase.TRAIN_STEP)
        if ctx.record.steps
        else 0.0
    )
    if data_only:
        speedup = Speedup.none(
            "not estimated: the model computes in float32, so float32 batches save only their "
            "cast and half their memory, not compute"
        )
    elif ctx.record.steps:
        speedup = Speedup(
            factor=speedup_if_removed(compute * (1 - 1 / DOUBLE_COST)),
            basis=f"compute phases ({compute:.0%} of time) assumed {DOUBLE_COST:g}x faster in "
            "float32",
        )
    else:
        speedup = Speedup.none(
            "not estimated: no steps measured (float32 runs the same work about "
            f"{DOUBLE_COST:g}x as fast)"
        )
    evidence = [
        Evidence(
            metric="float64 parameters",
            value=", ".join(m.class_name for m in models) or "none",
            source="model inspection",
        ),
        Evidence(
            metric="batch dtypes",
            value=", ".join(sorted(set(ctx.record.batch_dtypes))) or "unknown",
            source="first batches",
        ),
        Evidence(metric="torch default dtype", value=default, source="torch"),
        Evidence(
            metric="compute share of step time",
            value=round(compute, 4),
            unit="share",
            source="step phases",
        ),
    ]
    return [
        Finding(
            rule="float64",
            severity=Severity.INFO if data_only else Severity.WARNING,
            title="Batches in double precision (float64), cast for a float32 model"
            if data_only
            else "Training runs in double precision (float64)",
            explanation=(
                f"Found float64 in {' and '.join(where)}. Double precision is at least twice "
                "as slow as float32 for the same work (half the SIMD lanes, twice the memory "
                "traffic; far worse on most GPUs) and deep learning does not need it."
            ),
            evidence=tuple(evidence),
            speedup=speedup,
            fix=Fix(
                summary=(
                    "Convert the model with model.float() (or .to(torch.float32)) and make the "
                    "data set produce float32 tensors (numpy defaults to float64: use "
                    ".astype(np.float32) or torch.from_numpy(x).float()). Do not call "
                    "torch.set_default_dtype(torch.float64)."
                ),
                snippet="model = model.float()\nx = torch.as_tensor(array, dtype=torch.float32)",
            ),
        )
    ]
