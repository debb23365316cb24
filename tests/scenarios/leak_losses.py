"""Fault: the running loss is summed as a tensor (``total += loss``, not ``loss.item()``):
every step's autograd graph stays chained to the next, so the job holds more memory at each
step (the graph's nodes; the activations are freed by backward), and the freed activations
around them keep the process's RSS rising faster still.

``ZOO_MAGNITUDE=mild``: the loss is also kept every 4th step only (``losses.append(loss)``
instead of a running sum: the same leak, a quarter of the graphs). ``ZOO_FIXED=1``:
``total += loss.item()``.
"""

import os

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    mild = os.environ.get("ZOO_MAGNITUDE") == "mild"
    fixed = os.environ.get("ZOO_FIXED") == "1"
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    kept: list[object] = []
    total: list[object] = [0.0]

    def after_step(step: int, loss: torch.Tensor) -> None:
        if fixed:
            total[0] = total[0] + loss.item()  # type: ignore[operator]
        elif mild:
            if step % 4 == 0:
                kept.append(loss)
        else:
            total[0] = total[0] + loss  # type: ignore[operator]

    print("steps:", train(loader, mlp(), steps=1200, after_step=after_step))
