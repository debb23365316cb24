"""Profiler traces (Kineto / Chrome-trace JSON) -> TraceSummary, without torch."""

from __future__ import annotations

from pathlib import Path

from stepdoctor.errors import TraceError
from stepdoctor.model import TraceSummary
from stepdoctor.traces.analysis import analyse, kernel_type
from stepdoctor.traces.loader import RankEvents, load_events

__all__ = ["RankEvents", "analyse", "analyse_paths", "kernel_type", "load_events", "trace_files"]

_SUFFIXES = (".json", ".json.gz")


def trace_files(paths: list[Path]) -> list[Path]:
    """The trace files named by ``paths`` (files, or folders holding one file per rank)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith(_SUFFIXES))
            if not found:
                raise TraceError(f"{path}: no .json or .json.gz trace files in this folder")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise TraceError(f"{path}: no such file or folder")
    return files


def analyse_paths(
    paths: list[Path], *, include_last_step: bool = False, fast: bool = False
) -> TraceSummary:
    """Load every rank's file and analyse the set (``fast``: see ``load_events``)."""
    return analyse(
        [load_events(p, fast=fast) for p in trace_files(paths)],
        include_last_step=include_last_step,
    )
