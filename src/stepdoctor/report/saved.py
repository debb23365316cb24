"""What a run folder keeps beside its record: the profiler trace ``run --trace`` captured and
the fixes ``run --verify`` measured."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from stepdoctor.errors import TraceError
from stepdoctor.model import FixTrial, TraceSummary, from_jsonable, to_jsonable
from stepdoctor.traces import analyse_paths

__all__ = ["TRACE_FOLDER", "VERIFY_FILE", "trace_of_run", "verify_of_run", "write_verify"]


#: Where ``stepdoctor run --trace`` writes the profiler trace, inside the run folder.
TRACE_FOLDER = "trace"


def trace_of_run(run_path: Path) -> tuple[TraceSummary | None, str | None]:
    """The analysis of the profiler trace a run captured (``run --trace``), if it has one:
    ``(summary, None)``, ``(None, None)`` without a trace, ``(None, why)`` when it cannot be
    read."""
    folder = (run_path if run_path.is_dir() else run_path.parent) / TRACE_FOLDER
    if not folder.is_dir() or not any(folder.iterdir()):
        return None, None
    try:
        return analyse_paths([folder]), None
    except TraceError as exc:
        return None, f"the run's profiler trace could not be read: {exc}"


#: Where ``stepdoctor run --verify`` writes the fixes it tried, inside the run folder.
VERIFY_FILE = "verify.json"


def write_verify(run_dir: Path, trials: Sequence[FixTrial], notes: Sequence[str]) -> Path:
    """Keep what ``run --verify`` measured beside the run record."""
    path = run_dir / VERIFY_FILE
    data = {"trials": [to_jsonable(t) for t in trials], "notes": list(notes)}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def verify_of_run(run_path: Path) -> tuple[list[FixTrial], list[str]] | None:
    """What ``run --verify`` measured for a run, if it did: ``(trials, notes)``; a file that
    cannot be read gives no trials and a note saying so."""
    path = (run_path if run_path.is_dir() else run_path.parent) / VERIFY_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        trials = [from_jsonable(FixTrial, t) for t in data["trials"]]
        notes = [str(n) for n in data.get("notes", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [], [f"{path.name} could not be read: {exc}"]
    return trials, notes
