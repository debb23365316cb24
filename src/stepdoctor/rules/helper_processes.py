"""helper-processes: processes the job started itself take the CPUs its training needs.

Detects: CPU used by the job's own child processes that are not DataLoader workers
(``multiprocessing`` pools, subprocesses, servers the script starts) while the machine's CPUs
are saturated, so the training process gets less than its threads ask for. Other people's
processes are competing-processes'; DataLoader workers are the input pipeline's.
Evidence: the helpers by pid and name with their CPU, their share of the CPUs, the training
process's own CPU against what its threads could use, and the step time while the helpers
were busy against while they were idle (when the run had both).
Fix: stop them while training, or give them and the training threads cores that add up.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import statistics
from collections.abc import Sequence

from stepdoctor.model import Evidence, Finding, Fix, ProcessUsage, Speedup, SystemSample
from stepdoctor.rules._facts import fact_int
from stepdoctor.rules._severity import grade
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = [
    "BUSY_PCT",
    "CRITICAL_SHARE",
    "MIN_STEPS_EACH",
    "SATURATED",
    "SCAN_NS",
    "WARNING_SHARE",
    "Contention",
    "contention",
    "helper_processes",
]

#: Of the CPU the job's processes got (training process and helpers) while the CPUs were
#: saturated, the helpers' share from which the rule warns, and is critical: competing-
#: processes' quarter and half (DL4J's guide, step 12, gives no number), taken of the job's
#: own CPU: what the training lost does not shrink when someone else's load also runs.
WARNING_SHARE = 0.25
CRITICAL_SHARE = 0.50
#: The CPUs count as contended when the machine is this busy on average while the helpers run
#: (job, helpers and others together): below it the helpers take nothing the training could
#: have used, and nothing is reported.
SATURATED = 0.85
#: A helper reading counts as busy from this CPU (% of one core): a quarter of a core, the
#: least that `top` shows as a process at work rather than waiting.
BUSY_PCT = 25.0
#: How often the children's CPU is read (``collect.sampling.readers.SCAN_EVERY_NS``): the time
#: a lone reading covers.
SCAN_NS = 2_000_000_000
#: Steps needed on each side (helpers busy, helpers idle) before the step times of the two
#: are compared as the measured effect; fewer, and the speed-up is modelled from CPU shares.
MIN_STEPS_EACH = 5


@dataclasses.dataclass(frozen=True, slots=True)
class Contention:
    """The job's own helper processes taking its CPUs (this rule's condition): their share of
    the job's CPU, the CPUs' busy share while they ran, and the spans (``(start_ns, end_ns)``,
    one per ``SCAN_NS`` reading) in which they were busy."""

    share: float
    machine: float
    busy_spans: tuple[tuple[int, int], ...]
    readings: tuple[SystemSample, ...]
    pcts: tuple[float, ...]
    gap_ns: float
    helpers: tuple[tuple[ProcessUsage, ...], ...]
    helper_cores: float
    main_cores: float
    busy_ns: float


def contention(ctx: RuleContext) -> Contention | None:
    """The job's helper processes taking a warning share of its CPU on saturated CPUs, or
    None: the other rules' step-time evidence is then partly theirs."""
    workers = {w.pid for w in ctx.record.loader_workers}
    readings = [s for s in ctx.system if s.job_children]
    if not readings or not ctx.steps:
        return None
    gaps = [b.t_ns - a.t_ns for a, b in itertools.pairwise(readings)]
    gap_ns = statistics.median(gaps) if gaps else SCAN_NS
    helpers = [_helpers(s, workers) for s in readings]
    span_ns = ctx.steps[-1].end_ns - ctx.steps[0].start_ns
    if span_ns <= 0 or gap_ns <= 0:
        return None
    pcts = [sum(p.cpu_pct for p in h) for h in helpers]  # the helpers' CPU at each reading
    busy_ns = sum(gap_ns for pct in pcts if pct >= BUSY_PCT)
    helper_core_s = sum(pct / 100 * gap_ns / 1e9 for pct in pcts)
    during = [s for s, pct in zip(readings, pcts, strict=True) if pct]
    if busy_ns == 0 or not during:
        return None
    main = _main_cores(during)
    helper_cores = helper_core_s / (span_ns / 1e9)
    share = helper_cores / (helper_cores + main) if helper_cores + main > 0 else 0.0
    if share < WARNING_SHARE:
        return None
    capacity = float(ctx.record.meta.cpu_count or ctx.cores)
    machine = _machine_busy(ctx.system, during, capacity)
    if machine is None or machine < SATURATED:
        return None
    return Contention(
        share=share,
        machine=machine,
        busy_spans=tuple(
            (int(s.t_ns - gap_ns), s.t_ns)
            for s, pct in zip(readings, pcts, strict=True)
            if pct >= BUSY_PCT
        ),
        readings=tuple(readings),
        pcts=tuple(pcts),
        gap_ns=gap_ns,
        helpers=tuple(tuple(h) for h in helpers),
        helper_cores=helper_cores,
        main_cores=main,
        busy_ns=busy_ns,
    )


@rule(
    id="helper-processes",
    title="Processes the job started compete with its training for the CPUs",
    requires=("steps", "system"),
)
def helper_processes(ctx: RuleContext) -> list[Finding]:
    """Flag the job's own non-worker child processes taking a quarter of the CPUs or more."""
    found = contention(ctx)
    if found is None:
        return []
    rung = grade(found.share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    share, machine, main = found.share, found.machine, found.main_cores
    helper_cores, busy_ns, helpers = found.helper_cores, found.busy_ns, found.helpers
    readings, pcts, gap_ns = found.readings, found.pcts, found.gap_ns
    span_ns = ctx.steps[-1].end_ns - ctx.steps[0].start_ns
    capacity = float(ctx.record.meta.cpu_count or ctx.cores)
    threads = fact_int(ctx.record, "torch.num_threads") or ctx.cores
    wanted = float(min(ctx.cores, threads))
    effect = _step_effect(ctx, readings, pcts, gap_ns)
    if effect is not None:
        speedup = Speedup.measured(
            max(1.0, effect),
            "median step time while the helpers were busy / while they were idle",
        )
    else:
        factor = min(wanted, main + helper_cores) / main if main > 0 else 1.0
        speedup = Speedup(
            factor=max(1.0, factor),
            basis="the cores the training's threads could use (min(cores, torch threads), "
            "at most its CPU plus the helpers') / the CPU it got",
        )
    top = _ranked(helpers)
    names = ", ".join(f"{p.name or 'process'} (pid {p.pid}, {p.cpu_pct:.0f}%)" for p in top[:5])
    ran = min(1.0, busy_ns / span_ns)
    return [
        Finding(
            rule="helper-processes",
            span_ns=(ctx.steps[0].start_ns, ctx.steps[-1].end_ns),
            severity=rung.severity,
            title=(f"Processes your job started take {share:.0%} of its CPU from its training"),
            explanation=(
                f"Child processes that your script started (not DataLoader workers) used "
                f"{helper_cores:.1f} of the {capacity:.0f} CPUs over the training, busy "
                f"{ran:.0%} of the time: {names}. The CPUs were {machine:.0%} busy, so your "
                f"training process got {main:.1f} cores where its {threads} thread(s) could "
                f"use {wanted:.0f}."
                + (
                    f" Steps took {effect:.2f}x as long while they were busy."
                    if effect is not None
                    else ""
                )
            ),
            evidence=(
                Evidence(
                    metric="your helper processes' share of the job's CPU",
                    value=round(share, 4),
                    unit="share",
                    threshold=WARNING_SHARE,
                    source="/proc (the job's child processes, DataLoader workers left out)",
                ),
                Evidence(metric="helper processes", value=names, source="/proc"),
                Evidence(
                    metric="CPUs busy while they ran",
                    value=round(machine, 3),
                    unit="share",
                    threshold=SATURATED,
                    source="/proc/stat",
                ),
                Evidence(
                    metric="training process CPU",
                    value=round(main, 2),
                    unit="cores",
                    source="/proc",
                ),
                Evidence(metric="torch intra-op threads", value=threads, source="torch"),
            ),
            speedup=speedup,
            fix=Fix(
                summary=(
                    "Stop the processes your script starts while it trains, or run their work "
                    "before or after training. If the training needs them (they produce its "
                    "data), make their cores and the training's threads add up to the "
                    f"machine's {ctx.cores}: fewer helper processes, or "
                    "torch.set_num_threads(cores - helpers), or lower their priority "
                    "(os.nice(10) at the start of each helper)."
                ),
                snippet=(
                    "pool = multiprocessing.Pool(processes=1, initializer=os.nice, initargs=(10,))"
                ),
            ),
        )
    ]


def _helpers(sample: SystemSample, workers: set[int]) -> list[ProcessUsage]:
    return [p for p in sample.job_children if p.pid not in workers]


def _ranked(helpers: Sequence[Sequence[ProcessUsage]]) -> list[ProcessUsage]:
    """Each helper with its mean CPU over the readings that saw it, busiest first."""
    seen: dict[int, list[ProcessUsage]] = {}
    for reading in helpers:
        for p in reading:
            seen.setdefault(p.pid, []).append(p)
    ranked = [
        ProcessUsage(pid=pid, name=got[-1].name, cpu_pct=statistics.fmean(p.cpu_pct for p in got))
        for pid, got in seen.items()
    ]
    return sorted(ranked, key=lambda p: -p.cpu_pct)


def _machine_busy(
    system: Sequence[SystemSample], during: Sequence[SystemSample], capacity: float
) -> float | None:
    """The CPUs' mean busy share over the samples from the first to the last reading in
    ``during`` (the 10 Hz samples between the 2 s readings included)."""
    if not during:
        return None
    start, end = during[0].t_ns, during[-1].t_ns
    busy = [
        sum(s.cpu_pct_per_core) / 100 / capacity
        for s in system
        if s.cpu_pct_per_core and start <= s.t_ns <= end
    ]
    return statistics.fmean(busy) if busy else None


def _main_cores(during: Sequence[SystemSample]) -> float:
    """The training process's own CPU (the job's less its children's), in cores."""
    mains = [
        (s.job_cpu_pct - s.children_cpu_pct) / 100
        for s in during
        if s.job_cpu_pct is not None and s.children_cpu_pct is not None
    ]
    return statistics.fmean(mains) if mains else 0.0


def _step_effect(
    ctx: RuleContext,
    readings: Sequence[SystemSample],
    pcts: Sequence[float],
    gap_ns: float,
) -> float | None:
    """Median step time while the helpers were busy over while they were idle, when the run
    had ``MIN_STEPS_EACH`` steps of each (a reading covers the ``gap_ns`` before it;
    ``pcts``: the helpers' CPU at each reading)."""
    busy: list[int] = []
    idle: list[int] = []
    ends = [s.t_ns for s in readings]
    is_busy = [pct >= BUSY_PCT for pct in pcts]
    for step in ctx.steps:
        i = bisect.bisect_left(ends, step.end_ns)  # the first reading at or after the step
        if i < len(ends) and ends[i] - gap_ns <= step.end_ns:
            (busy if is_busy[i] else idle).append(step.duration_ns)
    if len(busy) < MIN_STEPS_EACH or len(idle) < MIN_STEPS_EACH:
        return None
    return statistics.median(busy) / max(1.0, statistics.median(idle))
