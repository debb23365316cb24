"""How long a one-hour run's HTML report takes to build, and how big it is (issue 6: a run of
>= 100,000 steps renders to under 5 MB in under 5 s).

    python benchmarks/html_report.py [--steps 100000] [--repeats 3]

The run is built (100,000 steps of ~36 ms, a 10 Hz system sample over the hour), then diagnosed
and rendered; the time printed is build_report + render_html, the median of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from tests.builders import record, samples, steps

from stepdoctor.render.html import render_html
from stepdoctor.report import build_report

TARGET_S = 5.0
TARGET_BYTES = 5 * 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    s = steps(args.steps, phases_ms={"data_wait": 1, "forward": 12, "backward": 23},
              every={33_333: {"backward": 900}})  # fmt: skip
    rec = record(s, system=samples(s, every_ms=100))
    times, size = [], 0
    for _ in range(args.repeats):
        start = time.perf_counter()
        page = render_html(rec, build_report(rec))
        times.append(time.perf_counter() - start)
        size = len(page.encode())
    took = statistics.median(times)
    print(
        f"{args.steps:,} steps, {len(rec.system):,} samples: report + HTML in {took:.2f} s "
        f"(median of {args.repeats}; min {min(times):.2f}), {size / 2**20:.2f} MB"
    )
    ok = took <= TARGET_S and size <= TARGET_BYTES
    print(f"target <= {TARGET_S:.0f} s and <= 5 MB: {'OK' if ok else 'OVER TARGET'}")


if __name__ == "__main__":
    main()
