"""Fault: the loop validates on its whole validation set (eval mode, no_grad, its own
DataLoader) every 2 training steps, 1,024 samples each time.

Mild: every 5 steps on 512 samples. Fixed: the same validation once every 200 steps (the run
ends first: none, or one).
"""

import torch
from _zoo import dose, fixed, mlp, tensors, train
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

EVERY, VALIDATION = (200, 1024) if fixed() else dose(strong=(2, 1024), mild=(5, 512))


if __name__ == "__main__":
    model = mlp(width=512)
    held_out = tensors(VALIDATION)
    val = DataLoader(
        held_out, sampler=BatchSampler(SequentialSampler(held_out), 128, False), batch_size=None
    )

    def validate(step: int, loss: torch.Tensor) -> None:
        if (step + 1) % EVERY:
            return
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in val)
        model.train()
        assert 0 <= correct <= VALIDATION

    data = tensors(8192)
    loader = DataLoader(
        data, sampler=BatchSampler(SequentialSampler(data), 64, False), batch_size=None
    )
    print("steps:", train(loader, model, steps=150, after_step=validate))
