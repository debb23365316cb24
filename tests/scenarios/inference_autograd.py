"""Fault: batch inference with autograd on and the model left in train mode (dropout active).

No optimizer, no backward: one step per model call. The batches are pre-cut tensors, so the
only fault is the model's mode. Mild: the model in eval mode, autograd still on. Fixed:
``model.eval()`` and ``torch.inference_mode()``.
"""

import contextlib

import torch
from _zoo import FEATURES, fixed, magnitude, tensors, until_done
from torch import nn

if __name__ == "__main__":
    model = nn.Sequential(
        nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Dropout(0.2), nn.Linear(1024, 1024), nn.ReLU(),
        nn.Dropout(0.2), nn.Linear(1024, 10),
    )  # fmt: skip
    if fixed() or magnitude() == "mild":
        model.eval()
    mode = torch.inference_mode() if fixed() else contextlib.nullcontext()
    data = tensors(n=8192).tensors[0]
    batches = list(data.split(256))
    predictions = 0
    done = until_done(steps=256)  # 8 passes over the 32 batches
    calls = 0
    with mode:
        while not done(calls):
            for x in batches:
                predictions += int(model(x).argmax(dim=1).numel())
                calls += 1
    print("predictions:", predictions)
