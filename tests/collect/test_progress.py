"""The periodic progress line, summed from the steps' marks (what the reducer writes as it
makes each step), against the line computed from the steps one by one."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from stepdoctor.collect.reduce.progress import NO_BATCH, Progress, ProgressLine, marks_of
from stepdoctor.model import StepTiming
from tests import builders


def _reference(steps: list[StepTiming]) -> ProgressLine:
    """The line from the steps themselves (the module docstring's definition)."""
    wall_ns = sum(s.end_ns - s.start_ns for s in steps) or 1
    n = len(steps)
    sizes = [s.batch_size for s in steps]
    known = all(isinstance(b, int) and NO_BATCH < b < 2**63 for b in sizes)
    samples = sum(int(b) for b in sizes if isinstance(b, int)) if known else None
    return ProgressLine(
        iteration=steps[-1].index,
        etl_ms=sum(s.phase_ns.get("data_wait", 0) for s in steps) / n / 1e6,
        iteration_ms=wall_ns / n / 1e6,
        samples_per_sec=None if samples is None else samples / (wall_ns / 1e9),
        batches_per_sec=n / (wall_ns / 1e9),
        gc_count=sum(s.gc_count for s in steps),
        gc_ms=sum(s.gc_pause_ns for s in steps) / 1e6,
    )


def _due_lines(steps: list[StepTiming], every_steps: int | None, every_ns: int) -> list[object]:
    """The lines a step-by-step logger prints: a line once the steps since the last one are
    ``every_steps`` many, or span ``every_ns``."""
    lines, pending = [], []
    for step in steps:
        pending.append(step)
        if every_steps is not None:
            due = len(pending) >= every_steps
        else:
            due = pending[-1].end_ns - pending[0].start_ns >= every_ns
        if due:
            lines.append(_reference(pending))
            pending = []
    return lines


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[StepTiming], list[int]]:
    """Steps of a run (ends only grow), and the sizes of the flushes they come in."""
    steps, t = [], draw(st.integers(0, 10**12))
    for index in range(draw(st.integers(0, 120))):
        duration = draw(st.integers(0, 3_000_000))
        steps.append(
            StepTiming(
                index=index,
                start_ns=t,
                end_ns=t + duration,
                boundary="optimizer",
                batch_size=draw(st.sampled_from([64, 64, 64, 1, None, True, 2**70])),
                phase_ns={"data_wait": duration // 4} if draw(st.booleans()) else {},
                gc_count=draw(st.integers(0, 2)),
                gc_pause_ns=draw(st.integers(0, 10**6)),
                gc_max_pause_ns=0,
                gc_phase_ns={},
            )
        )
        t += duration
    flushes = draw(st.lists(st.integers(0, 40), max_size=12))
    return steps, flushes


@given(runs(), st.sampled_from([None, 0, 1, 7, 50]), st.integers(0, 20_000_000))
def test_lines_from_marks_are_the_lines_step_by_step(
    run: tuple[list[StepTiming], list[int]], every_steps: int | None, every_ns: int
) -> None:
    steps, flushes = run
    progress = Progress(every_steps=every_steps, every_ns=every_ns)
    lines, start = [], 0
    for size in [*flushes, len(steps)]:  # the last flush takes what is left
        lines += progress.add_marks(marks_of(steps[start : start + size]))
        start += size
    assert lines == _due_lines(steps, every_steps, every_ns)


def test_a_line_reads_like_dl4j() -> None:
    steps = list(builders.steps(17, phases_ms={"data_wait": 1, "other": 64}, gc_ms=0.5))
    (line,) = Progress(every_steps=17).add_marks(marks_of(steps))
    assert line.format() == (
        "ETL: 1 ms; iteration 16; iteration time: 65 ms; samples/sec: 492.3; "
        "batches/sec: 15.4; GC: 17 (8 ms)"
    )
    steps[3] = replace(steps[3], batch_size=None)
    (line,) = Progress(every_steps=17).add_marks(marks_of(steps))
    assert "samples/sec: n/a;" in line.format()  # a step without a batch size: unknown
