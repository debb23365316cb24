"""Loop shape: LBFGS, whose step evaluates a closure (forward and backward) several times.

LBFGS stops a step early once the problem is solved (gradient or change below its
tolerances): on 2,048 samples it is after ~40 steps, and from there each step evaluates the
closure once, so how many passes a step makes would depend on how many steps the machine ran
in the time floor. The tolerances are off here, so every step makes exactly ``max_iter``
passes; the script counts them itself and prints the count (``closure_passes: N``).
"""

import torch
from _zoo import mlp, tensors, until_done
from torch import nn

PASSES = 4

if __name__ == "__main__":
    data = tensors(2048)
    x, y = data.tensors
    model, loss_fn = mlp(width=256), nn.CrossEntropyLoss()
    opt = torch.optim.LBFGS(
        model.parameters(),
        lr=0.1,
        max_iter=PASSES,
        history_size=5,
        tolerance_grad=-1.0,  # never "solved": no early stop
        tolerance_change=-1.0,
    )
    passes = 0

    def closure() -> torch.Tensor:
        global passes
        passes += 1
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    done, steps, counts = until_done(30), 0, set()
    while not done(steps):
        passes = 0
        opt.step(closure)
        counts.add(passes)
        steps += 1
    if counts != {PASSES}:
        raise SystemExit(f"closure passes per step: {sorted(counts)}, expected {PASSES} each")
    print("steps:", steps)
    print("closure_passes:", PASSES)
