"""Fault: a DataLoader with 2 workers on a 16-core machine, each item costing ~4 ms of
CPU: the workers cannot keep the GPU fed.

Fixed: 14 workers (the cores less the training process and one spare).
"""

from _gpu import DEV, cnn, main, measure, size, steps, train_step
from _images import DecodedImages
from torch.optim import SGD
from torch.utils.data import DataLoader

BATCH, STEPS, WARMUP = size(64, 8), steps(40, 4), 6


def run(fixed: bool) -> float:
    data = DecodedImages(BATCH * (STEPS + WARMUP), rounds=size(40, 2))
    loader = DataLoader(
        data,
        batch_size=BATCH,
        num_workers=size(14, 2) if fixed else 2,
        pin_memory=DEV.type == "cuda",
        prefetch_factor=4,
    )
    model = cnn(width=size(64, 8)).to(DEV)
    step = train_step(model, SGD(model.parameters(), lr=0.01))
    batches = ((x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)) for x, y in loader)
    return measure(step, batches, warmup=WARMUP)


if __name__ == "__main__":
    main(run)
