"""Which C parts are used: the optional extensions ``collect/hooks/_hotpath`` (the hot
path's hooks), ``collect/reduce/_reduce`` (the step reducer), ``collect/sampling/_sample`` (the
/proc sampler thread), ``traces/_scan`` (the trace scanner) and ``logs/_gcscan`` (the GC log
parsers' fast path), compiled at install
where a C compiler is there (``hatch_build.py``). ``collect/sampling/_frames`` (the stack
sampler's frame walk) is not one of them: it is a safety fix, not a faster twin, and is used
wherever it is built (``stacks.py``).

Each has a pure-Python twin that is the reference and the fallback; set
``STEPDOCTOR_PURE_PYTHON=1`` to run the twins even where the C parts are built.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["PURE_PYTHON_ENV", "c_part", "pure_python", "wanted"]

PURE_PYTHON_ENV = "STEPDOCTOR_PURE_PYTHON"


def pure_python() -> bool:
    """Whether the pure-Python twins were asked for."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def c_part(module: str, constants: Mapping[str, int] | None = None) -> Any:
    """The C part ``module``, or None: not built (no compiler at install), switched off with
    ``STEPDOCTOR_PURE_PYTHON=1``, or built with other values of ``constants`` (the event
    codes it shares with the Python side) than these."""
    if pure_python():
        return None
    try:
        found = importlib.import_module(module)
    except ImportError:
        return None
    for name, value in (constants or {}).items():
        if getattr(found, name, None) != value:
            return None
    return found


def wanted(part: Callable[[], Any], native: bool | None, what: str) -> Any:
    """The C part that ``part()`` finds (``c_part``), as ``native`` asks for it: where built
    (None), not at all (False: None), or necessarily (True).

    Raises:
        RuntimeError: ``native`` is True and the part is not there (``what`` names it).
    """
    if native is False:
        return None
    found = part()
    if found is None and native:
        raise RuntimeError(f"stepdoctor's C {what} is not available")
    return found
