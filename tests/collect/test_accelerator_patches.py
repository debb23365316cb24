"""The patches a GPU/MPS job gets: device-to-host syncs timed as ``sync``, MPS fallbacks caught.

This machine has no GPU, so the device path is driven with torch's ``meta`` device (a real
non-CPU device type whose copies to the host fail) and the MPS warning with the exact text
torch's MPSFallback.mm emits (as quoted in pytorch/pytorch#106594).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from stepdoctor.collect.hooks.autoinstrument import TorchPatches
from stepdoctor.collect.hooks.events import ENTER, EXIT, EventBuffer, EventQueue
from stepdoctor.model import LoaderInfo

MPS_WARNING = (
    "The operator 'aten::sgn.out' is not currently supported on the MPS backend and will fall "
    "back to run on the CPU. This may have performance implications."
)


class Sink:
    def __init__(self, events: EventBuffer | None = None) -> None:
        self.events: EventBuffer = EventQueue() if events is None else events
        self.clock = time.perf_counter_ns
        self.models: dict[int, Any] = {}
        self.loaders: dict[int, LoaderInfo] = {}
        self.loader_workers: list[tuple[int, int]] = []
        self.batch_dtypes: list[str] = []
        self.model_inputs: dict[int, tuple[tuple[int, ...], str | None]] = {}
        self.model_precision: dict[int, tuple[str | None, str | None]] = {}
        self.fallback_ops: list[str] = []
        self.h2d_in_forward: list[int] = [0]
        self.h2d_copies: list[int] = [0, 0]
        self.sync_calls: list[int] = [0]
        self.experiment_trigger = None
        self.step_limit = None
        self.trace_capture = None


@pytest.mark.parametrize("cuda", [False, True])
def test_only_accelerator_machines_get_sync_patches(
    cuda: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Auto-detection, whatever this machine has (it failed as written for a CPU machine when
    the suite ran on a GPU machine)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    sink = Sink()
    patches = TorchPatches(sink)
    original = torch.Tensor.item
    patches.install()  # auto
    try:
        assert (torch.Tensor.item is not original) == cuda
    finally:
        patches.uninstall()
    assert torch.Tensor.item is original


def test_device_reads_are_timed_as_sync_and_cpu_reads_are_not() -> None:
    sink = Sink()
    patches = TorchPatches(sink)
    patches.install(accelerator=True)
    try:
        assert torch.ones(2).sum().item() == 2.0
        assert torch.ones(2).tolist() == [1.0, 1.0]
        assert not sink.events  # CPU tensors: no wait on a device
        with pytest.raises(RuntimeError, match="meta tensor"):
            torch.ones(2, device="meta").cpu()
    finally:
        patches.uninstall()
    codes = [(code, arg) for _, code, arg, _ in sink.events]
    assert codes == [(ENTER, "sync"), (EXIT, None)]  # closed even when the read fails
    assert sink.sync_calls == [1]  # the CPU reads are not counted
    assert torch.Tensor.cpu.__name__ == "cpu" and not hasattr(torch.Tensor.cpu, "__wrapped__")


def test_mps_fallback_warnings_name_the_ops_and_still_show() -> None:
    sink = Sink()
    patches = TorchPatches(sink)
    shown: list[str] = []
    original = warnings.showwarning
    warnings.showwarning = lambda message, *a, **k: shown.append(str(message))  # type: ignore[assignment]
    try:
        patches.install(accelerator=True)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn(MPS_WARNING, UserWarning, stacklevel=1)
            warnings.warn(MPS_WARNING, UserWarning, stacklevel=1)
            warnings.warn("something else", UserWarning, stacklevel=1)
        patches.uninstall()
    finally:
        warnings.showwarning = original  # type: ignore[assignment]
    assert sink.fallback_ops == ["aten::sgn.out"]
    assert shown == [MPS_WARNING, MPS_WARNING, "something else"]


class MakesMask(torch.nn.Module):
    """Builds a tensor on the CPU in forward and moves it to the input's device each call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(x.shape[-1]).to(x.device)
        return x * mask


def test_host_to_device_copies_are_timed_and_counted_inside_forward() -> None:
    sink = Sink()
    patches = TorchPatches(sink)
    patches.install(accelerator=True)
    try:
        batch = torch.ones(2, 3).to("meta")  # a batch moved by the loop: h2d, not in forward
        assert batch.device.type == "meta"
        torch.ones(2).to(torch.float64)  # a dtype change is no copy to a device
        model = MakesMask()
        model(batch)
        model(batch)
    finally:
        patches.uninstall()
    h2d = [e for e in sink.events if e[1] == ENTER and e[2] == "h2d"]
    assert len(h2d) == 3
    assert sink.h2d_in_forward == [2]
    assert sink.h2d_copies == [3, 0]  # from pageable memory (pinning needs a GPU)


def test_each_models_first_call_notes_its_autocast_and_matmul_precision() -> None:
    # What the tensor-core rule needs to know of a GPU job, read where the job runs its first
    # forward: autocast is a context, and the matmul precision may be set after start-up.
    sink = Sink()
    patches = TorchPatches(sink)
    plain, mixed = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    before = torch.get_float32_matmul_precision()
    patches.install(accelerator=False)
    try:
        torch.set_float32_matmul_precision("high")
        plain(torch.ones(2, 4))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed(torch.ones(2, 4))
    finally:
        patches.uninstall()
        torch.set_float32_matmul_precision(before)
    assert sink.model_precision[id(plain)] == ("off", "high")
    assert sink.model_precision[id(mixed)] == ("torch.bfloat16", "high")
