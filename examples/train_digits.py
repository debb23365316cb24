"""Train a small MLP on scikit-learn's bundled digits data set (offline, CPU, ~10 s).

Run it under stepdoctor:  stepdoctor run examples/train_digits.py --epochs 3
With the report's first fix applied (whole batches indexed at once):
                          stepdoctor run examples/train_digits.py --epochs 3 --batched
"""

from __future__ import annotations

import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset


def make_data() -> TensorDataset:
    """The digits: 1,797 images of 8x8 pixels scaled to [0, 1], and their labels."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    return TensorDataset(x, torch.tensor(digits.target))


def make_loader(
    data: TensorDataset, batch_size: int, *, workers: int = 0, batched: bool = False
) -> DataLoader:  # type: ignore[type-arg]
    """Shuffled batches; ``batched``: each batch indexed at once (a BatchSampler as sampler)."""
    if batched:
        sampler = BatchSampler(RandomSampler(data), batch_size=batch_size, drop_last=False)
        return DataLoader(data, sampler=sampler, batch_size=None, num_workers=workers)
    return DataLoader(data, batch_size=batch_size, shuffle=True, num_workers=workers)


def make_model() -> nn.Module:
    """A 3-layer MLP."""
    return nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def train_epoch(
    model: nn.Module,
    loader: DataLoader,  # type: ignore[type-arg]
    optimizer: torch.optim.Optimizer,
) -> int:
    """One pass over ``loader``; the number of samples predicted right."""
    loss_fn = nn.CrossEntropyLoss()
    correct = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        out = model(xb)
        loss = loss_fn(out, yb)
        loss.backward()
        optimizer.step()
        correct += int((out.argmax(1) == yb).sum())
    return correct


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batched", action="store_true", help="index whole batches at once")
    args = parser.parse_args()

    torch.manual_seed(0)
    data = make_data()
    loader = make_loader(data, args.batch_size, workers=args.workers, batched=args.batched)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(args.epochs):
        correct = train_epoch(model, loader, optimizer)
        print(f"epoch {epoch}: accuracy {correct / len(data):.3f}")


if __name__ == "__main__":
    main()
