"""Fault: each sample is "decoded" with heavy per-sample work in the main process."""

import numpy as np
import torch
from _zoo import FEATURES, mlp, train
from torch.utils.data import DataLoader, Dataset


class DecodedDataset(Dataset):  # type: ignore[type-arg]
    """Pretends to decode an image: an FFT round-trip per sample (~0.5 ms of CPU)."""

    def __init__(self, n: int = 4096) -> None:
        self.raw = np.random.default_rng(0).standard_normal((n, 64, 64)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = np.abs(np.fft.ifft2(np.fft.fft2(self.raw[i]) * 0.5))
        feats = img.reshape(-1)[:FEATURES].astype(np.float32)
        return torch.from_numpy(feats), i % 10


if __name__ == "__main__":
    loader = DataLoader(DecodedDataset(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(), steps=80))
