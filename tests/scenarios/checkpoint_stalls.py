"""Fault: a full checkpoint (model and optimizer state) is saved every 5 steps.

Mild: every 8 steps. Fixed: saved by time (every 10 minutes, so not during this short run)
and once when training ends.
"""

import os
import tempfile
import time

import torch
from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

EVERY_STEPS = dose(strong=5, mild=8)
EVERY_S = 600.0

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=16, shuffle=True)
    model = mlp(width=1536, depth=3)  # 20 MiB of weights saved every 5 steps
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    last_save = time.monotonic()

    def after_step(step: int, loss: object) -> None:
        global last_save
        due = (
            time.monotonic() - last_save >= EVERY_S
            if fixed()
            else step % EVERY_STEPS == EVERY_STEPS - 1
        )
        if due:
            torch.save({"model": model.state_dict(), "step": step}, path)
            last_save = time.monotonic()

    steps = train(loader, model, steps=60, after_step=after_step)
    if fixed():
        torch.save({"model": model.state_dict(), "step": steps}, path)
    print("steps:", steps)
