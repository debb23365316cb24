"""Loop shape: an optimizer, and a validation pass (eval mode, no_grad, its own DataLoader)
every 20 training steps."""

import torch
from _zoo import mlp, tensors, until_done
from torch import nn
from torch.utils.data import DataLoader

EVERY = 20

if __name__ == "__main__":
    model, loss_fn = mlp(width=512), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train = DataLoader(tensors(4096), batch_size=64, shuffle=True)
    val = DataLoader(tensors(512), batch_size=128)
    done, steps, evaluations, due = until_done(80), 0, 0, False
    while not done(steps):
        for x, y in train:
            # the validation due after step N runs just before step N+1, so it always lies in
            # a step: one after the last step would be in none (and the loop's end depends on
            # the clock as well as the steps: until_done)
            if due:
                model.eval()
                correct = 0
                with torch.no_grad():
                    for vx, vy in val:
                        correct += int((model(vx).argmax(1) == vy).sum())
                        evaluations += 1
                due = False
            model.train()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            steps += 1
            if done(steps):
                break
            due = steps % EVERY == 0
    print("steps:", steps)
    print("evaluations:", evaluations)
