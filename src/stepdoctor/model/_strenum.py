"""``enum.StrEnum`` (Python 3.11+), with the same behaviour on Python 3.10: members are
strings, ``str(member)`` and ``format(member)`` give the value."""

from __future__ import annotations

import sys

__all__ = ["StrEnum"]

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10 (make test-pythons runs it)
    from enum import Enum

    class StrEnum(str, Enum):
        """An enum whose members are strings (3.11's ``enum.StrEnum``)."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str(self.value).__format__(spec)
