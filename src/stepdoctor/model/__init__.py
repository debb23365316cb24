"""The data types every stage talks through (frozen, slotted, keyword-only dataclasses).

The names below load on first use (PEP 562): ``stepdoctor trace`` needs only the trace types,
and defining every dataclass of the package took ~25 ms of its start (``python -X importtime``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepdoctor.model.experiments import (
        BoundVerdict,
        FixTrial,
        Throughput,
        TuneResult,
        TuneTrial,
    )
    from stepdoctor.model.findings import (
        Check,
        Checkup,
        Evidence,
        Finding,
        Fix,
        Report,
        Severity,
        SkippedRule,
        Speedup,
        SpeedupKind,
        Summary,
    )
    from stepdoctor.model.measured import (
        OUTLIER_SIGMAS,
        OutlierCut,
        measured_steps,
        outlier_cut,
        profiled_steps,
        training_steps,
    )
    from stepdoctor.model.phases import Phase
    from stepdoctor.model.run import (
        WARMUP_SAMPLES,
        ConcurrencyStat,
        EnvFact,
        GpuProcess,
        GpuSample,
        LayerInfo,
        LoaderInfo,
        LoaderWorker,
        ModelInfo,
        Notice,
        ProcessUsage,
        ProfiledSpan,
        RunEnd,
        RunMeta,
        RunRecord,
        StepTiming,
        SystemSample,
    )
    from stepdoctor.model.schema import (
        SCHEMA_VERSION,
        SchemaError,
        fields_getter,
        from_jsonable,
        json_default,
        to_jsonable,
    )
    from stepdoctor.model.traces import (
        KernelStat,
        LaunchStats,
        RankTrace,
        StreamIdle,
        TemporalBreakdown,
        TraceSummary,
    )

__all__ = [
    "OUTLIER_SIGMAS",
    "SCHEMA_VERSION",
    "WARMUP_SAMPLES",
    "BoundVerdict",
    "Check",
    "Checkup",
    "ConcurrencyStat",
    "EnvFact",
    "Evidence",
    "Finding",
    "Fix",
    "FixTrial",
    "GpuProcess",
    "GpuSample",
    "KernelStat",
    "LaunchStats",
    "LayerInfo",
    "LoaderInfo",
    "LoaderWorker",
    "ModelInfo",
    "Notice",
    "OutlierCut",
    "Phase",
    "ProcessUsage",
    "ProfiledSpan",
    "RankTrace",
    "Report",
    "RunEnd",
    "RunMeta",
    "RunRecord",
    "SchemaError",
    "Severity",
    "SkippedRule",
    "Speedup",
    "SpeedupKind",
    "StepTiming",
    "StreamIdle",
    "Summary",
    "SystemSample",
    "TemporalBreakdown",
    "Throughput",
    "TraceSummary",
    "TuneResult",
    "TuneTrial",
    "fields_getter",
    "from_jsonable",
    "json_default",
    "measured_steps",
    "outlier_cut",
    "profiled_steps",
    "to_jsonable",
    "training_steps",
]

#: The module of ``stepdoctor.model`` each public name lives in.
_HOMES = {
    "BoundVerdict": "experiments",
    "Check": "findings",
    "Checkup": "findings",
    "ConcurrencyStat": "run",
    "EnvFact": "run",
    "Evidence": "findings",
    "Finding": "findings",
    "Fix": "findings",
    "FixTrial": "experiments",
    "GpuProcess": "run",
    "GpuSample": "run",
    "KernelStat": "traces",
    "LaunchStats": "traces",
    "LayerInfo": "run",
    "LoaderInfo": "run",
    "LoaderWorker": "run",
    "ModelInfo": "run",
    "Notice": "run",
    "OUTLIER_SIGMAS": "measured",
    "OutlierCut": "measured",
    "Phase": "phases",
    "ProcessUsage": "run",
    "ProfiledSpan": "run",
    "RankTrace": "traces",
    "Report": "findings",
    "RunEnd": "run",
    "RunMeta": "run",
    "RunRecord": "run",
    "SCHEMA_VERSION": "schema",
    "SchemaError": "schema",
    "Severity": "findings",
    "SkippedRule": "findings",
    "Speedup": "findings",
    "SpeedupKind": "findings",
    "StepTiming": "run",
    "StreamIdle": "traces",
    "Summary": "findings",
    "SystemSample": "run",
    "TemporalBreakdown": "traces",
    "Throughput": "experiments",
    "TraceSummary": "traces",
    "TuneResult": "experiments",
    "TuneTrial": "experiments",
    "WARMUP_SAMPLES": "run",
    "fields_getter": "schema",
    "from_jsonable": "schema",
    "json_default": "schema",
    "measured_steps": "measured",
    "outlier_cut": "measured",
    "profiled_steps": "measured",
    "to_jsonable": "schema",
    "training_steps": "measured",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'stepdoctor.model' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"stepdoctor.model.{home}"), name)
    globals()[name] = value
    return value
