"""A small image classifier for the zoo's CNN jobs (conv-batchnorm-relu blocks, a linear head)."""

from __future__ import annotations

import torch
from _zoo import CLASSES
from torch import nn

SIDE = 32


def cnn(width: int = 32, channels: int = 3) -> nn.Module:
    """Two conv blocks (``width`` and ``2 * width`` channels, 3x3, pooled) and a linear head."""
    return nn.Sequential(
        nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(2 * width * (SIDE // 4) ** 2, CLASSES),
    )  # fmt: skip


def images(n: int = 2048, channels: int = 3, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Random ``n`` x ``channels`` x 32 x 32 images (the default dtype unless ``dtype``)."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, channels, SIDE, SIDE, generator=g, dtype=dtype)


def labels(n: int = 2048) -> torch.Tensor:
    """Random class labels for ``images(n)``."""
    return torch.randint(0, CLASSES, (n,), generator=torch.Generator().manual_seed(1))


__all__ = ["SIDE", "cnn", "images", "labels"]
