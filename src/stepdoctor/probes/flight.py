"""A rank's last collectives, from PyTorch's Flight Recorder.

The Flight Recorder keeps, for every collective a process group issues, its number in the
group (the same collective has the same number on every rank), its operation, its tensors'
shapes and how far it got (scheduled, started, completed): with NCCL, and with gloo on the
CPU too (torch 2.13: ``TORCH_FR_BUFFER_SIZE``). When a job hangs, the rank whose last
collective has a lower number than the others' never issued the one they wait in; ranks that
issued different operations under one number are out of step (a desync).

A rank under ``stepdoctor run`` turns the recorder on (``enable``: the environment variable,
read when the process group is made, unless the job set one of its own), and its record keeps
its last ``KEPT`` collectives, read when its steps stall and when it ends (``last``).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

from stepdoctor.model import Collective

__all__ = [
    "BUFFER_ENTRIES",
    "KEPT",
    "READ_SHARE",
    "STALL_AFTER_S",
    "STALL_VARIABLE",
    "enable",
    "last",
    "read_after_s",
]

logger = logging.getLogger(__name__)

#: Collectives the recorder keeps (a ring): a DDP step issues one to a few all-reduces, so
#: this holds the last tens of steps; each entry is a few hundred bytes.
BUFFER_ENTRIES = 256
#: Collectives a record keeps, the last ones.
KEPT = 8
_VARIABLES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
#: No step on any rank for this long is a stall the launcher tells (``run --stall-after``):
#: well beyond a step, an evaluation or a checkpoint of a typical job, and far below the
#: process group's default timeout (30 minutes for gloo, 10 for NCCL).
STALL_AFTER_S = 120.0
#: The launcher passes its ``--stall-after`` to the ranks in this variable...
STALL_VARIABLE = "STEPDOCTOR_STALL_AFTER_S"
#: ...and a rank reads its recorder when its own steps stalled for this share of it, so that
#: its record holds its collectives by the time the launcher reads it.
READ_SHARE = 0.5


def read_after_s(environ: Mapping[str, str]) -> float:
    """Seconds without a step after which a rank reads its recorder."""
    try:
        stall = float(environ.get(STALL_VARIABLE, STALL_AFTER_S))
    except ValueError:
        stall = STALL_AFTER_S
    return max(0.5, stall * READ_SHARE) if stall > 0 else STALL_AFTER_S * READ_SHARE


def enable(environ: MutableMapping[str, str]) -> bool:
    """Turn the recorder on for process groups made from now on, unless the job chose a size
    itself (0 included); return whether it was set here."""
    if any(name in environ for name in _VARIABLES):
        return False
    environ[_VARIABLES[0]] = str(BUFFER_ENTRIES)
    return True


def last(limit: int = KEPT) -> list[Collective]:
    """The last ``limit`` collectives the recorder kept, oldest first; none where torch's
    distributed package is not imported, no process group exists, or the recorder is off or
    unreadable (a private API: any failure is none)."""
    dist = sys.modules.get("torch.distributed")
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace_json", None)
    if dist is None or dump is None:
        return []
    try:
        if not dist.is_initialized():
            return []
        entries = json.loads(dump()).get("entries") or []
    except Exception as exc:  # a private API of torch: never break the job over it
        logger.debug("stepdoctor: the flight recorder could not be read: %r", exc)
        return []
    return [c for e in entries[-limit:] if (c := _collective(e)) is not None]


def _collective(entry: Any) -> Collective | None:
    if not isinstance(entry, dict):
        return None
    seq = entry.get("collective_seq_id", entry.get("record_id"))
    if not isinstance(seq, int):
        return None
    sizes = entry.get("input_sizes") or []
    dtypes = entry.get("input_dtypes") or []
    shapes = ", ".join(
        f"{_dtype(d)}[{', '.join(str(n) for n in s)}]"
        for s, d in zip(sizes, dtypes, strict=False)
        if isinstance(s, list)
    )
    group = entry.get("process_group") or []
    created = entry.get("time_created_ns")
    return Collective(
        seq=seq,
        op=str(entry.get("profiling_name", "") or "?"),
        state=str(entry.get("state", "") or "?"),
        sizes=shapes,
        group=str(group[1] if isinstance(group, list) and len(group) > 1 else group or ""),
        created_unix_ns=int(created) if isinstance(created, int) else None,
    )


def _dtype(name: object) -> str:
    """``Float`` -> ``float32``, as torch prints dtypes; other names lower-cased."""
    text = str(name)
    return {"Float": "float32", "Double": "float64", "Half": "float16", "Long": "int64"}.get(
        text, text.lower()
    )
