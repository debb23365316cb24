"""Fault: a CNN trained on batches of 2 images.

Mild: batches of 4. Fixed: batches of 64.
"""

from _cnn import cnn, images, labels
from _zoo import dose, fixed, train
from torch.utils.data import DataLoader, TensorDataset

BATCH = 64 if fixed() else dose(strong=2, mild=4)

if __name__ == "__main__":
    loader = DataLoader(TensorDataset(images(), labels()), batch_size=BATCH, shuffle=True)
    print("steps:", train(loader, cnn(width=16), steps=max(30, 1200 // BATCH), lr=0.002))
