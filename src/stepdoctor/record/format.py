"""The run record's line format: which line type holds which model type.

A run record is JSON Lines, one object a line, append-only. The first line is the header::

    {"type": "header", "schema_version": 1, "meta": {...RunMeta...}}

then any number of ``{"type": T, "items": [...]}`` lines, in the order they were written, and
at most one ``{"type": "end", "item": {...RunEnd...}}``. A reader keeps every item of every
line it can parse; for ``concurrency`` only the last line counts (it is a running total).

Since schema version 2 the line types written many times a second (``ROW_TYPES``) hold their
items as rows: ``{"type": "steps", "fields": ["index", "start_ns", ...], "rows": [[0, 17,
...], ...]}``, each row the item's field values in the order of ``fields``. Written each
flush on the job's CPUs, a step as a row takes half the encoding time and 56% of the bytes of
a step as an object (docs/overhead.md); the reader takes both forms.
"""

from __future__ import annotations

from typing import Final

from stepdoctor.model import (
    AllocationSite,
    BoundVerdict,
    CodeFrame,
    CodeStack,
    Collective,
    ConcurrencyStat,
    DdpStats,
    EnvFact,
    GpuSample,
    HookTime,
    LoaderInfo,
    LoaderWorker,
    ModelInfo,
    Notice,
    ProfiledSpan,
    StackSample,
    StepTiming,
    SystemSample,
)

__all__ = ["ITEM_TYPES", "RECORD_FILENAME", "REPLACING_TYPES", "ROW_TYPES"]

RECORD_FILENAME: Final = "run.jsonl"

#: line type -> (RunRecord field, item type)
ITEM_TYPES: Final[dict[str, tuple[str, type]]] = {
    "steps": ("steps", StepTiming),
    "system": ("system", SystemSample),
    "gpu": ("gpu", GpuSample),
    "loader": ("loaders", LoaderInfo),
    "loader_worker": ("loader_workers", LoaderWorker),
    "model": ("models", ModelInfo),
    "env": ("env", EnvFact),
    "batch_dtypes": ("batch_dtypes", str),
    "concurrency": ("concurrency", ConcurrencyStat),
    "notice": ("notices", Notice),
    "experiment": ("experiments", BoundVerdict),
    "profiled": ("profiled", ProfiledSpan),
    "frame": ("frames", CodeFrame),
    "stack": ("stacks", CodeStack),
    "sample": ("samples", StackSample),
    "allocation": ("allocations", AllocationSite),
    "ddp": ("ddp", DdpStats),
    "collective": ("collectives", Collective),
    "hook": ("hooks", HookTime),
}

#: line types whose latest line replaces the earlier ones rather than adding to them
REPLACING_TYPES: Final = frozenset({"concurrency", "collective", "hook"})

#: line types written as ``fields`` + ``rows`` (one row per item) rather than ``items``
ROW_TYPES: Final = frozenset({"steps", "system", "gpu", "sample"})
