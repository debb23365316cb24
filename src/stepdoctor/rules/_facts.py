"""Reading environment and model facts for the rules (shared helpers, no thresholds)."""

from __future__ import annotations

from collections.abc import Sequence

from stepdoctor.model import ModelInfo, RunRecord

__all__ = [
    "GPU_DEVICES",
    "distinct_models",
    "fact_bool",
    "fact_float",
    "fact_int",
    "gpu_job",
    "keras_compiled",
    "models_on",
    "same_models",
    "tensorflow_loop",
]

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


def keras_compiled(record: RunRecord) -> bool:
    """Whether the job's loop is Keras's on TensorFlow or JAX (its ``keras.backend`` fact): each
    batch one call of a compiled train function, with no torch model or loader for torch's
    hooks to split or for ``tune`` and ``--verify`` to try fixes on."""
    backend = record.env_value("keras.backend")
    return isinstance(backend, str) and backend != "torch"


def tensorflow_loop(record: RunRecord) -> bool:
    """Whether the job is a hand-written TensorFlow loop (``integrations/tensorflow.py``):
    compiled steps or eager ones, with no torch model for ``tune`` and ``--verify``."""
    return record.env_value("framework") == "tensorflow"


def gpu_job(record: RunRecord) -> bool:
    """Whether the job's models run on an accelerator."""
    return bool(models_on(record, *GPU_DEVICES))


def distinct_models(models: Sequence[ModelInfo]) -> list[tuple[ModelInfo, int]]:
    """One ``(model, how many)`` per structure among ``models``, in the order first seen.

    A job may build one model several times (a copy for evaluation or for an exponential
    moving average, one per fold or per trial): each is its own model to the record, but a
    finding about the structure is one finding, not one per copy.
    """
    counts: dict[tuple[object, ...], list[ModelInfo]] = {}
    for m in models:
        key = (
            m.class_name,
            m.param_count,
            m.param_dtypes,
            m.buffer_dtypes,
            m.devices,
            m.layers,
            m.input_shape,
        )
        counts.setdefault(key, []).append(m)
    return [(group[0], len(group)) for group in counts.values()]


def same_models(count: int) -> str:
    """A sentence for a finding that stands for ``count`` models of one structure ("" for 1)."""
    if count < 2:
        return ""
    return f" The job used {count} models of this structure (copies or re-builds): all alike."
