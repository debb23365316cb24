"""A seeded training run (shuffled loader, dropout, batch-norm, momentum) that saves its final
weights to argv[1]: the same with and without ``--experiments``."""

import sys

import torch
from _zoo import FEATURES, tensors
from torch import nn
from torch.utils.data import DataLoader

if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(FEATURES, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(128, 10),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(tensors(n=4096), batch_size=32, shuffle=True)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(2):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
    torch.save(model.state_dict(), sys.argv[1])
