"""What the logs say, as a ``RunRecord``: DL4J's iterations become steps, ND4J's start-up
lines environment facts, the GC logs' figures ride along (``RunRecord.jvm_gc``), so the rules
of live runs apply where they mean the same.

A PerformanceListener line is one iteration (its ETL the step's ``data_wait``, the rest
``fit``: DL4J's forward, backward and update, which the listener does not split); a listener
that logs every N iterations gives one step in N, laid end to end. Where both logs carry
wall-clock times (a logger that writes dates, a GC log with ``-XX:+PrintGCDateStamps`` or
``-Xlog:gc:...:time``), each iteration gets the GC pauses that fell in it (a logger that
writes the time of day only is put on the GC log's days); else the listener's own GC figures
(``reportGC``), where it logged them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import time
import uuid
from collections.abc import Sequence

from stepdoctor._version import __version__
from stepdoctor.model import EnvFact, RunMeta, RunRecord, StepTiming
from stepdoctor.model.jvm import Dl4jIteration, Dl4jLog, JvmGcLog

__all__ = ["FIT_PHASE", "to_record"]

#: The phase of an iteration's time outside ETL: DL4J's ``fit`` (forward, backward, update).
FIT_PHASE = "fit"
_MS = 1_000_000


def to_record(
    dl4j: Dl4jLog | None, gc_logs: Sequence[JvmGcLog], command: tuple[str, ...]
) -> RunRecord:
    """The record of a job told by ``dl4j`` (or None) and its ``gc_logs``."""
    facts = dict(dl4j.facts) if dl4j is not None else {}
    iterations = dl4j.iterations if dl4j is not None else ()
    started = next((i.unix_s for i in iterations if i.unix_s is not None), None)
    if started is None:
        started = next((g.started_unix_s for g in gc_logs if g.started_unix_s), None)
    cores = facts.get("nd4j.cores", "")
    meta = RunMeta(
        run_id=uuid.uuid4().hex[:12],
        started_unix_s=started if started is not None else time.time(),
        command=command,
        stepdoctor_version=__version__,
        # the job's machine, not this one: only what the log says
        cpu_count=int(cores) if cores.isdigit() else 0,
        affinity_cores=int(cores) if cores.isdigit() else 0,
    )
    env = [EnvFact(key=k, value=_value(v), source="log") for k, v in facts.items()]
    if dl4j is not None:
        env.append(EnvFact(key="framework", value="dl4j", source="log"))
    pauses = _pause_clock(gc_logs)
    steps = _steps(_dated(iterations, pauses), pauses)
    return RunRecord(
        meta=meta, steps=tuple(steps), env=tuple(env), jvm_gc=tuple(gc_logs), from_logs=True
    )


def _value(text: str) -> str | int | float | bool:
    if text in ("true", "false"):
        return text == "true"
    if text.isdigit():
        return int(text)
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return text


#: A logger's time of day is put on the GC log's day, within this of its first pause; a time
#: that goes back by more than this is the next day.
_HALF_DAY_S = 43_200.0


def _dated(
    iterations: Sequence[Dl4jIteration], pauses: list[tuple[float, float]]
) -> Sequence[Dl4jIteration]:
    """Iterations whose logger wrote the time of day only, put on the GC log's calendar:
    the day that brings the first within half a day of the first GC pause, the next day
    each time the clock goes back past midnight."""
    if not pauses or any(i.unix_s is not None for i in iterations):
        return iterations
    first = next((i.day_s for i in iterations if i.day_s is not None), None)
    if first is None:
        return iterations
    day = math.floor((pauses[0][0] - first + _HALF_DAY_S) / 86_400) * 86_400
    out, last = [], first
    for it in iterations:
        if it.day_s is None:
            out.append(it)
            continue
        if it.day_s < last - _HALF_DAY_S:
            day += 86_400
        last = it.day_s
        out.append(dataclasses.replace(it, unix_s=day + it.day_s))
    return out


def _pause_clock(gc_logs: Sequence[JvmGcLog]) -> list[tuple[float, float]]:
    """(wall-clock start, seconds) of every kept pause of the logs that have dates."""
    out = []
    for log in gc_logs:
        if log.pause_stride != 1:
            continue  # thinned out: pauses per iteration would be undercounted
        # the GC log's local time, as the DL4J logger's is read (as if UTC)
        local = log.utc_offset_s or 0.0
        for pause in log.timeline:
            if pause.unix_s is not None:
                start = pause.unix_s + local
                start -= pause.pause_s if log.format == "unified" else 0.0
                out.append((start, pause.pause_s))
    out.sort()
    return out


def _steps(
    iterations: Sequence[Dl4jIteration], pauses: list[tuple[float, float]]
) -> list[StepTiming]:
    steps = []
    at = 0
    starts = [p[0] for p in pauses]
    for index, it in enumerate(iterations):
        duration = max(0, round(it.time_ms * _MS))
        etl = None if it.etl_ms is None else min(duration, round(it.etl_ms * _MS))
        phases = {FIT_PHASE: duration - (etl or 0)}
        if etl is not None:
            phases["data_wait"] = etl
        gc_ns, gc_count, gc_max = 0, 0, 0
        if it.unix_s is not None and pauses:
            begin = it.unix_s - it.time_ms / 1000
            lo, hi = bisect.bisect_left(starts, begin), bisect.bisect_left(starts, it.unix_s)
            for _, seconds in pauses[lo:hi]:
                gc_ns += round(seconds * 1e9)
                gc_max = max(gc_max, round(seconds * 1e9))
                gc_count += 1
        elif it.gc_ms is not None:
            gc_ns, gc_count = round(it.gc_ms * _MS), it.gc_count or 0
            gc_max = gc_ns
        batch = None
        if it.samples_per_s and it.batches_per_s:
            ratio = it.samples_per_s / it.batches_per_s
            if math.isfinite(ratio) and ratio >= 0.5:
                batch = round(ratio)
        steps.append(
            StepTiming(
                index=index,
                start_ns=at,
                end_ns=at + duration,
                boundary="dl4j",
                batch_size=batch,
                phase_ns=phases,
                gc_count=gc_count,
                gc_pause_ns=min(gc_ns, duration),
                # the JVM stopped while it trained (no thread of it ran)
                gc_phase_ns={FIT_PHASE: min(gc_ns, phases[FIT_PHASE])} if gc_ns else {},
                gc_max_pause_ns=min(gc_max, duration),
            )
        )
        at += duration
    return steps
