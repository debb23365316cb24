"""Healthy: an MLP that saves a checkpoint (model and optimizer) every 100 steps, about 1% of
its time: what sensible periodic checkpointing costs. No warning."""

import os
import tempfile

import torch
from _zoo import mlp, tensors, until_done
from torch import nn
from torch.utils.data import DataLoader

EVERY = 100

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
    done, step = until_done(300), 0
    while not done(step):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            step += 1
            if step % EVERY == 0:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
            if done(step):
                break
    print("steps:", step)
