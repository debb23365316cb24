"""A run record as a Chrome / Perfetto trace (the Trace Event Format's JSON object form).

Opens in ui.perfetto.dev and chrome://tracing. One process, "stepdoctor: <command>", with:

- a ``steps`` track: one slice per step (args: batch size, each phase's ms, GC);
- a track per phase (``data wait (ETL)``, ``forward``...): one slice per step holding that
  phase's total time in the step. The record keeps per-step totals, not where inside the step
  each phase ran, so every phase's slice starts at its step's start;
- GC: an instant at the end of each step that had collections (args: count, total and
  longest pause) — the record keeps pauses per step, not their exact times;
- a ``stepdoctor`` track: the spans its own measurements slowed (``run --trace``'s
  torch.profiler capture, the allocation window's tracemalloc);
- a ``Python stacks`` track for the loop's thread and one per DataLoader worker: an instant
  per stack sample, named by its innermost function, with its phase and whole stack in args;
- counters: CPU (the job, its workers, other processes; % of one core), memory (RSS of the
  tree and of the main process, malloc heap; MiB), per-core CPU, and per GPU its utilisation
  and memory.

Times are µs from the start of the run (``RunMeta.clock_origin_ns``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stepdoctor.model import RunRecord, StepTiming
from stepdoctor.render.names import phase_label

__all__ = ["record_to_trace", "render_perfetto"]

PID = 1
STEPS_TID = 1
#: stepdoctor's own work that slowed the job (the --trace capture).
OWN_TID = 2
#: The loop thread's stack samples (a DataLoader worker's: STACKS_TID + 1 + its rank).
STACKS_TID = 3
#: Phase tracks start here (in the order phases first appear in the record).
FIRST_PHASE_TID = 10
#: DataLoader workers' stack tracks start here.
FIRST_WORKER_TID = 1000
MIB = 2**20


def render_perfetto(record: RunRecord) -> str:
    """Return the trace as JSON text."""
    return json.dumps(record_to_trace(record), separators=(",", ":"), allow_nan=False) + "\n"


def record_to_trace(record: RunRecord) -> dict[str, Any]:
    """Return the trace as JSON values (``{"traceEvents": [...], ...}``)."""
    origin = record.meta.clock_origin_ns or _first_time(record)
    events: list[dict[str, Any] | None] = [
        _meta("process_name", 0, {"name": "stepdoctor: " + " ".join(record.meta.command)}),
        _meta("thread_name", STEPS_TID, {"name": "steps"}),
        _meta("thread_sort_index", STEPS_TID, {"sort_index": 0}),
    ]
    phase_tids: dict[str, int] = {}
    for step in record.steps:
        for phase in step.phase_ns:
            if phase not in phase_tids:
                tid = phase_tids[phase] = FIRST_PHASE_TID + len(phase_tids)
                events.append(_meta("thread_name", tid, {"name": phase_label(phase)}))
                events.append(_meta("thread_sort_index", tid, {"sort_index": tid}))
    for step in record.steps:
        events.extend(_step_events(step, origin, phase_tids))
    if record.profiled:
        events.append(_meta("thread_name", OWN_TID, {"name": "stepdoctor"}))
        events.append(_meta("thread_sort_index", OWN_TID, {"sort_index": 1}))
    for span in record.profiled:
        start = _us(span.start_ns, origin)
        events.append(
            _slice(span.label, OWN_TID, start,
                   _us(span.end_ns, origin) - start,
                   {"note": "the job's steps here ran under stepdoctor's own measurement"})
        )  # fmt: skip
    events.extend(_sample_events(record, origin))
    for sample in record.system:
        ts = _us(sample.t_ns, origin)
        cpu = {
            "job": sample.job_cpu_pct,
            "workers": sample.children_cpu_pct,
            "others": sample.other_cpu_pct,
        }
        events.append(_counter("CPU (% of a core)", ts, cpu))
        memory = {
            "RSS, all processes": _mib(sample.job_rss_bytes),
            "RSS, main process": _mib(sample.main_rss_bytes),
            "malloc heap in use": _mib(sample.main_heap_bytes),
        }
        events.append(_counter("memory (MiB)", ts, memory))
        if sample.cpu_pct_per_core:
            cores = {f"core {i}": pct for i, pct in enumerate(sample.cpu_pct_per_core)}
            events.append(_counter("CPU per core (%)", ts, cores))
    for gpu in record.gpu:
        ts = _us(gpu.t_ns, origin)
        events.append(_counter(f"GPU {gpu.index} utilisation (%)", ts, {"util": gpu.util_pct}))
        used = {"used": _mib(gpu.mem_used_bytes), "total": _mib(gpu.mem_total_bytes)}
        events.append(_counter(f"GPU {gpu.index} memory (MiB)", ts, used))
    return {
        "traceEvents": [e for e in events if e is not None],
        "displayTimeUnit": "ms",
        "otherData": {
            "run_id": record.meta.run_id,
            "command": " ".join(record.meta.command),
            "hostname": record.meta.hostname,
            "started_unix_s": record.meta.started_unix_s,
            "stepdoctor_version": record.meta.stepdoctor_version,
        },
    }


def _step_events(step: StepTiming, origin: int, phase_tids: dict[str, int]) -> list[dict[str, Any]]:
    start = _us(step.start_ns, origin)
    args: dict[str, Any] = {"batch size": step.batch_size}
    args.update({f"{phase_label(p)} (ms)": round(ns / 1e6, 3) for p, ns in step.phase_ns.items()})
    if step.gc_count:
        args["GC collections"] = step.gc_count
        args["GC pause (ms)"] = round(step.gc_pause_ns / 1e6, 3)
    out = [_slice(f"step {step.index}", STEPS_TID, start, _us(step.end_ns, origin) - start, args)]
    for phase, ns in step.phase_ns.items():
        if ns > 0:
            out.append(_slice(phase_label(phase), phase_tids[phase], start, ns / 1e3, None))
    if step.gc_count:
        out.append(
            {
                "name": f"GC x{step.gc_count} ({step.gc_pause_ns / 1e6:.1f} ms)",
                "ph": "i",
                "s": "t",
                "pid": PID,
                "tid": STEPS_TID,
                "ts": _us(step.end_ns, origin),
                "args": {
                    "collections": step.gc_count,
                    "total pause (ms)": round(step.gc_pause_ns / 1e6, 3),
                    "longest pause (ms)": round(step.gc_max_pause_ns / 1e6, 3),
                },
            }
        )
    return out


def _sample_events(record: RunRecord, origin: int) -> list[dict[str, Any]]:
    """An instant per stack sample, on the track of the process it was taken in."""
    if not record.samples:
        return []
    frames = {f.id: f for f in record.frames}
    stacks: dict[int, list[str]] = {
        s.id: [frames[i].function for i in s.frames if i in frames] for s in record.stacks
    }
    tids = {0: STACKS_TID}
    out = []
    for pid in sorted({s.process for s in record.samples} - {0}):
        tids[pid] = FIRST_WORKER_TID + len(tids) - 1
    for pid, tid in tids.items():
        name = "Python stacks" if pid == 0 else f"Python stacks: DataLoader worker {pid}"
        out.append(_meta("thread_name", tid, {"name": name}))
        out.append(_meta("thread_sort_index", tid, {"sort_index": tid}))
    for sample in record.samples:
        names = stacks.get(sample.stack)
        if not names:
            continue
        out.append(
            {
                "name": names[-1],
                "ph": "i",
                "s": "t",
                "pid": PID,
                "tid": tids[sample.process],
                "ts": _us(sample.t_ns, origin),
                "args": {"phase": phase_label(sample.phase), "stack": " > ".join(names)},
            }
        )
    return out


def _slice(
    name: str, tid: int, ts: float, dur: float, args: dict[str, Any] | None
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "name": name, "ph": "X", "pid": PID, "tid": tid, "ts": ts, "dur": max(0.0, dur),
    }  # fmt: skip
    if args:
        event["args"] = args
    return event


def _counter(name: str, ts: float, values: Mapping[str, float | None]) -> dict[str, Any] | None:
    known = {k: v for k, v in values.items() if v is not None}
    if not known:
        return None
    return {"name": name, "ph": "C", "pid": PID, "ts": ts, "args": known}


def _meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": PID, "tid": tid, "args": args}


def _us(t_ns: int, origin: int) -> float:
    return round((t_ns - origin) / 1e3, 3)


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / MIB, 1)


def _first_time(record: RunRecord) -> int:
    times = [s.start_ns for s in record.steps[:1]] + [s.t_ns for s in record.system[:1]]
    return min(times) if times else 0
