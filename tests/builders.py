"""Builders of model objects for tests (instead of opaque literals)."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import replace

from stepdoctor.model import (
    CodeFrame,
    CodeStack,
    EnvFact,
    LoaderInfo,
    RunEnd,
    RunMeta,
    RunRecord,
    StackSample,
    StepTiming,
    SystemSample,
)

MS = 1_000_000


def meta(*, cores: int = 4, memory: int = 16 * 2**30) -> RunMeta:
    """Return run metadata for a machine with ``cores`` cores."""
    return RunMeta(
        run_id="test",
        started_unix_s=1.7e9,
        command=("train.py",),
        cpu_count=cores,
        affinity_cores=cores,
        total_memory_bytes=memory,
        clock_origin_ns=0,
    )


def steps(
    n: int,
    *,
    phases_ms: Mapping[str, float],
    batch: int | None = 32,
    every: Mapping[int, Mapping[str, float]] | None = None,
    gc_ms: float = 0.0,
    start_ms: float = 0.0,
) -> tuple[StepTiming, ...]:
    """Return ``n`` consecutive steps made of ``phases_ms``.

    ``every={k: extra}`` adds ``extra`` phase milliseconds to every k-th step.
    """
    out = []
    t = int(start_ms * MS)
    for i in range(n):
        phase_ns = {name: int(ms * MS) for name, ms in phases_ms.items()}
        for k, extra in (every or {}).items():
            if i % k == k - 1:
                for name, ms in extra.items():
                    phase_ns[name] = phase_ns.get(name, 0) + int(ms * MS)
        duration = sum(phase_ns.values())
        out.append(
            StepTiming(
                index=i,
                start_ns=t,
                end_ns=t + duration,
                boundary="optimizer",
                batch_size=batch,
                phase_ns=phase_ns,
                gc_count=1 if gc_ms else 0,
                gc_pause_ns=int(gc_ms * MS),
                gc_max_pause_ns=int(gc_ms * MS),
            )
        )
        t += duration
    return tuple(out)


def slowed(
    s: Sequence[StepTiming], slow: Container[int], *, forward_ms: float
) -> tuple[StepTiming, ...]:
    """``s`` with ``forward_ms`` more forward in the steps ``slow``, laid end to end again."""
    out, t = [], s[0].start_ns
    for st in s:
        extra = int(forward_ms * MS) if st.index in slow else 0
        phases = {**st.phase_ns, "forward": st.phase("forward") + extra}
        end = t + st.duration_ns + extra
        out.append(replace(st, start_ns=t, end_ns=end, phase_ns=phases))
        t = end
    return tuple(out)


def samples(
    span: Sequence[StepTiming],
    *,
    job_cpu: float = 100.0,
    other_cpu: float = 0.0,
    rss: int | Sequence[int] = 500 * 2**20,
    children_cpu: float = 0.0,
    every_ms: float = 100.0,
) -> tuple[SystemSample, ...]:
    """Return system samples every ``every_ms`` over the steps' time span."""
    start, end = span[0].start_ns, span[-1].end_ns
    times = list(range(start, end + 1, int(every_ms * MS)))
    out = []
    for i, t in enumerate(times):
        value = rss if isinstance(rss, int) else rss[min(i * len(rss) // len(times), len(rss) - 1)]
        out.append(
            SystemSample(
                t_ns=t,
                job_cpu_pct=job_cpu,
                other_cpu_pct=other_cpu,
                children_cpu_pct=children_cpu,
                job_rss_bytes=value,
            )
        )
    return tuple(out)


def env(**values: object) -> tuple[EnvFact, ...]:
    """Return environment facts; keys use ``__`` for ``.`` (``torch__num_threads=2``)."""
    return tuple(EnvFact(key=k.replace("__", "."), value=v) for k, v in values.items())  # type: ignore[arg-type]


def record(
    step_list: Sequence[StepTiming],
    *,
    cores: int = 4,
    system: Sequence[SystemSample] = (),
    facts: Sequence[EnvFact] = (),
    loaders: Sequence[LoaderInfo] = (),
    **extra: object,
) -> RunRecord:
    """Return a run record of the given parts."""
    end_ns = step_list[-1].end_ns if step_list else 0
    return RunRecord(
        meta=meta(cores=cores),
        steps=tuple(step_list),
        system=tuple(system),
        env=tuple(facts),
        loaders=tuple(loaders),
        end=RunEnd(t_ns=end_ns, status="ok"),
        **extra,
    )  # type: ignore[arg-type]


def stacked(
    rec: RunRecord,
    phases: Mapping[str, Sequence[tuple[Sequence[str], int]]],
    *,
    library: Sequence[str] = (),
    file: str = "/job/train.py",
) -> RunRecord:
    """``rec`` with sampled stacks: ``{phase: [(functions outermost first, samples), ...]}``
    spread over its steps' span; functions named in ``library`` live in an installed package
    (``/site-packages/lib.py``), the others in ``file`` at line 10 x their position."""
    names = sorted({f for stacks in phases.values() for fs, _ in stacks for f in fs})
    frames = tuple(
        CodeFrame(
            id=i,
            function=name,
            file="/venv/lib/python3.11/site-packages/lib.py" if name in library else file,
            line=10 * (i + 1),
            user=name not in library,
        )
        for i, name in enumerate(names)
    )
    ids = {f.function: f.id for f in frames}
    stacks: dict[tuple[int, ...], int] = {}
    out = []
    start = rec.steps[0].start_ns if rec.steps else 0
    end = rec.steps[-1].end_ns if rec.steps else 1
    total = sum(n for stacks_ in phases.values() for _, n in stacks_) or 1
    k = 0
    for phase, entries in phases.items():
        for functions, n in entries:
            key = tuple(ids[f] for f in functions)
            sid = stacks.setdefault(key, len(stacks))
            for _ in range(n):
                t = start + (end - start) * k // total
                out.append(StackSample(t_ns=t, stack=sid, phase=phase))
                k += 1
    return replace(
        rec,
        frames=frames,
        stacks=tuple(CodeStack(id=sid, frames=key) for key, sid in stacks.items()),
        samples=tuple(out),
    )
