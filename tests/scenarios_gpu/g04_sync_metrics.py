"""Fault: after every step the loop reads ``loss.item()``, copies the outputs to the CPU and
computes accuracy and a top-5 in numpy: each step waits for the GPU, then the GPU waits for
the CPU.

Fixed: the metrics accumulate on the GPU and are read every 50 steps.
"""

import numpy as np
import torch
from _gpu import DEV, main, measure, mlp, size, steps
from torch.optim import SGD

BATCH, WIDTH, STEPS, WARMUP = size(512, 16), size(4096, 64), steps(300, 10), 10


def run(fixed: bool) -> float:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, 1024, generator=g).to(DEV)
    y = torch.randint(0, 1000, (BATCH,), generator=g).to(DEV)
    model = mlp(width=WIDTH, depth=3, inputs=1024, classes=1000).to(DEV)
    opt = SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    correct = torch.zeros((), device=DEV)
    seen = [0]

    def step(i: int) -> int:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV.type, dtype=torch.bfloat16):
            out = model(x)
            loss = loss_fn(out, y)
        loss.backward()
        opt.step()
        if fixed:
            correct.add_((out.argmax(1) == y).sum())
            if i % 50 == 49:
                seen.append(int(correct.item()))
        else:
            host = out.float().detach().cpu().numpy()
            seen.append(int((host.argmax(1) == y.cpu().numpy()).sum()))
            np.argsort(host, axis=1)[:, -5:]
            seen.append(int(loss.item() * 0))
        return BATCH

    return measure(step, range(STEPS + WARMUP), warmup=WARMUP)


if __name__ == "__main__":
    main(run)
