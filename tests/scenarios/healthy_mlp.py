"""Healthy: an in-memory data set, batch 64, a model whose compute dominates. No warning."""

from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=64, shuffle=True)
    print("steps:", train(loader, mlp(width=2048), steps=80))
