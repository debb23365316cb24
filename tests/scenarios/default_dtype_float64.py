"""Fault: ``torch.set_default_dtype(torch.float64)`` at the top of a CNN job (copied from a
numerics notebook), so the model and the generated data are all float64.

Mild: the default is set only after the model is built, so the model is float32 and the data
float64, cast in the loop. Fixed: the default dtype left alone (float32).
"""

import torch
from _cnn import cnn, images, labels
from _zoo import fixed, magnitude, train
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CastToFloat(nn.Module):
    """Casts its input to float32 (a float32 model fed float64 batches)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float()


if __name__ == "__main__":
    mild = not fixed() and magnitude() == "mild"
    if not fixed() and not mild:
        torch.set_default_dtype(torch.float64)
    model = cnn(width=16)
    if mild:
        torch.set_default_dtype(torch.float64)
        model = nn.Sequential(CastToFloat(), model)
    loader = DataLoader(TensorDataset(images(), labels()), batch_size=32, shuffle=True)
    print("steps:", train(loader, model, steps=100))
