"""The step reducer, both of it: ``StepReducer`` (Python, the reference) and the C one
(``collect/reduce/_reduce.c``), run on the same tests and compared on random and real event streams.

``make test`` sets ``STEPDOCTOR_REQUIRE_C_PARTS=1``: there the C reducer must have been built.
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepdoctor.collect.hooks.events import (
    ENTER,
    EXIT,
    FWD_ENTER,
    FWD_EXIT,
    GC_START,
    GC_STOP,
    OPT_END,
    RESET,
    STEP,
    Event,
    EventBuffer,
    EventQueue,
    fwd_arg,
)
from stepdoctor.collect.reduce.progress import marks_of
from stepdoctor.collect.reduce.reducer import MODEL_MODE_AFTER_CALLS, StepReducer
from stepdoctor.collect.reduce.reducers import (
    Reducer,
    concurrency_stats,
    native_reducer,
    new_reducer,
)
from stepdoctor.collect.session import Session
from stepdoctor.model import StepTiming
from stepdoctor.native import PURE_PYTHON_ENV
from stepdoctor.record.rows import encode_json, step_rows_json, steps_from_rows

from .test_events import _c_events

ME, OTHER_THREAD = 1, 2
C = native_reducer()
REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"
needs_c = pytest.mark.skipif(
    C is None and not REQUIRED, reason="the C reducer was not built (no compiler at install)"
)
MakeReducer = Callable[..., Reducer]


def _python(owner: int, names: dict[int, str] | None = None, **kwargs: bool) -> Reducer:
    return new_reducer(owner, names, native=False, **kwargs)


def _c(owner: int, names: dict[int, str] | None = None, **kwargs: bool) -> Reducer:
    return new_reducer(owner, names, native=True, **kwargs)


@pytest.fixture(
    params=[pytest.param(_python, id="python"), pytest.param(_c, id="c", marks=needs_c)]
)
def make(request: pytest.FixtureRequest) -> MakeReducer:
    maker: MakeReducer = request.param
    return maker


def train_step(t: int, opt: int = 7) -> list[Event]:
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


def test_phases_and_optimizer_boundaries(make: MakeReducer) -> None:
    r = make(ME)
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


def test_gradient_accumulation_merges_tentative_model_steps(make: MakeReducer) -> None:
    r = make(ME)
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


def test_inference_only_jobs_get_one_step_per_model_call(make: MakeReducer) -> None:
    events: list[Event] = []
    for i in range(10):
        events += [(i * 2, FWD_ENTER, fwd_arg(99, True, True), ME), (i * 2 + 1, FWD_EXIT, 99, ME)]
    r = make(ME)
    r.feed(events)
    assert r.take_steps() == []  # tentative until decided
    steps = r.finish()
    assert len(steps) == 10
    assert {s.boundary for s in steps} == {"model"}


def test_model_mode_is_decided_after_many_calls(make: MakeReducer) -> None:
    r = make(ME)
    events: list[Event] = []
    for i in range(MODEL_MODE_AFTER_CALLS + 5):
        events += [(i * 2, FWD_ENTER, fwd_arg(99, True, True), ME), (i * 2 + 1, FWD_EXIT, 99, ME)]
    r.feed(events)
    assert len(r.take_steps()) == MODEL_MODE_AFTER_CALLS + 5
    assert r.mode == "model"


def test_explicit_steps_win_and_second_optimizer_is_ignored(make: MakeReducer) -> None:
    r = make(ME)
    r.feed(train_step(0, opt=7) + train_step(10, opt=8) + [(20, STEP, 32, ME)])
    r.feed(train_step(20) + [(30, STEP, 32, ME)])
    steps = r.take_steps()
    assert [s.boundary for s in steps] == ["optimizer", "explicit", "explicit"]
    assert steps[2].batch_size == 32


MODEL, LOSS, TEACHER = 99, 98, 97


def call(t: int, model: int, length: int, *, grad: bool = True, train: bool = True) -> list[Event]:
    """An outermost call of ``model`` from ``t`` for ``length``."""
    return [(t, FWD_ENTER, fwd_arg(model, grad, train), ME), (t + length, FWD_EXIT, model, ME)]


def by_hand(t: int, *, loader: bool = True) -> list[Event]:
    """One pass of a loop updating its parameters by hand from ``t``, 10 long: the batch
    (when from a loader), model and loss calls, backward, then the update (``other``)."""
    events: list[Event] = [(t, ENTER, "data_wait", ME), (t + 1, EXIT, 8, ME)] if loader else []
    return [
        *events,
        *call(t + 1, MODEL, 3),
        *call(t + 4, LOSS, 1),
        (t + 5, ENTER, "backward", ME),
        (t + 8, EXIT, None, ME),
    ]


def test_a_loop_updating_by_hand_has_a_step_per_backward_pass(make: MakeReducer) -> None:
    for loader in (True, False):
        r = make(ME)
        events: list[Event] = []
        for i in range(5):
            events += by_hand(i * 10, loader=loader)
        r.feed(events)
        assert r.take_steps() == []  # tentative: an optimizer step may still come
        steps = r.finish()
        assert [s.boundary for s in steps] == ["backward"] * 5
        assert [s.micro_batches for s in steps] == [1] * 5
        first = 0 if loader else 1  # the loader's wait, or the model's call
        assert [s.start_ns for s in steps] == [first + i * 10 for i in range(5)]
        assert steps[1].phase_ns == {
            **({"data_wait": 1} if loader else {}),
            "forward": 4,
            "backward": 3,
            "optimizer": 2 if loader else 3,  # the update by hand, after the backward
        }
        assert steps[-1].end_ns == 48  # the last pass ends at the loop's last event
        assert all(sum(s.phase_ns.values()) == s.wall_ns for s in steps)


def test_a_loop_updating_by_hand_is_settled_after_many_passes(make: MakeReducer) -> None:
    r = make(ME)
    events: list[Event] = []
    for i in range(MODEL_MODE_AFTER_CALLS + 3):
        events += by_hand(i * 10)
    r.feed(events)
    assert r.mode == "backward"
    assert len(r.take_steps()) == MODEL_MODE_AFTER_CALLS + 2
    assert len(r.finish()) == 1


def test_a_closure_optimizer_makes_one_step_of_several_passes(make: MakeReducer) -> None:
    r = make(ME)
    events: list[Event] = []
    for i in range(3):
        t = i * 100
        events.append((t, ENTER, "optimizer", ME))
        for k in range(4):  # LBFGS evaluates its closure several times
            u = t + 1 + k * 20
            events += [*call(u, MODEL, 5), *call(u + 5, LOSS, 1)]
            events += [(u + 6, ENTER, "backward", ME), (u + 16, EXIT, None, ME)]
        events.append((t + 90, OPT_END, 7, ME))
    r.feed(events)
    steps = r.take_steps()
    assert [s.boundary for s in steps] == ["optimizer"] * 3
    assert [(s.closure_passes, s.micro_batches) for s in steps] == [(4, 0)] * 3
    assert steps[1].phase_ns["forward"] == 4 * 6
    assert steps[1].phase_ns["backward"] == 4 * 10


def test_gradient_accumulation_counts_micro_batches(make: MakeReducer) -> None:
    r = make(ME)
    events: list[Event] = []
    for i in range(3):
        for k in range(4):
            events += by_hand(i * 50 + k * 10)
        events += [(i * 50 + 40, ENTER, "optimizer", ME), (i * 50 + 45, OPT_END, 7, ME)]
    r.feed(events)
    steps = r.take_steps()
    assert [s.boundary for s in steps] == ["optimizer"] * 3
    assert [s.micro_batches for s in steps] == [4, 4, 4]


def evaluation(t: int, batches: int) -> list[Event]:
    """An evaluation loop from ``t``: per batch a wait, the model and loss under no_grad in
    eval mode, and 1 of metrics; 6 a batch."""
    events: list[Event] = []
    for b in range(batches):
        u = t + b * 6
        events += [(u, ENTER, "data_wait", ME), (u + 1, EXIT, 8, ME)]
        events += call(u + 1, MODEL, 3, grad=False, train=False)
        events += call(u + 4, LOSS, 1, grad=False, train=True)
    return events


def test_evaluation_between_optimizer_steps_is_its_own_phase(make: MakeReducer) -> None:
    def step(t: int) -> list[Event]:  # 11 long, from the training batch's wait
        return [
            (t, ENTER, "data_wait", ME),
            (t + 2, EXIT, 16, ME),
            *call(t + 2, MODEL, 3),
            *call(t + 5, LOSS, 1),
            (t + 6, ENTER, "backward", ME),
            (t + 9, EXIT, None, ME),
            (t + 9, ENTER, "optimizer", ME),
            (t + 10, OPT_END, 7, ME),
        ]

    r = make(ME)
    events = step(0) + step(11)  # the second step ends at 21
    events += evaluation(22, 3)  # 22..40
    events += step(40) + step(51)
    r.feed(events)
    steps = r.take_steps()
    assert len(steps) == 4
    third = steps[2]
    assert third.eval_calls == 3
    assert third.phase_ns == {
        "other": 1,  # between the optimizer step and the evaluation
        "data_wait": 3,  # the training batch's wait and the first evaluation batch's
        "evaluation": 17,  # its model and loss calls, its later waits, its metrics
        "forward": 4,
        "backward": 3,
        "optimizer": 1,
    }
    assert third.wall_ns == 29
    assert third.duration_ns == 12  # a training step (11) and the first evaluation wait
    assert steps[1].duration_ns == steps[3].duration_ns == 11
    assert sum(third.phase_ns.values()) == third.wall_ns


def test_evaluation_in_a_loop_updating_by_hand(make: MakeReducer) -> None:
    # A language model's loop: no loader, no optimizer, evaluation after every pass.
    r = make(ME)
    events: list[Event] = []
    for i in range(6):
        events += by_hand(i * 30, loader=False)
        events += call(i * 30 + 10, MODEL, 5, grad=False, train=False)
        events += call(i * 30 + 15, LOSS, 1, grad=False, train=True)
    r.feed(events)
    steps = r.finish()
    assert [s.boundary for s in steps] == ["backward"] * 6
    assert [s.eval_calls for s in steps] == [1] * 6
    assert steps[2].phase_ns["evaluation"] == 21  # from its first call to the next pass
    assert steps[2].duration_ns == 9 == steps[2].wall_ns - 21


def test_a_frozen_model_called_without_autograd_is_forward_not_evaluation(
    make: MakeReducer,
) -> None:
    # Distillation: a teacher that is never trained runs under no_grad inside every step.
    r = make(ME)
    events: list[Event] = []
    for i in range(3):
        t = i * 20
        events += call(t, TEACHER, 4, grad=False, train=False)
        events += call(t + 4, MODEL, 4)
        events += [(t + 8, ENTER, "backward", ME), (t + 16, EXIT, None, ME)]
        events += [(t + 16, ENTER, "optimizer", ME), (t + 20, OPT_END, 7, ME)]
    r.feed(events)
    steps = r.take_steps()
    assert [s.phase_ns.get("evaluation", 0) for s in steps] == [0, 0, 0]
    assert steps[1].phase_ns["forward"] == 8


def test_inference_steps_are_the_first_models_calls(make: MakeReducer) -> None:
    r = make(ME)
    events: list[Event] = []
    for i in range(5):  # the model, then a post-processing module, under no_grad
        events += call(i * 10, MODEL, 6, grad=False, train=False)
        events += call(i * 10 + 6, LOSS, 2, grad=False, train=False)
    r.feed(events)
    steps = r.finish()
    assert [s.boundary for s in steps] == ["model"] * 5
    assert steps[1].phase_ns == {"other": 2, "forward": 8}


def test_inference_then_training_starts_training_steps(make: MakeReducer) -> None:
    r = make(ME)
    events: list[Event] = []
    calls = MODEL_MODE_AFTER_CALLS + 2
    for i in range(calls):  # a long baseline evaluation first: taken as inference
        events += call(i * 10, MODEL, 5, grad=False, train=False)
    events += train_step(calls * 10) + train_step(calls * 10 + 10)
    r.feed(events)
    steps = r.take_steps()
    # The first training call is still taken as an inference step: its backward comes after.
    assert [s.boundary for s in steps] == ["model"] * (calls + 1) + ["optimizer"] * 2


def test_gc_pauses_and_other_threads(make: MakeReducer) -> None:
    r = make(ME)
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


@needs_c
def test_c_steps_are_left_out_of_the_collectors_walks() -> None:
    # A run keeps every step: the C reducer's steps, which cannot be part of a cycle, are not
    # tracked by the garbage collector; the Python reducer's are (a dataclass's default).
    events: list[Event] = [(0, ENTER, "data_wait", ME), (3, EXIT, 8, ME), (10, STEP, None, ME)]
    made = []
    for maker in (_c, _python):
        r = maker(ME)
        r.feed(events)
        made.append(r.take_steps())
    (c_step,), (py_step,) = made
    assert c_step == py_step
    assert not gc.is_tracked(c_step) and gc.is_tracked(py_step)
    assert c_step.phase_ns == {"data_wait": 3, "other": 7} and c_step.batch_size == 8


def test_concurrent_forward_calls_from_threads(make: MakeReducer) -> None:
    r = make(ME, {99: "Net"})
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
    (stat,) = concurrency_stats(r.model_calls(), r.model_names)
    assert (stat.class_name, stat.calls, stat.threads, stat.max_concurrent) == ("Net", 3, 2, 2)
    assert stat.concurrent_calls == 2
    assert stat.solo_mean_ns == 2
    assert stat.concurrent_mean_ns == 5


@needs_c
def test_c_reducer_is_built_and_checks_what_it_builds() -> None:
    assert C is not None, "STEPDOCTOR_REQUIRE_C_PARTS=1 but collect/reduce/_reduce is not built"
    with pytest.raises(TypeError, match="StepTiming's 13 fields"):
        C.Reducer(ME, {}, dict, MODEL_MODE_AFTER_CALLS, encode_json)  # built slot by slot
    with pytest.raises(TypeError, match="encode must be callable"):
        C.Reducer(ME, {}, StepTiming, MODEL_MODE_AFTER_CALLS, None)
    r = _c(ME)
    with pytest.raises(ValueError, match="an event is a tuple"):
        r.feed([(0, ENTER, "data_wait")])
    with pytest.raises(AttributeError):
        r.mode = "model"  # type: ignore[misc]
    bare = C.Reducer.__new__(C.Reducer)  # never initialised: refuses, does not crash
    calls = (lambda: bare.feed([]), bare.take_steps, bare.take_rows, bare.finish, bare.model_calls)
    for call in calls:
        with pytest.raises(RuntimeError, match="__init__ was not called"):
            call()
    with pytest.raises(RuntimeError, match="initialised once"):
        r.__init__(ME, {}, StepTiming, MODEL_MODE_AFTER_CALLS, encode_json)  # type: ignore[misc]


def _outcome(
    r: Reducer,
    events: list[Event],
    cuts: list[int],
    buffer: EventBuffer | None = None,
    *,
    kept: bool = True,
) -> tuple[object, ...]:
    """Everything a reducer gives for ``events`` fed in pieces cut at ``cuts`` (appended to
    ``buffer`` and drained from it, if given; ``kept``: made with ``keep_steps``)."""
    steps: list[StepTiming] = []
    rows: list[bytes] = []
    marks = b""
    start = 0
    for cut in [*cuts, len(events)]:
        if buffer is None:
            r.feed(events[start:cut])
        else:
            for event in events[start:cut]:
                buffer.append(event)
            r.drain(buffer)
            assert len(buffer) == 0
        start = cut
        steps += r.take_steps()
        rows.append(r.take_rows())
        marks += r.take_marks()
    steps += r.finish()
    rows.append(r.take_rows())
    marks += r.take_marks()
    assert r.take_rows() == r.take_marks() == b""
    if kept:
        # the rows hold the steps, as the writer would have written them one by one
        assert steps_from_rows(rows) == steps
        assert b",".join(c for c in rows if c) == step_rows_json(steps)
    else:  # the caller compares the rows with a kept run's
        assert steps == []
        steps = steps_from_rows(rows)  # (an int over 64 bits read back as a float)
    assert marks == marks_of(steps)  # what the progress line is summed from
    # phase dicts compared with their order: the record keeps it
    ordered = [(s, list(s.phase_ns.items()), list(s.gc_phase_ns.items())) for s in steps]
    return (ordered if kept else []), rows, r.model_calls(), r.mode


_PHASES = st.sampled_from(
    [
        "data_wait",
        "backward",
        "backward",
        "optimizer",
        "checkpoint",
        "evaluation",
        "other",
        "pré",
        'a"b\\',
        "\x01\n",
    ]
)
_ODD_PHASES = st.sampled_from(["\ud800"])  # a lone surrogate: orjson refuses it, json not
_ARGS = {
    ENTER: st.one_of(_PHASES, _ODD_PHASES),
    EXIT: st.sampled_from([None, 16, 3, "x", True, 2**70]),
    STEP: st.sampled_from([None, 8, 0, True]),
    OPT_END: st.sampled_from([7, 8, None]),
    FWD_ENTER: st.sampled_from(
        [
            fwd_arg(99, True, True),
            fwd_arg(98, False, False),
            fwd_arg(99, False, False),
            fwd_arg(99, False, True),
            fwd_arg(98, True, True),
            None,
        ]
    ),
    FWD_EXIT: st.sampled_from([99, 98, None]),
    GC_START: st.just(0),
    GC_STOP: st.just(2),
    RESET: st.none(),
}


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[list[Event], list[int]]:
    """Plausible and odd event streams: several threads, any order of codes, no optimizer at
    all (inference) or a second one, time standing still, fed in up to three pieces."""
    allowed = draw(st.sampled_from([list(_ARGS), [c for c in _ARGS if c not in (OPT_END, STEP)]]))
    events: list[Event] = []
    t = 0
    for _ in range(draw(st.integers(0, 400))):
        t += draw(st.sampled_from([0, 0, 1, 2, 5]))
        code = draw(st.sampled_from(allowed))
        tid = draw(st.sampled_from([ME, ME, ME, OTHER_THREAD, 3]))
        events.append((t, code, draw(_ARGS[code]), tid))
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=3)))
    return events, cuts


@pytest.mark.no_cover
@needs_c
@given(event_streams())
def test_c_reducer_equals_the_python_one_on_any_stream_from_lists_and_both_buffers(
    stream: tuple[list[Event], list[int]],
) -> None:
    """The C reducer gives what the Python one gives, fed from lists; and it reads ``Events``'
    structs directly (no tuples): drained from the other buffer, or by the other reducer, the
    result is the same as fed from lists. (One test: drawing a stream of up to 400 events is
    most of an example's time.)"""
    assert C is not None and C.READS_EVENT_STRUCTS  # found _hotpath's Events, whatever came first
    events, cuts = stream
    names = {99: "Net"}
    expected = _outcome(_python(ME, names), events, cuts)
    assert _outcome(_c(ME, names), events, cuts) == expected
    for make, buffer in itertools.product((_c, _python), (EventQueue, _c_events)):
        assert _outcome(make(ME, names), events, cuts, buffer()) == expected
        # as a run's monitor has it: no StepTiming handed out, the same rows
        unkept = make(ME, names, keep_steps=False)
        steps, rows, calls, mode = _outcome(unkept, events, cuts, buffer(), kept=False)
        assert steps == [] and (rows, calls, mode) == expected[1:]


@needs_c
def test_draining_an_event_that_fails_leaves_the_buffer_empty_and_usable() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise LookupError("no name")

    outcomes = []
    for make, new_buffer in itertools.product((_c, _python), (EventQueue, _c_events)):
        r, buffer = make(ME), new_buffer()
        for event in [(0, ENTER, Unprintable(), ME), *train_step(2)]:
            buffer.append(event)
        with pytest.raises(LookupError, match="no name"):
            r.drain(buffer)
        assert len(buffer) == 0  # taken, the failing event and the ones after it
        for event in [*train_step(20), *train_step(30)]:
            buffer.append(event)
        r.drain(buffer)
        outcomes.append([(s.start_ns, s.end_ns, s.boundary) for s in r.take_steps()])
    # the step opened by the failing event runs to the next boundary
    assert outcomes == [[(0, 29, "optimizer"), (29, 39, "optimizer")]] * 4


@needs_c
def test_an_owner_id_that_no_thread_can_have() -> None:
    """Thread ids are unsigned 64-bit ints: an owner that is not one matches no event (the C
    reducer then compares ids as objects), and nothing breaks."""
    for owner in (-1, 2**64):
        for make, new_buffer in itertools.product((_c, _python), (EventQueue, _c_events)):
            r, buffer = make(owner), new_buffer()
            for event in [*train_step(0), *train_step(10)]:
                buffer.append(event)
            r.drain(buffer)
            assert r.take_steps() == [] and r.finish() == [] and r.mode is None


@needs_c
def test_c_reducer_equals_the_python_one_on_a_real_training_loop() -> None:
    from .test_hotpath import Job, run_loop  # a real loop: DataLoader, model, loss, SGD, save

    sink = run_loop(False, Job(12))
    events = list(sink.events)
    owner = events[0][3]
    assert len(events) > 50
    python, c = _outcome(_python(owner), events, [17]), _outcome(_c(owner), events, [17])
    assert c == python
    assert len(python[0]) >= 4 and python[3] == "optimizer"  # type: ignore[arg-type]


@needs_c
def test_pure_python_switch_and_a_reducer_built_from_other_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    assert native_reducer() is None
    assert isinstance(new_reducer(ME), StepReducer)
    with pytest.raises(RuntimeError, match="C reducer"):
        new_reducer(ME, native=True)
    monkeypatch.setenv(PURE_PYTHON_ENV, "0")
    assert C is not None and not isinstance(new_reducer(ME), StepReducer)
    monkeypatch.setattr(C, "GC_STOP", 99)  # a module built from other event codes is not used
    assert native_reducer() is None


@needs_c
def test_a_session_reduces_with_the_c_reducer(tmp_path: Path) -> None:
    assert C is not None
    session = Session(tmp_path / "run", instrument_torch=False, readers=[], interval_s=3600.0)
    with session:
        for _ in range(3):
            session.step(batch_size=4)
        assert isinstance(session._monitor._reducer, C.Reducer)  # type: ignore[union-attr]
    assert session.record is not None
    steps = session.record.steps
    assert [(s.boundary, s.batch_size) for s in steps] == [("explicit", 4)] * 3


class _Shrinking:
    """A phase name whose ``str()`` empties the list of events being fed."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def __str__(self) -> str:
        self.events.clear()
        return "odd"


def test_a_phase_name_that_changes_the_events_being_fed(make: MakeReducer) -> None:
    events: list[Event] = [(0, ENTER, "data_wait", ME)]
    events += [(1, ENTER, _Shrinking(events), ME), *train_step(2), *train_step(12)]
    r = make(ME)
    r.feed(events)  # the C loop reads the list afresh: no dangling item
    assert events == []
