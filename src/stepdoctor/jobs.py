"""One diagnosis for a distributed job from its ranks' records: a row per rank, and the rank
the others wait for, with its cause and what it costs the job.

In synchronous data parallelism (DDP) every rank's gradient all-reduce ends when the last
rank joins it, so a rank that is late makes every other rank wait inside its all-reduces. The
rank that spends the *least* time in them is the one the others wait for (the least-wait
logic; the same as the trace rule ``stragglers``). Each rank's time in them is DDP's own
measurement (``probes/ddp.py``); the cause is the phase in which the straggler spends more
time a step than the other ranks do (its data wait, its computation, a callback, GC...).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepdoctor.collect.sampling.nvml import THROTTLING, clock_reasons
from stepdoctor.errors import MissingExtraError, RecordError
from stepdoctor.model import (
    CodeFrame,
    Collective,
    DdpStats,
    Evidence,
    Finding,
    Fix,
    Report,
    RunRecord,
    Severity,
    Speedup,
    StackSample,
)
from stepdoctor.probes.ranks import rank_dirs, rank_of_dir
from stepdoctor.record import load_run
from stepdoctor.report import build_report
from stepdoctor.rules import RuleContext
from stepdoctor.rules.comm_bound import COMM_SHARE, POOR_OVERLAP
from stepdoctor.rules.competing_processes import WARNING_SHARE as COMPETING_SHARE
from stepdoctor.rules.competing_processes import busiest_others, named, others_share

__all__ = [
    "CAUSE_SHARE",
    "COMPUTE_PHASES",
    "CONTENDED_SHARE",
    "CRITICAL_WAIT_SHARE",
    "HANG_SAMPLES",
    "MIN_CRITICAL_STEPS",
    "UNEXPLAINED_SHARE",
    "WAITING_PHASES",
    "WAIT_SHARE",
    "RankRow",
    "comm_findings",
    "hang_findings",
    "job_findings",
    "rank_row",
    "rank_rows",
    "summarise_job",
    "summarise_rank",
]

#: The other ranks losing this share of their step waiting for one rank is worth naming: the
#: trace rule's threshold (comm-bound's TBP share: communication above 10% of the step).
WAIT_SHARE = 0.10
#: ...and critical from XProf's "highly" band for time spent waiting (input-bound's 20%)...
CRITICAL_WAIT_SHARE = 0.20
#: ...with at least this many steps per rank: a short run's waits are its start-up's.
MIN_CRITICAL_STEPS = 20
#: A phase names the cause when the straggler spends more time in it a step than the other
#: ranks' median by at least this share of the time they wait for it.
CAUSE_SHARE = 0.5
#: Phases that are the rank's computation: slower there while other processes take its host's
#: CPUs (competing-processes' warning share or more), by less than ``CRITICAL_WAIT_SHARE`` of
#: the step, the rank fell behind where they happened to take its cores, not for anything of
#: the job's: said as info (measured: two healthy ranks of tests/distributed/ddp_job.py beside
#: two busy processes on the 2 cores, one rank's backward 1.4x the other's, 16% of the step
#: lost). Beyond that the other processes single it out (a hog on its cores): graded as usual.
COMPUTE_PHASES = frozenset({"forward", "backward_compute", "optimizer"})
CONTENDED_SHARE = COMPETING_SHARE
#: Other processes using this share of the straggler's host are named beside a cause in its
#: computation (one on its cores slows it; with ``CONTENDED_SHARE`` or more it is info).
OTHERS_NOTED = 0.10
#: A wait no phase explains is named only from this share of the step: two healthy ranks of
#: tests/distributed/ddp_job.py on the 2-core reference machine came out 0-8% of the step
#: apart in their all-reduce times (DDP timing every iteration on the CPU; on a GPU it times
#: few, and the spread is wider).
UNEXPLAINED_SHARE = 0.20

#: Phases in which a rank of a DDP job waits for the others: the backward holds its gradient
#: all-reduces (and their wait for a rank that does not come).
WAITING_PHASES = frozenset({"backward"})
#: The last stack samples of a rank's loop read to say where it stopped (at 50 Hz: its last
#: 0.2 s before its record ends).
HANG_SAMPLES = 10

#: Phases that can make one rank late, with what to look at (the job's own words).
_CAUSES: Mapping[str, tuple[str, str]] = {
    "data_wait": (
        "its data loading",
        "Its data loading is slower than the other ranks': look at its shard (larger or "
        "slower-to-read samples, data on slower storage) and its DataLoader (num_workers, "
        "prefetching); every rank should read alike.",
    ),
    "forward": (
        "its forward computation",
        "Its computation is slower than the other ranks': another process on its cores (pin "
        "each rank's threads to cores of its own), a slower device or clock, or larger "
        "batches on that rank (sequences padded longer).",
    ),
    "backward_compute": (
        "its backward computation",
        "Its computation is slower than the other ranks': another process on its cores (pin "
        "each rank's threads to cores of its own), a slower device or clock, or larger "
        "batches on that rank (sequences padded longer).",
    ),
    "optimizer": (
        "its optimizer step",
        "Its optimizer step is slower than the other ranks': state or work only it has "
        "(a rank-0-only scheduler or EMA), or a slower device.",
    ),
    "other": (
        "work between its phases",
        "It does work between steps the others do not (logging, metrics or progress bars on "
        "rank 0 alone): do it every N steps, or asynchronously, or on every rank alike.",
    ),
    "callbacks": (
        "its callbacks",
        "Its callbacks take longer than the other ranks' (logging or metrics on rank 0 "
        "alone): run them every N steps, or asynchronously.",
    ),
    "checkpoint": (
        "its checkpoints",
        "It saves checkpoints while the others wait: save asynchronously "
        "(torch.distributed.checkpoint.async_save) or less often.",
    ),
    "evaluation": (
        "its evaluation",
        "It evaluates while the others wait: evaluate on every rank (a shard each), or less often.",
    ),
    "gc": (
        "its garbage-collector pauses",
        "Its garbage collector pauses longer than the other ranks': gc.freeze() after "
        "start-up, fewer Python objects per step.",
    ),
}


@dataclass(frozen=True, slots=True)
class RankRow:
    """One rank's line of the job's table."""

    rank: int
    host: str
    steps: int
    mean_step_ms: float | None
    samples_per_sec: float | None
    data_wait_share: float | None
    comm_ms: float | None
    """DDP's all-reduce time per sampled iteration (waiting for the other ranks included)."""
    phase_ms: Mapping[str, float] = field(default_factory=dict)
    """Time a step in each phase (``backward_compute`` from DDP; ``gc`` its pauses)."""
    completed: int = 0
    """Steps the rank completed (warm-up included)."""
    others_cpu_share: float | None = None
    """The share of its host's CPUs processes outside the job used during its steps."""
    status: str | None = None
    """How the rank's run ended (``RunEnd.status``); None: its record has no end (stopped)."""
    error: str = ""
    last_phase: str = ""
    """The phase most of its loop's last stack samples were in (``HANG_SAMPLES``)."""
    last_where: str = ""
    """Where its loop's last sample was: the innermost frame of its own code, and the call."""
    last_stack: str = ""
    """Its last sample's innermost frames, outermost first."""
    ddp: DdpStats | None = None
    """Its first DDP model's own timings and settings."""
    micro_batches: float | None = None
    """Backward passes a step (above 1: gradient accumulation)."""
    cpu_mhz: float | None = None
    """Its host's CPUs' median clock during its steps."""
    gpu_clock: float | None = None
    """Its GPU's median SM clock during its steps, as a share of the GPU's maximum."""
    gpu_throttled: tuple[str, ...] = ()
    """Why its GPU's clock was held down (power, heat) in at least half its readings."""
    busiest_others: str = ""
    """The processes outside the job that used the most CPU on its host during its steps."""
    collectives: tuple[Collective, ...] = ()
    """Its last collectives (flight recorder), as read last."""


def rank_row(rank: int, record: RunRecord, report: Report) -> RankRow:
    """A rank's row: what the job's diagnosis needs of its record and report."""
    summary = report.summary
    step = summary.mean_step_ms
    phases = {p: share * step for p, share in summary.phase_share.items()} if step else {}
    if step:
        phases["gc"] = summary.gc_share * step
    ddp = record.ddp[0] if record.ddp else None
    if ddp is not None and ddp.backward_compute_ns is not None:
        phases["backward_compute"] = ddp.backward_compute_ns / 1e6
    ctx = RuleContext(record)
    last = _last_samples(record)
    frames = {f.id: f for f in record.frames}
    stacks = {s.id: s.frames for s in record.stacks}
    path = [frames[i] for i in stacks.get(last[-1].stack, ()) if i in frames] if last else []
    return RankRow(
        rank=rank,
        host=record.meta.hostname,
        steps=summary.steps,
        mean_step_ms=step,
        samples_per_sec=summary.samples_per_sec,
        data_wait_share=summary.phase_share.get("data_wait"),
        comm_ms=(
            ddp.backward_comm_ns / 1e6
            if ddp is not None and ddp.backward_comm_ns is not None
            else None
        ),
        phase_ms=phases,
        completed=len(record.steps),
        others_cpu_share=others_share(ctx),
        busiest_others=named(busiest_others(ctx)[:3]),
        collectives=record.collectives,
        status=None if record.end is None else record.end.status,
        error="" if record.end is None else record.end.error,
        last_phase=_phase_of(last) if last else "",
        last_where=_where(path, last[-1].line) if last else "",
        last_stack=" > ".join(f.function for f in path[-6:]),
        ddp=ddp,
        micro_batches=summary.micro_batches_per_step,
        **_clocks(ctx),
    )


def _clocks(ctx: RuleContext) -> dict[str, Any]:
    """The rank's CPU clock, and its GPU's (the GPU its process used; the only one, else)
    with the throttling reasons seen in at least half its readings, over its measured
    steps."""
    span = (ctx.steps[0].start_ns, ctx.steps[-1].end_ns) if ctx.steps else None
    mhz = [s.cpu_mhz for s in ctx.system if s.cpu_mhz]
    gpus = [g for g in ctx.record.gpu if span is None or span[0] <= g.t_ns <= span[1]]
    mine = {g.index for g in gpus if any(p.is_job for p in g.processes)}
    if not mine and len({g.index for g in gpus}) == 1:
        mine = {g.index for g in gpus}
    clocked = [g for g in gpus if g.index in mine and g.sm_clock_mhz and g.max_sm_clock_mhz]
    held = [g.clock_reasons & THROTTLING for g in clocked if g.clock_reasons is not None]
    reasons = {name for mask in held for name in clock_reasons(mask)}
    return {
        "cpu_mhz": statistics.median(mhz) if mhz else None,
        "gpu_clock": (
            statistics.median((g.sm_clock_mhz or 0) / (g.max_sm_clock_mhz or 1) for g in clocked)
            if clocked
            else None
        ),
        "gpu_throttled": tuple(
            sorted(r for r in reasons if 2 * sum(r in clock_reasons(m) for m in held) >= len(held))
        ),
    }


def rank_rows(records: Mapping[int, RunRecord], reports: Mapping[int, Report]) -> list[RankRow]:
    """A row per rank, in rank order."""
    return [rank_row(rank, records[rank], reports[rank]) for rank in sorted(records)]


def summarise_rank(folder: Path) -> RankRow | str:
    """The map step: one rank's folder read into its row (a str: why it could not be read)."""
    try:
        record = load_run(folder)
    except (RecordError, OSError) as exc:
        return f"{folder.name}: its record could not be read ({exc})"
    rank = record.meta.rank if record.meta.rank is not None else rank_of_dir(folder)
    if rank is None:
        return f"{folder.name}: not a rank's folder"
    return rank_row(rank, record, build_report(record))


def summarise_job(
    job: Path, *, executor: str = "process", scheduler: str | None = None
) -> tuple[list[RankRow], list[str]]:
    """Every rank's row of a job's folder (``rank-N`` folders), and a line for each rank whose
    record could not be read. The map runs on ``executor``: ``process`` (a process pool, one
    process per core at most), ``serial``, or ``dask`` (a Dask cluster: the scheduler at
    ``scheduler``, or a local one; the ``[dask]`` extra).

    Raises:
        MissingExtraError: ``dask`` without Dask's ``distributed`` installed.
        ValueError: an unknown executor.
    """
    folders = rank_dirs(job)
    if executor == "serial" or (executor == "process" and len(folders) < 2):
        results = [summarise_rank(f) for f in folders]
    elif executor == "process":
        workers = max(1, min(len(folders), os.cpu_count() or 1))
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            results = list(pool.map(summarise_rank, folders))
    elif executor == "dask":
        results = _on_dask(folders, scheduler)
    else:
        raise ValueError(f"executor must be process, serial or dask, not {executor!r}")
    rows = sorted((r for r in results if isinstance(r, RankRow)), key=lambda r: r.rank)
    return rows, [r for r in results if isinstance(r, str)]


def _on_dask(folders: list[Path], scheduler: str | None) -> list[RankRow | str]:
    """The map on a Dask cluster: the scheduler at ``scheduler``, or a local one."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise MissingExtraError("distributed", "dask") from exc
    cluster: Any = None
    if scheduler is None:
        workers = max(1, min(len(folders), os.cpu_count() or 1))
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
    try:
        with Client(scheduler or cluster) as client:  # type: ignore[no-untyped-call]
            futures = client.map(summarise_rank, folders, pure=False)
            return list(client.gather(futures))
    finally:
        if cluster is not None:
            cluster.close()


def job_findings(rows: list[RankRow]) -> list[Finding]:
    """The straggler, by the least-wait logic, when the others lose ``WAIT_SHARE`` of their
    step waiting for it; none with fewer than two ranks with DDP's timings."""
    timed = [r for r in rows if r.comm_ms is not None and r.mean_step_ms]
    if len(timed) < 2:
        return []
    slow = min(timed, key=lambda r: (r.comm_ms or 0.0, r.rank))
    others = [r for r in timed if r is not slow]
    waited = statistics.median(r.comm_ms or 0.0 for r in others)
    step = statistics.median(r.mean_step_ms or 0.0 for r in others)
    gap = waited - (slow.comm_ms or 0.0)
    lost = gap / step if step else 0.0
    if lost < WAIT_SHARE:
        return []
    excess = {
        phase: slow.phase_ms.get(phase, 0.0)
        - statistics.median(r.phase_ms.get(phase, 0.0) for r in others)
        for phase in _CAUSES
    }
    phase, extra = max(excess.items(), key=lambda item: item[1])
    found = extra >= CAUSE_SHARE * gap
    clock = _clock_cause(slow, others, gap) if not found or phase in COMPUTE_PHASES else None
    if not found and clock is None and lost < UNEXPLAINED_SHARE:
        return []
    critical = lost >= CRITICAL_WAIT_SHARE and min(r.steps for r in timed) >= MIN_CRITICAL_STEPS
    contended = (
        clock is None
        and (not found or phase in COMPUTE_PHASES)
        and slow.others_cpu_share is not None
        and slow.others_cpu_share >= CONTENDED_SHARE
        and lost < CRITICAL_WAIT_SHARE
    )
    everyone = f"{len(others)} other ranks" if len(others) > 1 else "the other rank"
    if clock is not None:
        cause, advice = clock
    elif found:
        what, advice = _CAUSES[phase]
        cause = (
            f"{what}: {slow.phase_ms.get(phase, 0.0):.1f} ms a step against the others' "
            f"{slow.phase_ms.get(phase, 0.0) - extra:.1f} ms."
        )
    else:
        cause = (
            "none of its phases stands out (each is within half the wait of the others'): its "
            "whole step is slower, as when another process shares its cores or its clock is "
            "lower."
        )
        advice = (
            "Look at what runs beside this rank (processes on its cores, its CPU frequency) "
            "and pin each rank's threads to cores of its own."
        )
    return [
        Finding(
            rule="stragglers",
            ranks=(slow.rank,),
            severity=(
                Severity.INFO if contended else Severity.CRITICAL if critical else Severity.WARNING
            ),
            title=(f"Rank {slow.rank} holds back {everyone}: {lost:.0%} of each step lost waiting"),
            explanation=(
                "Every rank's gradient all-reduce ends when the last rank joins it. Rank "
                f"{slow.rank} spent {slow.comm_ms:.1f} ms a step in its all-reduces, the "
                f"others {waited:.1f} ms (median): they wait {gap:.1f} ms for it, {lost:.0%} "
                f"of their {step:.1f} ms step. Rank {slow.rank} is late because of {cause}"
                + _others_note(
                    slow,
                    contended=contended,
                    computing=clock is None and (not found or phase in COMPUTE_PHASES),
                )
            ),
            evidence=(
                Evidence(
                    metric="straggler's all-reduce time a step",
                    value=round(slow.comm_ms or 0.0, 2),
                    unit="ms",
                    source="DDP logging data",
                ),
                Evidence(
                    metric="other ranks' all-reduce time a step (median)",
                    value=round(waited, 2),
                    unit="ms",
                    source="DDP logging data",
                ),
                Evidence(
                    metric="other ranks' step lost waiting",
                    value=round(lost, 3),
                    unit="share",
                    threshold=WAIT_SHARE,
                    source="DDP logging data, steps",
                ),
                Evidence(
                    metric=f"straggler's {phase} a step beyond the others'",
                    value=round(extra, 2),
                    unit="ms",
                    threshold=round(CAUSE_SHARE * gap, 2),
                    source="step phases",
                ),
            ),
            speedup=Speedup(
                factor=1 / (1 - min(lost, 0.95)),
                basis=(
                    f"1 / (1 - {lost:.2f}): the others' wait for rank {slow.rank} gone (every "
                    "rank at the others' pace)"
                ),
            ),
            fix=Fix(summary=advice),
        )
    ]


def _others_note(slow: RankRow, *, contended: bool, computing: bool) -> str:
    """What other processes on the straggler's host did, where its computation is late."""
    share = slow.others_cpu_share
    if share is None or not computing or share < OTHERS_NOTED:
        return ""
    busiest = f" (the busiest: {slow.busiest_others})" if slow.busiest_others else ""
    if contended:
        return (
            f" Other processes used {share:.0%} of its host's CPUs meanwhile{busiest}: it fell "
            "behind where they took its cores (see the finding on other processes), not for "
            "anything of the job's."
        )
    return (
        f" Other processes used {share:.0%} of its host's CPUs meanwhile{busiest}: one that "
        "runs on its cores slows its computation."
    )


def _clock_cause(slow: RankRow, others: list[RankRow], gap: float) -> tuple[str, str] | None:
    """The straggler's lower clock as its cause, when its computation at the others' clock
    would save at least ``CAUSE_SHARE`` of the wait: its GPU's SM clock (a share of its
    maximum, with the throttling reasons NVML gave), else its host's CPU clock."""
    compute = sum(slow.phase_ms.get(p, 0.0) for p in COMPUTE_PHASES)
    theirs = [r.gpu_clock for r in others if r.gpu_clock]
    if (
        slow.gpu_clock
        and theirs
        and compute * (statistics.median(theirs) / slow.gpu_clock - 1) >= CAUSE_SHARE * gap
    ):
        why = f" ({', '.join(slow.gpu_throttled)})" if slow.gpu_throttled else ""
        return (
            f"its GPU's clock: {slow.gpu_clock:.0%} of its maximum against the others' "
            f"{statistics.median(theirs):.0%}{why}.",
            "Its GPU runs slower than the others': look at its power limit and cooling "
            "(nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE); a node whose GPUs throttle "
            "holds back the whole job, so fix or drain it.",
        )
    mhz = [r.cpu_mhz for r in others if r.cpu_mhz]
    if (
        slow.cpu_mhz
        and mhz
        and compute * (statistics.median(mhz) / slow.cpu_mhz - 1) >= CAUSE_SHARE * gap
    ):
        return (
            f"its host's CPU clock: {slow.cpu_mhz:.0f} MHz against the others' "
            f"{statistics.median(mhz):.0f} MHz.",
            "Its host's CPUs run at a lower clock than the others': look at its frequency "
            "governor (cpupower frequency-info), power limits and cooling.",
        )
    return None


def comm_findings(rows: list[RankRow]) -> list[Finding]:
    """The gradient all-reduces' own cost, when the part of it the backward does not hide is
    ``COMM_SHARE`` of the step or more. Measured on the rank that waits least in them (it
    arrives last, so its all-reduce time is the communication itself, not a wait for
    others); critical from ``CRITICAL_WAIT_SHARE`` with ``MIN_CRITICAL_STEPS`` steps."""
    timed = [r for r in rows if r.comm_ms is not None and r.mean_step_ms and r.ddp is not None]
    if len(timed) < 2:
        return []
    base = min(timed, key=lambda r: (r.comm_ms or 0.0, r.rank))
    ddp = base.ddp or DdpStats(model="", iterations=0)
    comm, step = base.comm_ms or 0.0, base.mean_step_ms or 1.0
    overlap = min(comm, (ddp.overlap_ns or 0) / 1e6)
    exposed = (comm - overlap) / step
    if exposed < COMM_SHARE:
        return []
    hidden = overlap / comm if comm else 0.0
    critical = exposed >= CRITICAL_WAIT_SHARE and min(r.steps for r in timed) >= MIN_CRITICAL_STEPS
    fixes = _comm_fixes(ddp, base.micro_batches, hidden)
    settings = _ddp_settings(ddp)
    return [
        Finding(
            rule="comm-bound",
            ranks=tuple(r.rank for r in timed),
            severity=Severity.CRITICAL if critical else Severity.WARNING,
            title=(
                f"Gradient all-reduces take {exposed:.0%} of each step that the backward "
                "does not hide"
            ),
            explanation=(
                f"Each step all-reduces the gradients across the {len(timed)} ranks: "
                f"{comm:.1f} ms a step on rank {base.rank}, the rank that waits least for the "
                f"others (its time is the communication itself), of its {step:.1f} ms step. "
                f"{overlap:.1f} ms of it ran while the backward still computed ({hidden:.0%}); "
                f"the rest, {comm - overlap:.1f} ms, every rank waits for. DDP's settings: "
                f"{settings}."
            ),
            evidence=(
                Evidence(
                    metric="all-reduce time a step (the rank that waits least)",
                    value=round(comm, 2),
                    unit="ms",
                    source="DDP logging data",
                ),
                Evidence(
                    metric="of it, overlapped with the backward",
                    value=round(hidden, 3),
                    unit="share",
                    threshold=POOR_OVERLAP / 100,
                    source="DDP logging data",
                ),
                Evidence(
                    metric="exposed all-reduce time, share of the step",
                    value=round(exposed, 3),
                    unit="share",
                    threshold=COMM_SHARE,
                    source="DDP logging data, steps",
                ),
            ),
            speedup=Speedup(
                factor=1 / (1 - min(exposed, 0.95)),
                basis=(
                    f"1 / (1 - {exposed:.2f}): the exposed all-reduce time hidden behind the "
                    "backward or shared by more samples a step (a bound: the all-reduce "
                    "still takes the cores or the network it takes)"
                ),
            ),
            fix=Fix(summary=" ".join(fixes)),
        )
    ]


def _comm_fixes(ddp: DdpStats, micro_batches: float | None, hidden: float) -> list[str]:
    """What applies to this job, in DDP's own terms, most effective first."""
    fixes = []
    if micro_batches is not None and micro_batches > 1:
        fixes.append(
            f"It accumulates {micro_batches:.0f} micro-batches a step: run all but the last "
            "inside `with model.no_sync():`, one all-reduce a step instead of one a "
            "micro-batch."
        )
    fixes.append(
        "An all-reduce costs the same whatever the batch: more samples a rank a step (a larger "
        "batch, or gradient accumulation with no_sync) share it."
    )
    if hidden < POOR_OVERLAP / 100:
        cap = f"{ddp.bucket_cap_bytes / 2**20:.0f} MiB" if ddp.bucket_cap_bytes else "25 MiB"
        fixes.append(
            f"Little of it overlaps the backward: DDP all-reduces the gradients in buckets of "
            f"up to {cap}, each once all of its gradients are ready, so a bucket that holds "
            "gradients the backward makes late waits for its end; a smaller bucket_cap_mb "
            "starts more of them during the backward (more, smaller all-reduces: measure both)."
        )
    if not ddp.comm_hook:
        fixes.append(
            "Compress the gradients: model.register_comm_hook(None, "
            "torch.distributed.algorithms.ddp_comm_hooks.default_hooks.fp16_compress_hook) "
            "(bf16_compress_hook) halves the bytes; powerSGD_hook cuts more."
        )
    if ddp.find_unused_parameters:
        fixes.append(
            "find_unused_parameters=True walks the autograd graph every step and holds back "
            "buckets: set it False unless some parameters get no gradient."
        )
    if ddp.static_graph is False:
        fixes.append("static_graph=True, if the graph is the same every step.")
    return fixes


def _ddp_settings(ddp: DdpStats) -> str:
    """DDP's settings that bear on its communication, in its own argument names."""
    parts = [
        f"backend {ddp.backend or 'unknown'}",
        "bucket_cap_mb="
        + (f"{ddp.bucket_cap_bytes / 2**20:g}" if ddp.bucket_cap_bytes else "unknown"),
        f"comm hook {ddp.comm_hook or 'none'}",
    ]
    for name in ("find_unused_parameters", "static_graph", "gradient_as_bucket_view"):
        value = getattr(ddp, name)
        if value is not None:
            parts.append(f"{name}={value}")
    return ", ".join(parts)


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
                f"'{row.last_phase or '?'}' at {row.last_where or 'an unknown place'}; "
                f"{how}. Rank(s) {waiting} {were} "
                "waiting in their gradient all-reduce (backward), which cannot end without it"
                + (f" ({issued})" if issued and behind is row else "")
                + (f" ({'; '.join(errors)})." if errors else ".")
            ),
            evidence=tuple(evidence),
            speedup=Speedup.none(f"none: the job makes no progress until rank {row.rank} moves on"),
            fix=Fix(
                summary=(
                    f"Look at what rank {row.rank} does at {row.last_where}: every rank must "
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
    group = max(set(groups), key=groups.count)
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
        kinds = {(c.op, c.sizes) for c in seen.values()}
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


def _last_samples(record: RunRecord) -> list[StackSample]:
    """The last ``HANG_SAMPLES`` stack samples of the rank's loop (its own process)."""
    loop = [s for s in record.samples if s.process == 0]
    loop.sort(key=lambda s: s.t_ns)
    return loop[-HANG_SAMPLES:]


def _phase_of(samples: list[StackSample]) -> str:
    """The phase most of ``samples`` were in."""
    counts: dict[str, int] = {}
    for sample in samples:
        counts[sample.phase] = counts.get(sample.phase, 0) + 1
    return max(counts.items(), key=lambda item: item[1])[0]


def _where(path: list[CodeFrame], line: int) -> str:
    """The innermost frame of the job's own code in ``path`` (outermost first), as
    ``function (file:line)``, with the library call it was in."""
    user = [i for i, f in enumerate(path) if f.user]
    if not user:
        return path[-1].function if path else "an unknown place"
    i = user[-1]
    frame = path[i]
    inside = f", in {path[-1].function}" if i < len(path) - 1 else ""
    return f"{frame.function} ({frame.file}:{line or frame.line}){inside}"
