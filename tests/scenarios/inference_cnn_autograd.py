"""Fault: batch inference of a CNN (batch-norm layers) over a DataLoader with autograd on and
the model left in train mode, so batch-norm normalises with each batch's statistics.

No optimizer, no backward: one step per model call. Mild: ``model.eval()``, autograd still
on. Fixed: ``model.eval()`` and ``torch.inference_mode()``.
"""

import contextlib

import torch
from _cnn import cnn, images
from _zoo import fixed, magnitude, until_done
from torch.utils.data import DataLoader

if __name__ == "__main__":
    model = cnn()
    if fixed() or magnitude() == "mild":
        model.eval()
    mode = torch.inference_mode() if fixed() else contextlib.nullcontext()
    loader: DataLoader[torch.Tensor] = DataLoader(images(1024), batch_size=128)  # type: ignore[arg-type]
    done, calls, predicted = until_done(steps=20), 0, 0
    with mode:
        while not done(calls):
            for x in loader:
                predicted += int(model(x).argmax(dim=1).numel())
                calls += 1
    print("predicted:", predicted)
