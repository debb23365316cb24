"""Fault: four DataLoader workers and torch's intra-op pool at one thread per core, on a
machine with two cores (six busy threads for two cores).

Mild: three workers and one intra-op thread (two threads a core on 2 cores). Fixed: one
worker and one intra-op thread, the other core the worker's.
"""

import numpy as np
import torch
from _zoo import FEATURES, dose, fixed, mlp, train
from torch.utils.data import DataLoader, Dataset

CORES = 2
WORKERS, THREADS = (1, 1) if fixed() else dose(strong=(4, CORES), mild=(3, 1))


class Scaled(Dataset):  # type: ignore[type-arg]
    """Samples normalised on the fly (a little numpy work per sample)."""

    def __init__(self, n: int = 8192) -> None:
        self.raw = np.random.default_rng(0).standard_normal((n, FEATURES))

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        row = self.raw[i]
        return torch.from_numpy(((row - row.mean()) / row.std()).astype(np.float32)), i % 10


if __name__ == "__main__":
    torch.set_num_threads(THREADS)
    loader = DataLoader(
        Scaled(),
        batch_size=128,
        shuffle=True,
        num_workers=WORKERS,
        persistent_workers=True,
        prefetch_factor=4,
    )
    print("steps:", train(loader, mlp(width=2048), steps=40))
