"""Shared pieces of the GPU zoo: real training jobs for a CUDA GPU, each with one fault
planted and a fixed twin (``benchmarks/gpu_zoo.py`` runs them; CI has no GPU and never does).

Every script has ``run(fixed: bool) -> float``: it trains a fixed number of steps and returns
its own samples/s over the steps after its warm-up, timed with the GPU synchronised at both
ends. ``python SCRIPT`` (the way ``stepdoctor run`` runs it) trains the variant
``ZOO_FIXED`` names and prints ``{"samples_per_s": ...}``. The true gain of a fix is
``run(True) / run(False)`` measured in one process, interleaved and repeated
(``gpu_zoo.py --gains``).

Without a GPU the scripts run on the CPU at ``ZOO_GPU_SMOKE=1`` sizes (a check that they
run, not a measurement).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
#: On a machine without a GPU, shrink every job so that it only checks the script runs.
SMOKE = DEV.type == "cpu" or os.environ.get("ZOO_GPU_SMOKE") == "1"


def size(gpu: int, smoke: int) -> int:
    """``gpu`` on a GPU, ``smoke`` in a smoke run."""
    return smoke if SMOKE else gpu


#: ``stepdoctor run`` of a script trains this many times its steps (``gpu_zoo.py --runs``
#: sets it per job so that each run's steps last long enough for NVML's 100 ms readings); the
#: true gains are measured at 1.
STEP_SCALE = int(os.environ.get("ZOO_STEP_SCALE", "1"))


def steps(gpu: int, smoke: int) -> int:
    """A number of steps: ``gpu`` times ``STEP_SCALE`` on a GPU, ``smoke`` in a smoke run."""
    return smoke if SMOKE else gpu * STEP_SCALE


def fixed_from_env() -> bool:
    return os.environ.get("ZOO_FIXED", "0") == "1"


def sync() -> None:
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def measure(step: Callable[[Any], int], batches: Iterable[Any], *, warmup: int) -> float:
    """Run ``step`` on each batch (it returns the batch's samples); samples/s over the steps
    after the first ``warmup``."""
    samples, start = 0, 0.0
    for i, batch in enumerate(batches):
        if i == warmup:
            sync()
            start = time.perf_counter()
        n = step(batch)
        if i >= warmup:
            samples += n
    sync()
    return samples / (time.perf_counter() - start)


def mlp(width: int, depth: int, inputs: int, classes: int = 10) -> torch.nn.Module:
    layers: list[torch.nn.Module] = [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*layers)


def cnn(width: int = 64, classes: int = 10) -> torch.nn.Module:
    """Four 3x3 convolutions (two strided), for 3-channel images."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, width, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * width, classes),
    )


def train_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, *, autocast: bool = False
) -> Callable[[tuple[torch.Tensor, torch.Tensor]], int]:
    """One optimizer step on an (inputs, labels) batch already on the device."""
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> int:
        x, y = batch
        opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return len(x)

    return step


def main(run: Callable[[bool], float]) -> None:
    """``python SCRIPT``: the variant ``ZOO_FIXED`` names, its samples/s printed."""
    print(json.dumps({"samples_per_s": run(fixed_from_env())}), flush=True)
