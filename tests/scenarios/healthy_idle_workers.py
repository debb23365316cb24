"""Healthy: four DataLoader workers that normalise each sample (a little numpy work) and
torch's default intra-op pool of one thread per core, on a machine with two cores. The workers
wait for their next indices nearly all the time (93-97% of their stack samples): no thread is
short of a core. With one thread and one worker, what counting them as busy threads advised,
this job ran 1.5x slower."""

import os

import numpy as np
import torch
from _zoo import FEATURES, mlp, train
from torch.utils.data import DataLoader, Dataset


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
    torch.set_num_threads(len(os.sched_getaffinity(0)))  # torch's default (_zoo sets 1)
    loader = DataLoader(
        Scaled(),
        batch_size=128,
        shuffle=True,
        num_workers=4,
        persistent_workers=True,
        prefetch_factor=4,
    )
    print("steps:", train(loader, mlp(width=2048), steps=40))
