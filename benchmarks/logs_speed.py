"""``stepdoctor logs`` on large GC logs: read speed (MB/s) and peak memory (RSS).

Writes an N-MB log of each family by repeating a real log of the corpus end to end
(tests/data/logs: GCViewer's JDK 6 G1 -verbose:gc log, one pause a line; its JDK 9+ G1
-Xlog:gc*,safepoint log, ten lines a pause), then reads each in a fresh process, ``--rounds``
times, and prints the median MB/s with its spread and the peak RSS. Issue 27's targets: 1 GB
in at most 200 MB of RSS, at least 100 MB/s.

    python benchmarks/logs_speed.py [--mb 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "tests" / "data" / "logs" / "gc" / "gcviewer"
LOGS = {
    "JDK 8 (G1, -verbose:gc)": CORPUS / "SampleSun1_6_0G1_gc_verbose.txt",
    "unified (G1, -Xlog:gc*,safepoint)": CORPUS / "sample-ujl-g1-gc-all,safepoint,os+cpu.txt",
}
TARGET_MB_S = 100.0
TARGET_RSS_MB = 200.0

_READ = """
import resource, sys, time
t = time.perf_counter()
from stepdoctor.logs import read_gc_log
log = read_gc_log(sys.argv[1])
seconds = time.perf_counter() - t
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, log.pauses)
"""


def _write(path: Path, source: Path, megabytes: int) -> None:
    data = source.read_bytes()
    with path.open("wb") as out:
        for _ in range(max(1, megabytes * 2**20 // len(data))):
            out.write(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=1000, help="size of each log (MB)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in LOGS.items():
            path = Path(tmp) / source.name
            _write(path, source, args.mb)
            size_mb = path.stat().st_size / 2**20
            speeds, peaks = [], []
            for _ in range(args.rounds):
                out = subprocess.run(
                    [sys.executable, "-c", _READ, str(path)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()
                speeds.append(size_mb / float(out[0]))
                peaks.append(float(out[1]))
                pauses = int(out[2])
            print(
                f"{name}: {size_mb:,.0f} MB, {pauses:,} pauses: "
                f"{statistics.median(speeds):.1f} MB/s (spread {min(speeds):.1f}-"
                f"{max(speeds):.1f}; target {TARGET_MB_S:g}), peak RSS "
                f"{max(peaks):.0f} MB (target {TARGET_RSS_MB:g})"
            )
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
