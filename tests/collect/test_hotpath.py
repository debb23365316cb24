"""The C hooks (``collect/hooks/_hotpath.c``) against their pure-Python twins: the same training
loop under each appends the same events; exceptions, descriptors, references and odd batches.

``make test`` sets ``STEPDOCTOR_REQUIRE_C_PARTS=1``: there the C module must have been built
(CI has a compiler), elsewhere the C half is skipped with a reason.
"""

from __future__ import annotations

import gc
import io
import itertools
import os
import sys
from collections import OrderedDict
from typing import Any

import pytest

pytest.importorskip("torch")

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from stepdoctor.collect.hooks import autoinstrument
from stepdoctor.collect.hooks.autoinstrument import (
    NARROW_AFTER_CALLS,
    PURE_PYTHON_ENV,
    TorchPatches,
    native_hooks,
)
from stepdoctor.collect.hooks.batches import batch_size_of
from stepdoctor.collect.hooks.events import ENTER, EXIT, FWD_ENTER, FWD_EXIT, OPT_END, Event
from stepdoctor.collect.session import Session

from .test_accelerator_patches import MakesMask, Sink

C = native_hooks()
REQUIRED = os.environ.get("STEPDOCTOR_REQUIRE_C_PARTS", "") == "1"
needs_c = pytest.mark.skipif(
    C is None and not REQUIRED, reason="the C hooks were not built (no compiler at install)"
)
BOTH = [pytest.param(False, id="python"), pytest.param(True, id="c", marks=needs_c)]
#: (C hooks, into a C ``Events`` buffer): the Python hooks, the C ones appending tuples to an
#: ``EventQueue``, the C ones writing structs into ``Events``.
HOOKS_AND_BUFFERS = [
    pytest.param(False, False, id="python"),
    pytest.param(True, False, id="c-tuples", marks=needs_c),
    pytest.param(True, True, id="c-structs", marks=needs_c),
]


class Counter:
    """A clock that ticks once per reading: two runs making the same readings in the same
    order get the same timestamps."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1)

    def __call__(self) -> int:
        return next(self._ticks)


def make_sink(structs: bool = False) -> Sink:
    """A sink on a counting clock; ``structs``: its events go to a C ``Events`` buffer."""
    sink = Sink(C.Events() if structs else None)
    sink.clock = Counter()
    return sink


def recorded(sink: Sink) -> list[Event]:
    """The events the sink holds (taken out of it)."""
    return sink.events.take()


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Job:
    """A real loop: DataLoader of (x, y) batches, model + loss, backward, SGD, a checkpoint.
    The same objects (so the same ids in the events) for every run."""

    def __init__(self, steps: int) -> None:
        torch.manual_seed(0)
        self.model = Net()
        self.loss_fn = nn.MSELoss()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        data = torch.utils.data.TensorDataset(torch.randn(steps * 3, 4), torch.randn(steps * 3, 2))
        self.loader = torch.utils.data.DataLoader(data, batch_size=3)


def train(job: Job) -> None:
    model, loss_fn, opt = job.model, job.loss_fn, job.opt
    for x, y in job.loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    with torch.no_grad():
        model.eval()
        model(torch.randn(1, 4))
        model.train()
    torch.save(model.state_dict(), io.BytesIO())


def run_loop(native: bool, job: Job, structs: bool = False) -> Sink:
    sink = make_sink(structs)
    patches = TorchPatches(sink, native=native)
    patches.install(accelerator=False)
    try:
        train(job)
    finally:
        patches.uninstall()
    return sink


@needs_c
def test_c_hooks_are_built_and_match_the_event_codes() -> None:
    assert C is not None, "STEPDOCTOR_REQUIRE_C_PARTS=1 but collect/hooks/_hotpath is not built"
    assert (C.ENTER, C.EXIT, C.OPT_END, C.FWD_ENTER, C.FWD_EXIT) == (
        ENTER,
        EXIT,
        OPT_END,
        FWD_ENTER,
        FWD_EXIT,
    )


@needs_c
def test_a_training_loop_appends_the_same_events_under_c_and_python_hooks() -> None:
    steps = NARROW_AFTER_CALLS  # past the forward patch's narrowing
    job = Job(steps)
    python = run_loop(False, job)
    native = run_loop(True, job)
    structs = run_loop(True, job, structs=True)  # the same, written as C structs
    events = recorded(native)
    assert events == recorded(python) == recorded(structs)
    assert len(structs.events) == 0
    codes = [code for _, code, _, _ in events]
    # every step: data wait, model and loss forward, backward, optimizer; then the
    # loader's end, the eval call and the checkpoint
    assert codes.count(FWD_ENTER) == 2 * steps + 1
    assert codes.count(OPT_END) == steps
    assert native.batch_dtypes == python.batch_dtypes == ["torch.float32"] * 2 * 4
    assert native.model_inputs == python.model_inputs
    assert set(native.models) == set(python.models) == {id(job.model), id(job.loss_fn)}
    exits = [arg for _, code, arg, _ in events if code == EXIT]
    assert exits.count(3) == steps  # each batch's size on leaving data_wait


@pytest.mark.parametrize(("native", "structs"), HOOKS_AND_BUFFERS)
def test_a_forward_that_raises_is_closed_and_the_exception_passes_unchanged(
    native: bool, structs: bool
) -> None:
    class Broken(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise KeyError("planted")

    sink = make_sink(structs)
    patches = TorchPatches(sink, native=native)
    patches.install(accelerator=False)
    broken = Broken()
    try:
        with pytest.raises(KeyError, match="planted") as caught:
            broken(torch.ones(1))
        assert caught.value.__context__ is None
        assert patches._in_forward == set()  # the thread is not left "inside" a forward
        broken2 = Net()
        broken2(torch.ones(1, 4))  # the next outermost call is timed again
    finally:
        patches.uninstall()
    codes = [code for _, code, _, _ in recorded(sink)]
    assert codes == [FWD_ENTER, FWD_EXIT, FWD_ENTER, FWD_EXIT]


@pytest.mark.parametrize("native", BOTH)
def test_a_first_call_hook_that_raises_breaks_no_call_and_leaves_no_thread_inside(
    native: bool,
) -> None:
    sink = make_sink()

    class Trigger:
        def saw_model(self, model: object, *args: object) -> None:
            raise RuntimeError("trigger failed")

    sink.experiment_trigger = Trigger()  # type: ignore[assignment]
    patches = TorchPatches(sink, native=native)
    patches.install(accelerator=False)
    try:
        # what we note of a model's first call failing is ours: the job's call goes on
        assert Net()(torch.ones(1, 4)).shape[0] == 1
        assert patches._in_forward == set()
        assert sink.models  # the model is still known
    finally:
        patches.uninstall()


@pytest.mark.parametrize(("native", "structs"), HOOKS_AND_BUFFERS)
def test_backward_that_raises_closes_its_phase(native: bool, structs: bool) -> None:
    sink = make_sink(structs)
    patches = TorchPatches(sink, native=native)
    patches.install(accelerator=False)
    try:
        with pytest.raises(RuntimeError, match="does not require grad"):
            torch.ones(2).sum().backward()
    finally:
        patches.uninstall()
    assert [(code, arg) for _, code, arg, _ in recorded(sink)] == [
        (ENTER, "backward"),
        (EXIT, None),
    ]


def device_work(native: bool, model: nn.Module, structs: bool = False) -> Sink:
    """Copies to a device (``meta``: this machine has no GPU) outside and inside ``model``'s
    forward, a CPU read and a device read (which fails: meta tensors hold no data)."""
    sink = make_sink(structs)
    patches = TorchPatches(sink, native=native)
    patches.install(accelerator=True)
    try:
        batch = torch.ones(2, 3).to("meta")
        model(batch)
        assert torch.ones(1).item() == 1.0
        with pytest.raises(RuntimeError, match="meta tensor"):
            batch.cpu()
    finally:
        patches.uninstall()
    return sink


@pytest.mark.parametrize(("native", "structs"), HOOKS_AND_BUFFERS)
def test_device_reads_and_copies_are_timed_by_the_phase_hook(native: bool, structs: bool) -> None:
    sink = device_work(native, MakesMask(), structs)
    phases = [(code, arg) for _, code, arg, _ in recorded(sink) if code in (ENTER, EXIT)]
    assert phases == [(ENTER, "h2d"), (EXIT, None)] * 2 + [(ENTER, "sync"), (EXIT, None)]
    assert sink.h2d_in_forward == [1]  # the mask, not the batch
    assert sink.sync_calls == [1]  # the device read, not the CPU one


@needs_c
def test_device_reads_and_copies_append_the_same_events_under_c_and_python_hooks() -> None:
    model = MakesMask()  # one model: the same id in the forward events of every run
    python, native = device_work(False, model), device_work(True, model)
    structs = device_work(True, model, structs=True)
    assert recorded(python) == recorded(native) == recorded(structs)


@pytest.mark.parametrize(("native", "structs"), HOOKS_AND_BUFFERS)
def test_the_loaders_end_closes_data_wait_without_a_batch_size(native: bool, structs: bool) -> None:
    sink = make_sink(structs)
    patches = TorchPatches(sink, native=native)
    patches.install(accelerator=False)
    try:
        loader = torch.utils.data.DataLoader(list(range(5)), batch_size=2)
        batches = list(loader)
    finally:
        patches.uninstall()
    assert [len(b) for b in batches] == [2, 2, 1]
    assert [arg for _, code, arg, _ in recorded(sink) if code == EXIT] == [2, 2, 1, None]


@needs_c
def test_hooks_bind_like_functions_and_carry_the_wrapped_names() -> None:
    assert C is not None
    sink = make_sink()
    patches = TorchPatches(sink, native=True)
    original_next = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
    patches.install(accelerator=False)
    try:
        hook = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
        assert isinstance(hook, C.Hook)
        assert hook.__wrapped__ is original_next
        assert hook.__name__ == "__next__"
        it = iter(torch.utils.data.DataLoader([1, 2, 3], batch_size=2))
        bound = it.__next__  # a bound method, as for a Python function
        assert bound.__self__ is it
        assert bound().tolist() == [1, 2]
        assert next(it).tolist() == [3]
        assert torch.autograd.backward.__name__ == "backward"
    finally:
        patches.uninstall()
    assert torch.utils.data.dataloader._BaseDataLoaderIter.__next__ is original_next


@needs_c
def test_the_after_batch_callback_switches_itself_off_once_dtypes_are_seen() -> None:
    sink = make_sink()
    patches = TorchPatches(sink, native=True)
    patches.install(accelerator=False)
    try:
        hook = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
        loader = torch.utils.data.DataLoader(torch.zeros(20, 2, dtype=torch.float64), batch_size=2)
        assert hook.after is not None
        list(loader)
        assert hook.after is None  # no Python left on the per-batch path
    finally:
        patches.uninstall()
    assert sink.batch_dtypes == ["torch.float64"] * autoinstrument.DTYPE_CHECKS


@needs_c
def test_c_hooks_leak_no_references() -> None:
    model = Net()
    x = torch.ones(2, 4)
    sink = make_sink()
    patches = TorchPatches(sink, native=True)
    patches.install(accelerator=False)
    try:
        model(x)
        gc.collect()
        before = (sys.getrefcount(model), sys.getrefcount(x))
        for _ in range(200):
            model(x).sum().backward()
        sink.events.clear()
        gc.collect()
        after = (sys.getrefcount(model), sys.getrefcount(x))
    finally:
        patches.uninstall()
    assert after == before


@needs_c
def test_pure_python_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    assert native_hooks() is None
    with pytest.raises(RuntimeError, match="C hook module"):
        TorchPatches(make_sink(), native=True)
    monkeypatch.setenv(PURE_PYTHON_ENV, "0")
    assert native_hooks() is not None


@needs_c
def test_a_session_uses_the_c_hooks(tmp_path: Any) -> None:
    assert C is not None
    with Session(tmp_path / "run", instrument_torch=True, readers=[], interval_s=3600.0):
        assert isinstance(torch.autograd.backward, C.Hook)
    assert not isinstance(torch.autograd.backward, C.Hook)


class Shaped:
    def __init__(self, shape: object) -> None:
        self.shape = shape


class BadShape:
    @property
    def shape(self) -> object:
        raise ValueError("no shape here")


class ReorderedDict(OrderedDict[str, Any]):
    def values(self) -> Any:  # type: ignore[override]
        return list(reversed(list(super().values())))


class ShapedTuple(tuple[Any, ...]):
    """A batch type of the job's own (a subclass of tuple) that says its shape."""

    shape = (11,)


ODD_BATCHES = [
    torch.zeros(5, 3),
    torch.tensor(2.0),
    (torch.zeros(4), torch.zeros(7)),
    [[[torch.zeros(6, 1)]]],
    [[[[torch.zeros(6, 1)]]]],  # deeper than four levels
    {"x": torch.zeros(9, 2), "y": torch.zeros(1)},
    ReorderedDict(x=torch.zeros(9, 2), y=torch.zeros(1)),
    {},
    [],
    (),
    "text",
    None,
    Shaped((3, 4)),
    Shaped(()),
    Shaped([torch.tensor(8)]),
    Shaped(7),  # no len()
    Shaped(("a",)),  # not a number
    Shaped({}),
    BadShape(),
    ShapedTuple((torch.zeros(3),)),  # a subclass's own shape first
]


@needs_c
@pytest.mark.parametrize("batch", ODD_BATCHES, ids=range(len(ODD_BATCHES)))
def test_batch_size_of_agrees_on_odd_batches(batch: object) -> None:
    assert C is not None
    assert C.batch_size_of(batch) == batch_size_of(batch)


def test_a_subclass_of_a_plain_container_is_asked_its_shape() -> None:
    assert batch_size_of(ShapedTuple((torch.zeros(3),))) == 11
    assert batch_size_of((torch.zeros(3),)) == 3


leaves = st.one_of(
    st.integers(0, 5).map(lambda n: torch.zeros(n, 1)),
    st.builds(Shaped, st.one_of(st.tuples(st.integers(-3, 9)), st.just(()), st.integers())),
    st.none(),
    st.text(max_size=2),
)
batches = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
    ),
    max_leaves=6,
)


@needs_c
@given(batches)
def test_batch_size_of_agrees_on_generated_batches(batch: object) -> None:
    assert C is not None
    assert C.batch_size_of(batch) == batch_size_of(batch)


def test_a_symbolic_input_shape_is_noted_as_unknown() -> None:
    # Keras 3 builds its layers on tensors whose batch dimension is None (torch backend)
    from stepdoctor.collect.hooks.autoinstrument import _input_of

    class Symbolic:
        shape = (None, 256)
        dtype = "float32"

    assert _input_of((Symbolic(),), {}) == ((), None)
    assert _input_of((torch.ones(2, 3),), {}) == ((2, 3), "torch.float32")
