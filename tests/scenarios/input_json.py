"""Fault: every sample is a JSON record parsed in ``__getitem__`` (records read from a JSON
Lines export), in the main process, every epoch.

Mild: the records hold numbers rounded to 4 decimals (half the text to parse). Fixed: the
records are parsed once, into one tensor, before training.
"""

import json

import numpy as np
import torch
from _zoo import CLASSES, FEATURES, dose, fixed, mlp, train
from torch.utils.data import DataLoader, Dataset

DIGITS = dose(strong=17, mild=4)  # 17 digits: every float's full repr


class JsonRecords(Dataset):  # type: ignore[type-arg]
    """Samples kept as JSON text: ``{"id": ..., "features": [...], "label": ...}``."""

    def __init__(self, n: int = 4096, *, parse_once: bool = False) -> None:
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((n, FEATURES)), rng.integers(0, CLASSES, n)
        values = x if DIGITS >= 17 else np.round(x, DIGITS)  # 17: the floats as they are
        self.records = [
            json.dumps({"id": f"s{i:06d}", "features": values[i].tolist(), "label": int(y[i])})
            for i in range(n)
        ]
        self.parsed: list[tuple[torch.Tensor, int]] | None = None
        if parse_once:
            self.parsed = [self.parse(r) for r in self.records]

    @staticmethod
    def parse(record: str) -> tuple[torch.Tensor, int]:
        fields = json.loads(record)
        return torch.tensor(fields["features"], dtype=torch.float32), fields["label"]

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.parsed[i] if self.parsed is not None else self.parse(self.records[i])


if __name__ == "__main__":
    loader = DataLoader(JsonRecords(parse_once=fixed()), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(width=2048), steps=36))
