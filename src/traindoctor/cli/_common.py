"""What every command shares: the error-to-exit-code contract."""

from __future__ import annotations

import sys

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "error_line"]

#: Exit code for traindoctor's own errors (bad record, bad arguments, missing script).
EXIT_ERROR = 1
EXIT_USAGE = 2


def error_line(message: str) -> None:
    """Print one ``traindoctor: error: ...`` line to stderr."""
    print(f"traindoctor: error: {message}", file=sys.stderr)
