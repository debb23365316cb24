"""Data-only and compute-only experiments on real CPU jobs: counts, budgets, refusals, and the
job's state left exactly as it was."""

from __future__ import annotations

import itertools
import random

import pytest

pytest.importorskip("torch")

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from stepdoctor.errors import UsageError
from stepdoctor.experiments import Throughput, compute_only, data_only, verdict


def _data(n: int = 512) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g))


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.3), nn.Linear(16, 3))


def test_data_only_counts_batches_and_samples_after_warmup() -> None:
    loader = DataLoader(_data(), batch_size=32)
    result = data_only(loader, batches=10, warmup=2)
    assert (result.batches, result.samples, result.warmup_batches) == (10, 320, 2)
    assert result.samples_per_sec is not None and result.samples_per_sec > 0
    short = data_only(DataLoader(_data(64), batch_size=32), batches=10, warmup=1)
    assert (short.batches, short.samples) == (1, 32)  # the loader ran out


def test_data_only_stops_at_the_budget_and_refuses_a_generator() -> None:
    ticks = itertools.count()
    result = data_only(
        DataLoader(_data(), batch_size=8), batches=50, budget_s=3.0, clock=lambda: next(ticks)
    )
    assert result.stopped_by_budget and result.batches == 3
    with pytest.raises(UsageError, match="cannot restart"):
        data_only(iter(DataLoader(_data(), batch_size=8)))


def test_data_only_leaves_a_persistent_loaders_own_workers_running() -> None:
    # A loader with persistent workers keeps one iterator: the job's. Timing the loader must
    # not reset it nor end its workers (the job's next batches would fail).
    loader = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=8, num_workers=1,
                        persistent_workers=True)  # fmt: skip
    own = iter(loader)
    first = next(own)
    for _ in range(2):
        assert data_only(loader, batches=3, warmup=1).batches == 3
    rest = list(own)
    assert len(rest) == 7 and not any(torch.equal(first[0], b[0]) for b in rest)
    assert len(list(loader)) == 8  # the next epoch, on the same workers
    loader._iterator._shutdown_workers()


def test_compute_only_restores_weights_buffers_grads_mode_and_rng() -> None:
    torch.manual_seed(1)
    model = _model()
    model.train()
    x, y = next(iter(DataLoader(_data(), batch_size=32)))
    nn.CrossEntropyLoss()(model(x), y).backward()  # the job has gradients pending
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    torch_rng, py_rng = torch.get_rng_state(), random.getstate()
    model.eval()

    result = compute_only(model, (x, y), nn.CrossEntropyLoss(), steps=5, warmup=1)

    assert (result.batches, result.samples) == (5, 160) and result.note == ""
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key  # BN running stats included
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))
    assert not model.training and not model[2].training  # eval mode kept
    assert torch.equal(torch.get_rng_state(), torch_rng) and random.getstate() == py_rng


def test_compute_only_without_a_loss_uses_the_output_mean() -> None:
    result = compute_only(_model(), torch.randn(16, 8), steps=3, warmup=0)
    assert result.batches == 3 and result.samples == 48
    assert result.note == "loss: mean of the output"


def test_training_with_experiments_in_the_middle_ends_with_the_same_weights() -> None:
    def train(experiments: bool) -> dict[str, torch.Tensor]:
        torch.manual_seed(7)
        random.seed(7)
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loader = DataLoader(_data(), batch_size=32, shuffle=True)
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(2):
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
                if experiments and epoch == 0 and step == 3:
                    data_only(loader, batches=5)
                    compute_only(model, (x, y), loss_fn, steps=3)
        return {k: v.clone() for k, v in model.state_dict().items()}

    plain, measured = train(False), train(True)
    assert all(torch.equal(plain[k], measured[k]) for k in plain)


def _tp(name: str, samples: int, seconds: float) -> Throughput:
    return Throughput(name=name, batches=samples // 32, samples=samples, seconds=seconds)


def test_verdict_input_compute_and_balanced() -> None:
    slow_data = verdict(_tp("data-only", 3200, 2.0), _tp("compute-only", 3200, 1.0))
    assert slow_data.bound == "input" and slow_data.ceiling_per_sec == 1600
    assert slow_data.unit == "samples/s"
    fast_data = verdict(_tp("data-only", 3200, 1.0), _tp("compute-only", 3200, 2.0))
    assert fast_data.bound == "compute"
    close = verdict(_tp("data-only", 3200, 1.0), _tp("compute-only", 3200, 1.05))
    assert close.bound == "balanced"
    unknown = Throughput(name="data-only", batches=10, samples=None, seconds=1.0)
    assert verdict(unknown, _tp("compute-only", 320, 1.0)).unit == "batches/s"
