"""Shared reading of a trace analysis for the trace rules (no thresholds here)."""

from __future__ import annotations

from traindoctor.model import RankTrace
from traindoctor.rules.context import RuleContext

__all__ = ["share_of_kernel_time", "traced_ranks"]


def traced_ranks(ctx: RuleContext) -> list[RankTrace]:
    """Ranks with GPU events."""
    return [r for r in (ctx.trace.ranks if ctx.trace else ()) if r.temporal is not None]


def share_of_kernel_time(rank: RankTrace, us: int) -> float:
    """``us`` over the rank's GPU kernel time (first GPU event's start to the last's end)."""
    total = rank.temporal.kernel_time_us if rank.temporal else 0
    return us / total if total else 0.0
