"""What a run recorded of its GPU, for the live GPU rules (no profiler trace): how busy NVML
saw the job's GPUs during its steps, the GPU's compute peaks, a dense model's multiply-adds."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from stepdoctor.model import ModelInfo, RunRecord
from stepdoctor.rules.context import RuleContext

__all__ = [
    "MIN_BUSY_READINGS",
    "PEAKS",
    "GpuPeak",
    "dense_flops_per_sample",
    "gpu_busy",
    "job_gpus",
    "peak_of",
]

#: Module kinds whose work a dense model's multiply-adds account for.
_DENSE_KINDS = frozenset({"linear", "activation"})

#: NVML's utilisation is a share of its sample period (1/6 s to 1 s by GPU) in which a kernel
#: ran; fewer readings than this during the steps say little about them.
MIN_BUSY_READINGS = 3


@dataclass(frozen=True)
class GpuPeak:
    """Dense peak throughputs of one GPU model, in TFLOP/s, from NVIDIA's data sheets."""

    fp32: float
    """Plain float32 (CUDA cores, no tensor cores)."""
    tf32: float | None
    """float32 matmuls on tensor cores (TF32); None: no TF32 (before Ampere)."""
    half: float
    """bf16 / fp16 on tensor cores (fp16 only before Ampere)."""


#: NVIDIA data sheets, dense (without sparsity), SXM parts where a part has several: H100 and
#: H200 (identical compute, the H200 has more and faster memory), A100, L40S, L4, A10, V100,
#: T4. Matched by the longest name contained in NVML's device name.
PEAKS: dict[str, GpuPeak] = {
    "H200": GpuPeak(fp32=67.0, tf32=494.0, half=989.0),
    "H100": GpuPeak(fp32=67.0, tf32=494.0, half=989.0),
    "A100": GpuPeak(fp32=19.5, tf32=156.0, half=312.0),
    "L40S": GpuPeak(fp32=91.6, tf32=183.0, half=362.0),
    "L4": GpuPeak(fp32=30.3, tf32=60.0, half=121.0),
    "A10": GpuPeak(fp32=31.2, tf32=62.5, half=125.0),
    "V100": GpuPeak(fp32=15.7, tf32=None, half=125.0),
    "T4": GpuPeak(fp32=8.1, tf32=None, half=65.0),
}


def peak_of(name: str) -> GpuPeak | None:
    """The peaks of the GPU NVML calls ``name`` (None: not in ``PEAKS``)."""
    found = [key for key in PEAKS if key in name.upper()]
    return PEAKS[max(found, key=len)] if found else None


def job_gpus(record: RunRecord) -> set[int]:
    """The GPUs on which NVML listed one of the job's processes at some reading."""
    return {s.index for s in record.gpu if any(p.is_job for p in s.processes)}


def gpu_busy(ctx: RuleContext) -> tuple[float, int, str] | None:
    """The job's GPUs' mean NVML utilisation (0-1) over the readings taken during its measured
    steps, how many readings, and the GPU's name (None: fewer than ``MIN_BUSY_READINGS``).
    A GPU counts from the first reading that lists one of the job's processes on it."""
    if not ctx.steps:
        return None
    start, end = ctx.steps[0].start_ns, ctx.steps[-1].end_ns
    mine = job_gpus(ctx.record)
    readings = [
        s
        for s in ctx.record.gpu
        if s.index in mine and start <= s.t_ns <= end and s.util_pct is not None
    ]
    if len(readings) < MIN_BUSY_READINGS:
        return None
    busy = statistics.fmean(s.util_pct or 0.0 for s in readings) / 100
    return min(1.0, busy), len(readings), readings[0].name


def dense_flops_per_sample(model: ModelInfo) -> float | None:
    """Multiply-adds x 2 of one training sample's forward and backward through a model of
    dense layers and activations only, fed one row a sample (backward twice the forward:
    gradients of inputs and of weights); None where the model has other modules whose cost
    the record cannot size (a convolution's depends on its input's height and width)."""
    if model.flops_per_sample:
        return 3.0 * model.flops_per_sample
    layers = model.layers
    if not layers or any(x.kind != "linear" for x in layers):
        return None
    if set(model.kinds) - _DENSE_KINDS or len(model.input_shape) != 2:
        return None  # other modules' work, or a sequence of rows a sample (tokens): unsized
    return 6.0 * sum((x.in_features or 0) * (x.out_features or 0) for x in layers)
