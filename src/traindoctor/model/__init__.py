"""The data types every stage talks through (frozen, slotted, keyword-only dataclasses)."""

from __future__ import annotations

from traindoctor.model.experiments import BoundVerdict, Throughput, TuneResult, TuneTrial
from traindoctor.model.findings import (
    Check,
    Checkup,
    Evidence,
    Finding,
    Fix,
    Measurement,
    Report,
    Severity,
    SkippedRule,
    Speedup,
    Summary,
)
from traindoctor.model.phases import Phase
from traindoctor.model.run import (
    ConcurrencyStat,
    EnvFact,
    GpuProcess,
    GpuSample,
    LayerInfo,
    LoaderInfo,
    ModelInfo,
    Notice,
    ProcessUsage,
    RunEnd,
    RunMeta,
    RunRecord,
    StepTiming,
    SystemSample,
)
from traindoctor.model.schema import SCHEMA_VERSION, SchemaError, from_jsonable, to_jsonable

__all__ = [
    "SCHEMA_VERSION",
    "BoundVerdict",
    "Check",
    "Checkup",
    "ConcurrencyStat",
    "EnvFact",
    "Evidence",
    "Finding",
    "Fix",
    "GpuProcess",
    "GpuSample",
    "LayerInfo",
    "LoaderInfo",
    "Measurement",
    "ModelInfo",
    "Notice",
    "Phase",
    "ProcessUsage",
    "Report",
    "RunEnd",
    "RunMeta",
    "RunRecord",
    "SchemaError",
    "Severity",
    "SkippedRule",
    "Speedup",
    "StepTiming",
    "Summary",
    "SystemSample",
    "Throughput",
    "TuneResult",
    "TuneTrial",
    "from_jsonable",
    "to_jsonable",
]
