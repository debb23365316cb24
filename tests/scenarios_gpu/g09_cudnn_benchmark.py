"""Fault: a convolutional network with fixed input shapes and ``cudnn.benchmark`` off
(torch's default): cuDNN's heuristic picks each convolution's algorithm instead of the
fastest measured one.

Fixed: ``torch.backends.cudnn.benchmark = True`` before training.
"""

import torch
from _gpu import DEV, cnn, main, measure, size, steps, train_step
from torch.optim import SGD

BATCH, SIDE, STEPS, WARMUP = size(128, 4), size(96, 16), steps(40, 4), 6


def run(fixed: bool) -> float:
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = fixed
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(BATCH, 3, SIDE, SIDE, generator=g).to(DEV)
        y = torch.randint(0, 10, (BATCH,), generator=g).to(DEV)
        model = cnn(width=size(96, 8)).to(DEV)
        step = train_step(model, SGD(model.parameters(), lr=0.01))
        return measure(step, [(x, y)] * (STEPS + WARMUP), warmup=WARMUP)
    finally:
        torch.backends.cudnn.benchmark = before


if __name__ == "__main__":
    main(run)
