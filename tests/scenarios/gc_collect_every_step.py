"""Fault: ``gc.collect()`` called after every step ("to free memory"): each call walks every
Python object of the job, its tokenised corpus (50,000 lists) and torch's ~170,000.

Mild: ``gc.collect()`` every 8th step. Fixed: no explicit collection (the corpus is
unchanged).
"""

import gc
import random

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

COLLECT_EVERY = dose(strong=1, mild=8)

if __name__ == "__main__":
    rng = random.Random(0)
    corpus = [[rng.randrange(30_000) for _ in range(8)] for _ in range(50_000)]
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)

    def after_step(step: int, loss: object) -> None:
        if not fixed() and step % COLLECT_EVERY == 0:
            gc.collect()

    print("steps:", train(loader, mlp(width=2048), steps=36, after_step=after_step), len(corpus))
