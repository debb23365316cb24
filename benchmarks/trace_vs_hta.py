"""stepdoctor's trace analysis against Holistic Trace Analysis, interleaved in one run.

For each shared trace case: load + temporal breakdown with stepdoctor and with HTA, each in
its own fresh process (so peak RSS is that analysis's own), alternating which goes first,
``--rounds`` times. Prints the median wall-time ratio (HTA / stepdoctor) with its spread and
the peak RSS of each. HTA lives in its own virtual environment (``--hta-python``; install it
there with ``pip install HolisticTraceAnalysis==0.5.0 -c constraints.txt``).

``--synthetic-mb N`` also writes an N-MB trace by replicating the A100 trace's events (ts and
correlation ids shifted) and reports stepdoctor's time and peak RSS on it (streaming: RSS
must stay far below the file size).

    python benchmarks/trace_vs_hta.py --hta-python /tmp/hta-venv/bin/python [--rounds 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(os.environ.get("STEPDOCTOR_SHARED", Path(__file__).parents[2] / "shared"))
TARGET_SPEED = 10.0  # >= 10x faster than HTA (issue 5)
TARGET_MEMORY = 1 / 3  # <= a third of HTA's peak RSS

_TD = """
import json, resource, sys, time
from pathlib import Path
start = time.perf_counter()
from stepdoctor.traces import analyse_paths
s = analyse_paths([Path(sys.argv[1])], fast=sys.argv[2:] == ["fast"])
[r.temporal for r in s.ranks]
print(json.dumps({"s": time.perf_counter() - start,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
_HTA = """
import json, resource, sys, time
start = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_temporal_breakdown(visualize=False)
print(json.dumps({"s": time.perf_counter() - start,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _measure(python: str, code: str, case: Path, *extra: str) -> dict[str, float]:
    proc = subprocess.run(
        [python, "-c", code, str(case), *extra], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{python} failed on {case}: {proc.stderr.strip().splitlines()[-1:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def synthetic(path: Path, megabytes: int) -> Path:
    """Write a trace of about ``megabytes`` MB by replicating the A100 trace's events."""
    source = SHARED / "traces" / "hta_a100_80gb_r0of16" / "rank0.json.gz"
    with gzip.open(source) as f:
        data = json.loads(f.read())
    events = data.pop("traceEvents")
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(
        e.get("ts", 0) for e in events if "ts" in e
    )
    with path.open("w") as f:
        head = json.dumps(data)[:-1]
        f.write(head + ', "traceEvents": [')
        copy, written, first = 0, 0, True
        while written < megabytes * 2**20:
            shift, corr = copy * (span + 1000), copy * 10_000_000
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e2["ts"] + shift
                args = e2.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    e2["args"] = {**args, "correlation": args["correlation"] + corr}
                text = json.dumps(e2)
                f.write(("" if first else ",") + text)
                written += len(text) + 1
                first = False
            copy += 1
        f.write("]}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--synthetic-mb", type=int, default=0)
    parser.add_argument(
        "--fast", action="store_true", help="stepdoctor with fast=True (simdjson, whole files)"
    )
    args = parser.parse_args()
    cases = sorted(p for p in (SHARED / "traces").iterdir() if p.is_dir())
    ratios, memory = [], []
    if args.hta_python:
        print(f"{'case':<28} {'stepdoctor s':>13} {'HTA s':>8} {'x faster':>9} "
              f"{'td MB':>7} {'HTA MB':>7}")  # fmt: skip
        for case in cases:
            td_runs, hta_runs = [], []
            for r in range(args.rounds):
                order = [("td", sys.executable, _TD), ("hta", args.hta_python, _HTA)]
                extra = ("fast",) if args.fast else ()
                for name, python, code in order if r % 2 == 0 else reversed(order):
                    runs = td_runs if name == "td" else hta_runs
                    runs.append(_measure(python, code, case, *(extra if name == "td" else ())))
            td_s = statistics.median(x["s"] for x in td_runs)
            hta_s = statistics.median(x["s"] for x in hta_runs)
            td_mb = max(x["rss_mb"] for x in td_runs)
            hta_mb = max(x["rss_mb"] for x in hta_runs)
            ratios.append(hta_s / td_s)
            memory.append(td_mb / hta_mb)
            print(f"{case.name:<28} {td_s:>13.2f} {hta_s:>8.2f} {hta_s / td_s:>9.1f} "
                  f"{td_mb:>7.0f} {hta_mb:>7.0f}")  # fmt: skip
        speed = statistics.median(ratios)
        mem = statistics.median(memory)
        met = speed >= TARGET_SPEED and mem <= TARGET_MEMORY
        print(
            f"median: {speed:.1f}x faster (min {min(ratios):.1f}, max {max(ratios):.1f}); "
            f"peak RSS {mem:.2f} of HTA's; targets >= {TARGET_SPEED:g}x and <= "
            f"{TARGET_MEMORY:.2f}: {'OK' if met else 'NOT MET'}"
        )
    if args.synthetic_mb:
        with tempfile.TemporaryDirectory() as tmp:
            big = synthetic(Path(tmp) / "big.json", args.synthetic_mb)
            size = big.stat().st_size / 2**20
            result = _measure(sys.executable, _TD, big)
            print(
                f"synthetic {size:,.0f} MB trace: {result['s']:.1f} s, peak RSS "
                f"{result['rss_mb']:,.0f} MB"
            )


if __name__ == "__main__":
    main()
