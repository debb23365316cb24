from __future__ import annotations

from traindoctor.collect.events import (
    ENTER,
    EXIT,
    FWD_ENTER,
    FWD_EXIT,
    GC_START,
    GC_STOP,
    OPT_END,
    STEP,
    fwd_arg,
)
from traindoctor.collect.reducer import MODEL_MODE_AFTER_CALLS, StepReducer

ME, OTHER_THREAD = 1, 2


def train_step(t: int, opt: int = 7) -> list[tuple[int, int, object, int]]:
    """One training step starting at ``t`` (ms units), 10 long."""
    return [
        (t, ENTER, "data_wait", ME),
        (t + 2, EXIT, 16, ME),
        (t + 2, FWD_ENTER, fwd_arg(99, True, True), ME),
        (t + 5, FWD_EXIT, 99, ME),
        (t + 5, ENTER, "backward", ME),
        (t + 8, EXIT, None, ME),
        (t + 8, ENTER, "optimizer", ME),
        (t + 9, OPT_END, opt, ME),
    ]


def test_phases_and_optimizer_boundaries() -> None:
    r = StepReducer(ME)
    r.feed(train_step(0) + train_step(10) + train_step(20))
    steps = r.take_steps()
    assert [s.boundary for s in steps] == ["optimizer"] * 3
    assert steps[1].phase_ns == {
        "other": 1,
        "data_wait": 2,
        "forward": 3,
        "backward": 3,
        "optimizer": 1,
    }
    assert steps[1].batch_size == 16
    assert steps[1].duration_ns == 10


def test_gradient_accumulation_merges_tentative_model_steps() -> None:
    r = StepReducer(ME)
    events = [
        (0, FWD_ENTER, fwd_arg(99, True, True), ME),
        (3, FWD_EXIT, 99, ME),
        (3, FWD_ENTER, fwd_arg(99, True, True), ME),
        (6, FWD_EXIT, 99, ME),
        (6, ENTER, "optimizer", ME),
        (7, OPT_END, 7, ME),
    ]
    r.feed(events)
    (step,) = r.take_steps()
    assert step.phase_ns == {"forward": 6, "optimizer": 1}


def test_inference_only_jobs_get_one_step_per_model_call() -> None:
    r = StepReducer(ME)
    r.feed([(i * 2, FWD_ENTER, fwd_arg(99, True, True), ME) for i in range(1)])
    events = []
    for i in range(10):
        events += [(i * 2, FWD_ENTER, fwd_arg(99, True, True), ME), (i * 2 + 1, FWD_EXIT, 99, ME)]
    r = StepReducer(ME)
    r.feed(events)
    assert r.take_steps() == []  # tentative until decided
    steps = r.finish()
    assert len(steps) == 10
    assert {s.boundary for s in steps} == {"model"}


def test_model_mode_is_decided_after_many_calls() -> None:
    r = StepReducer(ME)
    events = []
    for i in range(MODEL_MODE_AFTER_CALLS + 5):
        events += [(i * 2, FWD_ENTER, fwd_arg(99, True, True), ME), (i * 2 + 1, FWD_EXIT, 99, ME)]
    r.feed(events)
    assert len(r.take_steps()) == MODEL_MODE_AFTER_CALLS + 5
    assert r.mode == "model"


def test_explicit_steps_win_and_second_optimizer_is_ignored() -> None:
    r = StepReducer(ME)
    r.feed(train_step(0, opt=7) + train_step(10, opt=8) + [(20, STEP, 32, ME)])
    r.feed(train_step(20) + [(30, STEP, 32, ME)])
    steps = r.take_steps()
    assert [s.boundary for s in steps] == ["optimizer", "explicit", "explicit"]
    assert steps[2].batch_size == 32


def test_gc_pauses_and_other_threads() -> None:
    r = StepReducer(ME)
    r.feed(
        [
            (0, ENTER, "data_wait", ME),
            (1, GC_START, 2, OTHER_THREAD),
            (4, GC_STOP, 2, OTHER_THREAD),
            (5, ENTER, "checkpoint", OTHER_THREAD),
            (6, EXIT, None, ME),
            (10, STEP, None, ME),
        ]
    )
    (step,) = r.take_steps()
    assert (step.gc_count, step.gc_pause_ns, step.gc_max_pause_ns) == (1, 3, 3)
    assert step.phase_ns == {"data_wait": 6, "other": 4}


def test_concurrent_forward_calls_from_threads() -> None:
    r = StepReducer(ME, {99: "Net"})
    r.feed(
        [
            (0, FWD_ENTER, fwd_arg(99, True, True), ME),
            (1, FWD_ENTER, fwd_arg(99, True, True), OTHER_THREAD),
            (5, FWD_EXIT, 99, ME),
            (6, FWD_EXIT, 99, OTHER_THREAD),
            (10, FWD_ENTER, fwd_arg(99, True, True), ME),
            (12, FWD_EXIT, 99, ME),
        ]
    )
    (stat,) = r.concurrency()
    assert (stat.class_name, stat.calls, stat.threads, stat.max_concurrent) == ("Net", 3, 2, 2)
    assert stat.concurrent_calls == 2
    assert stat.solo_mean_ns == 2
    assert stat.concurrent_mean_ns == 5
