"""stepdoctor: why is my training slow, how much faster could it be, and what to change.

Importing this package imports neither torch nor anything heavy: the public names are loaded
on first use (PEP 562), so ``stepdoctor trace`` or ``import stepdoctor.traces`` does not pay
for the collectors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepdoctor._lazy import lazy_names
from stepdoctor._version import __version__

if TYPE_CHECKING:
    from stepdoctor.checkup import checkup, lint
    from stepdoctor.collect import Session, current_session
    from stepdoctor.errors import StepdoctorError
    from stepdoctor.model import Finding, Report, RunRecord, Severity
    from stepdoctor.record import load_run
    from stepdoctor.report import build_report
    from stepdoctor.watching import watch

__all__ = [
    "Finding",
    "Report",
    "RunRecord",
    "Session",
    "Severity",
    "StepdoctorError",
    "__version__",
    "build_report",
    "checkup",
    "current_session",
    "lint",
    "load_run",
    "watch",
]

#: Where each public name lives.
_HOMES = {
    "Finding": "stepdoctor.model",
    "Report": "stepdoctor.model",
    "RunRecord": "stepdoctor.model",
    "Severity": "stepdoctor.model",
    "Session": "stepdoctor.collect",
    "current_session": "stepdoctor.collect",
    "StepdoctorError": "stepdoctor.errors",
    "build_report": "stepdoctor.report",
    "checkup": "stepdoctor.checkup",
    "lint": "stepdoctor.checkup",
    "load_run": "stepdoctor.record",
    "watch": "stepdoctor.watching",
}


__getattr__ = lazy_names("stepdoctor", _HOMES, globals())
