"""A rank that stopped stepping while the others wait for it (a hang), or ranks out of step
(a desync): from the ranks' last stack samples and their flight recorders."""

from __future__ import annotations

from stepdoctor.jobs.rows import RankRow
from stepdoctor.model import Collective, Evidence, Finding, Fix, Severity, Speedup

__all__ = ["SAME_SHAPE", "WAITING_PHASES", "hang_findings"]

#: Collectives to which every rank passes tensors of one shape (``gloo:all_reduce``...).
SAME_SHAPE = ("all_reduce", "allreduce", "broadcast", "reduce")

#: Phases in which a rank of a DDP job waits for the others: the backward holds its gradient
#: all-reduces (and their wait for a rank that does not come).
WAITING_PHASES = frozenset({"backward"})


def hang_findings(rows: list[RankRow], *, ended: bool = True) -> list[Finding]:
    """A rank that stopped stepping while the others waited for it: the run did not end well
    on every rank (a timeout, a rank stopped), or it has not ended (``ended`` False: the
    launcher saw no step for a while), and exactly one rank's last stack samples are outside
    the phases where ranks wait for each other (``WAITING_PHASES``) while the others' are
    inside them, or, where the stacks cannot tell, exactly one rank's last collective (flight
    recorder) is behind the others'. Its last phase, stack and collective are named. Ranks
    that issued different collectives under one number are out of step: a desync."""
    if len(rows) < 2 or (ended and all(r.status == "ok" for r in rows)):
        return []
    desync = _desync(rows)
    if desync is not None:
        return [desync]
    behind, issued = _behind(rows)
    stuck = [r for r in rows if r.last_phase and r.last_phase not in WAITING_PHASES]
    if any(not r.last_phase for r in rows) or len(stuck) != 1:
        stuck = [] if behind is None else [behind]  # the stacks cannot tell: the recorder
    if len(stuck) != 1:
        return []
    (row,) = stuck
    others = [r for r in rows if r is not row]
    where = row.last_where or "an unknown place (no stack samples of its loop)"
    errors = [f"rank {r.rank}: {r.error}" for r in others if r.error]
    if not ended:
        how = "it is still there"
    elif row.status is None:
        how = "its record ends there (the process was stopped)"
    else:
        how = f"it ended with status {row.status}"
    were = "were" if ended else "are"
    waiting = ", ".join(str(r.rank) for r in others)
    evidence = [
        Evidence(
            metric=f"rank {r.rank}: steps, last phase",
            value=f"{r.completed}, {r.last_phase}",
            source="steps, stack samples",
        )
        for r in rows
    ]
    evidence.append(
        Evidence(
            metric=f"rank {row.rank}'s stack (innermost last)",
            value=row.last_stack or "unknown",
            source="stack samples",
        )
    )
    evidence += [
        Evidence(
            metric=f"rank {r.rank}: last collective",
            value=f"#{r.collectives[-1].seq}, {_said(r.collectives[-1])}",
            source="flight recorder",
        )
        for r in rows
        if r.collectives
    ]
    return [
        Finding(
            rule="hang",
            ranks=(row.rank,),
            severity=Severity.CRITICAL,
            title=(
                f"Rank {row.rank} stopped stepping; rank(s) {waiting} "
                + ("waited" if ended else "wait")
                + " for it"
            ),
            explanation=(
                f"Rank {row.rank} completed {row.completed} steps, then stayed in "
                f"'{row.last_phase or '?'}' at {where}; {how}. Rank(s) {waiting} {were} "
                + (
                    f"waiting in {issued}"
                    if issued and behind is row
                    else "waiting in their gradient all-reduce (backward), which cannot end "
                    "without it"
                )
                + (f" ({'; '.join(errors)})." if errors else ".")
            ),
            evidence=tuple(evidence),
            speedup=Speedup.none(f"none: the job makes no progress until rank {row.rank} moves on"),
            fix=Fix(
                summary=(
                    f"Look at what rank {row.rank} does at {where}: every rank must "
                    "reach each collective (the same number of batches per rank, the same "
                    "branches, no rank-only work that blocks). A process-group timeout "
                    "(init_process_group(timeout=...)) turns a hang into an error sooner."
                ),
            ),
        )
    ]


def _behind(rows: list[RankRow]) -> tuple[RankRow | None, str]:
    """The one rank whose last collective (flight recorder, in the group most collectives
    were in) has a lower number than the others': they wait in one it never issued. With
    what they wait in, in words."""
    if len(rows) < 2 or any(not r.collectives for r in rows):
        return None, ""
    groups = [c.group for r in rows for c in r.collectives]
    group = max(sorted(set(groups)), key=groups.count)  # ties: the first by name
    last = {r.rank: max((c for c in r.collectives if c.group == group), key=lambda c: c.seq,
                        default=None) for r in rows}  # fmt: skip
    if any(c is None for c in last.values()):
        return None, ""
    low = min(c.seq for c in last.values() if c is not None)
    behind = [r for r in rows if (c := last[r.rank]) is not None and c.seq == low]
    ahead = [c for c in last.values() if c is not None and c.seq > low]
    if len(behind) != 1 or not ahead:
        return None, ""
    waited = max(ahead, key=lambda c: c.seq)
    return behind[0], (
        f"collective #{waited.seq}, {_said(waited)}, which rank {behind[0].rank} never issued: "
        f"its last was #{low}"
    )


def _desync(rows: list[RankRow]) -> Finding | None:
    """Ranks that issued different collectives under one number of one group (flight
    recorder): out of step, each waits in a collective the others will not join."""
    by_key: dict[tuple[str, int], dict[int, Collective]] = {}
    for r in rows:
        for c in r.collectives:
            by_key.setdefault((c.group, c.seq), {})[r.rank] = c
    for (group, seq), seen in sorted(by_key.items(), key=lambda kv: kv[0][1]):
        # the operation must match; the shapes too where every rank passes the same shape
        # (an all-to-all or a scatter may differ by rank)
        kinds = {(c.op, c.sizes if c.op.endswith(SAME_SHAPE) else "") for c in seen.values()}
        if len(seen) < 2 or len(kinds) < 2:
            continue
        said = "; ".join(f"rank {rank}: {_said(c)}" for rank, c in sorted(seen.items()))
        return Finding(
            rule="desync",
            ranks=tuple(sorted(seen)),
            severity=Severity.CRITICAL,
            title=f"The ranks issued different collectives as #{seq} of group {group}",
            explanation=(
                f"Every rank must issue the same collectives in the same order; as #{seq} "
                f"they issued: {said}. Each waits in a collective the others do not join."
            ),
            evidence=tuple(
                Evidence(
                    metric=f"rank {rank}: collective #{seq}",
                    value=_said(c),
                    source="flight recorder",
                )
                for rank, c in sorted(seen.items())
            ),
            speedup=Speedup.none("none: the job makes no progress until the ranks agree"),
            fix=Fix(
                summary=(
                    "Find the collective a rank issues that the others do not (a branch on the "
                    "rank, a different number of batches or parameters per rank, a metric "
                    "all-reduced on some ranks only): every rank must call the same "
                    "collectives with tensors of the same shape, in the same order."
                )
            ),
        )
    return None


def _said(c: Collective) -> str:
    """A collective in words: ``gloo:all_reduce of float32[1115146], started``."""
    return f"{c.op}" + (f" of {c.sizes}" if c.sizes else "") + f", {c.state}"
