"""Fault: a hand-written bucketing sampler that reshuffles its Python list of 150,000 sample
ids every 40 steps, inside the training loop: one step in 40 stalls.

Mild: 75,000 ids. Fixed: the ids reshuffled as a tensor (``torch.randperm``), in ~1 ms.
"""

import random

import torch
from _zoo import dose, fixed, mlp, tensors, train

IDS = dose(strong=150_000, mild=75_000)
EVERY = 40

if __name__ == "__main__":
    rng = random.Random(0)
    ids: object = list(range(IDS))
    x, y = tensors().tensors
    batches = list(zip(x.split(64), y.split(64), strict=True))

    def after_step(step: int, loss: object) -> None:
        global ids
        if step % EVERY == EVERY - 1:
            if fixed():
                ids = torch.randperm(IDS)
            else:
                rng.shuffle(ids)  # type: ignore[arg-type]

    # 450 steps: 11 reshuffles after the warm-up, step-outliers needs 10 (its MIN_OUTLIERS)
    print("steps:", train(batches, mlp(), steps=450, after_step=after_step))
