"""Fault: ``torch.cuda.empty_cache()`` after every step "to avoid running out of memory":
the caching allocator hands its blocks back to the driver, and the next step allocates them
again with cudaMalloc (which synchronises the device).

Fixed: no ``empty_cache()`` in the loop.
"""

import torch
from _gpu import DEV, main, measure, mlp, size, steps, train_step
from torch.optim import Adam

BATCH, WIDTH, STEPS, WARMUP = size(1024, 16), size(4096, 64), steps(150, 6), 6


def run(fixed: bool) -> float:
    g = torch.Generator().manual_seed(0)
    batch = (torch.randn(BATCH, 1024, generator=g).to(DEV), torch.randint(0, 10, (BATCH,)).to(DEV))
    model = mlp(width=WIDTH, depth=3, inputs=1024).to(DEV)
    train = train_step(model, Adam(model.parameters(), lr=1e-4), autocast=True)

    def step(b: tuple[torch.Tensor, torch.Tensor]) -> int:
        n = train(b)
        if not fixed and DEV.type == "cuda":
            torch.cuda.empty_cache()
        return n

    return measure(step, [batch] * (STEPS + WARMUP), warmup=WARMUP)


if __name__ == "__main__":
    main(run)
