"""Reading environment and model facts for the rules (shared helpers, no thresholds)."""

from __future__ import annotations

from stepdoctor.model import ModelInfo, RunRecord

__all__ = ["GPU_DEVICES", "fact_bool", "fact_float", "fact_int", "gpu_job", "models_on"]

#: Device types that are accelerators (torch's device.type names).
GPU_DEVICES = ("cuda", "mps", "xpu")


def fact_int(record: RunRecord, key: str) -> int | None:
    """Return fact ``key`` as an int (env-var strings of digits included), else None."""
    value = record.env_value(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def fact_float(record: RunRecord, key: str) -> float | None:
    """Return fact ``key`` as a float, else None."""
    value = record.env_value(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def fact_bool(record: RunRecord, key: str) -> bool | None:
    """Return fact ``key`` when it is a bool, else None (unknown)."""
    value = record.env_value(key)
    return value if isinstance(value, bool) else None


def models_on(record: RunRecord, *devices: str) -> list[ModelInfo]:
    """Models with a parameter or buffer on one of ``devices``."""
    return [m for m in record.models if set(m.devices) & set(devices)]


def gpu_job(record: RunRecord) -> bool:
    """Whether the job's models run on an accelerator."""
    return bool(models_on(record, *GPU_DEVICES))
