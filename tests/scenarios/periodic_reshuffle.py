"""Fault: a hand-written bucketing sampler that reshuffles its Python list of 150,000 sample
ids every 60 steps, inside the training loop: one step in 60 stalls.

Mild: 100,000 ids (a stall of ~6 steps, clear of the 3σ cut beside two busy processes).
Fixed: the ids reshuffled as a tensor (``torch.randperm``), in ~1 ms.
"""

import random

import torch
from _zoo import dose, fixed, mlp, tensors, train

IDS = dose(strong=150_000, mild=100_000)
EVERY = 60

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

    # 900 steps: 14 reshuffles after the warm-up, step-outliers needs more than 10 (its
    # MIN_OUTLIERS); a stall in 60 steps keeps them under 20% of the time (slow-callbacks' line)
    print("steps:", train(batches, mlp(), steps=900, after_step=after_step))
