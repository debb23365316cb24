"""Shared fixtures: every test must leave no thread, GC callback or torch patch behind."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator

import pytest


def _torch_state() -> tuple[object, ...]:
    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    from torch.utils.data import dataloader as dl

    return (
        torch.nn.Module.__dict__["__call__"],
        torch.autograd.backward,
        torch.save,
        dl._BaseDataLoaderIter.__dict__["__next__"],
        dl.DataLoader.__dict__["__iter__"],
    )


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Fail a test that leaves a traindoctor thread, GC callback, session or patch behind."""
    from traindoctor.collect import current_session

    callbacks = list(gc.callbacks)
    torch_before = _torch_state()
    yield
    leaked = [t.name for t in threading.enumerate() if t.name.startswith("traindoctor")]
    assert not leaked, f"threads left running: {leaked}"
    assert list(gc.callbacks) == callbacks, "gc.callbacks changed"
    assert current_session() is None, "a session is still active"
    if torch_before:
        assert _torch_state() == torch_before, "torch patches left installed"
