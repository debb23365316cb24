"""The summary's account of a run's steps: how they were counted, evaluation between them, and
the batch size when no DataLoader gave one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stepdoctor.model import LayerInfo, ModelInfo, training_steps
from stepdoctor.rules.summary import step_basis, summarize
from tests.builders import MS, record, steps


def _model(shape: tuple[int, ...], *, recurrent: bool | None = None) -> ModelInfo:
    layers = ()
    if recurrent is not None:
        layers = (LayerInfo(name="rnn", kind="lstm", params=1, batch_first=recurrent),)
    return ModelInfo(
        model_id=1, class_name="Net", param_count=1, param_bytes=4, layers=layers,
        input_shape=shape,
    )  # fmt: skip


def test_evaluation_inside_steps_is_left_out_of_their_figures() -> None:
    plain = steps(50, phases_ms={"data_wait": 1, "forward": 4, "backward": 5})
    evaluated = tuple(
        replace(s, end_ns=s.end_ns + (i + 1) * 10 * MS, start_ns=s.start_ns + i * 10 * MS)
        for i, s in enumerate(plain)
    )  # every step also holds 10 ms of evaluation, in one call
    evaluated = tuple(
        replace(s, phase_ns={**s.phase_ns, "evaluation": 10 * MS}, eval_calls=1) for s in evaluated
    )
    base, with_eval = summarize(record(plain)), summarize(record(evaluated))
    assert with_eval.mean_step_ms == pytest.approx(base.mean_step_ms)
    assert with_eval.phase_share == base.phase_share  # evaluation is no share of a step
    assert with_eval.evaluation_calls == 50
    assert with_eval.evaluation_s == pytest.approx(0.5)
    assert with_eval.evaluation_share == pytest.approx(0.5)
    assert (base.evaluation_calls, base.evaluation_share) == (0, 0.0)


def test_model_calls_before_training_are_evaluation() -> None:
    calls = tuple(
        replace(s, boundary="model", batch_size=None) for s in steps(10, phases_ms={"forward": 2})
    )
    train = steps(40, phases_ms={"forward": 4, "backward": 6}, start_ms=20)
    train = tuple(replace(s, index=s.index + 10) for s in train)
    rec = record(calls + train)
    assert training_steps(rec.steps) == train
    summary = summarize(rec)
    assert (summary.kind, summary.steps, summary.evaluation_calls) == ("training", 40, 10)
    assert summary.evaluation_s == pytest.approx(0.02)
    assert "10 model calls before training started" in summary.step_basis
    assert summary.samples_per_sec is not None  # the batch-less calls are not training steps


@pytest.mark.parametrize(
    ("boundary", "micro", "closure", "words"),
    [
        ("optimizer", 1, 0, "one step per optimizer step"),
        ("optimizer", 4, 0, "4 micro-batches each (gradient accumulation)"),
        ("optimizer", 0, 5, "5 forward/backward passes inside each (a closure optimizer)"),
        ("backward", 1, 0, "parameters updated by hand"),
        ("explicit", 1, 0, "doc.step()"),
        ("model", 0, 0, "inference"),
    ],
)
def test_how_steps_were_counted_is_said(
    boundary: str, micro: int, closure: int, words: str
) -> None:
    s = tuple(
        replace(step, boundary=boundary, micro_batches=micro, closure_passes=closure)
        for step in steps(5, phases_ms={"forward": 1})
    )
    assert words in step_basis(s)
    assert summarize(record(s)).kind == ("inference" if boundary == "model" else "training")


@pytest.mark.parametrize(
    ("shape", "recurrent", "batch"),
    [((64, 256), None, 64), ((20, 16), False, 16), ((16, 20, 8), True, 16), ((0, 3), None, None)],
)
def test_batch_size_from_the_models_input_when_no_loader_gave_one(
    shape: tuple[int, ...], recurrent: bool | None, batch: int | None
) -> None:
    s = steps(20, phases_ms={"forward": 5}, batch=None)
    summary = summarize(record(s, models=(_model(shape, recurrent=recurrent),)))
    if batch is None:
        assert summary.samples_per_sec is None and not summary.batch_note
        return
    assert summary.samples == batch * (20 - summary.warmup_steps)
    assert f"batch size {batch} from Net's input {shape}" in summary.batch_note
    with_loader = summarize(record(steps(20, phases_ms={"forward": 5}, batch=8)))
    assert not with_loader.batch_note  # a loader's batches are the batch size


def test_a_gpu_jobs_summary_says_its_step_times_are_the_hosts() -> None:
    s = steps(100, phases_ms={"forward": 10, "backward": 20})  # 3 s of steps
    on_gpu = replace(_model((32, 8)), devices=("cuda",))
    short = summarize(record(s, models=(on_gpu,)))
    assert short.timing_note.startswith("step times are the host's")
    assert "may read high" in short.timing_note  # under GPU_RUNAHEAD_S of steps
    long = summarize(record(steps(400, phases_ms={"forward": 30}), models=(on_gpu,)))
    assert long.timing_note and "may read high" not in long.timing_note  # 12 s
    assert summarize(record(s, models=(_model((32, 8)),))).timing_note == ""  # on the CPU
