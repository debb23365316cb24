"""Real data the tests read from ``shared/``, beside the checkout: GPU profiler traces with
Holistic Trace Analysis' figures (``traces/``), JVM GC and DL4J logs with their oracles
(``logs/``), schemas of formats stepdoctor writes (``schemas/``) and stepdoctor's own records
of jobs on a GPU (``gpu-runs/``). They come from other
public repositories, so they are kept there for every developer and CI and never in this
repository (``shared/logs/README.md`` and ``shared/traces/README.md`` give each file's
origin). Where the folder is absent, a test that needs it skips and says so in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

__all__ = ["GPU_RUNS", "LOGS", "SCHEMAS", "SHARED", "TRACES", "needs"]


def _shared_root(environ: Mapping[str, str] = os.environ) -> Path:
    """``$STEPDOCTOR_SHARED`` where set, else ``shared/`` beside the checkout."""
    where = environ.get("STEPDOCTOR_SHARED", "")
    return Path(where) if where else Path(__file__).resolve().parents[1].parent / "shared"


SHARED = _shared_root()
TRACES = SHARED / "traces"
LOGS = SHARED / "logs"
SCHEMAS = SHARED / "schemas"
GPU_RUNS = SHARED / "gpu-runs"


def needs(path: Path) -> pytest.MarkDecorator:
    """Skip the test (or module, as ``pytestmark``) where ``path`` under ``shared/`` is absent."""
    where = path.relative_to(SHARED) if path.is_relative_to(SHARED) else path
    return pytest.mark.skipif(
        not path.exists(),
        reason=f"shared/{where} is not available here (set STEPDOCTOR_SHARED to the folder)",
    )
