"""Fault: a mixture of 64 small experts applied in a Python loop, one matmul each per step:
hundreds of tiny kernel launches a step, the GPU mostly idle between them.

Fixed: the experts' weights in one tensor and one batched matmul (``torch.bmm``).
"""

import torch
from _gpu import DEV, main, measure, size, steps
from torch.optim import SGD

EXPERTS, DIM, TOKENS, STEPS, WARMUP = 64, size(128, 16), size(64, 8), steps(150, 5), 10


class Experts(torch.nn.Module):
    def __init__(self, batched: bool) -> None:
        super().__init__()
        self.batched = batched
        self.weight = torch.nn.Parameter(torch.randn(EXPERTS, DIM, DIM) / DIM**0.5)
        self.head = torch.nn.Linear(DIM, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (EXPERTS, TOKENS, DIM)
        if self.batched:
            h = torch.relu(torch.bmm(x, self.weight))
        else:
            h = torch.stack([torch.relu(x[e] @ self.weight[e]) for e in range(EXPERTS)])
        return self.head(h.mean(0))


def run(fixed: bool) -> float:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(EXPERTS, TOKENS, DIM, generator=g).to(DEV)
    y = torch.randint(0, 10, (TOKENS,), generator=g).to(DEV)
    model = Experts(batched=fixed).to(DEV)
    opt = SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(_: int) -> int:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        return TOKENS

    return measure(step, range(STEPS + WARMUP), warmup=WARMUP)


if __name__ == "__main__":
    main(run)
