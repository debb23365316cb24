"""Fault: the model and the data are in float64 (numpy's default leaking into torch).

Mild: float32 data and first layer; the layers after it (~80% of the multiply-adds) are
float64, the activations cast on the way in (a head converted with ``.double()`` and left so).
Fixed: float32 data and model.
"""

import torch
from _zoo import fixed, magnitude, mlp, tensors, train
from torch import nn
from torch.utils.data import DataLoader


class CastToDouble(nn.Module):
    """Casts its input to float64 (the mild dose: the float64 part of the model)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.double()


if __name__ == "__main__":
    strong = not fixed() and magnitude() == "strong"
    data_dtype = torch.float64 if strong else torch.float32
    loader = DataLoader(tensors(dtype=data_dtype), batch_size=64, shuffle=True)
    model = mlp()
    if strong:
        model = model.double()
    elif not fixed():
        model = nn.Sequential(model[0], model[1], CastToDouble(), *model[2:].double())
    print("steps:", train(loader, model, steps=120))
