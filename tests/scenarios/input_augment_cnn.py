"""Fault: a CNN whose dataset augments each image in numpy in ``__getitem__`` (random crop
from a padded copy, flip, 3x3 blur, noise, per-image normalisation), in the main process.

Mild: the crop and flip only. Fixed: the same augmentations in one DataLoader worker, on the
core the training leaves free (the job trains with one intra-op thread).
"""

import numpy as np
import torch
from _cnn import SIDE, cnn, images, labels
from _zoo import fixed, magnitude, train
from torch.utils.data import DataLoader, Dataset

PAD = 4
FULL = magnitude() == "strong"


def blur(img: np.ndarray) -> np.ndarray:
    """A 3x3 box blur of a C x H x W image, from nine shifted copies."""
    padded = np.pad(img, ((0, 0), (1, 1), (1, 1)), mode="edge")
    return sum(padded[:, i : i + SIDE, j : j + SIDE] for i in range(3) for j in range(3)) / 9


class Augmented(Dataset):  # type: ignore[type-arg]
    """Images augmented one at a time as they are read."""

    def __init__(self) -> None:
        self.x, self.y = images(4096).numpy(), labels(4096)
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        img = self.x[i]
        padded = np.pad(img, ((0, 0), (PAD, PAD), (PAD, PAD)), mode="reflect")
        top, left = self.rng.integers(0, 2 * PAD + 1, size=2)
        img = padded[:, top : top + SIDE, left : left + SIDE]
        if self.rng.random() < 0.5:
            img = img[:, :, ::-1]
        if FULL:
            img = blur(img) + self.rng.normal(0.0, 0.05, img.shape)
            img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)), self.y[i]


if __name__ == "__main__":
    if fixed():
        loader = DataLoader(
            Augmented(), batch_size=64, shuffle=True, num_workers=1, persistent_workers=True
        )
    else:
        loader = DataLoader(Augmented(), batch_size=64, shuffle=True)
    print("steps:", train(loader, cnn(width=16), steps=60))
