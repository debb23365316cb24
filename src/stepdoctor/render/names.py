"""The one table of display names (phases, severities)."""

from __future__ import annotations

import os
from typing import Final

from stepdoctor.model import (
    GC_PHASE,
    SETUP_PHASE,
    UNPHASED,
    WORKER_PHASE,
    AllocationSite,
    CodeSite,
    Phase,
    RankRow,
    Severity,
    Speedup,
    SpeedupKind,
)

__all__ = [
    "PHASE_LABELS",
    "RANK_COLUMNS",
    "SEVERITY_LABELS",
    "allocation_words",
    "phase_label",
    "rank_cells",
    "short_path",
    "site_words",
    "speedup_words",
]

PHASE_LABELS: Final[dict[str, str]] = {
    Phase.DATA_WAIT.value: "data wait (ETL)",
    Phase.H2D.value: "host→device",
    Phase.FORWARD.value: "forward",
    Phase.BACKWARD.value: "backward",
    Phase.OPTIMIZER.value: "optimizer",
    Phase.SYNC.value: "sync",
    Phase.CALLBACKS.value: "callbacks",
    Phase.CHECKPOINT.value: "checkpoint",
    Phase.TRAIN_STEP.value: "train step (compiled)",
    Phase.OTHER.value: "other (between phases)",
    Phase.EVALUATION.value: "evaluation",
    SETUP_PHASE: "set-up (outside steps)",
    GC_PHASE: "full GC collections",
    UNPHASED: "the whole run (py-spy: no phases)",
    WORKER_PHASE: "DataLoader workers",
}

SEVERITY_LABELS: Final[dict[Severity, str]] = {
    Severity.CRITICAL: "CRITICAL",
    Severity.WARNING: "WARNING",
    Severity.INFO: "info",
}


def phase_label(name: str) -> str:
    """Return the display label of a phase (user phases show as named)."""
    return PHASE_LABELS.get(name, name)


def speedup_words(speedup: Speedup, modelled: Speedup | None = None) -> str:
    """A finding's speed-up in one line: its figure, whether it was measured or modelled and
    on what basis (with the model it replaced, when a measurement did)."""
    if speedup.kind is SpeedupKind.NONE:
        return speedup.basis
    if speedup.kind is SpeedupKind.MODELLED:
        return f"up to {speedup.factor:.2f}x, modelled: {speedup.basis}"
    spread = (
        f" (repeats {speedup.spread[0]:.2f}-{speedup.spread[1]:.2f}x)" if speedup.spread else ""
    )
    slower = " — slower than the job as it is" if speedup.factor < 1 else ""
    said = f"{speedup.factor:.2f}x{spread}, measured{slower}: {speedup.basis}"
    if modelled is not None and modelled.kind is not SpeedupKind.NONE:
        said += f" (the model said up to {modelled.factor:.2f}x)"
    return said


def short_path(file: str, cwd: str = "") -> str:
    """A file as the user knows it: relative to the job's folder when inside it."""
    if cwd and file.startswith(os.path.join(cwd, "")):
        return file[len(cwd) + 1 :]
    return file


def site_words(site: CodeSite, cwd: str = "") -> str:
    """``62% of data wait (ETL): decode_record (data.py:41), in json.loads``."""
    where = f"{site.function} ({short_path(site.file, cwd)}:{site.line})"
    calls = f", in {site.calls}" if site.calls else ""
    return f"{site.share:.0%} of {phase_label(site.phase)}: {where}{calls}"


def allocation_words(site: AllocationSite, cwd: str = "") -> str:
    """``71% of surviving objects: build_index (data.py:12), 52,000 objects, 4.1 MiB``; for
    tensors: ``93% of new tensors' bytes: 16 x float32[512, 512], 16.0 MiB, held by list
    'kept' (global of train.py)``."""
    size = site.size_bytes / 2**20
    if site.kind == "types":
        return f"{site.share:.0%} of the objects added: {site.count:,} more {site.function}"
    if site.kind == "tensors":
        held = f", held by {site.caller}" if site.caller else ""
        return (
            f"{site.share:.0%} of new tensors' bytes: {site.count:,} x {site.function}, "
            f"{size:.1f} MiB{held}"
        )
    what = "of surviving objects" if site.kind == "gc" else "of the memory growth"
    where = f"{site.function} ({short_path(site.file, cwd)}:{site.line})"
    caller = f", called from {site.caller}" if site.caller else ""
    return f"{site.share:.0%} {what}: {where}{caller}, {site.count:,} objects, {size:.1f} MiB"


#: The columns of a job's table of ranks (``rank_cells``' keys, in order).
RANK_COLUMNS = (
    "rank",
    "steps",
    "mean step",
    "samples/s",
    "data wait",
    "all-reduce",
    "other processes",
    "host",
)


def rank_cells(row: RankRow, missing: str) -> dict[str, str]:
    """A rank's row of a job's table as its columns' texts (``RANK_COLUMNS``), ``missing``
    where a value is not known (the terminal's table and the page's)."""

    def ms(value: float | None) -> str:
        return missing if value is None else f"{value:.1f} ms"

    def share(value: float | None) -> str:
        return missing if value is None else f"{value:.0%}"

    rate = row.samples_per_sec
    return {
        "rank": str(row.rank),
        "steps": str(row.steps),
        "mean step": ms(row.mean_step_ms),
        "samples/s": missing if rate is None else f"{rate:.0f}",
        "data wait": share(row.data_wait_share),
        "all-reduce": ms(row.comm_ms),
        "other processes": share(row.others_cpu_share),
        "host": row.host,
    }
