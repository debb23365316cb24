"""Fault: an autoencoder that logs its reconstructions every step, the tensor formatted in
full (``torch.set_printoptions(profile="full")``) into a log file.

Mild: half the rows (4 of the batch's reconstructions instead of 8). Fixed: the loss logged
every 50 steps.
"""

import logging
import os
import tempfile

import torch
from _zoo import FEATURES, dose, fixed, tensors, train
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ROWS = dose(strong=8, mild=4)
LOG_EVERY = 50 if fixed() else 1

if __name__ == "__main__":
    torch.set_printoptions(profile="full")
    log = logging.getLogger("autoencoder")
    log.addHandler(logging.FileHandler(os.path.join(tempfile.mkdtemp(), "train.log")))
    log.setLevel(logging.INFO)
    x = tensors().tensors[0]
    loader = DataLoader(TensorDataset(x, x), batch_size=64, shuffle=True)
    model = nn.Sequential(
        nn.Linear(FEATURES, 2048), nn.ReLU(), nn.Linear(2048, 64), nn.ReLU(),
        nn.Linear(64, 2048), nn.ReLU(), nn.Linear(2048, FEATURES),
    )  # fmt: skip
    last: list[torch.Tensor] = []

    def keep_output(module: nn.Module, args: object, out: torch.Tensor) -> None:
        last[:] = [out]

    model.register_forward_hook(keep_output)

    def after_step(step: int, loss: torch.Tensor) -> None:
        if step % LOG_EVERY:
            return
        if fixed():
            log.info("step %d loss %.4f", step, loss.item())
        else:
            log.info("step %d reconstructions %s", step, last[0][:ROWS].detach())

    print("steps:", train(loader, model, steps=90, after_step=after_step, loss_fn=nn.MSELoss()))
