"""The ``Module.__call__`` patch: outermost calls are ``forward``, and after a warm-up the patch
narrows itself to the classes seen outermost, so inner layers run unpatched."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("torch")

import torch
from torch import nn

from stepdoctor.collect.hooks.autoinstrument import NARROW_AFTER_CALLS, TorchPatches
from stepdoctor.collect.hooks.events import FWD_ENTER, FWD_EXIT

from .test_accelerator_patches import Sink


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Called(nn.Module):
    """A module class with a ``__call__`` of its own (kept under the wrapper)."""

    calls = 0

    def __call__(self, *args: object, **kwargs: object) -> object:
        type(self).calls += 1
        return super().__call__(*args, **kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def forward_events(sink: Sink) -> list[tuple[int, int]]:
    """(code, model id) of each forward event, FWD_ENTER's packed flags removed."""
    return [
        (code, arg >> 2 if code == FWD_ENTER else arg)
        for _, code, arg, _ in sink.events
        if code in (FWD_ENTER, FWD_EXIT)
    ]


def test_patch_narrows_to_outermost_classes_and_keeps_timing_them() -> None:
    model, loss, other = Net(), nn.MSELoss(), Called()
    x, y = torch.randn(3, 4), torch.randn(3, 2)
    original = nn.Module.__call__
    patches = TorchPatches(sink := Sink())
    patches.install(accelerator=False)
    try:
        assert nn.Module.__call__ is not original
        other(x)  # a class with its own __call__, seen outermost during the warm-up
        for _ in range(NARROW_AFTER_CALLS // 2):
            loss(model(x), y)
        # Narrowed: nn.Module's own __call__ is back, so Linear/ReLU/Sequential run unpatched.
        assert nn.Module.__call__ is original
        assert "__call__" not in vars(nn.Linear) and "__call__" not in vars(nn.Sequential)
        assert "__call__" in vars(Net) and "__call__" in vars(nn.MSELoss)
        sink.events.clear()
        twin = Net()  # a new instance of a patched class is still a model
        loss(model(x), y)
        twin(x)
        assert other(x).shape == x.shape and Called.calls == 2  # its own __call__ still runs
        assert forward_events(sink) == [
            (FWD_ENTER, id(model)),
            (FWD_EXIT, id(model)),
            (FWD_ENTER, id(loss)),
            (FWD_EXIT, id(loss)),
            (FWD_ENTER, id(twin)),
            (FWD_EXIT, id(twin)),
            (FWD_ENTER, id(other)),
            (FWD_EXIT, id(other)),
        ]
        assert id(twin) in sink.models
        # Inner layers are not outermost even when their class is patched (nested Sequentials).
        seq = nn.Sequential(nn.Sequential(nn.Linear(4, 4)))
        sink.events.clear()
        seq(x)
        assert forward_events(sink) == []  # Sequential was never outermost: not patched
    finally:
        patches.uninstall()
    assert nn.Module.__call__ is original
    for cls in (Net, nn.MSELoss, nn.Linear, nn.Sequential):
        assert "__call__" not in vars(cls)
    assert vars(Called)["__call__"] is not None and Called.__call__.__name__ == "__call__"
    assert not hasattr(Called.__call__, "__wrapped__")


class Meeting(nn.Module):
    """Waits in its forward until two threads are inside it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.barrier: threading.Barrier | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        return self.linear(x)


def test_narrowed_patch_still_sees_concurrent_forwards_per_thread() -> None:
    model = Meeting()
    x = torch.randn(2, 4)
    patches = TorchPatches(sink := Sink())
    patches.install(accelerator=False)
    try:
        for _ in range(NARROW_AFTER_CALLS):
            model(x)
        assert nn.Module.__call__ is getattr(nn.Module.__call__, "__wrapped__", nn.Module.__call__)
        sink.events.clear()
        model.barrier = threading.Barrier(2)  # both threads are inside forward together
        threads = [threading.Thread(target=model, args=(x,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tids = {tid for _, code, _, tid in sink.events if code == FWD_ENTER}
        assert len(tids) == 2
    finally:
        patches.uninstall()


def test_reinstall_starts_discovering_again() -> None:
    patches = TorchPatches(Sink())
    for _ in range(2):
        patches.install(accelerator=False)
        try:
            for _ in range(NARROW_AFTER_CALLS):
                Net()(torch.randn(1, 4))
            assert "__call__" in vars(Net)
        finally:
            patches.uninstall()
        assert "__call__" not in vars(Net)
