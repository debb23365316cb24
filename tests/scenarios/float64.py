"""Fault: the model and the data are in float64 (numpy's default leaking into torch).

Mild: only the data is float64; the model is float32 and each batch is cast with ``.float()``
in the loop. Fixed: float32 data and model.
"""

import torch
from _zoo import fixed, magnitude, mlp, tensors, train
from torch import nn
from torch.utils.data import DataLoader


class CastToFloat(nn.Module):
    """Casts its input to float32 (the mild dose: a float32 model fed float64 batches)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float()


if __name__ == "__main__":
    data_dtype = torch.float32 if fixed() else torch.float64
    loader = DataLoader(tensors(dtype=data_dtype), batch_size=64, shuffle=True)
    model = mlp()
    if not fixed():
        model = model.double() if magnitude() == "strong" else nn.Sequential(CastToFloat(), model)
    print("steps:", train(loader, model, steps=200))
