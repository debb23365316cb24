"""Fault: images read one by one from slow storage (a network disk: 0.5 ms of latency per
file, simulated by a sleep) in the main process, so the CNN waits on I/O.

Mild: 0.15 ms per file. Fixed: two DataLoader workers prefetch the files while the model
trains (the workers wait on I/O, not on a core, so they help even on 2 cores).
"""

import time

import torch
from _cnn import cnn, images, labels
from _zoo import dose, fixed, train
from torch.utils.data import DataLoader, Dataset

LATENCY_S = dose(strong=0.0005, mild=0.00015)


class SlowStorage(Dataset):  # type: ignore[type-arg]
    """Images whose every read waits ``LATENCY_S`` for the storage."""

    def __init__(self) -> None:
        self.x, self.y = images(4096), labels(4096)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(LATENCY_S)
        return self.x[i], self.y[i]


if __name__ == "__main__":
    if fixed():
        loader = DataLoader(
            SlowStorage(),
            batch_size=32,
            shuffle=True,
            num_workers=2,
            persistent_workers=True,
            prefetch_factor=4,
        )
    else:
        loader = DataLoader(SlowStorage(), batch_size=32, shuffle=True)
    print("steps:", train(loader, cnn(width=48), steps=40))
