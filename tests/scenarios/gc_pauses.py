"""Fault: a large cache of Python objects plus per-step history kept as dicts."""

import gc

from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    gc.set_threshold(700, 10, 10)
    cache = [{"id": i, "tags": [i, i + 1]} for i in range(1_500_000)]
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    history: list[dict[str, object]] = []

    def after_step(step: int, loss: object) -> None:
        history.extend({"step": step, "k": [k]} for k in range(3000))
        if len(history) > 30000:
            del history[:15000]

    print("steps:", train(loader, mlp(width=512), steps=300, after_step=after_step), len(cache))
