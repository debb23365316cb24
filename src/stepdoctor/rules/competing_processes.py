"""competing-processes: other processes take the CPUs (or the GPU) the job needs.

Detects: CPU used by processes outside the job's process tree while it runs, and other
processes holding memory on the job's GPUs.
Evidence: their share of the machine's CPUs, the top processes.
Fix: stop or move them, or pin the job and them to separate cores.
"""

from __future__ import annotations

import dataclasses

from stepdoctor.model import (
    TOP_OTHERS_MIN_PCT,
    Evidence,
    Finding,
    Fix,
    ProcessUsage,
    Severity,
    Speedup,
    SpeedupKind,
)
from stepdoctor.rules._facts import fact_int
from stepdoctor.rules._gpu import job_gpus
from stepdoctor.rules._severity import at_most, grade
from stepdoctor.rules.context import UNSPLIT_SHARE, RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "CHECKUP_CEILING",
    "CRITICAL_SHARE",
    "LITTLE_TAKEN",
    "NOT_SHORT_IDLE_CORES",
    "OTHERS_GPU_BUSY",
    "OTHERS_GPU_MEMORY",
    "UNNAMED",
    "WARNING_SHARE",
    "busiest_others",
    "competing_processes",
    "loop_wait_share",
    "named",
    "others_share",
]

#: DL4J's guide, step 12 ("other processes using CPU or GPU resources"), gives no number. A
#: quarter of the machine's CPU taken by others for the whole run is what `top` would show as a
#: clear competitor; half the machine is critical.
WARNING_SHARE = 0.25
CRITICAL_SHARE = 0.50
#: Other processes on the job's GPU are worth acting on when they compute (NVML saw the GPU a
#: tenth busy with only them on it: more than an idle context's housekeeping) or hold a
#: quarter of its memory (the job's batch and cache must fit in the rest); else they are noted.
OTHERS_GPU_BUSY = 0.10
#: The doctor's look at the machine lasts about a second: others busy in it may stop before a
#: job starts (a package install), so it warns at most (issue 39: a critical from `doctor`).
CHECKUP_CEILING = Severity.WARNING
#: A job that left this many cores idle on average while the others ran was not short of CPU:
#: its threads would have taken an idle core before sharing one with the others (the kernel
#: balances a job's runnable threads over the cores it may use), so the others took nothing
#: it waited for. A sleeping or GPU-bound job beside a busy process was given "up to 50x".
NOT_SHORT_IDLE_CORES = 1.0
#: Below this bound on a one-thread job's gain (from its loop thread's measured wait for a
#: core) the others took too little from it to act on: its thread was mostly running or
#: waiting on something else (its data, a sleep). A job asleep 30 ms a step beside a busy
#: process was claimed "up to 13x" (its true gain: 1.0-1.07x, a held-out job).
LITTLE_TAKEN = 1.05
OTHERS_GPU_MEMORY = 0.25


@rule(
    id="competing-processes",
    title="Other processes compete for the CPU or GPU",
    requires=("system",),
    scope="env",
)
def competing_processes(ctx: RuleContext) -> list[Finding]:
    """Flag other processes using a quarter of the machine's CPUs, or the job's GPUs."""
    findings = []
    cpu = _cpu(ctx)
    if cpu is not None:
        findings.append(cpu)
    gpu = _gpu(ctx)
    if gpu is not None:
        findings.append(gpu)
    return findings


def busiest_others(ctx: RuleContext) -> list[ProcessUsage]:
    """The five processes outside the job that used the most CPU during its steps, each with
    its mean share of a core over the readings that named processes."""
    best: dict[int, ProcessUsage] = {}
    totals: dict[int, float] = {}
    counts: dict[int, int] = {}
    for sample in ctx.system:
        for proc in sample.top_others:
            totals[proc.pid] = totals.get(proc.pid, 0.0) + proc.cpu_pct
            counts[proc.pid] = counts.get(proc.pid, 0) + 1
            best[proc.pid] = proc
    readings = sum(1 for s in ctx.system if s.top_others) or 1
    ranked = [dataclasses.replace(best[pid], cpu_pct=totals[pid] / readings) for pid in totals]
    return sorted(ranked, key=lambda p: -p.cpu_pct)[:5]


def named(processes: list[ProcessUsage]) -> str:
    """``name (pid N, X% of a core): its command line`` for each, in order, ``;`` between
    (a command line has commas of its own)."""
    return "; ".join(
        f"{p.name} (pid {p.pid}, {p.cpu_pct:.0f}% of a core)"
        + (f": {p.command}" if p.command else "")
        for p in processes
    )


#: What the report says where no other process is named.
UNNAMED = (
    f"none named: no single process outside the job used {TOP_OTHERS_MIN_PCT:g}% of a core "
    "or more between two listings of every process (at the start, at the end and every few "
    "seconds between): many small ones, or short-lived ones that began and ended between "
    "two listings"
)


def others_share(ctx: RuleContext) -> float | None:
    """The share of the machine's CPUs processes outside the job used during its steps, on
    average (None: not read)."""
    others = [s.other_cpu_pct for s in ctx.system if s.other_cpu_pct is not None]
    if not others:
        return None
    return sum(others) / len(others) / (100.0 * (ctx.record.meta.cpu_count or ctx.cores))


def _cpu(ctx: RuleContext) -> Finding | None:
    jobs = [s.job_cpu_pct for s in ctx.system if s.job_cpu_pct is not None]
    share = others_share(ctx)
    if share is None or not jobs:
        return None
    capacity = 100.0 * (ctx.record.meta.cpu_count or ctx.cores)
    other = share * capacity
    job = sum(jobs) / len(jobs)
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return None
    top = busiest_others(ctx)
    names = named(top) or UNNAMED
    busy = [
        s.t_ns
        for s in ctx.system
        if s.other_cpu_pct is not None and s.other_cpu_pct / capacity >= WARNING_SHARE
    ]
    if ctx.checkup:  # no job ran: the doctor's own CPU is no job's to model a gain from
        # its length where it took more than one reading (the doctor's one reading closes
        # a window that opened before it)
        seconds = (ctx.system[-1].t_ns - ctx.system[0].t_ns) / 1e9 if ctx.system else 0.0
        look = f" ({seconds:.1f} s)" if seconds > 0 else ""
        severity = at_most(rung.severity, CHECKUP_CEILING)
        speedup = Speedup.none(
            "not modelled: no job ran; `stepdoctor run` measures what they take from yours"
        )
        explanation = (
            f"In stepdoctor's look at the machine{look}, processes other than it "
            f"used {other / 100:.1f} of the {capacity / 100:.0f} CPUs on average. Top: "
            f"{names}. A look this short cannot tell whether they keep running while a job "
            "does (a warning at most): `stepdoctor run` your job to see."
        )
    else:
        severity = rung.severity
        speedup = _job_speedup(ctx, capacity, job, other)
        explanation = (
            f"While the job ran, processes outside it used {other / 100:.1f} of the "
            f"{capacity / 100:.0f} CPUs on average, and the job itself {job / 100:.1f}. "
            f"Top: {names}."
        )
        idle = capacity - job - other
        waited = loop_wait_share(ctx) if _one_thread(ctx) else None
        if waited is not None and speedup.kind is not SpeedupKind.NONE:
            bound = 1.0 / (1.0 - min(waited, UNSPLIT_SHARE))
            if bound < speedup.factor:
                speedup = Speedup(
                    factor=bound,
                    basis=f"1 / (1 - {waited:.2f}): the job's loop thread waited for a core "
                    f"{waited:.0%} of the time (the model of the CPU it could use, "
                    f"{speedup.factor:.2f}x, is more than that wait allows)",
                )
        if waited is not None and speedup.factor < LITTLE_TAKEN:
            severity = Severity.INFO
            explanation += (
                f" The job's loop thread waited for a core only {waited:.0%} of the time: "
                "they took little from it (it was running, or waiting on something else)."
            )
        elif idle >= 100.0 * NOT_SHORT_IDLE_CORES and ctx.cores >= capacity / 100.0:
            severity = Severity.INFO
            speedup = Speedup.none(
                f"not modelled: {idle / 100:.1f} CPUs stayed idle that the job did not use: "
                "it was not short of CPU"
            )
            explanation += (
                f" The machine still had {idle / 100:.1f} CPUs idle on average, which the job "
                "did not use: it was not short of CPU, so the others took nothing it waited "
                "for (they would if it used more cores: worth knowing before adding threads "
                "or workers)."
            )
    return Finding(
        rule="competing-processes",
        span_ns=(busy[0], busy[-1]) if busy else None,
        severity=severity,
        title=f"Other processes use {share:.0%} of the CPUs",
        explanation=explanation,
        evidence=(
            Evidence(
                metric="other processes' share of CPU",
                value=round(share, 4),
                unit="share",
                threshold=WARNING_SHARE,
                source="psutil",
            ),
            *(
                ()
                if ctx.checkup  # the doctor's own CPU, not a job's
                else (
                    Evidence(
                        metric="job CPU",
                        value=round(job / 100, 2),
                        unit="cores",
                        source="psutil (process tree)",
                    ),
                )
            ),
            Evidence(metric="top other processes", value=names, source="psutil"),
        ),
        speedup=speedup,
        fix=Fix(
            summary=(
                "Stop or reschedule the competing processes, or lower their priority (renice, "
                "if they still run: the pids are from this run; another user's needs sudo), "
                "or give the job cores of its own (taskset/numactl, container CPU limits) and "
                "size torch.set_num_threads and num_workers to them."
            ),
            snippet=_renice(top),
        ),
    )


def loop_wait_share(ctx: RuleContext) -> float | None:
    """The share of the measured steps' time the job's loop thread spent runnable but waiting
    for a core (its run delay, ``SystemSample.main_run_delay_s``), or None where unread."""
    read = [(s.t_ns, s.main_run_delay_s) for s in ctx.system if s.main_run_delay_s is not None]
    if len(read) < 2 or read[-1][0] <= read[0][0]:
        return None
    (t0, d0), (t1, d1) = read[0], read[-1]
    assert d0 is not None
    assert d1 is not None
    return max(0.0, min(1.0, (d1 - d0) / ((t1 - t0) / 1e9)))


def _one_thread(ctx: RuleContext) -> bool:
    """Whether the job computes on its loop thread alone (torch set to one thread, no loader
    workers): its loop thread's wait for a core is then the whole of what the others take.
    With more threads the loop thread also blocks, not runnable, on a pool thread the others
    pushed off its core, and its own wait tells less."""
    workers = max((lo.num_workers for lo in ctx.record.loaders), default=0)
    return fact_int(ctx.record, "torch.num_threads") == 1 and workers == 0


def _job_speedup(ctx: RuleContext, capacity: float, job: float, other: float) -> Speedup:
    """The job's gain from the CPU the others take. The job cannot use more cores than it
    runs threads for: torch's intra-op threads and its DataLoader workers (a one-thread job
    gains one core at most, whatever the others)."""
    threads = fact_int(ctx.record, "torch.num_threads")
    workers = max((lo.num_workers for lo in ctx.record.loaders), default=0)
    wanted = capacity if threads is None else min(capacity, 100.0 * (threads + workers))
    usable = min(capacity, wanted, job + other)
    factor = usable / job if job > 0 else 1.0
    return Speedup(
        factor=max(1.0, factor),
        basis="the job could use the CPU the others take, up to a core per thread it runs: "
        "min(CPUs, torch threads + loader workers, job + others) / job"
        if threads is not None
        else "the job could use the CPU the others take: min(CPUs, job + others) / job "
        "(its threads' count not known)",
    )


def _renice(top: list[ProcessUsage]) -> str:
    """The command that gives the busiest other processes the lowest CPU priority, by their
    pids (any machine: no core numbers that may not exist here)."""
    pids = " ".join(str(p.pid) for p in top if p.pid > 0)
    if not pids:
        return "top -o %CPU   # find the busiest processes, then: renice -n 19 -p PID..."
    return f"renice -n 19 -p {pids}   # the busiest other processes: lowest CPU priority"


def _gpu(ctx: RuleContext) -> Finding | None:
    """Processes outside the job on its GPUs: a warning where NVML saw them compute (the GPU
    busy at a reading that listed them but none of the job's processes) or hold a quarter of
    its memory; else info (holding some memory while idle costs the job nothing)."""
    foreign: dict[tuple[int, int], tuple[str, int | None]] = {}
    mine = job_gpus(ctx.record)
    alone: list[float] = []
    held: dict[int, float] = {}
    for sample in ctx.record.gpu:
        if sample.index not in mine:
            continue
        others = [p for p in sample.processes if not p.is_job]
        if not any(p.is_job for p in sample.processes):
            if others and sample.util_pct is not None:
                alone.append(sample.util_pct / 100)
            continue
        for proc in others:
            foreign[(sample.index, proc.pid)] = (proc.name, proc.mem_bytes)
        if others and sample.mem_total_bytes:
            share = sum(p.mem_bytes or 0 for p in others) / sample.mem_total_bytes
            held[sample.index] = max(held.get(sample.index, 0.0), share)
    if not foreign:
        return None
    names = ", ".join(
        f"{name} (pid {pid} on GPU {index}" + (f", {mem / 2**20:.0f} MiB)" if mem else ")")
        for (index, pid), (name, mem) in sorted(foreign.items())
    )
    busy = max(alone, default=0.0)
    memory = max(held.values(), default=0.0)
    loud = busy >= OTHERS_GPU_BUSY or memory >= OTHERS_GPU_MEMORY
    if busy >= OTHERS_GPU_BUSY:
        seen = f"NVML saw the GPU {busy:.0%} busy while only they were on it."
    elif alone:
        seen = "NVML saw the GPU idle while only they were on it."
    else:
        seen = "NVML never read the GPU with them alone on it, so whether they compute is unknown."
    return Finding(
        rule="competing-processes",
        severity=Severity.WARNING if loud else Severity.INFO,
        title="Other processes share the job's GPU",
        explanation=(
            f"Processes outside the job are on the job's GPU: {names}; they hold up to "
            f"{memory:.0%} of its memory. {seen}"
        ),
        evidence=(
            Evidence(metric="other GPU processes", value=names, source="NVML"),
            Evidence(
                metric="GPU memory they hold",
                value=round(memory, 4),
                unit="share",
                threshold=OTHERS_GPU_MEMORY,
                source="NVML process list",
            ),
            Evidence(
                metric="GPU busy with only them on it",
                value=round(busy, 4) if alone else None,
                unit="share",
                threshold=OTHERS_GPU_BUSY,
                source="NVML utilisation",
            ),
        ),
        speedup=Speedup.none("not estimated: NVML gives no per-process utilisation here"),
        fix=Fix(
            summary="Give the job a GPU of its own (CUDA_VISIBLE_DEVICES) or stop the "
            "other processes."
        ),
    )
