"""Which C parts are used: the optional extensions ``collect/_hotpath`` (the hot path's hooks),
``collect/_reduce`` (the step reducer) and ``traces/_scan`` (the trace scanner), compiled at
install where a C compiler is there (``hatch_build.py``).

Each has a pure-Python twin that is the reference and the fallback; set
``TRAINDOCTOR_PURE_PYTHON=1`` to run the twins even where the C parts are built.
"""

from __future__ import annotations

import os

__all__ = ["PURE_PYTHON_ENV", "pure_python"]

PURE_PYTHON_ENV = "TRAINDOCTOR_PURE_PYTHON"


def pure_python() -> bool:
    """Whether the pure-Python twins were asked for."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
