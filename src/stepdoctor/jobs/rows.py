"""A distributed job's ranks read one by one into rows (the map of ``stepdoctor.jobs``): a
rank's steps, phases, DDP's timings, clocks, other processes, how it ended, its last stack
samples and collectives; on a process pool, serially, or on a Dask cluster."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stepdoctor.collect.sampling.nvml import IDLE, THROTTLING, clock_reasons
from stepdoctor.errors import MissingExtraError, RecordError
from stepdoctor.model import CodeFrame, RankRow, Report, RunRecord, StackSample
from stepdoctor.probes.ranks import rank_dirs, rank_of_dir
from stepdoctor.record import load_run
from stepdoctor.report import build_report
from stepdoctor.rules import RuleContext
from stepdoctor.rules.competing_processes import busiest_others, named, others_share

__all__ = [
    "BUSY_GPU_PCT",
    "HANG_SAMPLES",
    "RankRow",
    "rank_row",
    "rank_rows",
    "summarise_job",
    "summarise_rank",
]

#: A GPU reading counts for its clock from this utilisation: below it, the GPU lowers its
#: clock for want of work, not for heat or power.
BUSY_GPU_PCT = 50.0
#: The fewest stack samples of a rank's loop read to say where it stopped (at 50 Hz: 0.2 s):
#: those since its last step, or its last ones.
HANG_SAMPLES = 10


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
    phase = _phase_of(last) if last else ""
    last = [s for s in last if s.phase == phase]  # where it stayed, not where it ended
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
        last_phase=phase,
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
    # a GPU that idles lowers its clock of its own accord: only busy readings count
    clocked = [
        g
        for g in gpus
        if g.index in mine
        and g.sm_clock_mhz
        and g.max_sm_clock_mhz
        and (g.util_pct or 0.0) >= BUSY_GPU_PCT
        and not (g.clock_reasons or 0) & IDLE
    ]
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


def summarise_rank(folder: Path) -> tuple[RankRow, Report] | str:
    """The map step: one rank's folder read into its row and its report (a str: why it could
    not be read)."""
    try:
        record = load_run(folder)
    except (RecordError, OSError) as exc:
        return f"{folder.name}: its record could not be read ({exc})"
    rank = record.meta.rank if record.meta.rank is not None else rank_of_dir(folder)
    if rank is None:
        return f"{folder.name}: not a rank's folder"
    report = build_report(record)
    return rank_row(rank, record, report), report


def summarise_job(
    job: Path, *, executor: str = "process", scheduler: str | None = None
) -> tuple[list[RankRow], dict[int, Report], list[str]]:
    """Every rank's row and report of a job's folder (``rank-N`` folders), and a line for each
    rank whose record could not be read. The map runs on ``executor``: ``process`` (a process
    pool, one process per core at most), ``serial``, or ``dask`` (a Dask cluster: the scheduler
    at ``scheduler``, or a local one; the ``[dask]`` extra).

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
    read = sorted((r for r in results if not isinstance(r, str)), key=lambda r: r[0].rank)
    return (
        [row for row, _ in read],
        {row.rank: report for row, report in read},
        [r for r in results if isinstance(r, str)],
    )


def _on_dask(folders: list[Path], scheduler: str | None) -> list[tuple[RankRow, Report] | str]:
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


def _last_samples(record: RunRecord) -> list[StackSample]:
    """The stack samples of the rank's loop (its own process) since its last step ended:
    where it stayed while the others waited (a timeout's error and the rank's own shutdown
    are its last fraction of a second); its last ``HANG_SAMPLES`` when fewer."""
    loop = [s for s in record.samples if s.process == 0]
    loop.sort(key=lambda s: s.t_ns)
    end = record.steps[-1].end_ns if record.steps else None
    since = [s for s in loop if end is not None and s.t_ns > end]
    return since if len(since) >= HANG_SAMPLES else loop[-HANG_SAMPLES:]


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
