"""Healthy: a wide MLP in bf16 fed by a DataLoader of light items (a tensor slice each) with
8 workers, pinned memory and non-blocking copies: the data keeps up with the GPU."""

import torch
from _gpu import DEV, main, measure, mlp, size, steps, train_step
from torch.optim import SGD
from torch.utils.data import DataLoader, TensorDataset

BATCH, WIDTH, STEPS, WARMUP = size(1024, 16), size(8192, 64), steps(40, 4), 6


def run(fixed: bool) -> float:
    g = torch.Generator().manual_seed(0)
    n = BATCH * (STEPS + WARMUP)
    data = TensorDataset(torch.randn(n, 1024, generator=g), torch.randint(0, 10, (n,), generator=g))
    loader = DataLoader(
        data,
        batch_size=BATCH,
        num_workers=size(8, 2),
        pin_memory=DEV.type == "cuda",
        prefetch_factor=4,
    )
    model = mlp(width=WIDTH, depth=3, inputs=1024).to(DEV)
    step = train_step(model, SGD(model.parameters(), lr=0.01), autocast=True)
    batches = ((x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)) for x, y in loader)
    return measure(step, batches, warmup=WARMUP)


if __name__ == "__main__":
    main(run)
