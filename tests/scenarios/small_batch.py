"""Fault: training one sample at a time."""

from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=1, shuffle=True)
    print("steps:", train(loader, mlp(width=256), steps=1500))
