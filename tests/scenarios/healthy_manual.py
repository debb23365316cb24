"""Healthy: parameters updated by hand (no torch.optim), whole batches indexed at once from an
in-memory data set (a BatchSampler as the sampler), a model whose compute dominates."""

import torch
from _zoo import mlp, tensors, until_done
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

LR = 0.01

if __name__ == "__main__":
    model, loss_fn = mlp(width=1024), nn.CrossEntropyLoss()
    data = tensors(4096)
    sampler = BatchSampler(RandomSampler(data), batch_size=64, drop_last=False)
    loader = DataLoader(data, sampler=sampler, batch_size=None)
    done, steps = until_done(120), 0
    while not done(steps):
        for x, y in loader:
            model.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-LR)
            steps += 1
            if done(steps):
                break
    print("steps:", steps)
