"""Fault: the model and the data are in float64 (numpy's default leaking into torch)."""

import torch
from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(dtype=torch.float64), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp().double(), steps=200))
