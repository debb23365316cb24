"""Fault: a full evaluation pass inside the loop every 40 steps.

Mild: the evaluation pass on half the held-out samples (2,048 instead of 4,096). Fixed: one
evaluation pass after training.
"""

import torch
from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

HELD_OUT = dose(strong=4096, mild=2048)

if __name__ == "__main__":
    data = tensors()
    loader = DataLoader(data, batch_size=64, shuffle=True)
    val_x = data.tensors[0][:HELD_OUT]
    model = mlp()

    def after_step(step: int, loss: object) -> None:
        if step % 40 == 39 and not fixed():
            with torch.no_grad():
                model(val_x).argmax(1)

    print("steps:", train(loader, model, steps=600, after_step=after_step))
    if fixed():
        with torch.no_grad():
            print("predicted:", model(val_x).argmax(1).numel())
