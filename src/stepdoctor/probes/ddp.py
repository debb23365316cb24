"""A DistributedDataParallel model's own timings, from its logger (``_get_ddp_logging_data``).

DDP's reducer times, at the iterations it samples, its forward, the backward's computation,
the gradient all-reduces (from the first bucket launched to the last one done) and how much
of them ran during the backward; on the CPU (gloo) too. A rank that waits for a slower one
spends that wait inside its all-reduces: the rank that spends *least* time in them is the one
the others wait for (``stepdoctor/jobs/stragglers.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from stepdoctor.model import DdpStats

__all__ = ["ddp_stats"]

logger = logging.getLogger(__name__)


def ddp_stats(model: Any) -> DdpStats | None:
    """``model``'s logger data as ``DdpStats``; None when it is no DDP model, or its logger
    has sampled no iteration or cannot be read (a private API: any failure is None)."""
    get = getattr(model, "_get_ddp_logging_data", None)
    if get is None:
        return None
    try:
        data = dict(get())
    except Exception as exc:  # a private API of torch: never break the report over it
        logger.debug("stepdoctor: DDP logging data unreadable: %r", exc)
        return None
    iterations = _int(data.get("iteration"))
    if not iterations:
        return None
    inner = getattr(model, "module", None)
    return DdpStats(
        model=type(inner).__name__ if inner is not None else type(model).__name__,
        iterations=iterations,
        forward_ns=_int(data.get("avg_forward_compute_time")),
        backward_compute_ns=_int(data.get("avg_backward_compute_time")),
        backward_comm_ns=_int(data.get("avg_backward_comm_time")),
        overlap_ns=_int(data.get("avg_backward_compute_comm_overlap_time")),
        bucket_cap_bytes=_int(data.get("bucket_cap_bytes")),
        find_unused_parameters=_bool(data.get("find_unused_parameters")),
        static_graph=_bool(data.get("static_graph")),
        gradient_as_bucket_view=_bool(data.get("gradient_as_bucket_view")),
        comm_hook=str(data.get("comm_hook", "") or ""),
        backend=str(data.get("backend_name", "") or ""),
    )


def _int(value: object) -> int | None:
    if not isinstance(value, (int, float, str)):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _bool(value: object) -> bool | None:
    if value in (None, ""):
        return None
    return bool(_int(value)) if _int(value) is not None else str(value).lower() == "true"
