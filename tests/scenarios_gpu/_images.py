"""An image data set decoded and augmented on the CPU in ``__getitem__`` (numpy), as a
job reading compressed images does: the GPU waits for it unless workers keep up."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset


class DecodedImages(Dataset):  # type: ignore[type-arg]
    """``n`` 3x64x64 images, each "decoded" from bytes and augmented per item: ``rounds``
    passes of a blur-like filter set the CPU cost of an item."""

    def __init__(self, n: int, rounds: int, side: int = 64) -> None:
        rng = np.random.default_rng(0)
        self.raw = [
            rng.integers(0, 255, side * side * 3, dtype=np.uint8).tobytes() for _ in range(64)
        ]
        self.n, self.rounds, self.side = n, rounds, side

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        side = self.side
        img = np.frombuffer(self.raw[i % 64], dtype=np.uint8).reshape(side, side, 3)
        img = img.astype(np.float32) / 255.0
        for _ in range(self.rounds):  # the decode and augmentation's CPU work
            img = 0.5 * img + 0.25 * (np.roll(img, 1, axis=0) + np.roll(img, 1, axis=1))
        if i % 2:
            img = img[:, ::-1]
        img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), i % 10
