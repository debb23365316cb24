"""A rank of a job that needs no process group: a few optimizer steps of a tiny model (the
8-rank test of records written side by side)."""

import torch
from torch import nn

torch.set_num_threads(1)

if __name__ == "__main__":
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 8)
    for _ in range(40):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
