"""thread-oversubscription: the job runs more compute threads than it has cores.

Detects: torch's intra-op threads times the training processes on this machine
(LOCAL_WORLD_SIZE ranks) plus DataLoader workers far above the cores the job may use
(``os.sched_getaffinity``); OMP_NUM_THREADS or a BLAS pool (threadpoolctl) sized above them;
with several ranks, OMP_NUM_THREADS left unset. On a run the workers count by the share of
their stack samples in which they were not waiting for their next indices: a worker that
waits takes no core from the training's threads (their CPU readings cannot tell: on saturated
cores a worker that waits for a core uses little). Works at start (the doctor, counting
workers) as well as on a run.
Evidence: torch.get_num_threads(), OMP_NUM_THREADS, ranks, workers and how busy they were,
BLAS pools, cores, the job's CPU use.
Fix: one intra-op thread per core the training process owns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepdoctor.model import WORKER_PHASE, Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules._facts import fact_int
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "MAYBE_OVERSUBSCRIBED",
    "MIN_WORKER_SAMPLES",
    "OVERSUBSCRIBED",
    "ComputeThreads",
    "compute_threads",
    "thread_oversubscription",
    "workers_idle",
]

#: Runnable compute threads per core from which the rule fires. DL4J's guide (step 13): native
#: thread pools sized past the physical cores lose throughput to cache thrashing and spinning.
OVERSUBSCRIBED = 2.0
#: Busy threads per core from which, with DataLoader workers sampled, the rule says (info) that
#: their bursts may take cores from torch's pool, to be measured rather than assumed: idle
#: workers beside a pool of one thread per core read 1.05-1.14 (tests/scenarios/
#: healthy_idle_workers.py, whose one-thread one-worker "fix" ran 1.5x slower), four workers
#: busy 20% of the time beside 2 threads on 2 cores read 1.4 (a job written blind for the
#: class, whose fix ran 2.3x faster on a loaded machine).
MAYBE_OVERSUBSCRIBED = 1.25
#: Worker samples needed to judge their idleness (2 s of one worker at 50 Hz).
MIN_WORKER_SAMPLES = 100


@dataclass(frozen=True, slots=True)
class ComputeThreads:
    """The compute threads the job runs on this machine against its usable cores."""

    intra: int
    """torch's intra-op threads a process."""
    ranks: int
    """The job's ranks on this machine (LOCAL_WORLD_SIZE)."""
    workers: int
    cores: int
    sharing: int = 0
    """The ranks whose threads share this process's usable cores (0: ``ranks``): a rank
    pinned to some of the machine's cores shares them with its part of the ranks, the ranks
    spread over the machine's cores alike (its siblings' pinning is not in its record)."""
    workers_idle: float | None = None
    """The share of the DataLoader workers' stack samples that found them waiting for their
    next indices (``workers_idle``), or None where not sampled (no run, too few samples)."""

    @property
    def demand(self) -> int:
        """Threads that may compute at once: every rank's intra-op pool, and the DataLoader
        workers (one intra-op thread each, as torch sets them)."""
        return self.intra * (self.sharing or self.ranks) + self.workers

    @property
    def busy(self) -> float:
        """Threads that compute at once: the intra-op pools, and the workers for the share of
        their time they were not waiting for work (all of it where not sampled)."""
        idle = self.workers_idle or 0.0
        return self.intra * (self.sharing or self.ranks) + self.workers * (1.0 - idle)

    @property
    def per_core(self) -> float:
        return self.busy / self.cores


def compute_threads(ctx: RuleContext) -> ComputeThreads | None:
    """The job's compute threads, or None where its intra-op pool size is unknown."""
    record = ctx.record
    threads = record.env_value("torch.num_threads")
    intra = (
        threads
        if isinstance(threads, int)
        else fact_int(record, "env.OMP_NUM_THREADS") or fact_int(record, "pools.max_threads")
    )
    if intra is None:
        return None
    workers = max((lo.num_workers for lo in record.loaders), default=0)
    ranks = max(1, fact_int(record, "env.LOCAL_WORLD_SIZE") or 1)
    machine = record.meta.cpu_count or ctx.cores
    return ComputeThreads(
        intra=intra,
        ranks=ranks,
        workers=workers,
        cores=ctx.cores,
        # pinned to some of the cores: its share of the ranks (2 ranks, each pinned to one
        # of 2 cores, share none: one read "2 compute threads on 1 cores")
        sharing=max(1, math.ceil(ranks * ctx.cores / machine)) if ctx.cores < machine else 0,
        workers_idle=workers_idle(ctx) if workers else None,
    )


def workers_idle(ctx: RuleContext) -> float | None:
    """The share of the DataLoader workers' stack samples that found them waiting for their
    next indices (None: fewer than ``MIN_WORKER_SAMPLES``). A worker samples its own stack
    (collect/sampling/stacks.py); one found in torch's ``_worker_loop`` waiting in
    ``Queue.get`` is ahead of the loop (a worker reading its data is inside the fetch)."""
    frames = {f.id: f.function for f in ctx.record.frames}
    stacks = {s.id: s.frames for s in ctx.record.stacks}
    total = idle = 0
    for sample in ctx.record.samples:
        if sample.phase != WORKER_PHASE or sample.stack not in stacks:
            continue
        total += 1
        names = [frames.get(i, "") for i in stacks[sample.stack]]
        if "_worker_loop" in names:
            below = names[names.index("_worker_loop") + 1 :]
            idle += bool(below) and below[0] == "Queue.get"
    return idle / total if total >= MIN_WORKER_SAMPLES else None


@rule(
    id="thread-oversubscription",
    title="More compute threads than cores",
    requires=("env",),
    scope="env",
)
def thread_oversubscription(ctx: RuleContext) -> list[Finding]:
    """Flag compute threads at twice the usable cores or more."""
    record = ctx.record
    found = compute_threads(ctx)
    if found is None:
        return []
    threads = record.env_value("torch.num_threads")
    omp = record.env_value("env.OMP_NUM_THREADS")
    intra, ranks, workers, cores = found.intra, found.ranks, found.workers, found.cores
    sharing = found.sharing or ranks
    demand, ratio, idle = found.demand, found.per_core, found.workers_idle
    unset_with_ranks = ranks > 1 and omp is None
    maybe = idle is not None and MAYBE_OVERSUBSCRIBED <= ratio < OVERSUBSCRIBED
    if ratio < OVERSUBSCRIBED and not unset_with_ranks and not maybe:
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
        Evidence(metric="ranks on this machine", value=ranks, source="LOCAL_WORLD_SIZE"),
        *(
            [
                Evidence(
                    metric="ranks sharing its cores",
                    value=sharing,
                    source="pinned: the ranks spread over the machine's cores alike",
                )
            ]
            if found.sharing
            else []
        ),
        Evidence(metric="DataLoader workers", value=workers, source="DataLoader"),
        *(
            [
                Evidence(
                    metric="DataLoader workers idle, waiting for their next indices",
                    value=round(idle, 3),
                    unit="share",
                    source="DataLoader workers' stack samples",
                )
            ]
            if idle is not None
            else []
        ),
        Evidence(
            metric="BLAS/OpenMP pools",
            value=record.env_value("pools.summary") or "unknown",
            source="threadpoolctl",
        ),
        Evidence(
            metric="cores available", value=cores, unit="cores", source="os.sched_getaffinity"
        ),
        Evidence(
            metric="compute threads per core",
            value=round(ratio, 2),
            unit="x",
            threshold=OVERSUBSCRIBED,
            source="busy threads / cores (workers by their busy share where sampled)",
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
    best = max(1, (cores - workers) // sharing) if workers < cores else 1
    over = ratio >= OVERSUBSCRIBED
    busy_workers = (
        f" and {workers} DataLoader workers"
        + (f", busy {1 - idle:.0%} of the time," if idle is not None else "")
        if workers
        else ""
    )
    explanation = (
        f"torch runs {intra} intra-op threads"
        + (f" in each of {sharing} ranks sharing them" if sharing > 1 else "")
        + busy_workers
        + f" on {cores} usable cores ({ratio:.1f} per core)."
    )
    if over:
        explanation += (
            " Threads beyond the cores do no extra work: they preempt each other, spin "
            "waiting at barriers and thrash the caches."
        )
    elif maybe:
        explanation += (
            " The workers' bursts of work may take cores from torch's threads, which then "
            "wait for each other at every op; or the pool may need every thread it has: one "
            "run cannot tell which."
        )
    if unset_with_ranks:
        explanation += (
            f" OMP_NUM_THREADS is unset with {ranks} ranks on the machine: a rank that calls "
            "torch.set_num_threads late, or a BLAS library, sizes its pool to every core."
        )
    title = f"{demand} compute threads on {cores} cores"
    fix = Fix(
        summary=(
            f"Use one intra-op thread per core the training process owns: "
            f"torch.set_num_threads({best}) (or OMP_NUM_THREADS={best}); with several "
            "processes per machine divide the cores between them."
        ),
        snippet=f"torch.set_num_threads({best})",
    )
    if over:
        speedup = Speedup.none(
            "not estimated from one run: what oversubscription costs depends on the op mix "
            "(on 2 cores, jobs ran 1.5x to 13x slower with 2 to 16 threads); "
            "`stepdoctor tune --only threads` measures it"
        )
    elif maybe:
        title += ", the workers busy part of the time"
        speedup = Speedup.none(
            "not estimated: one run cannot tell what fewer threads would gain or lose; "
            "`stepdoctor tune --only threads` measures it"
        )
        fix = Fix(
            summary=(
                "Measure before changing it: `stepdoctor tune --only threads` times the job "
                f"with fewer intra-op threads (torch.set_num_threads({best}) leaves the "
                "workers a core), `stepdoctor run --verify` its forward and backward."
            )
        )
    else:
        title = f"OMP_NUM_THREADS unset with {ranks} ranks"
        speedup = Speedup.none("not estimated: no oversubscription measured")
    return [
        Finding(
            rule="thread-oversubscription",
            severity=Severity.WARNING if over else Severity.INFO,
            title=title,
            explanation=explanation,
            evidence=tuple(evidence),
            speedup=speedup,
            fix=fix,
        )
    ]
