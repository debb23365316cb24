"""Fault: the job starts its own CPU-bound helper processes (a ``multiprocessing`` pool that
"precomputes features" in the background, not DataLoader workers) and trains beside them.

``ZOO_MAGNITUDE=mild``: one helper instead of two, beside torch's default of one intra-op thread
per core (the helper then takes a core the training's threads ask for), over 200 steps instead
of 80: the job's children are read every 2 s, and 80 steps (~2.6 s measured) gave one reading,
in which one helper's share of the job's CPU fell on either side of the rule's quarter (the
planted fault missed in 1 run of 4-8, alone on the machine); and for at least 6 s, on a machine
where 200 steps would take less. ``ZOO_FIXED=1``: no helpers
(their work would run before or after training).
"""

import multiprocessing
import os
import time

import torch
from _zoo import MIN_SECONDS, dose, mlp, tensors, train
from torch.utils.data import DataLoader

HELPERS = {"strong": 2, "mild": 1}


def precompute(deadline: float) -> int:
    """Busy CPU work until ``deadline`` (the helper's "feature precomputation")."""
    n = 0
    while time.time() < deadline:
        n += sum(i * i for i in range(10_000))
    return n


if __name__ == "__main__":
    magnitude = os.environ.get("ZOO_MAGNITUDE", "strong")
    helpers = 0 if os.environ.get("ZOO_FIXED") == "1" else HELPERS[magnitude]
    if magnitude == "mild":
        torch.set_num_threads(os.cpu_count() or 1)
    pool = multiprocessing.get_context("fork").Pool(helpers) if helpers else None
    if pool is not None:
        # they stop by themselves at most a minute later; the pool is ended with the job
        pool.map_async(precompute, [time.time() + 60] * helpers)
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    # at least 3 readings of the children (every 2 s) on a machine however fast
    seconds = max(6.0, MIN_SECONDS)
    print("steps:", train(loader, mlp(), steps=dose(strong=80, mild=200), min_seconds=seconds))
    if pool is not None:
        pool.terminate()
