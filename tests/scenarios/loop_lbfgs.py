"""Loop shape: LBFGS, whose step evaluates a closure (forward and backward) several times."""

import torch
from _zoo import mlp, tensors, until_done
from torch import nn

if __name__ == "__main__":
    data = tensors(2048)
    x, y = data.tensors
    model, loss_fn = mlp(width=256), nn.CrossEntropyLoss()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4, history_size=5)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    done, steps = until_done(30), 0
    while not done(steps):
        opt.step(closure)
        steps += 1
    print("steps:", steps)
