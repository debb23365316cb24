"""``run --trace``'s capture: a real torch.profiler trace of the job's steps after its warm-up,
written where ``stepdoctor trace`` reads it (a job too short writes none); the steps it
slowed noted in the record and left out of the figures, its own time not charged to the job."""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from stepdoctor.cli import main
from stepdoctor.collect import Session
from stepdoctor.collect.hooks.profiling import TraceCapture
from stepdoctor.collect.hooks.trigger import EXPERIMENT_AFTER_STEPS
from stepdoctor.collect.sampling import allocations
from stepdoctor.collect.sampling.sampler import native_sampler
from stepdoctor.record import load_run
from stepdoctor.render.trace import render_trace
from stepdoctor.rules import RuleContext
from stepdoctor.traces import analyse_paths, load_events

#: Real captures whose windows follow the job's pace: make test runs these beside no other test.
pytestmark = pytest.mark.serial


def _train(steps: int) -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        opt.step()


def test_capture_writes_a_kineto_trace_that_stepdoctor_reads(tmp_path: Path) -> None:
    capture = TraceCapture(tmp_path / "trace", wait=1, warmup=1, active=2)
    with Session(tmp_path / "run", readers=[], instrument_torch=True, trace=capture):
        _train(8)
    (path,) = capture.files()
    assert path.name.endswith(".pt.trace.json.gz") and capture.error == ""
    events = load_events(path)
    assert events.events > 0 and any(s.startswith("ProfilerStep#") for s, _ in events.steps)
    summary = analyse_paths([capture.folder])
    assert summary.ranks[0].temporal is None  # a CPU machine: no GPU events, and it says so
    assert any("no GPU events" in w for w in summary.warnings)
    text = render_trace(summary)  # and no empty GPU tables in the terminal
    assert "no GPU events" in text
    assert not any(t in text for t in ("Temporal breakdown", "top kernels", "idle time"))


def test_a_job_shorter_than_the_schedule_writes_no_trace(tmp_path: Path) -> None:
    capture = TraceCapture(tmp_path / "trace", wait=10, warmup=2, active=5)
    with Session(tmp_path / "run", readers=[], instrument_torch=True, trace=capture) as doc:
        _train(3)
    assert capture.files() == []
    assert doc.record is not None and doc.record.profiled == ()  # it never recorded a step
    assert RuleContext(doc.record).summary.profiled_note == ""


def test_the_steps_the_profiler_slowed_are_noted_and_its_trace_writing_is_not_charged(
    tmp_path: Path,
) -> None:
    capture = TraceCapture(tmp_path / "trace", wait=2, warmup=1, active=2)
    with Session(tmp_path / "run", readers=[], instrument_torch=True, trace=capture) as doc:
        _train(8)
    assert doc.record is not None and capture.span is not None
    for run in (doc.record, load_run(tmp_path / "run")):  # in memory and as saved
        (span,) = run.profiled
        assert (span.start_ns, span.end_ns) == capture.span
        # the warm-up step and the two recorded ones; nothing before, nothing after
        assert RuleContext(run).profiled_steps == frozenset({2, 3, 4})
        assert RuleContext(run).summary.profiled_note.startswith(
            "steps 2-4 ran under stepdoctor's torch.profiler capture"
        )
        # the trace was written in the optimizer's post-step hook: the next step starts after
        assert run.steps[5].start_ns > span.end_ns >= run.steps[4].end_ns


def test_a_job_that_ends_while_profiled_ends_the_span_at_the_end(tmp_path: Path) -> None:
    capture = TraceCapture(tmp_path / "trace", wait=1, warmup=1, active=5)
    with Session(tmp_path / "run", readers=[], instrument_torch=True, trace=capture) as doc:
        _train(3)
    assert doc.record is not None
    (span,) = doc.record.profiled
    assert RuleContext(doc.record).profiled_steps == frozenset({1, 2})
    assert span.end_ns >= doc.record.steps[-1].end_ns


def test_report_of_a_traced_run_says_what_the_trace_lacks_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    capture = TraceCapture(run / "trace", wait=1, warmup=1, active=2)
    with Session(run, readers=[], instrument_torch=True, trace=capture):
        _train(8)
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    text = capsys.readouterr().out
    assert text.count("no GPU events") == 1  # the report's warning, not the trace's note too
    assert "steps 1-3 ran under stepdoctor's torch.profiler capture" in text


def _train_from_loader(n: int, batch: int) -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for (x,) in DataLoader(TensorDataset(torch.randn(n, 4)), batch_size=batch):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()


@pytest.mark.parametrize(
    ("batch", "profiled"),
    [
        (100, {10, 11, 12}),  # after the warm-up's 1,000 samples: 10 steps of 100
        (1, {20, 21, 22}),  # 1,000 samples would take too long: after max_wait steps
        (500, {2, 3, 4}),  # 1,000 samples in 2 steps: after wait steps
    ],
)
def test_the_capture_starts_after_the_jobs_warm_up(
    tmp_path: Path, batch: int, profiled: set[int]
) -> None:
    capture = TraceCapture(tmp_path / "trace", wait=2, max_wait=20, warmup=1, active=2)
    with Session(tmp_path / "run", readers=[], instrument_torch=True, trace=capture) as doc:
        _train_from_loader(3000 if batch > 1 else 40, batch)
    assert doc.record is not None
    assert RuleContext(doc.record).profiled_steps == frozenset(profiled)
    (path,) = capture.files()  # and it was written
    assert any(s.startswith("ProfilerStep#") for s, _ in load_events(path).steps)


@pytest.mark.skipif(native_sampler() is None, reason="the C census is not built")
def test_steps_the_allocation_window_slowed_are_left_out_even_when_it_found_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tracemalloc slows an allocation-heavy step many times over (20x on a healthy job's
    span-building callback, on a busy machine): a window that saw fewer than two steps end
    keeps no sites, but the steps it ran over are still not the job's."""
    monkeypatch.setattr(allocations, "WAIT_NS", 0)
    monkeypatch.setattr(allocations, "MIN_WINDOW_NS", 300_000_000)
    monkeypatch.setattr(allocations, "WINDOW_STEPS", 1)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    traced: list[int] = []
    deadline = time.monotonic() + 60  # liveness only

    def step(index: int, pause_s: float = 0.0) -> None:
        """One step; the first that sees the window open lasts until the window ends (the
        window starts and ends inside it however long its census takes on a busy machine)."""
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        if tracemalloc.is_tracing():
            traced.append(index)
            while tracemalloc.is_tracing() and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(pause_s)
        opt.step()

    with Session(tmp_path / "run", readers=[], instrument_torch=True, flush_every_s=0.02) as doc:
        index = 0
        for index in range(EXPERIMENT_AFTER_STEPS + 5):  # the warm-up the window waits for
            step(index, 0.002)
        while not traced and time.monotonic() < deadline:
            gc.collect()  # full collections after warm-up: the window is due
            index += 1
            step(index, 0.01)
        long_step = index
        for after in range(long_step + 1, long_step + 4):
            step(after)
    assert traced == [long_step]
    for run in (doc.record, load_run(tmp_path / "run")):  # in memory and as saved
        assert run is not None
        assert [p.what for p in run.profiled] == ["tracemalloc"]
        assert not run.allocations  # too few steps in it to name a site
        assert any("saw no steps" in n.message for n in run.notices)
        left_out = RuleContext(run).profiled_steps
        assert set(traced) <= left_out and long_step in left_out
        assert long_step + 2 not in left_out  # after the window: the job's again
