"""Fault: a CNN whose dataset augments each image in numpy in ``__getitem__`` (random crop
from a padded copy, flip, 3x3 blur, noise, per-image normalisation), in the main process.

Mild: the crop and flip only. Fixed: the same augmentations applied to the whole batch with
tensor operations in the ``collate_fn`` (one crop offset and one blur for the batch).
"""

import numpy as np
import torch
from _cnn import SIDE, cnn, images, labels
from _zoo import fixed, magnitude, train
from torch.utils.data import DataLoader, Dataset, default_collate

PAD = 4
FULL = magnitude() == "strong"


def blur(img: np.ndarray) -> np.ndarray:
    """A 3x3 box blur of a C x H x W image, from nine shifted copies."""
    padded = np.pad(img, ((0, 0), (1, 1), (1, 1)), mode="edge")
    return sum(padded[:, i : i + SIDE, j : j + SIDE] for i in range(3) for j in range(3)) / 9


class Augmented(Dataset):  # type: ignore[type-arg]
    """Images augmented one at a time, unless the job is fixed (then the batch is)."""

    def __init__(self) -> None:
        self.x, self.y = images().numpy(), labels()
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        img = self.x[i]
        if not fixed():
            padded = np.pad(img, ((0, 0), (PAD, PAD), (PAD, PAD)), mode="reflect")
            top, left = self.rng.integers(0, 2 * PAD + 1, size=2)
            img = padded[:, top : top + SIDE, left : left + SIDE]
            if self.rng.random() < 0.5:
                img = img[:, :, ::-1]
            if FULL:
                img = blur(img) + self.rng.normal(0.0, 0.05, img.shape)
                img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)), self.y[i]


def augment_batch(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """The same augmentations on the whole batch at once."""
    x, y = default_collate(batch)
    padded = torch.nn.functional.pad(x, (PAD,) * 4, mode="reflect")
    top, left = torch.randint(0, 2 * PAD + 1, (2,)).tolist()
    x = padded[:, :, top : top + SIDE, left : left + SIDE]
    flip = torch.rand(len(x)) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    x = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    x = x + 0.05 * torch.randn_like(x)
    mean, std = x.mean(dim=(1, 2, 3), keepdim=True), x.std(dim=(1, 2, 3), keepdim=True)
    return [(x - mean) / (std + 1e-6), y]


if __name__ == "__main__":
    collate = augment_batch if fixed() else None
    loader = DataLoader(Augmented(), batch_size=64, shuffle=True, collate_fn=collate)
    print("steps:", train(loader, cnn(width=16), steps=60))
