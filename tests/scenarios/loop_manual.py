"""Loop shape: parameters updated by hand (no torch.optim), batches from a DataLoader."""

import torch
from _zoo import mlp, tensors, until_done
from torch import nn
from torch.utils.data import DataLoader

LR = 0.01

if __name__ == "__main__":
    model, loss_fn = mlp(width=512), nn.CrossEntropyLoss()
    loader = DataLoader(tensors(4096), batch_size=64, shuffle=True)
    done, steps = until_done(80), 0
    while not done(steps):
        for x, y in loader:
            model.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-LR)
            steps += 1
            if done(steps):
                break
    print("steps:", steps)
