"""slow-callbacks: time between steps outside the model (logging, metrics, post-processing).

Detects: the share of step time in ``other`` (time in no known phase: the user's callbacks,
logging, ``.item()`` calls, post-processing) plus an explicit ``callbacks`` phase, less the
garbage-collector pauses that fell in it (``gc-pauses`` reports those). Only info when several
threads call one model at once: a thread's time between its model calls then includes waiting
for the other threads' calls (``shared-model-threads`` is the finding to act on).
Skipped where the steps were not split into phases (a loop marked by ``doc.step()`` alone, a
framework whose calls the hooks do not see): all of such a step is ``other``, which tells
nothing of what runs between steps.
Evidence: that share and the mean per step.
Fix: do the work every N steps, asynchronously, or on the device.
"""

from __future__ import annotations

import math

from stepdoctor.model import Evidence, Finding, Fix, Phase, Severity
from stepdoctor.rules._facts import gpu_job
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext, removal_speedup
from stepdoctor.rules.registry import rule
from stepdoctor.rules.shared_model_threads import shared_model

__all__ = ["CRITICAL_SHARE", "WAITS_TITLE", "WARNING_SHARE", "slow_callbacks"]

#: The title's start where the time between steps is mostly the loop's thread waiting off the
#: CPU (``_waits``): the frameworks' terms tell that case apart by it.
WAITS_TITLE = "The loop waits between steps"

#: Healthy zoo runs (tests/scenarios/healthy_*.py) keep ``other`` — loop bookkeeping,
#: ``zero_grad``, the loss's ``.item()`` — under ~10% of a 2–5 ms step; 20% is well clear of that
#: noise. 40% means post-processing costs nearly as much as training (the TF
#: performance-analysis article's "heavy post-processing" case study).
WARNING_SHARE = 0.20
CRITICAL_SHARE = 0.40
#: The phases that are time between steps' work.
_BETWEEN = (Phase.OTHER.value, Phase.CALLBACKS.value)
#: At or above this share of the time between steps with the loop's thread off the CPU (by
#: its CPU clock), that time is a wait (a sleep, I/O, a remote call, a lock), not work: its
#: fix is to overlap it with the steps, not to do less of it. A held-out job that fetched
#: each batch from a "remote service" (30 ms asleep) was told to log every N steps.
WAITING_SHARE = 0.5
#: ... and only where the job's processes as a whole used no more CPU than its steps' other
#: phases could on every core, plus this many cores: work between steps that runs on the
#: library's own threads (a Keras callback's eager TensorFlow ops) leaves the loop's thread
#: waiting on them, off the CPU, while the process computes (a held-out callback was told to
#: overlap "fetches").
WAIT_CPU_MARGIN_CORES = 0.25


@rule(
    id="slow-callbacks",
    title="Work between steps slows training",
    requires=("steps", "phases"),
    where=("other", "callbacks"),
)
def slow_callbacks(ctx: RuleContext) -> list[Finding]:
    """Flag a large share of step time outside data loading and the model."""
    # Collector pauses that interrupted this time are gc-pauses' finding, not ours.
    between_ns = sum(
        s.phase_ns.get(n, 0) - s.gc_phase_ns.get(n, 0) for s in ctx.steps for n in _BETWEEN
    )
    total_ns = sum(s.duration_ns for s in ctx.steps)
    share = between_ns / total_ns if total_ns else 0.0
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    per_step_ms = between_ns / len(ctx.steps) / 1e6
    shared = shared_model(ctx)
    explained = (
        f" Several threads call {shared} at once (see the finding on that): this time "
        "includes waiting for the other threads' calls, so it is that contention's symptom."
        if shared
        else ""
    )
    # on a GPU the loop's thread also sits off the CPU while a .item() waits for the GPU's
    # work: a wait that is the training's own
    waiting = None if shared or gpu_job(ctx.record) else _waiting(ctx, between_ns)
    if waiting is not None and waiting >= WAITING_SHARE:
        return [_waits(ctx, rung.severity, share, per_step_ms, waiting)]
    return [
        Finding(
            rule="slow-callbacks",
            severity=Severity.INFO if shared else rung.severity,
            title=f"Work between steps takes {share:.0%} of the time",
            explanation=(
                f"{per_step_ms:.1f} ms of every step is spent outside data loading, forward, "
                "backward and the optimizer: callbacks, logging, metrics, .item()/.cpu() "
                f"calls or post-processing of outputs. Nothing trains meanwhile.{explained}"
            ),
            evidence=_between(share, per_step_ms),
            speedup=removal_speedup(
                share,
                f"1 / (1 - {share:.2f}): the between-step work removed",
            ),
            fix=Fix(
                summary=(
                    "Run logging, metrics and evaluation every N steps instead of every step; "
                    "accumulate metrics on the device and read them (.item()) rarely; move "
                    "heavy post-processing to a background thread or process."
                ),
                snippet=("if step % 100 == 0:\n    log(loss.item())  # not every step"),
            ),
        )
    ]


def _between(share: float, per_step_ms: float) -> tuple[Evidence, Evidence]:
    """The time between phases as evidence: its share of the steps, and per step."""
    return (
        Evidence(
            metric="share of step time between phases",
            value=round(share, 4),
            unit="share",
            threshold=WARNING_SHARE,
            source="step phases",
        ),
        Evidence(
            metric="mean time between phases per step",
            value=round(per_step_ms, 2),
            unit="ms",
            source="step phases",
        ),
    )


def _waiting(ctx: RuleContext, between_ns: int) -> float | None:
    """The least share of the time between phases the loop's thread spent off the CPU: that
    time less all the CPU the thread used over the measured steps (None: its clock unread)."""
    readings = [(s.t_ns, s.main_thread_cpu_s) for s in ctx.system if s.main_thread_cpu_s]
    if len(readings) < 2 or not between_ns:
        return None
    (t0, c0), (t1, c1) = readings[0], readings[-1]
    inside = [s for s in ctx.steps if s.start_ns >= t0 and s.end_ns <= t1]
    between_s = sum(s.phase_ns.get(n, 0) for s in inside for n in _BETWEEN) / 1e9
    if not inside or between_s <= 0:
        return None
    cpu_s = (c1 or 0.0) - (c0 or 0.0)
    waiting = max(0.0, min(1.0, (between_s - cpu_s) / between_s))
    jobs = [x.job_cpu_pct for x in ctx.system if x.job_cpu_pct is not None]
    wall_s = (t1 - t0) / 1e9
    if not jobs or wall_s <= 0:
        return None
    job_cores = sum(jobs) / len(jobs) / 100.0
    rest = max(0.0, 1.0 - between_s / wall_s)  # the steps' share in their other phases
    if job_cores > ctx.cores * rest + WAIT_CPU_MARGIN_CORES:
        return 0.0  # the process computed meanwhile, on threads other than the loop's
    return waiting


def _waits(
    ctx: RuleContext, severity: Severity, share: float, per_step_ms: float, waiting: float
) -> Finding:
    """The time between steps is mostly a wait of the loop's thread: told as one, with the
    fetches in flight it takes to hide it (the wait over the rest of the step, plus one)."""
    flight = max(2, math.ceil(share / max(1.0 - share, 1e-3)) + 1)
    return Finding(
        rule="slow-callbacks",
        severity=severity,
        title=f"{WAITS_TITLE} {share:.0%} of the time",
        explanation=(
            f"{per_step_ms:.1f} ms of every step is spent outside data loading, forward, "
            f"backward and the optimizer, and for at least {waiting:.0%} of it the loop's "
            "thread was not running on a CPU: it waited (asleep, on a file or the network, a "
            "remote call, a lock). Nothing trains meanwhile. Where it waits is in the code "
            "below."
        ),
        evidence=(
            *_between(share, per_step_ms),
            Evidence(
                metric="of it, the loop's thread off the CPU (at least)",
                value=round(waiting, 4),
                unit="share",
                threshold=WAITING_SHARE,
                source="the loop thread's CPU clock",
            ),
        ),
        speedup=removal_speedup(
            share,
            f"1 / (1 - {share:.2f}): the wait overlapped with the steps, which takes about "
            f"{flight} fetches in flight (the wait is {flight - 1}x the rest of a step)",
        ),
        fix=Fix(
            summary=(
                f"Overlap the wait with the steps: about {flight} fetches (or calls) in "
                "flight at once, made ahead by workers while the model trains (one fetch "
                "ahead hides only a wait shorter than the rest of the step); or batch many "
                "small reads or calls into one. A sleep of the job's own (a throttle, a "
                "poll) is removed or shortened."
            ),
            snippet=(
                "class Fetched(torch.utils.data.Dataset):  # each item: one whole batch\n"
                "    def __len__(self): return steps\n"
                "    def __getitem__(self, i): return fetch_batch(i)\n"
                f"loader = DataLoader(Fetched(), batch_size=None, num_workers={flight})"
            ),
        ),
    )
