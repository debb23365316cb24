"""Shared pieces of the scenario zoo: real small training jobs on the CPU.

Each scenario script trains for a fixed number of steps and for at least ``MIN_SECONDS``: the
steps give every rule the same evidence however fast the machine runs (a loaded machine takes
longer, it does not see fewer steps), and the floor gives the 10 Hz system samples (memory,
other processes' CPU) enough readings on a fast one. The fault is planted in the script.

The jobs run one intra-op thread (a scenario about threads sets its own). Another process
taking a core then slows every phase alike, so the shares the rules judge do not move: with
torch's default pool of one thread per core, a competing process makes the compute alone up
to ten times slower on the 2-core reference machine (the pool's threads wait for each other),
and the planted fault's share shrinks below its rule's threshold.

A fault script plants its fault at one of two magnitudes, or fixes it, as the environment
says (``dose``, ``fixed``): ``ZOO_MAGNITUDE=strong`` (the default, what other tests and
benchmarks run) or ``mild`` (a smaller dose that is still a fault), and ``ZOO_FIXED=1`` for the
same job with the fault fixed the way its user would.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import torch
from _catalog import MAGNITUDES
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

torch.set_num_threads(1)

T = TypeVar("T")
#: Floor on a scenario's training time: memory-growth wants 20 system samples (10 Hz).
MIN_SECONDS = float(os.environ.get("ZOO_MIN_SECONDS", "3"))
FEATURES = 256
CLASSES = 10


def mlp(width: int = 1024, depth: int = 2) -> nn.Module:
    """A plain MLP; ~1.3M parameters at the default size (compute >> data loading)."""
    layers: list[nn.Module] = [nn.Linear(FEATURES, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, CLASSES))
    return nn.Sequential(*layers)


def tensors(n: int = 8192, dtype: torch.dtype = torch.float32) -> TensorDataset:
    """A synthetic classification data set held in memory."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, FEATURES, generator=g).to(dtype)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    return TensorDataset(x, y)


def magnitude(environ: Mapping[str, str] = os.environ) -> str:
    """The planted fault's dose from ``ZOO_MAGNITUDE``: ``"strong"`` (default) or ``"mild"``.

    Raises:
        ValueError: for any other value.
    """
    value = environ.get("ZOO_MAGNITUDE", "strong")
    if value not in MAGNITUDES:
        raise ValueError(f"ZOO_MAGNITUDE={value!r}: use one of {', '.join(MAGNITUDES)}")
    return value


def dose(strong: T, mild: T, environ: Mapping[str, str] = os.environ) -> T:
    """``strong`` or ``mild``, whichever ``ZOO_MAGNITUDE`` asks for."""
    return strong if magnitude(environ) == "strong" else mild


def fixed(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``ZOO_FIXED=1`` asks for the job with its fault fixed."""
    return environ.get("ZOO_FIXED", "") == "1"


#: Where a job writes its own throughput when asked (``ZOO_TIMING=FILE``): the calibration
#: benchmark's measure of a job run in plain python, without stepdoctor.
TIMING_FILE = os.environ.get("ZOO_TIMING", "")
#: The first ticks are warm-up (first-call allocation, worker start-up): left out of the rate.
WARMUP_TICKS_SHARE = 0.1
_ticks: list[tuple[float, int]] = []


def tick(done: int) -> None:
    """Note that ``done`` units of work (steps, requests or samples: the job's own count,
    cumulative) are finished now; a no-op unless ``ZOO_TIMING`` is set."""
    if TIMING_FILE:
        _ticks.append((time.perf_counter(), done))


def throughput(ticks: list[tuple[float, int]]) -> dict[str, float] | None:
    """Units a second over ``ticks`` after the warm-up ticks (None with fewer than 3 left)."""
    after = ticks[max(1, int(len(ticks) * WARMUP_TICKS_SHARE)) :]
    if len(after) < 3 or after[-1][0] <= after[0][0]:
        return None
    units = after[-1][1] - after[0][1]
    seconds = after[-1][0] - after[0][0]
    return {"units": units, "seconds": seconds, "per_sec": units / seconds}


@atexit.register
def _write_timing() -> None:
    if TIMING_FILE:
        with open(TIMING_FILE, "w") as f:
            json.dump(throughput(_ticks), f)


def until_done(
    steps: int, min_seconds: float = MIN_SECONDS, *, ticks: bool = True
) -> Callable[[int], bool]:
    """A test of whether a loop may stop after ``done`` steps: ``steps`` done and
    ``min_seconds`` passed. Each call ticks ``done`` (``tick``) unless ``ticks`` is False (the
    loop ticks its own unit, e.g. samples)."""
    floor = time.monotonic() + min_seconds

    def done_yet(done: int) -> bool:
        if ticks:
            tick(done)
        return done >= steps and time.monotonic() >= floor

    return done_yet


def train(
    loader: DataLoader | list,  # type: ignore[type-arg]
    model: nn.Module,
    *,
    steps: int,
    after_step: Callable[[int, torch.Tensor], None] | None = None,
    lr: float = 0.01,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    min_seconds: float = MIN_SECONDS,
) -> int:
    """Train for ``steps`` steps and at least ``min_seconds``; return the number of steps.

    The loss is cross-entropy unless ``loss_fn`` is given.
    """
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    done = until_done(steps, min_seconds, ticks=False)
    step = samples = 0
    while not done(step):
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step(step, loss)
            step += 1
            samples += len(x)
            tick(samples)
            if done(step):
                break
    return step


__all__ = [
    "CLASSES",
    "FEATURES",
    "MAGNITUDES",
    "MIN_SECONDS",
    "Dataset",
    "dose",
    "fixed",
    "magnitude",
    "mlp",
    "tensors",
    "throughput",
    "tick",
    "train",
    "until_done",
]
