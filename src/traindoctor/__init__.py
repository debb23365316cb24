"""traindoctor: why is my training slow, how much faster could it be, and what to change.

Importing this package imports neither torch nor anything heavy: the public names are loaded
on first use (PEP 562), so ``traindoctor trace`` or ``import traindoctor.traces`` does not pay
for the collectors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from traindoctor._version import __version__

if TYPE_CHECKING:
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

#: Where each public name lives.
_HOMES = {
    "Finding": "traindoctor.model",
    "Report": "traindoctor.model",
    "RunRecord": "traindoctor.model",
    "Severity": "traindoctor.model",
    "Session": "traindoctor.collect",
    "current_session": "traindoctor.collect",
    "TraindoctorError": "traindoctor.errors",
    "build_report": "traindoctor.report",
    "checkup": "traindoctor.checkup",
    "lint": "traindoctor.checkup",
    "load_run": "traindoctor.record",
    "watch": "traindoctor.watching",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'traindoctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
