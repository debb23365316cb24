"""What the monitor thread spends per step, part by part, inside a watched run.

Runs the overhead benchmark's loop (``overhead.make_loop``) under a full ``Session`` and
times each part of the monitor thread's work with ``thread_time`` around it: the sample
(with its per-core CPU, process-tree, walk, disk/net and heap parts; with a sampler thread,
the per-core and tree parts parse its snapshots, and the thread's own CPU is shown),
reducing events into steps, writing the record and the inspection of models and loaders.
Prints microseconds of CPU per training step; docs/overhead.md keeps the results.

    python benchmarks/monitor_parts.py [--steps 4000] [--batch 64] [--flush-every 0.5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from overhead import make_loop
from stepdoctor.collect import Session
from stepdoctor.collect.session import FLUSH_EVERY_S


class _Timed:
    """CPU time spent in wrapped callables, by label."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = {}

    def wrap(self, label: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time_ns()
            try:
                return func(*args, **kwargs)
            finally:
                self.ns[label] = self.ns.get(label, 0) + time.thread_time_ns() - start

        return timed


class _Proxy:
    """Stands in for an object whose methods cannot be replaced (a C type)."""

    def __init__(self, target: object) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--flush-every", type=float, default=FLUSH_EVERY_S, help="seconds")
    args = parser.parse_args()
    loop = make_loop(args.steps, args.batch)
    loop()  # warm up
    timed = _Timed()
    psutil.disk_io_counters = timed.wrap("  disk", psutil.disk_io_counters)
    psutil.net_io_counters = timed.wrap("  net", psutil.net_io_counters)
    with tempfile.TemporaryDirectory() as tmp:
        session = Session(Path(tmp) / "run", instrument_torch=True, flush_every_s=args.flush_every)
        with session:
            monitor: Any = session._monitor  # a benchmark may look inside
            for reader in monitor._readers:
                reader.read = timed.wrap(f"sample ({reader.name})", reader.read)
                for part, label in (
                    ("_per_core", "  per-core CPU"),
                    ("_tree", "  job's tree"),
                    ("_descendants", "  job's children"),
                    ("_walk", "  walk of all processes"),
                ):
                    if hasattr(reader, part):
                        setattr(reader, part, timed.wrap(label, getattr(reader, part)))
                heap = getattr(reader, "_heap", None)
                if heap is not None:
                    heap.read = timed.wrap("  heap", heap.read)
            reducer = _Proxy(monitor._reducer)
            reducer.drain = timed.wrap("reduce", monitor._reducer.drain)
            monitor._reducer = reducer
            monitor._write_pending = timed.wrap("write", monitor._write_pending)
            monitor._inspect = timed.wrap("inspect", monitor._inspect)
            per_step_ms = sum(loop()) / args.steps / 1e6
    for reader in monitor._readers:
        if getattr(reader, "cpu_ns", 0):
            timed.ns["sampler thread (snapshots)"] = reader.cpu_ns
    total_us = monitor.cpu_ns / args.steps / 1e3
    print(f"step {per_step_ms:.3f} ms; monitor CPU {total_us:.1f} us/step, of which:")
    order = ["sampler thread", "sample", "  per-core", "  job's", "  walk", "  disk", "  net"]
    order += ["  heap", "reduce", "write", "inspect"]
    for label, ns in sorted(
        timed.ns.items(), key=lambda item: [item[0].startswith(o) for o in order].index(True)
    ):
        print(f"  {label:<26} {ns / args.steps / 1e3:6.2f} us/step")


if __name__ == "__main__":
    main()
