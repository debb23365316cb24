"""Fault: an MLP with 4,096-unit hidden layers (DL4J's guide: dense layers > 2,048 units)."""

from _zoo import mlp, tensors, train
from torch.utils.data import DataLoader

if __name__ == "__main__":
    loader = DataLoader(tensors(n=4096), batch_size=128, shuffle=True)
    print("steps:", train(loader, mlp(width=4096), steps=40))
