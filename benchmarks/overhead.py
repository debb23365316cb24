"""Overhead of traindoctor on a tiny training loop, against a plain loop in the same run.

The same ~1-3 ms/step loop runs plain, under a traindoctor Session (torch patches, GC
callback, 10 Hz sampler, record on disk) and under torch.profiler (CPU), interleaved in rounds
so machine noise hits all three alike. Prints the median ratio against plain with its spread,
and the hot-path cost per step (the events a step appends, timed in isolation).

    python benchmarks/overhead.py [--rounds 7] [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import deque
from pathlib import Path

import torch
from torch import nn

from traindoctor.collect import Session

TARGET_OVERHEAD = 0.01  # <= 1% step time
TARGET_HOT_PATH_US = 5.0  # <= 5 us per step


def make_loop(steps: int):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(steps * 64, 128), torch.randint(0, 10, (steps * 64,))
    )
    loader = torch.utils.data.DataLoader(data, batch_size=64)
    model = nn.Sequential(
        nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def loop() -> float:
        start = time.perf_counter()
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / steps

    return loop


def hot_path_us(n: int = 200_000) -> float:
    """Cost of one step's hot-path work: 8 events (4 phases in/out + boundary)."""
    events: deque[tuple[int, int, object, int]] = deque()
    append = events.append
    clock = time.perf_counter_ns
    import threading

    get_ident = threading.get_ident
    start = time.perf_counter()
    for _ in range(n):
        for _ in range(8):
            append((clock(), 0, "forward", get_ident()))
        if len(events) > 100_000:
            events.clear()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    loop = make_loop(args.steps)
    loop()  # warm up
    ratios_td: list[float] = []
    ratios_prof: list[float] = []
    plain_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            plain = loop()
            with Session(Path(tmp) / f"r{r}", instrument_torch=True):
                watched = loop()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
                profiled = loop()
            plain_ms.append(plain * 1e3)
            ratios_td.append(watched / plain)
            ratios_prof.append(profiled / plain)
    hot = hot_path_us()

    def show(name: str, ratios: list[float]) -> str:
        med = statistics.median(ratios)
        return (
            f"{name:<16} median {med:.3f}x  (min {min(ratios):.3f}, max {max(ratios):.3f}) "
            f"overhead {100 * (med - 1):+.1f}%"
        )

    print(
        f"plain loop: median {statistics.median(plain_ms):.2f} ms/step, "
        f"{args.rounds} rounds x {args.steps} steps, interleaved"
    )
    print(show("traindoctor", ratios_td))
    print(show("torch.profiler", ratios_prof))
    print(f"hot path: {hot:.2f} us/step (8 events; target <= {TARGET_HOT_PATH_US} us)")
    med = statistics.median(ratios_td) - 1
    verdict = "OK" if med <= TARGET_OVERHEAD and hot <= TARGET_HOT_PATH_US else "OVER TARGET"
    print(f"target <= {TARGET_OVERHEAD:.0%} step time: {verdict}")


if __name__ == "__main__":
    main()
