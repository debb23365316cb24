"""Facts about the environment that the rules need (threads, cores, torch build).

Probed on the monitor thread: once the job has taken its first step (so a
``torch.set_num_threads`` in the script has happened) and again at the end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import psutil

from traindoctor.model import EnvFact

__all__ = ["THREAD_ENV_VARS", "probe_environment"]

#: Variables that size the native thread pools torch and numpy use.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def probe_environment(environ: Mapping[str, str] = os.environ) -> list[EnvFact]:
    """Return the facts readable now; torch facts only if torch is already imported."""
    facts = [
        EnvFact(key="cpu.logical", value=psutil.cpu_count(logical=True), source="psutil"),
        EnvFact(key="cpu.physical", value=psutil.cpu_count(logical=False), source="psutil"),
        EnvFact(key="cpu.affinity", value=_affinity(), source="os.sched_getaffinity"),
    ]
    for name in THREAD_ENV_VARS:
        facts.append(EnvFact(key=f"env.{name}", value=environ.get(name), source="environment"))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        facts.extend(
            [
                EnvFact(key="torch.version", value=str(torch.__version__), source="torch"),
                EnvFact(key="torch.num_threads", value=torch.get_num_threads(), source="torch"),
                EnvFact(
                    key="torch.num_interop_threads",
                    value=torch.get_num_interop_threads(),
                    source="torch",
                ),
                EnvFact(
                    key="torch.cuda_available",
                    value=bool(torch.cuda.is_available()),
                    source="torch",
                ),
            ]
        )
    return facts


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
