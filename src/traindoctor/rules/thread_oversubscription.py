"""thread-oversubscription: the job runs more compute threads than it has cores.

Detects: torch's intra-op threads (times the training processes) plus DataLoader workers far
above the cores the job may use (``os.sched_getaffinity``), or OMP_NUM_THREADS set above them.
Evidence: torch.get_num_threads(), OMP_NUM_THREADS, workers, cores, the job's CPU use.
Fix: one intra-op thread per core the training process owns.
"""

from __future__ import annotations

from traindoctor.model import Evidence, Finding, Fix, Severity, Speedup
from traindoctor.rules.context import RuleContext
from traindoctor.rules.registry import rule

__all__ = ["MEASURED_SLOWDOWN", "OVERSUBSCRIBED", "thread_oversubscription"]

#: Runnable compute threads per core from which the rule fires. DL4J's guide (step 13): native
#: thread pools sized past the physical cores lose throughput to cache thrashing and spinning.
OVERSUBSCRIBED = 2.0
#: Measured on the 2-core reference machine (tests/scenarios/oversubscribed_threads.py): a
#: 1.3M-parameter MLP with torch.set_num_threads(16) took ~54 ms a step against ~4 ms with the
#: default 2 threads. The loss depends on the op mix, so we claim a conservative 2x; a thread
#: sweep measures it for your job.
MEASURED_SLOWDOWN = 2.0


@rule(
    id="thread-oversubscription", title="More compute threads than cores", requires=("steps", "env")
)
def thread_oversubscription(ctx: RuleContext) -> list[Finding]:
    """Flag compute threads at twice the usable cores or more."""
    record = ctx.record
    cores = ctx.cores
    threads = record.env_value("torch.num_threads")
    omp = record.env_value("env.OMP_NUM_THREADS")
    omp_threads = int(omp) if isinstance(omp, str) and omp.strip().isdigit() else None
    intra = threads if isinstance(threads, int) else omp_threads
    if intra is None:
        return []
    workers = max((lo.num_workers for lo in record.loaders), default=0)
    # Torch's DataLoader workers run with one intra-op thread each.
    demand = intra + workers
    ratio = demand / cores
    if ratio < OVERSUBSCRIBED:
        return []
    jobs = [s.job_cpu_pct for s in ctx.system if s.job_cpu_pct is not None]
    job_cores = sum(jobs) / len(jobs) / 100 if jobs else None
    evidence = [
        Evidence(metric="torch.get_num_threads()", value=threads, source="torch"),
        Evidence(
            metric="OMP_NUM_THREADS",
            value=omp if omp is not None else "unset",
            source="environment",
        ),
        Evidence(metric="DataLoader workers", value=workers, source="DataLoader"),
        Evidence(
            metric="cores available", value=cores, unit="cores", source="os.sched_getaffinity"
        ),
        Evidence(
            metric="compute threads per core",
            value=round(ratio, 2),
            unit="x",
            threshold=OVERSUBSCRIBED,
            source="threads / cores",
        ),
    ]
    if job_cores is not None:
        evidence.append(
            Evidence(
                metric="job CPU",
                value=round(job_cores, 2),
                unit="cores",
                source="psutil (process tree)",
            )
        )
    best = max(1, cores - workers) if workers < cores else 1
    return [
        Finding(
            rule="thread-oversubscription",
            severity=Severity.WARNING,
            title=f"{demand} compute threads on {cores} cores",
            explanation=(
                f"torch runs {intra} intra-op threads"
                + (f" and {workers} DataLoader workers" if workers else "")
                + f" on {cores} usable cores ({ratio:.1f} per core). Threads beyond the cores "
                "do no extra work: they preempt each other, spin waiting at barriers and "
                "thrash the caches."
            ),
            evidence=tuple(evidence),
            speedup=Speedup(
                factor=MEASURED_SLOWDOWN,
                method="conservative floor of the ~13x slowdown measured for 16 threads on 2 "
                "cores in the scenario zoo; verify with a thread sweep",
            ),
            fix=Fix(
                summary=(
                    f"Use one intra-op thread per core the training process owns: "
                    f"torch.set_num_threads({best}) (or OMP_NUM_THREADS={best}); with several "
                    "processes per machine divide the cores between them."
                ),
                snippet=f"torch.set_num_threads({best})",
            ),
        )
    ]
