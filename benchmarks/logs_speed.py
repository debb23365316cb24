"""``stepdoctor logs`` on large GC logs: read speed (MB/s) and peak memory (RSS), with the C
fast path (``logs/_gcscan.c``) and, with ``--pure``, with the pure-Python parsers alone.

Writes an N-MB log of each format by repeating a real log of the corpus end to end
(``shared/logs`` beside the checkout, or ``$STEPDOCTOR_SHARED/logs``), then reads each in a
fresh process, ``--rounds`` times, and prints the median MB/s with its spread, the peak RSS
and the share of lines the Python parser read.
Issue 27's targets: 1 GB in at most 200 MB of RSS, at least 100 MB/s.

    python benchmarks/logs_speed.py [--mb 1000] [--rounds 3] [--pure]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = os.environ.get("STEPDOCTOR_SHARED") or Path(__file__).resolve().parents[2] / "shared"
CORPUS = Path(SHARED) / "logs" / "gc"
LOGS = {
    "JDK 8 G1 -verbose:gc (one pause a line)": "gcviewer/SampleSun1_6_0G1_gc_verbose.txt",
    "JDK 8 Parallel, details and dates": "garbagecat/dataset103.txt",
    "JDK 8 CMS, details": "gcviewer/SampleSun1_5_0CMS_PrintGCDetails.txt",
    "JDK 8 G1, details and ergonomics": "gcviewer/SampleSun1_8_0G1_ConcurrentCycle.txt",
    "JDK 8 G1, details, dates, ergonomics": "jifa/8ConcurrentPrintDateTimeStamp.log",
    "unified G1 -Xlog:gc*,safepoint": "gcviewer/sample-ujl-g1-gc-all,safepoint,os+cpu.txt",
    "unified Parallel -Xlog:gc*,safepoint": (
        "gcviewer/sample-ujl-parallel-gc-all,safepoint,os+cpu.txt"
    ),
    "unified ZGC -Xlog:gc*": "jifa/17ZGCParser.log",
    "unified Shenandoah, dates": "gcviewer/Sample-ujl-shenandoah-jdk17.txt",
}
TARGET_MB_S = 100.0
TARGET_RSS_MB = 200.0

_READ = """
import resource, sys, time
from stepdoctor.logs import feed, sources
from stepdoctor.logs.gc_jdk8 import parse_jdk8
from stepdoctor.logs.gc_unified import parse_unified
t = time.perf_counter()
(source,) = sources.open_sources([sys.argv[1]])
lines = feed.Feed(source)
parse = parse_unified if source.kind == "unified-gc" else parse_jdk8
log = parse(source.name, lines)
source.close()
seconds = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(seconds, rss, log.pauses, lines.handed / max(1, log.lines))
"""


def _write(path: Path, source: Path, megabytes: int) -> None:
    data = source.read_bytes()
    with path.open("wb") as out:
        for _ in range(max(1, megabytes * 2**20 // len(data))):
            out.write(data)


def _read(path: Path, pure: bool) -> tuple[float, float, int, float]:
    env = {**os.environ, "STEPDOCTOR_PURE_PYTHON": "1" if pure else "0"}
    out = subprocess.run(
        [sys.executable, "-c", _READ, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), float(out[3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=1000, help="size of each log (MB)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pure", action="store_true", help="also the pure-Python parsers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, file in LOGS.items():
            path = Path(tmp) / "gc.log"
            _write(path, CORPUS / file, args.mb)
            size_mb = path.stat().st_size / 2**20
            for pure in (False, True) if args.pure else (False,):
                runs = [_read(path, pure) for _ in range(args.rounds)]
                speeds = [size_mb / r[0] for r in runs]
                print(
                    f"{name} ({'pure Python' if pure else 'C fast path'}): {size_mb:,.0f} MB, "
                    f"{runs[0][2]:,} pauses: {statistics.median(speeds):.1f} MB/s (spread "
                    f"{min(speeds):.1f}-{max(speeds):.1f}; target {TARGET_MB_S:g}), peak RSS "
                    f"{max(r[1] for r in runs):.0f} MB (target {TARGET_RSS_MB:g}), lines read "
                    f"by Python {runs[0][3]:.2%}"
                )
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
