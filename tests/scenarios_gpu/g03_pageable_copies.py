"""Fault: each step copies a 64 MiB batch from pageable host memory to the GPU
(``x[i].to("cuda")``), and the model on it is small: the step is the copy.

Fixed: the host tensor pinned once (``pin_memory()``) and copied with ``non_blocking=True``.
"""

import torch
from _gpu import DEV, main, measure, mlp, size, steps, train_step
from torch.optim import SGD

BATCH, FEATURES, STEPS, WARMUP = size(4096, 64), size(4096, 64), steps(60, 6), 5
CHUNKS = 8


def run(fixed: bool) -> float:
    g = torch.Generator().manual_seed(0)
    host = torch.randn(CHUNKS, BATCH, FEATURES, generator=g)
    labels = torch.randint(0, 10, (CHUNKS, BATCH), generator=g)
    if fixed and DEV.type == "cuda":
        host, labels = host.pin_memory(), labels.pin_memory()
    model = mlp(width=256, depth=1, inputs=FEATURES).to(DEV)
    step = train_step(model, SGD(model.parameters(), lr=0.01))
    batches = (
        (
            host[i % CHUNKS].to(DEV, non_blocking=fixed),
            labels[i % CHUNKS].to(DEV, non_blocking=fixed),
        )
        for i in range(STEPS + WARMUP)
    )
    return measure(step, batches, warmup=WARMUP)


if __name__ == "__main__":
    main(run)
