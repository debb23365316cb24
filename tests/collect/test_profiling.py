"""``run --trace``'s capture: a real torch.profiler trace of the job's steps, written where
``traindoctor trace`` reads it; a job too short for the schedule writes none."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from traindoctor.collect import Session
from traindoctor.collect.profiling import TraceCapture
from traindoctor.traces import analyse_paths, load_events


def _train(steps: int) -> None:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        opt.step()


def test_capture_writes_a_kineto_trace_that_traindoctor_reads(tmp_path: Path) -> None:
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


def test_a_job_shorter_than_the_schedule_writes_no_trace(tmp_path: Path) -> None:
    capture = TraceCapture(tmp_path / "trace", wait=10, warmup=2, active=5)
    with Session(tmp_path / "run", readers=[], instrument_torch=True, trace=capture):
        _train(3)
    assert capture.files() == []
