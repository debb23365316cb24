"""Names a package loads on first use (PEP 562): what keeps ``stepdoctor --version``,
``stepdoctor doctor`` and a watched job's start from importing what they do not use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any], prefix: str = ""
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``homes`` is imported from its
    module (``prefix`` + its home) on first use and kept in ``namespace`` (the package's
    ``globals()``), so later uses find it there; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(prefix + home), name)
        namespace[name] = value
        return value

    return __getattr__
