"""shared-model-threads: one model's forward is entered by several threads at once.

Detects: outermost calls of the same module overlapping in time from different threads.
Evidence: threads, the most concurrent calls, how much slower concurrent calls are.
Fix: one model per thread, or batch the requests into one call (DL4J's ParallelInference idea).
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["MIN_CONCURRENT_SHARE", "shared_model", "shared_model_threads"]

#: DL4J's guide (step 6): a network used from several threads serialises them and is not thread
#: safe. A tenth of the calls overlapping is a pattern, not an accident.
MIN_CONCURRENT_SHARE = 0.10


def shared_model(ctx: RuleContext) -> str | None:
    """The model several threads call at once (this rule's condition), if any: the other
    rules' time-based evidence (step times, time between calls) is then that contention's."""
    for stat in ctx.record.concurrency:
        share = stat.concurrent_calls / stat.calls if stat.calls else 0.0
        if stat.threads >= 2 and stat.max_concurrent >= 2 and share >= MIN_CONCURRENT_SHARE:
            return stat.class_name
    return None


@rule(id="shared-model-threads", title="One model used from several threads", requires=())
def shared_model_threads(ctx: RuleContext) -> list[Finding]:
    """Flag a model whose forward is entered concurrently by two threads or more."""
    findings = []
    for stat in ctx.record.concurrency:
        if stat.threads < 2 or stat.max_concurrent < 2:
            continue
        share = stat.concurrent_calls / stat.calls if stat.calls else 0.0
        if share < MIN_CONCURRENT_SHARE:
            continue
        slower = None
        if stat.solo_mean_ns and stat.concurrent_mean_ns:
            slower = stat.concurrent_mean_ns / stat.solo_mean_ns
        # Calls overlapping k at a time that each take more than k times as long lose
        # throughput to contention; batching them into one call recovers it.
        factor = max(1.0, slower / stat.max_concurrent) if slower else 1.0
        evidence = [
            Evidence(
                metric="threads calling the model", value=stat.threads, source="Module.__call__"
            ),
            Evidence(
                metric="most calls at once", value=stat.max_concurrent, source="Module.__call__"
            ),
            Evidence(
                metric="calls overlapping another",
                value=round(share, 3),
                unit="share",
                threshold=MIN_CONCURRENT_SHARE,
                source="Module.__call__",
            ),
        ]
        if slower is not None:
            evidence.append(
                Evidence(
                    metric="concurrent call / solo call duration",
                    value=round(slower, 2),
                    unit="x",
                    source="Module.__call__",
                )
            )
        findings.append(
            Finding(
                rule="shared-model-threads",
                severity=Severity.WARNING,
                title=f"{stat.class_name} is called from {stat.threads} threads at once",
                explanation=(
                    f"{stat.concurrent_calls} of {stat.calls} forward calls of "
                    f"{stat.class_name} overlapped a call from another thread (up to "
                    f"{stat.max_concurrent} at once)"
                    + (
                        f"; overlapping calls took {slower:.1f}x as long as solo ones"
                        if slower
                        else ""
                    )
                    + ". The threads contend for the GIL and the same intra-op thread pool, "
                    "and a module with state (batch-norm statistics, caches) is not safe to "
                    "share."
                ),
                evidence=tuple(evidence),
                speedup=Speedup(
                    factor=factor,
                    basis="concurrent slowdown beyond fair sharing: "
                    "(concurrent / solo duration) / calls at once",
                ),
                fix=Fix(
                    summary=(
                        "Collect the requests into one batch and call the model once from one "
                        "thread (a queue feeding a single inference worker), or give each "
                        "thread its own copy of the model with torch.set_num_threads(cores // "
                        "threads)."
                    ),
                    snippet=(
                        "batch = torch.stack([q.get() for _ in range(n)])\n"
                        "with torch.inference_mode():\n"
                        "    out = model(batch)"
                    ),
                ),
            )
        )
    return findings
