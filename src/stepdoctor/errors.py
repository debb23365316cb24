"""The one exception tree of stepdoctor.

::

    StepdoctorError                 base: everything stepdoctor raises on purpose
    ├── UsageError                   bad command-line arguments or options
    ├── ScriptNotFoundError          `stepdoctor run X`: X does not exist or is not a file
    ├── RecordError                  a run record cannot be read at all
    │   └── RecordCorruptError       a record is corrupt at a known byte offset
    ├── TraceError                   a profiler trace cannot be read (file, offset, what)
    ├── LogError                     a log given to `stepdoctor logs` cannot be read
    └── MissingExtraError            an optional dependency (torch, nvidia-ml-py) is missing

Messages say what went wrong, where (path, byte offset) and what to do. The CLI prints
``str(error)`` as one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

__all__ = [
    "LogError",
    "MissingExtraError",
    "RecordCorruptError",
    "RecordError",
    "ScriptNotFoundError",
    "StepdoctorError",
    "TraceError",
    "UsageError",
]


class StepdoctorError(Exception):
    """Base class of every error stepdoctor raises on purpose."""


class UsageError(StepdoctorError):
    """The command line or an option is wrong."""


class ScriptNotFoundError(StepdoctorError):
    """The script given to ``stepdoctor run`` does not exist."""


class RecordError(StepdoctorError):
    """A run record cannot be read."""


class RecordCorruptError(RecordError):
    """A run record is corrupt before any usable content, at a known byte offset."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt run record at byte {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class TraceError(StepdoctorError):
    """A profiler trace cannot be read; the message names the file and, where known, the
    byte offset."""


class MissingExtraError(StepdoctorError):
    """An optional dependency is not installed."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module} is not installed: pip install 'stepdoctor[{extra}]' "
            f"(or install {module} yourself)"
        )
        self.module = module
        self.extra = extra


class LogError(StepdoctorError):
    """A log given to ``stepdoctor logs`` cannot be read (no such file, not a log)."""
