"""What the hooks note about a loader: the worker processes it starts."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

pytest.importorskip("torch")

import torch
from torch.utils.data import DataLoader, TensorDataset

from stepdoctor.collect import Session
from stepdoctor.collect.hooks.batches import note_workers
from stepdoctor.record import load_run


def _loader(workers: int) -> DataLoader:  # type: ignore[type-arg]
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    context = "fork" if workers else None
    return DataLoader(data, batch_size=8, num_workers=workers, multiprocessing_context=context)


def test_the_workers_a_loader_starts_are_noted_and_nothing_else() -> None:
    loader = _loader(2)
    seen: list[tuple[int, int]] = []
    iterator = iter(loader)
    note_workers(iterator, loader, seen)
    children = {p.pid for p in psutil.Process(os.getpid()).children()}
    assert len(seen) == 2 and {pid for pid, _ in seen} <= children
    assert {loader_id for _, loader_id in seen} == {id(loader)}
    iterator._shutdown_workers()  # ends the workers and closes their queues now, not at GC
    plain: list[tuple[int, int]] = []
    note_workers(iter(_loader(0)), loader, plain)  # no workers, and no error
    note_workers(object(), loader, plain)
    assert plain == []


def test_a_run_records_its_loaders_workers(tmp_path: Path) -> None:
    with Session(tmp_path, instrument_torch=True) as doc:
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in _loader(1):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    rec = doc.record
    assert rec is not None
    (worker,) = rec.loader_workers
    assert worker.loader_id == rec.loaders[0].loader_id
    assert load_run(tmp_path).loader_workers == rec.loader_workers


def _pad(batch: list[object]) -> list[object]:
    return batch


class _RemoveColumns:
    """The Hugging Face Trainer's wrapper of its data collator (``data_collator``)."""

    def __init__(self, data_collator: object) -> None:
        self.data_collator = data_collator

    def __call__(self, batch: list[object]) -> object:
        return batch


def test_a_loaders_own_collate_fn_is_named_and_torchs_default_is_not() -> None:
    from torch.utils.data import DataLoader

    from stepdoctor.collect.hooks.batches import loader_info

    data = list(range(8))
    assert loader_info(DataLoader(data, batch_size=2)).collate_fn == ""
    own = loader_info(DataLoader(data, batch_size=2, collate_fn=_pad)).collate_fn
    assert own.startswith("_pad (") and "test_batches.py:" in own
    wrapped = loader_info(DataLoader(data, batch_size=2, collate_fn=_RemoveColumns(_pad)))
    assert wrapped.collate_fn.startswith("_pad (")
