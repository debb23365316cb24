"""Fault: a product classifier whose output layer has 30,000 classes, one per catalogue item
(DL4J's guide: more than 10,000 classes in the last dense layer).

Mild: 12,000 classes. Fixed: the 8,000 most frequent items, the rest merged into an "other"
class (8,001 outputs).
"""

from _zoo import FEATURES, dose, fixed, tensors, train
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 8001 if fixed() else dose(strong=30_000, mild=12_000)

if __name__ == "__main__":
    x, y = tensors(n=4096).tensors
    y = (y * 997 + x[:, 0].abs().mul(1000).long()) % CLASSES
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)
    model = nn.Sequential(nn.Linear(FEATURES, 512), nn.ReLU(), nn.Linear(512, CLASSES))
    print("steps:", train(loader, model, steps=40))
