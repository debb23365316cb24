"""A small DistributedDataParallel job on the CPU (gloo): an MLP on synthetic data, each rank
its shard. ``DDP_STEPS`` steps; ``DDP_SLOW_RANK`` makes that rank's data loading slow
(a sleep per batch: a rank whose shard lives on slower storage)."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

torch.set_num_threads(1)
STEPS = int(os.environ.get("DDP_STEPS", "30"))
SLOW_RANK = int(os.environ.get("DDP_SLOW_RANK", "-1"))


class Rows(Dataset):  # type: ignore[type-arg]
    """Random rows; slow to read on ``SLOW_RANK``."""

    def __init__(self, n: int, slow: bool) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 64, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.slow = slow

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.slow:
            time.sleep(0.0005)
        return self.x[i], self.y[i]


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    data = Rows(4096, slow=rank == SLOW_RANK)
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data))
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    while done < STEPS:
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            done += 1
            if done >= STEPS:
                break
    dist.destroy_process_group()
    print(f"rank {rank}: {done} steps")


if __name__ == "__main__":
    main()
