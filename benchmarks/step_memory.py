"""Bytes a watched run keeps per step: its record rows and everything else stepdoctor holds.

A step is kept as its record row (``record/rows.py``, ~110 bytes) rather than a ``StepTiming``
(~500-670 bytes with its dicts) until the run ends. This counts, with tracemalloc, what
stepdoctor's code allocated and still holds after N steps, for the C parts and their Python
twins. The figure moves with how far the event buffer grew before a flush (the machine's
speed against the monitor's 0.5 s flush), which is why it is a benchmark and not a test;
tests/collect/test_session.py checks the property (no step kept as an object).

    python benchmarks/step_memory.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

from stepdoctor.collect import Session
from stepdoctor.native import PURE_PYTHON_ENV


def _caught_up(doc: Session, steps: int) -> None:
    """Wait until the monitor reduced ``steps`` steps, and a flush more."""
    monitor = doc._monitor  # a benchmark may look inside
    assert monitor is not None
    while monitor.collected.step_count < steps:
        time.sleep(0.05)
    time.sleep(1.0)


def kept_per_step(steps: int, folder: Path) -> tuple[float, float]:
    """(bytes held per step, bytes of record rows per step) after ``steps`` steps."""
    tracemalloc.start()
    try:
        with Session(folder, readers=[], instrument_torch=False, log_every_steps=500) as doc:
            for _ in range(100):  # the session's own one-off allocations
                with doc.phase("forward"):
                    pass
                doc.step(batch_size=32)
            _caught_up(doc, 100)
            before = tracemalloc.take_snapshot()
            for _ in range(steps):
                with doc.phase("forward"):
                    pass
                with doc.phase("backward"):
                    pass
                doc.step(batch_size=32)
            _caught_up(doc, steps + 100)
            after = tracemalloc.take_snapshot()
            assert doc._monitor is not None
            rows = doc._monitor.collected.step_rows
    finally:
        tracemalloc.stop()
    ours = [tracemalloc.Filter(True, "*stepdoctor*")]
    diff = after.filter_traces(ours).compare_to(before.filter_traces(ours), "filename")
    return sum(stat.size_diff for stat in diff) / steps, sum(map(len, rows)) / steps


def main() -> None:
    """Print the bytes kept per step for the C parts and the Python twins."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    for label, pure in (("C parts", "0"), ("Python twins", "1")):
        os.environ[PURE_PYTHON_ENV] = pure
        with tempfile.TemporaryDirectory() as tmp:
            held, rows = kept_per_step(args.steps, Path(tmp))
        print(f"{label:13} {held:6.0f} bytes held a step ({rows:.0f} of them record rows)")


if __name__ == "__main__":
    main()
