"""Healthy: a transformer encoder in bf16 autocast with TF32 on, batches of 64 sequences
resident on the GPU, metrics read every 100 steps."""

import torch
from _gpu import DEV, main, measure, size, steps
from torch.optim import AdamW

BATCH, SEQ, DIM, LAYERS, STEPS, WARMUP = (
    size(64, 4),
    size(256, 16),
    size(1024, 64),
    size(6, 1),
    steps(40, 4),
    5,
)


def run(fixed: bool) -> float:
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(BATCH, SEQ, DIM, generator=g).to(DEV)
        y = torch.randint(0, 10, (BATCH,), generator=g).to(DEV)
        layer = torch.nn.TransformerEncoderLayer(DIM, 8, 4 * DIM, batch_first=True)
        body = torch.nn.TransformerEncoder(layer, LAYERS).to(DEV)
        head = torch.nn.Linear(DIM, 10).to(DEV)
        opt = AdamW([*body.parameters(), *head.parameters()], lr=1e-4)
        loss_fn = torch.nn.CrossEntropyLoss()
        total = torch.zeros((), device=DEV)

        def step(i: int) -> int:
            opt.zero_grad(set_to_none=True)
            with torch.autocast(DEV.type, dtype=torch.bfloat16):
                loss = loss_fn(head(body(x).mean(1)), y)
            loss.backward()
            opt.step()
            total.add_(loss.detach())
            if i % 100 == 99:
                float(total.item())
            return BATCH

        return measure(step, range(STEPS + WARMUP), warmup=WARMUP)
    finally:
        torch.set_float32_matmul_precision(before)


if __name__ == "__main__":
    main(run)
