"""Fault: torch's intra-op pool sized to 16 threads on a machine with far fewer cores.

Mild: 4 threads (two per core on the 2-core reference machine; twice the cores on any
machine). Fixed: one thread per usable core.
"""

import os

import torch
from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

CORES = len(os.sched_getaffinity(0))
THREADS = CORES if fixed() else dose(strong=16, mild=2 * CORES)

if __name__ == "__main__":
    torch.set_num_threads(THREADS)
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(width=2048), steps=60))
