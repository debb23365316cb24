"""Fault: a full evaluation pass inside the loop every 40 steps."""

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    data = tensors()
    loader = DataLoader(data, batch_size=64, shuffle=True)
    val_x = data.tensors[0][:4096]
    model = mlp()

    def after_step(step: int, loss: object) -> None:
        if step % 40 == 39:
            with torch.no_grad():
                model(val_x).argmax(1)

    print("steps:", train(loader, model, steps=600, after_step=after_step))
