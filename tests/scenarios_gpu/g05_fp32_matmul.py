"""Fault: a wide MLP trained in plain float32 on a GPU with tensor cores (TF32 off: torch's
default for matmuls): its matmuls run at the float32 rate, a small part of what the tensor
cores give.

Fixed: bf16 autocast around the forward and the loss.
"""

import torch
from _gpu import DEV, main, measure, mlp, size, steps, train_step
from torch.optim import SGD

BATCH, WIDTH, STEPS, WARMUP = size(2048, 16), size(8192, 64), steps(40, 4), 4


def run(fixed: bool) -> float:
    g = torch.Generator().manual_seed(0)
    batch = (torch.randn(BATCH, 1024, generator=g).to(DEV), torch.randint(0, 10, (BATCH,)).to(DEV))
    model = mlp(width=WIDTH, depth=3, inputs=1024).to(DEV)
    step = train_step(model, SGD(model.parameters(), lr=0.01), autocast=fixed)
    return measure(step, [batch] * (STEPS + WARMUP), warmup=WARMUP)


if __name__ == "__main__":
    main(run)
