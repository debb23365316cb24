"""A small DistributedDataParallel job on the CPU (gloo): an MLP on synthetic data, each rank
its shard. ``DDP_STEPS`` steps of ``DDP_BATCH`` samples a rank (at the default 32 the
gradient all-reduce is about half of a step: communication-bound). ``DDP_MODEL=conv`` trains a
convolutional net whose all-reduce is a small part of its step instead; ``DDP_HOOK=fp16``
compresses the gradients (DDP's fp16 comm hook); ``DDP_PIN=1`` pins each rank to the core of
its local rank's number (a CPU hog on one of those cores slows that rank alone);
``DDP_SLOW_RANK`` makes that rank's data loading slow (a sleep per batch: a rank whose shard
lives on slower storage); ``DDP_HANG_RANK`` makes that rank stop after ``DDP_HANG_AT`` steps
(it waits on something that never comes) while the others wait in their all-reduce until the
process group's timeout (``DDP_TIMEOUT_S``); ``DDP_DESYNC_RANK`` makes that rank broadcast a
tensor after ``DDP_HANG_AT`` steps, where the others all-reduce their gradients (out of step)."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

torch.set_num_threads(1)
STEPS = int(os.environ.get("DDP_STEPS", "30"))
SLOW_RANK = int(os.environ.get("DDP_SLOW_RANK", "-1"))
HANG_RANK = int(os.environ.get("DDP_HANG_RANK", "-1"))
DESYNC_RANK = int(os.environ.get("DDP_DESYNC_RANK", "-1"))
HANG_AT = int(os.environ.get("DDP_HANG_AT", "20"))
TIMEOUT_S = float(os.environ.get("DDP_TIMEOUT_S", "300"))
#: Hidden units: the default makes a step of ~10-20 ms on one core, so that the scheduler's
#: noise on a shared machine (a rank waiting a fraction of a millisecond more for a core) is
#: a small share of it.
WIDTH = int(os.environ.get("DDP_WIDTH", "1024"))
BATCH = int(os.environ.get("DDP_BATCH", "32"))
HOOK = os.environ.get("DDP_HOOK", "")
PIN = os.environ.get("DDP_PIN") == "1"
MODEL = os.environ.get("DDP_MODEL", "mlp")


def wait_for_reply(event: threading.Event) -> None:
    """A rank-only wait that never ends (a reply from a service that never comes)."""
    event.wait()


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


def mlp() -> nn.Module:
    """Two hidden layers of ``WIDTH`` units: ~1.1 M parameters all-reduced a step for
    ~0.7 MFLOP a sample (communication-bound at small batches)."""
    return nn.Sequential(
        nn.Linear(64, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 10)
    )


def conv() -> nn.Module:
    """Convolutions over each row as a sequence of 64: ~0.1 M parameters for ~40 MFLOP a
    sample (the all-reduce is a small part of a step)."""
    return nn.Sequential(
        nn.Unflatten(1, (1, 64)),
        nn.Conv1d(1, 96, 5, padding=2), nn.ReLU(),
        nn.Conv1d(96, 96, 5, padding=2), nn.ReLU(),
        nn.Conv1d(96, 96, 5, padding=2), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(96, 10),
    )  # fmt: skip


def main() -> None:
    if PIN:  # before the process group's threads start: they are pinned with it
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[int(os.environ["LOCAL_RANK"]) % len(cores)]})
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    data = Rows(4096, slow=rank == SLOW_RANK)
    loader = DataLoader(data, batch_size=BATCH, sampler=DistributedSampler(data))
    model = DistributedDataParallel(conv() if MODEL == "conv" else mlp())
    if HOOK == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    while done < STEPS:
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            done += 1
            if rank == HANG_RANK and done == HANG_AT:
                wait_for_reply(threading.Event())
            if rank == DESYNC_RANK and done == HANG_AT:
                dist.broadcast(torch.zeros(10, dtype=torch.long), src=0)  # the others do not
            if done >= STEPS:
                break
    dist.destroy_process_group()
    print(f"rank {rank}: {done} steps")


if __name__ == "__main__":
    main()
