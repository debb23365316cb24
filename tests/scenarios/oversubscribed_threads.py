"""Fault: torch's intra-op pool sized to 16 threads on a machine with far fewer cores."""

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    torch.set_num_threads(16)
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(), steps=60))
