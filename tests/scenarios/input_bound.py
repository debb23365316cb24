"""Fault: each sample is "decoded" with heavy per-sample work in the main process."""

import numpy as np
import torch
from _zoo import FEATURES, mlp, train
from torch.utils.data import DataLoader, Dataset

DECODE_ROUNDS = 6


class DecodedDataset(Dataset):  # type: ignore[type-arg]
    """Pretends to decode an image: six FFT round-trips per sample (~0.5 ms of CPU, several
    times the sample's share of the model's forward and backward)."""

    def __init__(self, n: int = 4096) -> None:
        self.raw = np.random.default_rng(0).standard_normal((n, 64, 64)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = self.raw[i]
        for _ in range(DECODE_ROUNDS):
            img = np.abs(np.fft.ifft2(np.fft.fft2(img) * 0.5))
        feats = img.reshape(-1)[:FEATURES].astype(np.float32)
        return torch.from_numpy(feats), i % 10


if __name__ == "__main__":
    loader = DataLoader(DecodedDataset(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(), steps=80))
