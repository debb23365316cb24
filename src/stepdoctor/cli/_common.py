"""What every command shares: the error-to-exit-code contract."""

from __future__ import annotations

import sys
from pathlib import Path

from stepdoctor.errors import UsageError

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "error_line", "write_output"]

#: Exit code for stepdoctor's own errors (bad record, bad arguments, missing script).
EXIT_ERROR = 1
EXIT_USAGE = 2


def error_line(message: str) -> None:
    """Print one ``stepdoctor: error: ...`` line to stderr."""
    print(f"stepdoctor: error: {message}", file=sys.stderr)


def write_output(path: Path, text: str) -> None:
    """Write a command's output file (``--json FILE``); a failure is one usage error line."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
