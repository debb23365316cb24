"""``--experiments`` in-process: the trigger fires once after warm-up in the job's thread, its
time is taken out of the steps, and the report attaches the measurement."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from stepdoctor.collect import Session
from stepdoctor.collect.hooks.trigger import ExperimentObjects, ExperimentTrigger
from stepdoctor.experiments import Throughput, make_run_experiment, verdict
from stepdoctor.model import Severity, SpeedupKind
from stepdoctor.record import load_run
from stepdoctor.report import attach_measurements, build_report
from stepdoctor.rules import RuleContext
from stepdoctor.rules.input_bound import input_bound
from tests.builders import record, steps

JUMP_NS = 10 * 10**9


def _train(steps_: int = 40) -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(steps_ * 8, 4), torch.randn(steps_ * 8, 1))
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(data, batch_size=8):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def test_trigger_runs_once_with_the_jobs_objects_and_its_time_leaves_the_steps(
    tmp_path: Path,
) -> None:
    offset = [0]
    seen: list[ExperimentObjects] = []

    def experiment(objects: ExperimentObjects) -> tuple[list[object], list[str]]:
        seen.append(objects)
        offset[0] += JUMP_NS  # the experiment "takes" 10 s on the session's clock
        return [], ["a note"]

    trigger = ExperimentTrigger(experiment, after_steps=10, after_samples=0)
    with Session(
        tmp_path,
        readers=[],
        instrument_torch=True,
        clock=lambda: time.perf_counter_ns() + offset[0],
        experiment=trigger,
    ) as doc:
        _train()
    rec = doc.record
    assert rec is not None and len(seen) == 1
    objects = seen[0]
    assert objects.steps_before == 10 and isinstance(objects.model, nn.Sequential)
    assert isinstance(objects.loader, DataLoader) and objects.batch[0].shape == (8, 4)
    assert len(rec.steps) == 40
    assert max(s.end_ns - s.start_ns for s in rec.steps) < JUMP_NS  # not in any step
    assert any(n.message == "a note" for n in rec.notices)


def test_run_experiment_measures_and_the_record_keeps_it(tmp_path: Path) -> None:
    lines: list[str] = []
    trigger = ExperimentTrigger(
        make_run_experiment(4.0, progress=lines.append), after_steps=10, after_samples=0
    )
    with Session(tmp_path, readers=[], instrument_torch=True, experiment=trigger) as doc:
        _train(60)
    assert lines[:2] == ["data-only throughput (<= 2 s)", "compute-only throughput (<= 2 s)"]
    assert len(lines) == 3 and lines[2].startswith("measured after step 10: data-only ")
    rec = doc.record
    assert rec is not None and len(rec.experiments) == 1
    v = rec.experiments[0]
    assert v.data.name == "data-only" and v.data.batches > 0
    assert v.compute.name == "compute-only" and v.compute.batches > 0
    assert v.bound in ("input", "compute", "balanced") and v.unit == "samples/s"
    assert load_run(tmp_path).experiments == rec.experiments  # written to the record
    report = build_report(rec)
    assert report.experiments and report.experiments[0].achieved_per_sec is not None


def test_a_job_too_short_for_the_warmup_says_experiments_did_not_run(tmp_path: Path) -> None:
    trigger = ExperimentTrigger(make_run_experiment(1.0))
    with Session(tmp_path, readers=[], instrument_torch=True, experiment=trigger) as doc:
        _train(5)
    assert doc.record is not None and not doc.record.experiments
    assert any("did not run" in n.message for n in doc.record.notices)


def _tp(name: str, per_sec: float) -> Throughput:
    return Throughput(name=name, batches=100, samples=int(per_sec), seconds=1.0)


def test_measurement_confirms_or_downgrades_input_bound() -> None:
    s = steps(100, phases_ms={"data_wait": 30, "forward": 40, "backward": 30}, batch=10)
    ctx = RuleContext(record(s))
    (finding,) = input_bound(ctx)  # 30% wait: critical
    summary = ctx.summary  # 100 samples/s achieved
    confirmed = attach_measurements(
        [finding], (verdict(_tp("data-only", 120.0), _tp("compute-only", 300.0)),), summary
    )
    assert confirmed[0].severity is Severity.CRITICAL
    assert confirmed[0].speedup.kind is SpeedupKind.MEASURED
    assert round(confirmed[0].speedup.factor, 2) == 3.0  # compute alone / achieved
    assert confirmed[0].modelled == finding.speedup  # the model is kept beside it
    refuted = attach_measurements(
        [finding], (verdict(_tp("data-only", 900.0), _tp("compute-only", 300.0)),), summary
    )
    assert refuted[0].severity is Severity.INFO
    assert "the loader alone is not the limit" in refuted[0].explanation
