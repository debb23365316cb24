"""Fault: each sample is "decoded" with heavy per-sample work in the main process.

Mild: half the decode work (three FFT round-trips a sample instead of six). Fixed: the data set
is decoded once, vectorised over all samples, before training (decoded data cached in memory).
"""

import numpy as np
import torch
from _zoo import FEATURES, dose, fixed, mlp, train
from torch.utils.data import DataLoader, Dataset

DECODE_ROUNDS = dose(strong=6, mild=3)


def decode(raw: np.ndarray) -> np.ndarray:
    """FFT round-trips over the last two axes of one image or of a stack of them."""
    img = raw
    for _ in range(DECODE_ROUNDS):
        img = np.abs(np.fft.ifft2(np.fft.fft2(img) * 0.5))
    return img.astype(np.float32)


class DecodedDataset(Dataset):  # type: ignore[type-arg]
    """Pretends to decode an image: six FFT round-trips per sample (~0.5 ms of CPU, several
    times the sample's share of the model's forward and backward)."""

    def __init__(self, n: int = 2048, *, cache: bool = False) -> None:
        self.raw = np.random.default_rng(0).standard_normal((n, 64, 64)).astype(np.float32)
        self.cache = cache
        if cache:
            self.raw = decode(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = self.raw[i] if self.cache else decode(self.raw[i])
        feats = np.ascontiguousarray(img.reshape(-1)[:FEATURES])
        return torch.from_numpy(feats), i % 10


if __name__ == "__main__":
    loader = DataLoader(DecodedDataset(cache=fixed()), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(), steps=50))
