"""What the Lightning integration's profiler costs a step: ``Trainer.fit`` with Lightning's own
``PassThroughProfiler`` (A) and with ``StepdoctorProfiler`` in front of it (B), interleaved,
repeated; the median ratio B/A of the seconds a step and its spread.

B's profiler appends its phases and hook times to an event buffer, as under a session, without
the session's monitor and samplers (their cost is the session's, measured by overhead.py): this
is the part on the job's thread that Lightning's ~40 profiled actions a step add.

    python benchmarks/lightning_overhead.py [--pairs 7] [--steps 200]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
import types
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

from stepdoctor.collect.hooks.events import new_event_buffer
from stepdoctor.integrations._timing import FrameworkTimer
from stepdoctor.integrations.lightning import kit


class _Small(pl.LightningModule):
    """A step of a few milliseconds: the integration's share shows on it."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> Any:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _session() -> Any:
    """The parts of a session the profiler feeds (its buffers and clock), nothing running."""
    return types.SimpleNamespace(
        clock=time.perf_counter_ns,
        events=new_event_buffer(),
        hook_calls=collections.deque(),
        step=lambda batch_size=None: None,
    )


def _fit_seconds_a_step(steps: int, *, ours: bool) -> float:
    data = TensorDataset(torch.randn(64 * 50, 64), torch.randint(0, 10, (64 * 50,)))
    loader = DataLoader(data, sampler=BatchSampler(RandomSampler(data), 64, False), batch_size=None)
    profiler = (
        kit()[0](FrameworkTimer(_session()), wrapped=pl.profilers.PassThroughProfiler())
        if ours
        else None
    )
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        profiler=profiler,
    )
    started = time.perf_counter()
    trainer.fit(_Small(), loader)
    return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    _fit_seconds_a_step(20, ours=True)  # warm both paths up
    ratios = []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        got = {ours: _fit_seconds_a_step(args.steps, ours=ours) for ours in order}
        ratios.append(got[True] / got[False])
        print(f"pair {pair}: plain {got[False] * 1e3:.3f} ms, ours {got[True] * 1e3:.3f} ms a step")
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(
        f"StepdoctorProfiler / Lightning's own: median {statistics.median(ratios):.3f} "
        f"(quartiles {q[0]:.3f}-{q[2]:.3f}, {len(ratios)} pairs)"
    )


if __name__ == "__main__":
    main()
