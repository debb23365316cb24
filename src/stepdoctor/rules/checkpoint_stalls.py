"""checkpoint-stalls: saving checkpoints stops training.

Detects: periodic long steps that coincide with time inside ``torch.save``.
Evidence: checkpoint share of time, how many saves, their mean duration, every how many steps,
and how much longer a saving step is than a plain one.
Fix: save less often, save asynchronously, save to fast local disk.
"""

from __future__ import annotations

import itertools
import statistics

from stepdoctor.model import Evidence, Finding, Fix, Phase
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule

__all__ = ["CRITICAL_SHARE", "WARNING_SHARE", "checkpoint_stalls"]

#: The same bands as input-bound (XProf's 5% / 20% of step time): time the model does not
#: train, whatever the cause, is graded alike.
WARNING_SHARE = 0.05
CRITICAL_SHARE = 0.20


@rule(id="checkpoint-stalls", title="Checkpointing stalls training", where=("checkpoint",))
def checkpoint_stalls(ctx: RuleContext) -> list[Finding]:
    """Flag a checkpoint share at or above 5% of step time."""
    share = ctx.share(Phase.CHECKPOINT)
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    saving = [s for s in ctx.steps if s.phase(Phase.CHECKPOINT)]
    plain = [s.duration_ns for s in ctx.steps if not s.phase(Phase.CHECKPOINT)]
    mean_save_ms = sum(s.phase(Phase.CHECKPOINT) for s in saving) / len(saving) / 1e6
    gaps = [b.index - a.index for a, b in itertools.pairwise(saving)]
    period = statistics.median(gaps) if gaps else None
    ratio = (
        statistics.median(s.duration_ns for s in saving) / statistics.median(plain)
        if plain
        else None
    )
    evidence = [
        Evidence(
            metric="checkpoint share of step time",
            value=round(share, 4),
            unit="share",
            threshold=WARNING_SHARE,
            source="time inside torch.save",
        ),
        Evidence(metric="saves", value=len(saving), source="time inside torch.save"),
        Evidence(
            metric="mean save duration",
            value=round(mean_save_ms, 1),
            unit="ms",
            source="time inside torch.save",
        ),
    ]
    if period is not None:
        evidence.append(
            Evidence(metric="saves every", value=period, unit="steps", source="step indices")
        )
    if ratio is not None:
        evidence.append(
            Evidence(
                metric="saving step / plain step (median)",
                value=round(ratio, 1),
                unit="x",
                source="step durations",
            )
        )
    every = f" every {period:g} steps" if period else ""
    return [
        Finding(
            rule="checkpoint-stalls",
            severity=rung.severity,
            title=f"Checkpointing stalls training {share:.0%} of the time",
            explanation=(
                f"{len(saving)} saves{every} took {mean_save_ms:.0f} ms each on average, and "
                "training stops while torch.save serialises and writes the state."
            ),
            evidence=tuple(evidence),
            speedup=removal_speedup(
                share,
                f"1 / (1 - {share:.2f}): saving fully overlapped with training",
            ),
            fix=Fix(
                summary=(
                    "Save less often (by time, e.g. every 30 min, rather than every few "
                    "steps); write to fast local disk and copy off asynchronously; save only "
                    "model.state_dict() and the optimizer state; for large or distributed "
                    "models use torch.distributed.checkpoint.async_save."
                ),
                snippet=(
                    "if time.monotonic() - last_save > 1800:\n"
                    "    torch.save(model.state_dict(), path)\n"
                    "    last_save = time.monotonic()"
                ),
            ),
        )
    ]
