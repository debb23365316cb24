"""Collection: the only package with a hot path (docs/design/hot-path.md).

The names below load on first use (PEP 562): ``stepdoctor doctor`` needs the readers, not the
session's hooks (importing the session took ~150 ms of the doctor's start, ``python -X
importtime``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepdoctor._lazy import lazy_names

if TYPE_CHECKING:
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

_HOMES = {
    "NvmlReader": "sampling.nvml",
    "PsutilReader": "sampling.readers",
    "Reader": "sampling.readers",
    "Session": "session",
    "current_session": "session",
    "default_run_dir": "session",
    "end_status": "session",
    "raised_at": "session",
}


__getattr__ = lazy_names("stepdoctor.collect", _HOMES, globals(), "stepdoctor.collect.")
