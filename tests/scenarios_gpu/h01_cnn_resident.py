"""Healthy: a CNN on images held on the GPU, bf16 autocast, batches of 256, cudnn.benchmark
on. Nothing to fix (``ZOO_FIXED`` changes nothing)."""

import torch
from _gpu import DEV, cnn, main, measure, size, steps, train_step
from torch.optim import SGD

BATCH, STEPS, WARMUP = size(256, 8), steps(60, 4), 6


def run(fixed: bool) -> float:
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8, BATCH, 3, 64, 64, generator=g).to(DEV)
        y = torch.randint(0, 10, (8, BATCH), generator=g).to(DEV)
        model = cnn(width=size(96, 8)).to(DEV).to(memory_format=torch.channels_last)
        step = train_step(model, SGD(model.parameters(), lr=0.01, momentum=0.9), autocast=True)
        batches = ((x[i % 8], y[i % 8]) for i in range(STEPS + WARMUP))
        return measure(step, batches, warmup=WARMUP)
    finally:
        torch.backends.cudnn.benchmark = before


if __name__ == "__main__":
    main(run)
