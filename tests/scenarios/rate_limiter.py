"""Fault: a CNN training loop throttled by a fixed sleep after every step (a rate limiter left
in from sharing the machine, "to keep the box responsive").

Mild: a 6 ms sleep instead of 15 ms. Fixed: no sleep.
"""

import time

from _cnn import cnn, images, labels
from _zoo import dose, fixed, train
from torch.utils.data import DataLoader, TensorDataset

PAUSE_S = 0.0 if fixed() else dose(strong=0.015, mild=0.006)

if __name__ == "__main__":
    loader = DataLoader(TensorDataset(images(), labels()), batch_size=32, shuffle=True)

    def after_step(step: int, loss: object) -> None:
        if PAUSE_S:
            time.sleep(PAUSE_S)

    print("steps:", train(loader, cnn(width=16), steps=120, after_step=after_step))
