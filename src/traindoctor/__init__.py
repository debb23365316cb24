"""traindoctor: why is my training slow, how much faster could it be, and what to change.

Importing this package imports neither torch nor anything heavy.
"""

from __future__ import annotations

from traindoctor._version import __version__
from traindoctor.checkup import checkup, lint
from traindoctor.collect import Session, current_session
from traindoctor.errors import TraindoctorError
from traindoctor.model import Finding, Report, RunRecord, Severity
from traindoctor.record import load_run
from traindoctor.report import build_report
from traindoctor.watching import watch

__all__ = [
    "Finding",
    "Report",
    "RunRecord",
    "Session",
    "Severity",
    "TraindoctorError",
    "__version__",
    "build_report",
    "checkup",
    "current_session",
    "lint",
    "load_run",
    "watch",
]
