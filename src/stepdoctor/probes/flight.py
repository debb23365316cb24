"""A rank's last collectives, from PyTorch's Flight Recorder.

The Flight Recorder keeps, for every collective a process group issues, its number in the
group (the same collective has the same number on every rank), its operation, its tensors'
shapes and how far it got (scheduled, started, completed). torch 2.13 keeps the last 2,000 by
default (``TORCH_FR_BUFFER_SIZE``; 0 turns it off), gloo's on the CPU as well as NCCL's
(dumped separately, where torch was built with NCCL). When a job hangs, the rank whose last
collective has a lower number than the others' never issued the one they wait in; ranks that
issued different operations under one number are out of step (a desync).

A rank's record keeps its last ``KEPT`` collectives, read when its steps stall and when it
ends (``last``).
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Mapping
from typing import Any

from stepdoctor.model import Collective

__all__ = [
    "KEPT",
    "READ_SHARE",
    "STALL_AFTER_S",
    "STALL_VARIABLE",
    "last",
    "read_after_s",
]

logger = logging.getLogger(__name__)

#: Collectives a record keeps, the last ones.
KEPT = 8
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
    if not math.isfinite(stall) or stall <= 0:  # never told: read at the default's pace
        stall = STALL_AFTER_S
    return max(0.5, stall * READ_SHARE)


def last(limit: int = KEPT) -> list[Collective]:
    """The last ``limit`` collectives the recorders kept (gloo's and, where torch has it,
    NCCL's), oldest first; none where torch's distributed package is not imported, no process
    group exists, or the recorder is off or unreadable (a private API: any failure is none).
    Point-to-point operations (send, recv) are left out: they carry the number of the
    collective before them."""
    dist = sys.modules.get("torch.distributed")
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dumps = [getattr(c10d, name, None) for name in ("_dump_fr_trace_json", "_dump_nccl_trace_json")]
    if dist is None or not any(dumps):
        return []
    try:
        if not dist.is_initialized():
            return []
        found: dict[tuple[str, int, str], Collective] = {}
        for dump in dumps:
            if dump is None:
                continue
            for entry in json.loads(dump()).get("entries") or []:
                if isinstance(entry, dict) and not entry.get("is_p2p"):
                    c = _collective(entry)
                    if c is not None:
                        found[(c.group, c.seq, c.op)] = c
    except Exception as exc:  # a private API of torch: never break the job over it
        logger.debug("stepdoctor: the flight recorder could not be read: %r", exc)
        return []
    ordered = sorted(found.values(), key=lambda c: (c.created_unix_ns or 0, c.seq))
    return ordered[-limit:]


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
    # the group's name, unique per group ("0", "1"...), then its description, which groups
    # made without one share ("undefined")
    names = [str(g) for g in group if g] if isinstance(group, list) else [str(group)]
    if len(names) > 1:
        names = [names[0] + ("" if names[1] == "undefined" else f" ({names[1]})")]
    return Collective(
        seq=seq,
        op=str(entry.get("profiling_name", "") or "?"),
        state=str(entry.get("state", "") or "?"),
        sizes=shapes,
        group=names[0] if names else "",
        created_unix_ns=int(created) if isinstance(created, int) else None,
    )


def _dtype(name: object) -> str:
    """``Float`` -> ``float32``, as torch prints dtypes; other names lower-cased."""
    text = str(name)
    return {"Float": "float32", "Double": "float64", "Half": "float16", "Long": "int64"}.get(
        text, text.lower()
    )
