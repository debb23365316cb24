"""Fault: a small MLP trained on batches of 4 from tensors already on the GPU: each step is
a few dozen tiny kernels, and the GPU idles between launches.

Fixed: batches of 512 (same data, same model).
"""

import torch
from _gpu import DEV, main, measure, mlp, size, steps, train_step
from torch.optim import SGD

N = size(262_144, 2048)


def run(fixed: bool) -> float:
    batch = 512 if fixed else 4
    n = steps(400 if fixed else 2000, 20)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 256, generator=g).to(DEV)
    y = torch.randint(0, 10, (N,), generator=g).to(DEV)
    model = mlp(width=512, depth=2, inputs=256).to(DEV)
    step = train_step(model, SGD(model.parameters(), lr=0.01))
    batches = (
        (x[(i * batch) % N : (i * batch) % N + batch], y[(i * batch) % N : (i * batch) % N + batch])
        for i in range(n + 20)
    )
    return measure(step, batches, warmup=20)


if __name__ == "__main__":
    main(run)
