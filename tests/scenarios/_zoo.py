"""Shared pieces of the scenario zoo: real small training jobs on the CPU.

Each scenario script trains for a fixed time budget (``SECONDS``, default 6 s) so the zoo
stays fast on a 2-core machine; the fault it plants is in the script itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

SECONDS = float(os.environ.get("ZOO_SECONDS", "6"))
FEATURES = 256
CLASSES = 10


def mlp(width: int = 1024, depth: int = 2) -> nn.Module:
    """A plain MLP; ~1.3M parameters at the default size (compute >> data loading)."""
    layers: list[nn.Module] = [nn.Linear(FEATURES, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, CLASSES))
    return nn.Sequential(*layers)


def tensors(n: int = 8192, dtype: torch.dtype = torch.float32) -> TensorDataset:
    """A synthetic classification data set held in memory."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, FEATURES, generator=g).to(dtype)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    return TensorDataset(x, y)


def train(
    loader: DataLoader | list,  # type: ignore[type-arg]
    model: nn.Module,
    *,
    seconds: float = SECONDS,
    after_step: Callable[[int, torch.Tensor], None] | None = None,
    lr: float = 0.01,
) -> int:
    """Train until ``seconds`` have passed; return the number of steps."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    deadline = time.monotonic() + seconds
    step = 0
    while time.monotonic() < deadline:
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step(step, loss)
            step += 1
            if time.monotonic() >= deadline:
                break
    return step


__all__ = ["FEATURES", "SECONDS", "Dataset", "mlp", "tensors", "train"]
