"""Collection: the only package with a hot path (docs/design/hot-path.md)."""

from __future__ import annotations

from stepdoctor.collect.sampling.nvml import NvmlReader
from stepdoctor.collect.sampling.readers import PsutilReader, Reader
from stepdoctor.collect.session import (
    Session,
    current_session,
    default_run_dir,
    end_status,
    raised_at,
)

__all__ = [
    "NvmlReader",
    "PsutilReader",
    "Reader",
    "Session",
    "current_session",
    "default_run_dir",
    "end_status",
    "raised_at",
]
