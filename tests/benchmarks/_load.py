"""Import a script of ``benchmarks/`` (not a package's module) for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def benchmark(script: str) -> ModuleType:
    """``benchmarks/<script>.py``, imported once."""
    name = f"{script}_benchmark"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{script}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
