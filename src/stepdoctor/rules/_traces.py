"""Shared reading of a trace analysis for the trace rules (no thresholds here)."""

from __future__ import annotations

import dataclasses
import itertools

from stepdoctor.model import Evidence, Finding, RankTrace
from stepdoctor.rules.context import RuleContext

__all__ = ["group_ranks", "rank_list", "share_of_kernel_time", "traced_ranks"]


def traced_ranks(ctx: RuleContext) -> list[RankTrace]:
    """Ranks with GPU events."""
    return [r for r in (ctx.trace.ranks if ctx.trace else ()) if r.temporal is not None]


def share_of_kernel_time(rank: RankTrace, us: int) -> float:
    """``us`` over the rank's GPU kernel time (first GPU event's start to the last's end)."""
    total = rank.temporal.kernel_time_us if rank.temporal else 0
    return us / total if total else 0.0


def rank_list(ranks: list[int]) -> str:
    """``[0, 1, 2, 3, 5, 6]`` -> ``"0-3, 5, 6"``."""
    parts: list[str] = []
    for _, run in itertools.groupby(enumerate(sorted(ranks)), lambda ir: ir[1] - ir[0]):
        values = [v for _, v in run]
        if len(values) < 3:
            parts.extend(str(v) for v in values)
        else:
            parts.append(f"{values[0]}-{values[-1]}")
    return ", ".join(parts)


def group_ranks(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and severity instead of one per rank: the worst rank's (largest
    estimated speed-up) stands for the others, which are named in its title and evidence."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.severity.value), []).append(f)
    out = []
    for group in groups.values():
        worst = max(group, key=lambda f: f.speedup.factor)
        ranks = sorted({r for f in group for r in f.ranks})
        if len(group) < 2 or len(worst.ranks) != 1:
            out.extend(group)
            continue
        (mine,) = worst.ranks
        span = rank_list(ranks)
        title = worst.title
        prefix = f"Rank {mine}"
        if title.startswith(prefix):
            title = f"Ranks {span} (worst: {mine})" + title[len(prefix) :]
        out.append(
            dataclasses.replace(
                worst,
                title=title,
                explanation=(
                    f"{worst.explanation} The same holds on ranks {span}; the numbers are "
                    f"rank {mine}'s, the worst."
                ),
                evidence=(
                    *worst.evidence,
                    Evidence(metric="ranks affected", value=len(ranks), unit="ranks"),
                ),
                ranks=tuple(ranks),
            )
        )
    return out
