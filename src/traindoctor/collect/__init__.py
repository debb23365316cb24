"""Collection: the only package with a hot path (docs/design/hot-path.md)."""

from __future__ import annotations

from traindoctor.collect.nvml import NvmlReader
from traindoctor.collect.readers import PsutilReader, Reader
from traindoctor.collect.session import Session, current_session, default_run_dir, end_status

__all__ = [
    "NvmlReader",
    "PsutilReader",
    "Reader",
    "Session",
    "current_session",
    "default_run_dir",
    "end_status",
]
