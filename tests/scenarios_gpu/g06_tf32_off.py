"""Fault: a float32 transformer encoder with TF32 off (torch's default for matmuls since
1.12): every matmul runs at the float32 rate.

Fixed: ``torch.set_float32_matmul_precision("high")`` (TF32 matmuls); the model and data stay
float32.
"""

import torch
from _gpu import DEV, main, measure, size, steps
from torch.optim import AdamW

BATCH, SEQ, DIM, LAYERS, STEPS, WARMUP = (
    size(32, 4),
    size(256, 16),
    size(1024, 64),
    size(6, 1),
    steps(20, 4),
    4,
)


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(
            DIM, nhead=8, dim_feedforward=4 * DIM, batch_first=True
        )
        self.body = torch.nn.TransformerEncoder(layer, LAYERS)
        self.head = torch.nn.Linear(DIM, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean(1))


def run(fixed: bool) -> float:
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if fixed else "highest")
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(BATCH, SEQ, DIM, generator=g).to(DEV)
        y = torch.randint(0, 10, (BATCH,), generator=g).to(DEV)
        model = Encoder().to(DEV)
        opt = AdamW(model.parameters(), lr=1e-4)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step(_: int) -> int:
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
            return BATCH

        return measure(step, range(STEPS + WARMUP), warmup=WARMUP)
    finally:
        torch.set_float32_matmul_precision(before)


if __name__ == "__main__":
    main(run)
