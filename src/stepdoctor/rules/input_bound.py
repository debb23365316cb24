"""input-bound: the training loop waits for data.

Detects: the share of step time blocked in the DataLoader's ``__next__`` (``data_wait``).
Evidence: that share, the mean wait per step, the loader's settings, the cores, the cost of
preparing one sample, and what the loader did while the loop waited: the loop's thread's CPU
(loading in the main process) or the workers' CPU per worker.
Fix, by cause (``CAUSES``): per-sample indexing of in-memory tensors -> index whole batches;
CPU work per sample (decoding, parsing, augmenting) -> prepare once and cache, vectorise,
workers only on spare cores; waiting on storage or the network (the loader idle) -> workers and
prefetching (waiting needs no core), faster storage.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence

from stepdoctor.model import (
    GENERATOR_MADE,
    GENERATOR_WAIT,
    PIPELINE_WAIT,
    PRODUCER_PHASE,
    PYDATASET_MADE,
    WORKER_PHASE,
    Evidence,
    Finding,
    Fix,
    LoaderInfo,
    Phase,
    Severity,
    Speedup,
    StepTiming,
)
from stepdoctor.rules._facts import fact_int, tensorflow_loop
from stepdoctor.rules._severity import Rung, grade
from stepdoctor.rules.competing_processes import WARNING_SHARE as COMPETING_SHARE
from stepdoctor.rules.competing_processes import others_share
from stepdoctor.rules.context import RuleContext, removal_speedup, speedup_if_removed
from stepdoctor.rules.registry import rule
from stepdoctor.rules.thread_oversubscription import (
    OVERSUBSCRIBED,
    ComputeThreads,
    compute_threads,
    workers_idle,
)

__all__ = [
    "CAUSES",
    "CHEAP_SAMPLE_MS",
    "CHEAP_WARNING_SHARE",
    "CPU_BOUND",
    "CRITICAL_SHARE",
    "HEAVY_SAMPLE_MS",
    "IN_MEMORY_DATASETS",
    "IO_BOUND",
    "WARNING_SHARE",
    "input_bound",
]

#: XProf (TensorFlow profiler) grades a step input-bound from 5% of step time spent waiting
#: for input ("moderately") and from 20% ("highly").
WARNING_SHARE = 0.05
CRITICAL_SHARE = 0.20
#: Preparing one sample taking over 1 ms of CPU is worth caching: at batch 64 that is 64 ms of
#: CPU per batch, more than a small model's whole step (DL4J benchmarks guide: pre-save
#: processed data sets instead of re-doing the ETL every epoch).
HEAVY_SAMPLE_MS = 1.0
#: Fetching one sample in the main process in under 20 us is the DataLoader's own per-sample
#: Python work (index one sample, then collate the list), not the data: measured here, a
#: TensorDataset of 64 floats a sample takes 4 us a sample (examples/train_digits.py), and
#: the zoo's decoding data set 500 us. Workers do not help there (on 2 cores one worker
#: made make demo's job 0.41x as fast; `stepdoctor tune`): indexing whole batches does.
CHEAP_SAMPLE_MS = 0.02
#: That per-sample work of in-memory data is a warning from 10% of step time (info from 5%):
#: measured in the zoo, a 1.3M-parameter MLP at batch 64 fetching from a TensorDataset waits
#: 3-6% of its step (tests/scenarios/healthy_mlp.py, healthy_checkpoint.py), moving across
#: XProf's 5% line with the machine's load, and indexing whole batches saves at most that
#: share; jobs whose steps are small beside it (make demo: 20%) are the ones worth a change.
CHEAP_WARNING_SHARE = 0.10
#: Data sets whose samples are rows of tensors already in memory: fetched one by one in the
#: main process, their wait is the loader's own per-sample work whatever the machine's speed.
IN_MEMORY_DATASETS = frozenset({"TensorDataset"})
#: What the loader did while the loop waited, from the CPU it used then (``_cause``): at or
#: above ``CPU_BOUND`` of the wait on a CPU, the wait is the samples' preparation; under
#: ``IO_BOUND`` the loader sat idle, waiting on storage or the network. A thread preparing
#: samples runs at ~100% of a core; one blocked in a read or a sleep near 0%; between the two
#: the causes mix (or other load took the core), and the fix is the general one.
CPU_BOUND = 0.6
IO_BOUND = 0.3
#: The loop's compute rate is read from the intervals between CPU readings (10 Hz) with at
#: most this share of data wait, once there are this many of them (1 s of them).
QUIET_WAIT_SHARE = 0.05
MIN_QUIET_INTERVALS = 10
#: Below this share of a core between waits the loop's thread was starved: its CPU in the
#: waits tells nothing.
MIN_COMPUTE_RATE = 0.1
#: Workers idle (``workers_idle``: waiting for their next indices) in this share of their
#: samples or more have time to spare, so the loop's wait is neither preparing samples nor
#: reading them but each batch's hand-off between processes. Measured on a job of one worker
#: at 12 us a sample (tests/scenarios/healthy_idle_workers.py with one worker): idle
#: in 90-93% of its samples, while the loop waited 3% of its step on a quiet machine and 6-8%
#: with another process on one of the two cores (the worker answers a socket for each batch's
#: shared memory, later when it waits for a core).
WORKERS_IDLE_SHARE = 0.5
#: The causes ``_cause`` tells apart.
CAUSES = ("indexing", "handoff", "cpu", "io", "unknown")


@rule(id="input-bound", title="Training waits for data", where=("data_wait", WORKER_PHASE))
def input_bound(ctx: RuleContext) -> list[Finding]:
    """Flag a data-wait share at or above XProf's 5% band: timed around the loader's
    ``__next__``, or inside a compiled step's call (``_fused``)."""
    share = ctx.share(Phase.DATA_WAIT)
    if share < WARNING_SHARE:
        return _fused(ctx)
    steps = ctx.steps
    wait_ms = sum(s.phase(Phase.DATA_WAIT) for s in steps) / len(steps) / 1e6
    loader = ctx.record.loaders[-1] if ctx.record.loaders else None
    workers = loader.num_workers if loader else None
    cores = ctx.cores
    samples = ctx.summary.samples
    # a hand-written TensorFlow loop's batches are made on tf.data's own threads: the loop's
    # thread blocks in the iterator's next, its CPU says nothing of the making
    pipeline = tensorflow_loop(ctx.record)
    per_sample_ms, how = (None, "") if pipeline else _per_sample_ms(ctx, workers)
    in_memory = loader is not None and loader.dataset_type in IN_MEMORY_DATASETS
    cheap = not workers and (
        in_memory or (per_sample_ms is not None and per_sample_ms < CHEAP_SAMPLE_MS)
    )
    idle = workers_idle(ctx) if workers else None
    handoff = idle is not None and idle >= WORKERS_IDLE_SHARE
    rung = (
        grade(share, info=WARNING_SHARE, warning=CHEAP_WARNING_SHARE, critical=CRITICAL_SHARE)
        if cheap or handoff
        else grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    )
    if rung is None:
        return []
    crowded = compute_threads(ctx) if handoff else None
    if crowded is not None and crowded.per_core >= OVERSUBSCRIBED:
        # the hand-off waits for a worker that waits for a core behind the job's own threads:
        # a symptom of thread-oversubscription, told there
        rung = Rung(severity=Severity.INFO, threshold=WARNING_SHARE)
    if cheap:
        cause, busy, busy_how = "indexing", None, ""
    elif pipeline:
        cause, busy, busy_how = "unknown", None, ""
    elif handoff:
        cause, busy, busy_how = "handoff", idle, "DataLoader workers' stack samples"
    else:
        cause, busy, busy_how = _cause(ctx, workers)
    evidence = [
        Evidence(
            metric="data_wait share of step time",
            value=round(share, 4),
            unit="share",
            threshold=WARNING_SHARE,
            source="step phases",
        ),
        Evidence(
            metric="mean data wait per step",
            value=round(wait_ms, 2),
            unit="ms",
            source="step phases",
        ),
        Evidence(
            metric="cores available", value=cores, unit="cores", source="os.sched_getaffinity"
        ),
    ]
    if loader is not None:
        evidence += [
            Evidence(
                metric="DataLoader num_workers", value=loader.num_workers, source="DataLoader"
            ),
            Evidence(
                metric="DataLoader pin_memory", value=str(loader.pin_memory), source="DataLoader"
            ),
            Evidence(
                metric="DataLoader prefetch_factor",
                value=loader.prefetch_factor,
                source="DataLoader",
            ),
            Evidence(
                metric="DataLoader persistent_workers",
                value=str(loader.persistent_workers),
                source="DataLoader",
            ),
        ]
    if per_sample_ms is not None:
        evidence.append(
            Evidence(
                metric="time to prepare one sample",
                value=round(per_sample_ms, 3),
                unit="ms",
                source=how,
            )
        )
    if busy is not None:
        evidence.append(
            Evidence(
                metric="loader on a CPU while the loop waited",
                value=round(busy, 3),
                unit="share",
                threshold=CPU_BOUND if cause == "cpu" else IO_BOUND,
                source=busy_how,
            )
            if cause != "handoff"
            else Evidence(
                metric="workers idle, waiting for their next indices",
                value=round(busy, 3),
                unit="share",
                threshold=WORKERS_IDLE_SHARE,
                source=busy_how,
            )
        )
    if loader is not None and loader.getitem_at:
        evidence.append(
            Evidence(
                metric="samples prepared in",
                value=f"{loader.dataset_type}.__getitem__ ({loader.getitem_at})",
                source="DataLoader",
            )
        )
    if loader is not None and loader.collate_fn:
        evidence.append(
            Evidence(metric="batches put together in", value=loader.collate_fn, source="DataLoader")
        )
    heavy = per_sample_ms is not None and per_sample_ms >= HEAVY_SAMPLE_MS
    threads = fact_int(ctx.record, "torch.num_threads") or cores
    return [
        Finding(
            rule="input-bound",
            severity=rung.severity,
            title=f"Training waits for data {share:.0%} of the time",
            explanation=(
                f"Each step spends {wait_ms:.1f} ms on average blocked waiting for the next "
                f"batch ({share:.0%} of step time; the TensorFlow profiler calls a job input "
                "bound from 5% and highly input bound from 20%). The model sits idle while the "
                "batch is prepared" + (f" ({samples} samples measured)." if samples else ".")
            ),
            evidence=tuple(evidence),
            speedup=_speedup(ctx, share, cause),
            fix=(
                _handoff_fix(ctx, busy or 0.0, per_sample_ms, wait_ms, loader, crowded=crowded)
                if cause == "handoff"
                else _cure(
                    cause,
                    busy,
                    per_sample_ms,
                    loader=loader,
                    cores=cores,
                    threads=threads,
                    heavy=heavy,
                )
            ),
        )
    ]


def _fused(ctx: RuleContext) -> list[Finding]:
    """Steps that fetch their batch inside a compiled call (``train_step``: Keras on
    TensorFlow), from a producer on a thread of its own (``PRODUCER_PHASE``: a generator, a
    tf.data pipeline), graded by how long each call waited for its batch: XProf's bands, as
    a timed data wait."""
    hooks = {h.name: h for h in ctx.record.hooks if h.phase == PRODUCER_PHASE and h.calls}
    waited = hooks.get(GENERATOR_WAIT) or hooks.get(PIPELINE_WAIT)
    made = hooks.get(GENERATOR_MADE) or hooks.get(PYDATASET_MADE)
    # the waits leave the first call out (it traces the step's graph): so does their total
    total_ns = sum(s.duration_ns for s in ctx.record.steps[1:])
    if waited is None or not total_ns or ctx.share(Phase.TRAIN_STEP) <= 0:
        return []
    share = waited.total_ns / total_ns
    rung = grade(share, warning=WARNING_SHARE, critical=CRITICAL_SHARE)
    if rung is None:
        return []
    wait_ms = waited.total_ns / waited.calls / 1e6
    evidence = [
        Evidence(
            metric="share of step time waiting for the batch",
            value=round(share, 4),
            unit="share",
            threshold=rung.threshold,
            source="XProf's bands for a step waiting on input",
        ),
        Evidence(metric="mean wait per call", value=round(wait_ms, 3), unit="ms",
                 source=f"{waited.calls} calls"),
    ]  # fmt: skip
    if made is not None:
        made_ms = made.total_ns / made.calls / 1e6
        evidence.append(
            Evidence(metric="time to make a batch", value=round(made_ms, 3), unit="ms",
                     source=f"{made.calls} batches")
        )  # fmt: skip
        explanation = (
            f"Each call of the compiled train step waited {wait_ms:.2f} ms on average for "
            f"its batch, which the input pipeline took {made_ms:.2f} ms to make on a "
            "thread of its own: prefetching hides only the making that is shorter than "
            "the step's compute. The wait is inside the step's call (the batch is fetched "
            "in the graph): timed from when the call began to when its batch was made."
        )
    else:
        explanation = (
            f"Each call of the compiled train step waited {wait_ms:.2f} ms on average for "
            "its batch from the tf.data pipeline: the pipeline makes batches more slowly "
            "than the step computes them. The wait is inside the step's call (the batch is "
            "fetched in the graph): timed from when the call began to when its batch left "
            "the pipeline, stamped there in the graph."
        )
    return [
        Finding(
            rule="input-bound",
            severity=rung.severity,
            title=f"Training waits for data {share:.0%} of the time",
            explanation=explanation,
            evidence=tuple(evidence),
            speedup=removal_speedup(share, f"1 / (1 - {share:.2f}): the waits for the batch"),
            fix=Fix(
                summary="Make the batches faster than the steps use them: in parallel "
                "(several workers), prepared once ahead of training, or vectorised per batch "
                "rather than per sample.",
            ),
        )
    ]


def _per_sample_ms(ctx: RuleContext, workers: int | None) -> tuple[float | None, str]:
    samples = ctx.summary.samples
    if not samples:
        return None, ""
    if not workers:
        wait_ns = sum(s.phase(Phase.DATA_WAIT) for s in ctx.steps)
        return wait_ns / samples / 1e6, "data wait / samples (loading in the main process)"
    worker_pcts = [s.children_cpu_pct for s in ctx.system if s.children_cpu_pct is not None]
    if not worker_pcts:
        return None, ""
    cpu_s = sum(worker_pcts) / len(worker_pcts) / 100 * ctx.summary.measured_s
    return cpu_s * 1000 / samples, "DataLoader workers' CPU time / samples"


def _speedup(ctx: RuleContext, share: float, cause: str) -> Speedup:
    """The job without its data wait: gone (batched indexing, samples prepared once), or
    overlapped with compute (workers). Overlapping moves the loader's CPU work onto other
    cores, so it cannot beat the CPU the job uses per step spread over every core."""
    removed = speedup_if_removed(share)
    what = {
        "indexing": "the data wait gone (one indexing a batch)",
        "handoff": "the data wait gone (no batch handed between processes)",
        "cpu": "the data wait gone (each sample prepared once, ahead of training)",
        "io": "the data wait overlapped with compute (reads in flight while the model trains)",
    }.get(cause, "the data wait fully overlapped with compute")
    basis = f"1 / (1 - {share:.2f}): {what}"
    if cause != "unknown":
        return Speedup(factor=removed, basis=basis)
    jobs = [s.job_cpu_pct for s in ctx.system if s.job_cpu_pct is not None]
    if not jobs:
        return Speedup(factor=removed, basis=basis)
    busy_cores = sum(jobs) / len(jobs) / 100
    # Per step: the job's CPU seconds over its cores is the shortest the step can get.
    floor = min(1.0, busy_cores / ctx.cores)
    capped = min(removed, 1 / max(1 - share, floor))
    if capped >= removed:
        return Speedup(factor=removed, basis=basis)
    return Speedup(
        factor=capped,
        basis=f"{basis}, capped by the machine: the job already keeps {busy_cores:.1f} of "
        f"its {ctx.cores} cores busy, and overlapping moves the loader's work onto the rest",
    )


def _cause(ctx: RuleContext, workers: int | None) -> tuple[str, float | None, str]:
    """What the loader did while the loop waited: ``(cause, share of the wait on a CPU, how
    it was measured)``; the cause is ``cpu``, ``io`` or ``unknown`` (``CAUSES``)."""
    busy, how = _main_busy(ctx) if not workers else _workers_busy(ctx, workers)
    if busy is None:
        return "unknown", None, ""
    cause = "cpu" if busy >= CPU_BOUND else "io" if busy < IO_BOUND else "unknown"
    return cause, busy, how


def _handoff_fix(
    ctx: RuleContext,
    idle: float,
    per_sample_ms: float | None,
    wait_ms: float,
    loader: LoaderInfo | None,
    *,
    crowded: ComputeThreads | None = None,
) -> Fix:
    """The workers keep up; the wait is handing batches over: fewer, larger hand-offs, or
    none where making a batch costs the loop less than receiving it."""
    other = others_share(ctx) or 0.0
    busy_machine = (
        f" Other processes used {other:.0%} of the CPUs meanwhile: a worker waiting for a core "
        "answers late."
        if other >= COMPETING_SHARE
        else ""
    )
    if crowded is not None and crowded.per_core >= OVERSUBSCRIBED:
        busy_machine += (
            f" The job itself runs {crowded.demand} compute threads on {crowded.cores} cores "
            "(see the finding on threads): a worker waiting for a core behind them answers "
            "late. Fix that first."
        )
    batch = loader.batch_size if loader is not None and loader.batch_size else None
    per_batch = (
        f" Making a batch costs {per_sample_ms * batch:.1f} ms of CPU here against "
        f"{wait_ms:.1f} ms of waiting for it: with num_workers=0 the loop makes its own "
        "batches and hands none over (`stepdoctor tune --only workers` measures it)."
        if per_sample_ms is not None and batch and per_sample_ms * batch < wait_ms
        else ""
    )
    return Fix(
        summary=(
            f"The workers sat idle in {idle:.0%} of their samples, waiting for their next "
            "indices: they make batches faster than the loop takes them, so more workers or "
            "cheaper samples will not help. The wait is each batch's hand-off from a worker "
            "process to the loop (a pipe, and a socket that passes the batch's shared memory)."
            + busy_machine
            + " Larger batches spread each hand-off over more samples."
            + per_batch
        ),
        snippet="loader = DataLoader(dataset, batch_size=2 * batch_size, num_workers=...)",
    )


def _main_busy(ctx: RuleContext) -> tuple[float | None, str]:
    """Loading in the main process: the share of the data wait the loop's thread ran on a
    CPU. Its CPU time over the steps, less what it used in the rest of the steps' time (where
    it computes, at the rate ``_compute_rate`` measured), over the time it waited for
    batches."""
    readings = [(s.t_ns, s.main_thread_cpu_s) for s in ctx.system if s.main_thread_cpu_s]
    if len(readings) < 2:
        return None, ""
    (t0, c0), (t1, c1) = readings[0], readings[-1]
    inside = [s for s in ctx.steps if s.start_ns >= t0 and s.end_ns <= t1]
    wait_s = sum(s.phase(Phase.DATA_WAIT) for s in inside) / 1e9
    wall_s = (t1 - t0) / 1e9
    if not inside or wait_s <= 0 or wall_s <= wait_s:
        return None, ""
    rate = _compute_rate(readings, inside)
    if rate < MIN_COMPUTE_RATE:  # a thread starved of the CPU: nothing to tell from it
        return None, ""
    # a thread that gets ``rate`` of a core while it computes gets no more while it loads
    busy = ((c1 or 0.0) - (c0 or 0.0) - rate * (wall_s - wait_s)) / wait_s / rate
    how = "CPU time of the loop's thread beyond its compute / data wait"
    if rate < 1.0:
        how += f", over the {rate:.0%} of a core it got between waits"
    return min(1.0, max(0.0, busy)), how


def _compute_rate(
    readings: Sequence[tuple[int, float | None]], steps: Sequence[StepTiming]
) -> float:
    """The loop thread's CPU rate while it computes: the median over the intervals between
    readings that hold almost no data wait (``QUIET_WAIT_SHARE``; each step's wait taken at its
    start, where the loop asks for its batch), at most 1. A thread computing on a busy machine
    gets less than a core (examples/frameworks/hf_job.py beside a fresh-clone check: its
    collator's work read as 0% of the wait on a CPU when a core was assumed); with fewer than
    ``MIN_QUIET_INTERVALS`` such intervals (steps shorter than the readings' period), a core
    is assumed."""
    waits = [(s.start_ns, s.start_ns + s.phase_ns.get(Phase.DATA_WAIT.value, 0)) for s in steps]
    rates = []
    j = 0
    for (ta, ca), (tb, cb) in itertools.pairwise(readings):
        while j < len(waits) and waits[j][1] <= ta:
            j += 1
        waited = 0
        k = j
        while k < len(waits) and waits[k][0] < tb:
            waited += max(0, min(tb, waits[k][1]) - max(ta, waits[k][0]))
            k += 1
        if tb > ta and waited <= QUIET_WAIT_SHARE * (tb - ta):
            rates.append(((cb or 0.0) - (ca or 0.0)) / ((tb - ta) / 1e9))
    if len(rates) < MIN_QUIET_INTERVALS:
        return 1.0
    return min(1.0, max(0.0, statistics.median(rates)))


def _workers_busy(ctx: RuleContext, workers: int) -> tuple[float | None, str]:
    """Loading in workers: the workers' mean CPU, per worker, over the steps."""
    pcts = [s.children_cpu_pct for s in ctx.system if s.children_cpu_pct is not None]
    if not pcts:
        return None, ""
    busy = sum(pcts) / len(pcts) / 100 / workers
    return min(1.0, busy), "DataLoader workers' CPU / workers"


def _cure(
    cause: str,
    busy: float | None,
    per_sample_ms: float | None,
    *,
    loader: LoaderInfo | None,
    cores: int,
    threads: int,
    heavy: bool,
) -> Fix:
    """The fix for the cause found (``CAUSES``)."""
    workers = loader.num_workers if loader is not None else None
    where = (
        f"{loader.dataset_type}.__getitem__ ({loader.getitem_at})"
        if loader is not None and loader.getitem_at
        else "the data set's __getitem__"
    )
    if loader is not None and loader.collate_fn:
        where += f" and the collate_fn {loader.collate_fn}"
    if cause == "indexing" and loader is not None and loader.auto_collation is False:
        return _per_batch_fix(per_sample_ms or 0.0)
    if cause == "indexing":
        return _batched_fix(per_sample_ms or 0.0, loader.batch_size if loader else None)
    if cause == "cpu":
        return _cpu_fix(
            busy or 0.0, per_sample_ms, where, workers=workers, cores=cores, threads=threads
        )
    if cause == "io":
        return _io_fix(busy or 0.0, where, workers, cores)
    return _fix(workers, cores, heavy, loader is not None and loader.persistent_workers)


def _cpu_fix(
    busy: float,
    per_sample_ms: float | None,
    where: str,
    *,
    workers: int | None,
    cores: int,
    threads: int,
) -> Fix:
    """The wait is CPU work per sample: make it once, or vectorise it; workers only where
    cores are spare (a worker on a core torch's threads use slows the job)."""
    cost = f" ({per_sample_ms:.2f} ms a sample)" if per_sample_ms else ""
    doing = "the workers were" if workers else "the loop's thread was"
    spare = cores - threads - (workers or 0)
    if spare >= 1:
        more = (
            f"This machine has {spare} core(s) no thread of the job uses: "
            f"DataLoader(..., num_workers={(workers or 0) + spare}, persistent_workers=True) "
            "moves that work onto them."
        )
    else:
        more = (
            f"Workers would not help on their own: the {cores} cores already run torch's "
            f"{threads} thread(s)" + (f" and {workers} worker(s)" if workers else "") + ", so "
            "a worker takes a core from the computation (`stepdoctor tune --only workers` "
            "measures it)."
        )
    return Fix(
        summary=(
            f"Preparing each sample is the cost{cost}: {doing} on a CPU {busy:.0%} of the time "
            f"the loop waited, in {where}. Do that work once instead of every epoch: decode, "
            "parse or tokenise the data set ahead of training and save the result (a tensor "
            "file, a memory-mapped array), keeping only cheap random augmentation per sample; "
            "or apply it to a whole batch at once (vectorised) rather than per sample. " + more
        ),
        snippet=(
            "# once, before training:\n"
            "prepared = torch.stack([prepare(raw) for raw in raw_samples])\n"
            "torch.save(prepared, 'prepared.pt')\n"
            "# in training:\n"
            "dataset = TensorDataset(torch.load('prepared.pt'), labels)"
        ),
    )


def _io_fix(busy: float, where: str, workers: int | None, cores: int) -> Fix:
    """The wait is storage or the network: overlap it (waiting needs no core)."""
    suggested = max(2, 2 * (workers or 0), min(8, 2 * cores))
    return Fix(
        summary=(
            f"The loader was on a CPU only {busy:.0%} of the time the loop waited: samples wait "
            f"on storage or the network in {where}, not on computation. Waiting needs no core, "
            f"so overlap it: DataLoader(..., num_workers={suggested}, prefetch_factor=4, "
            "persistent_workers=True) keeps reads in flight while the model trains, even on a "
            "machine with few cores; or copy the data set to local or faster storage (or into "
            "memory) before training."
        ),
        snippet=(
            f"loader = DataLoader(dataset, batch_size=..., num_workers={suggested},\n"
            "                    prefetch_factor=4, persistent_workers=True)"
        ),
    )


def _fix(workers: int | None, cores: int, heavy: bool, persistent: bool) -> Fix:
    parts = []
    suggested = max(1, min(cores - 1, 8)) if cores > 1 else 1
    threads = max(1, cores - suggested)
    if not workers:
        parts.append(
            f"Load batches in background processes: DataLoader(..., num_workers={suggested}, "
            "persistent_workers=True, pin_memory=True on GPU) — this machine has "
            f"{cores} cores — and leave the workers their cores: "
            f"torch.set_num_threads({threads}) for a CPU job (on a 2-core machine, one worker "
            "added alone made a job that decodes each sample in its loader 0.7x as fast, and "
            "1.2x as fast with one thread fewer; `stepdoctor tune` measures it for your job)."
        )
    elif workers < cores - 1:
        parts.append(f"Raise num_workers from {workers} towards {suggested} ({cores} cores).")
    else:
        parts.append(
            f"num_workers={workers} already uses the {cores} cores: adding workers will not "
            "help; make each sample cheaper."
        )
    if workers and not persistent:
        parts.append("Set persistent_workers=True so workers are not restarted every epoch.")
    if heavy or (workers and workers >= cores - 1):
        parts.append(
            "Pre-compute the expensive per-sample work once (decode, resize, tokenise) and "
            "cache the result (a tensor file or memory-mapped array), keeping only cheap random "
            "augmentation in __getitem__."
        )
    snippet = (
        f"loader = DataLoader(dataset, batch_size=..., num_workers={suggested},\n"
        "                    persistent_workers=True, prefetch_factor=4)\n"
        f"torch.set_num_threads({threads})  # CPU training: the workers keep their cores"
    )
    return Fix(summary=" ".join(parts), snippet=snippet)


def _per_batch_fix(per_sample_ms: float) -> Fix:
    """The loader already yields whole batches (``batch_size=None``: a batch sampler, or a
    data set of batches): what is left is its cost per batch (examples/frameworks/
    lightning_job.py: 0.6 ms a batch of 128 through Lightning's fetcher, 5% of its step)."""
    return Fix(
        summary=(
            "The DataLoader already returns whole batches (batch_size=None), "
            f"{per_sample_ms * 1000:.0f} us a sample: what is left is its cost per batch "
            "(its iterator, and the loop's fetch around it), not per-sample work. Larger "
            "batches share it; workers would not help (handing a batch between processes "
            "costs more)."
        ),
        snippet=None,
    )


def _batched_fix(per_sample_ms: float, batch_size: int | None) -> Fix:
    """Indexing whole batches: the fix when the wait is the loader's per-sample work."""
    batch = batch_size or 64
    return Fix(
        summary=(
            f"Each sample takes {per_sample_ms * 1000:.0f} us to fetch: the wait is the "
            "DataLoader's own per-sample Python work (indexing each sample, then collating the "
            "list), not your data. Index whole batches at once: pass a BatchSampler as the "
            "sampler with batch_size=None (a TensorDataset, or any data set whose __getitem__ "
            "takes a list of indices, returns the batch in one indexing), or slice tensors "
            "you shuffle once an epoch. DataLoader workers would not help: handing each batch "
            "between processes costs more than making it."
        ),
        snippet=(
            "from torch.utils.data import BatchSampler, RandomSampler\n"
            "sampler = BatchSampler(RandomSampler(dataset), "
            f"batch_size={batch}, drop_last=False)\n"
            "loader = DataLoader(dataset, sampler=sampler, batch_size=None)"
        ),
    )
