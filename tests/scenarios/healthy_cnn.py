"""Healthy: a small CNN on 1x28x28 images held in memory, batch 64. No warning."""

import torch
from _zoo import train
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    )  # fmt: skip


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(4096, 1, 28, 28, generator=g), torch.randint(0, 10, (4096,)))
    loader = DataLoader(data, batch_size=64, shuffle=True)
    print("steps:", train(loader, cnn(), steps=120))
