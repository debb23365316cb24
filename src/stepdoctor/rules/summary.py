"""Headline numbers of a run, with warm-up steps left out of the shares."""

from __future__ import annotations

from collections.abc import Sequence

from stepdoctor.model import (
    WARMUP_SAMPLES,
    Phase,
    RunRecord,
    StepTiming,
    Summary,
    measured_steps,
    profiled_steps,
)

__all__ = [
    "WARMUP_MAX_SHARE",
    "WARMUP_SAMPLES",  # (re-exported: the rules' warm-up is the model's)
    "measured_steps",  # (re-exported: the model's, so that the plots judge the same steps)
    "profiled_steps",  # (re-exported, as measured_steps)
    "split_warmup",
    "summarize",
]

#: Steps treated as warm-up when the batch size is unknown.
WARMUP_STEPS_UNKNOWN_BATCH = 3
#: Never drop more than this share of a short run's steps as warm-up.
WARMUP_MAX_SHARE = 0.2


def split_warmup(steps: Sequence[StepTiming]) -> int:
    """Return how many leading steps are warm-up (at least one when there are two or more)."""
    n = len(steps)
    if n < 2:
        return 0
    seen = 0
    count = 0
    for step in steps:
        if step.batch_size is None:
            count = WARMUP_STEPS_UNKNOWN_BATCH
            break
        count += 1
        seen += step.batch_size
        if seen >= WARMUP_SAMPLES:
            break
    return max(1, min(count, int(n * WARMUP_MAX_SHARE)))


def summarize(record: RunRecord, profiled: frozenset[int] | None = None) -> Summary:
    """Compute the summary of ``record``; ``profiled``: its ``profiled_steps`` where the caller
    has them already (found here otherwise)."""
    steps = record.steps
    warm = split_warmup(steps)
    if profiled is None:
        profiled = profiled_steps(record)
    measured = measured_steps(steps, warm, profiled)
    total_ns = sum(s.duration_ns for s in measured)
    shares: dict[str, float] = {}
    if total_ns:
        for step in measured:
            for name, ns in step.phase_ns.items():
                shares[name] = shares.get(name, 0.0) + ns
        shares = {
            name: ns / total_ns
            for name, ns in sorted(shares.items(), key=lambda kv: _phase_order(kv[0]))
        }
    sizes = [s.batch_size for s in measured]
    samples = None if not measured or any(b is None for b in sizes) else sum(b or 0 for b in sizes)
    seconds = total_ns / 1e9
    warm_samples = sum(s.batch_size or 0 for s in steps[:warm])
    note = ""
    if warm:
        note = f"first {warm} step(s)" + (f" ({warm_samples} samples)" if warm_samples else "")
        note += " left out as warm-up"
    first, last = (min(profiled), max(profiled)) if profiled else (0, 0)
    profiled_note = (
        f"steps {first}-{last} ran under stepdoctor's torch.profiler capture (--trace): "
        "left out of these figures and of the diagnosis"
        if profiled
        else ""
    )
    return Summary(
        steps=len(steps),
        warmup_steps=warm,
        wall_s=_wall_s(record),
        measured_s=seconds,
        samples=samples,
        samples_per_sec=None if samples is None or not seconds else samples / seconds,
        batches_per_sec=len(measured) / seconds if seconds else None,
        mean_step_ms=total_ns / len(measured) / 1e6 if measured else None,
        phase_share=shares,
        gc_share=sum(s.gc_pause_ns for s in measured) / total_ns if total_ns else 0.0,
        warmup_note=note,
        profiled_note=profiled_note,
        monitor_cpu_share=_monitor_share(record),
    )


def _wall_s(record: RunRecord) -> float:
    ends = [record.meta.clock_origin_ns]
    if record.end is not None:
        ends.append(record.end.t_ns)
    if record.steps:
        ends.append(record.steps[-1].end_ns)
    if record.system:
        ends.append(record.system[-1].t_ns)
    return (max(ends) - record.meta.clock_origin_ns) / 1e9


_ORDER = {p.value: i for i, p in enumerate(Phase)}


def _phase_order(name: str) -> tuple[int, str]:
    return (_ORDER.get(name, len(_ORDER)), name)


def _monitor_share(record: RunRecord) -> float | None:
    if record.end is None or record.end.monitor_cpu_ns is None:
        return None
    wall_ns = record.end.t_ns - record.meta.clock_origin_ns
    return record.end.monitor_cpu_ns / wall_ns if wall_ns > 0 else None
