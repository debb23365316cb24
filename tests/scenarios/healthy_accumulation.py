"""Healthy: gradient accumulation, four micro-batches per optimizer step, whole micro-batches
indexed at once from an in-memory data set, a model whose compute dominates."""

import torch
from _zoo import mlp, tensors, until_done
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

MICRO_BATCHES = 4

if __name__ == "__main__":
    model, loss_fn = mlp(width=1024), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = tensors(4096)
    sampler = BatchSampler(RandomSampler(data), batch_size=32, drop_last=False)
    loader = DataLoader(data, sampler=sampler, batch_size=None)
    done, steps, micro = until_done(40), 0, 0
    while not done(steps):
        for x, y in loader:
            loss = loss_fn(model(x), y) / MICRO_BATCHES
            loss.backward()
            micro += 1
            if micro % MICRO_BATCHES == 0:
                opt.step()
                opt.zero_grad()
                steps += 1
                if done(steps):
                    break
    print("steps:", steps)
