"""Fault: every image is decoded and augmented in ``Dataset.__getitem__`` in the training
process (``num_workers=0``): the GPU waits for the CPU each step.

Fixed: 12 DataLoader workers, pinned memory, non-blocking copies.
"""

from _gpu import DEV, cnn, main, measure, size, steps, train_step
from _images import DecodedImages
from torch.optim import SGD
from torch.utils.data import DataLoader

BATCH, STEPS, WARMUP = size(128, 8), steps(24, 4), 4


def run(fixed: bool) -> float:
    data = DecodedImages(BATCH * (STEPS + WARMUP), rounds=size(12, 2))
    loader = DataLoader(
        data,
        batch_size=BATCH,
        num_workers=size(12, 2) if fixed else 0,
        pin_memory=fixed and DEV.type == "cuda",
        prefetch_factor=4 if fixed else None,
    )
    model = cnn(width=size(64, 8)).to(DEV)
    step = train_step(model, SGD(model.parameters(), lr=0.01))
    batches = ((x.to(DEV, non_blocking=fixed), y.to(DEV, non_blocking=fixed)) for x, y in loader)
    return measure(step, batches, warmup=WARMUP)


if __name__ == "__main__":
    main(run)
