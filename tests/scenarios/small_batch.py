"""Fault: training one sample at a time.

Mild: batches of 4. Fixed: batches of 64.
"""

from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import DataLoader

BATCH = 64 if fixed() else dose(strong=1, mild=4)

if __name__ == "__main__":
    loader = DataLoader(tensors(), batch_size=BATCH, shuffle=True)
    print("steps:", train(loader, mlp(width=256), steps=1500 // BATCH))
