"""Fault: a full checkpoint (model and optimizer state) is saved every 5 steps."""

import os
import tempfile

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=16, shuffle=True)
    model = mlp(width=1536, depth=3)  # 20 MiB of weights saved every 5 steps
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")

    def after_step(step: int, loss: object) -> None:
        if step % 5 == 4:
            torch.save({"model": model.state_dict(), "step": step}, path)

    print("steps:", train(loader, model, steps=150, after_step=after_step))
