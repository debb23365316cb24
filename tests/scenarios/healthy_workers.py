"""Healthy: one spawn-started persistent DataLoader worker and one intra-op thread on 2 cores."""

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    torch.set_num_threads(1)  # the other core is the worker's
    loader = DataLoader(
        tensors(4096),
        batch_size=256,
        shuffle=True,
        num_workers=1,
        persistent_workers=True,
        multiprocessing_context="spawn",
    )
    print("steps:", train(loader, mlp(width=2048), steps=30))
