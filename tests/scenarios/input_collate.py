"""Fault: a sequence classifier (LSTM) whose ``collate_fn`` augments every sample in Python,
value by value (time-step jitter), then pads the batch, in the main process.

Mild: each sample augmented with probability 0.5. Fixed: the batch padded first and jittered
in one tensor operation.
"""

import random

import torch
from _zoo import CLASSES, dose, fixed, train
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

CHANNELS = 16
AUGMENT_P = dose(strong=1.0, mild=0.5)


class LstmClassifier(nn.Module):
    """One LSTM layer over the sequence, a linear head on its last hidden state."""

    def __init__(self, hidden: int = 256) -> None:
        super().__init__()
        self.lstm = nn.LSTM(CHANNELS, hidden, batch_first=True)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x)
        return self.head(h[-1])


def jitter(seq: torch.Tensor) -> torch.Tensor:
    """Gaussian noise added value by value, the way a hand-written augmentation does it."""
    return torch.tensor([[v + random.gauss(0.0, 0.01) for v in row] for row in seq.tolist()])


def collate_slow(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    seqs = [jitter(s) if random.random() < AUGMENT_P else s for s, _ in batch]
    return pad_sequence(seqs, batch_first=True), torch.tensor([label for _, label in batch])


def collate_fast(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    x = pad_sequence([s for s, _ in batch], batch_first=True)
    return x + 0.01 * torch.randn_like(x), torch.tensor([label for _, label in batch])


if __name__ == "__main__":
    random.seed(0)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(24, 40, (2048,), generator=g).tolist()
    data = [(torch.randn(n, CHANNELS, generator=g), i % CLASSES) for i, n in enumerate(lengths)]
    collate = collate_fast if fixed() else collate_slow
    loader: DataLoader[tuple[torch.Tensor, int]] = DataLoader(
        data,  # type: ignore[arg-type]
        batch_size=32,
        shuffle=True,
        collate_fn=collate,
    )
    print("steps:", train(loader, LstmClassifier(), steps=60))
