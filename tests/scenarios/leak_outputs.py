"""Fault: the model's outputs are kept for metrics at the end of the epoch, computed by a
second forward pass outside ``torch.no_grad()``: each kept output holds its autograd graph
and, through it, the activations of its forward pass (a list of outputs that leaks).

``ZOO_MAGNITUDE=mild``: the outputs of every other step only. ``ZOO_FIXED=1``: the outputs are
computed under ``torch.no_grad()`` (``.detach()`` would do as well).
"""

import os

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    every = 2 if os.environ.get("ZOO_MAGNITUDE") == "mild" else 1
    fixed = os.environ.get("ZOO_FIXED") == "1"
    data = tensors()
    loader = DataLoader(data, batch_size=64, shuffle=True)
    model = mlp(width=1024, depth=3)
    probe = data.tensors[0][:64]
    outputs: list[torch.Tensor] = []

    def after_step(step: int, loss: torch.Tensor) -> None:
        if step % every:
            return
        if fixed:
            with torch.no_grad():
                outputs.append(model(probe))
        else:
            outputs.append(model(probe))  # keeps the graph and its activations

    print("steps:", train(loader, model, steps=180, after_step=after_step))
    print("evaluations:", len(outputs))
