"""Fault: an MLP with 4,096-unit hidden layers (DL4J's guide: dense layers > 2,048 units).

Mild: 3,072-unit hidden layers. Fixed: 2,048-unit hidden layers (at the guide's limit).
"""

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

WIDTH = 2048 if fixed() else dose(strong=4096, mild=3072)

if __name__ == "__main__":
    loader = DataLoader(tensors(n=4096), batch_size=128, shuffle=True)
    print("steps:", train(loader, mlp(width=WIDTH), steps=20))
