"""What stepdoctor adds to a job's start and end, and how long its quick commands take.

For a job without torch and for a small torch job (its own ``import torch`` and 30 tiny
steps), each run plainly (``python job.py``), under ``stepdoctor run --no-report`` (no report
built) and under ``stepdoctor run`` (the report built and printed), interleaved, ``--rounds``
times: *before* is the time from the launch to the job's first line, *after* from its last
line to the process's end; stepdoctor's cost is the difference from the plain run's.
Also the wall time of ``stepdoctor --version`` and ``stepdoctor doctor``. Python's
bytecode cache is warm (each command runs once first; ``PYTHONDONTWRITEBYTECODE`` is unset
for the children), as on a user's machine after the first run. Prints medians and ranges.

    python benchmarks/startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOBS = {
    "no torch": """
import time
print("first", time.time(), flush=True)
total = sum(i * i for i in range(200_000))
print("last", time.time(), flush=True)
""",
    "torch": """
import time
print("first", time.time(), flush=True)
import torch
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(30):
    opt.zero_grad()
    model(torch.randn(32, 64)).sum().backward()
    opt.step()
print("last", time.time(), flush=True)
""",
}
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed_job(command: list[str]) -> tuple[float, float]:
    """(before, after) seconds of one run of ``command``, which prints its first and last
    lines' times."""
    start = time.time()
    out = subprocess.run(command, capture_output=True, text=True, env=ENV, check=True).stdout
    end = time.time()
    said = dict(line.split()[:2] for line in out.splitlines() if line.startswith(("first", "last")))
    return float(said["first"]) - start, end - float(said["last"])


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, env=ENV, check=False)
    return time.perf_counter() - start


def line(name: str, values: list[float]) -> str:
    spread = f"{min(values):.3f}-{max(values):.3f}"
    return f"{name:<52} median {statistics.median(values):6.3f} s  ({spread})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    stepdoctor = [sys.executable, "-m", "stepdoctor"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results: dict[str, list[float]] = {}
        for name, text in JOBS.items():
            script = folder / f"job_{name.replace(' ', '_')}.py"
            script.write_text(text)
            under = [*stepdoctor, "run", "--no-report", "--out", str(folder / "run"), str(script)]
            shown = [*stepdoctor, "run", "--out", str(folder / "shown"), str(script)]
            plain = [sys.executable, str(script)]
            timed_job(under), timed_job(shown), timed_job(plain)  # the bytecode caches warm
            for _ in range(args.rounds):
                for how, command in (("plain", plain), ("run", under), ("report", shown)):
                    before, after = timed_job(command)
                    results.setdefault(f"{name}: {how} before", []).append(before)
                    results.setdefault(f"{name}: {how} after", []).append(after)
        wall([*stepdoctor, "doctor"])
        for _ in range(args.rounds):
            results.setdefault("stepdoctor --version", []).append(wall([*stepdoctor, "--version"]))
            results.setdefault("stepdoctor doctor", []).append(wall([*stepdoctor, "doctor"]))
    for name in JOBS:
        for how, label in (("run", "run --no-report"), ("report", "run (report printed)")):
            for part in ("before", "after"):
                added = [
                    u - p
                    for u, p in zip(
                        results[f"{name}: {how} {part}"],
                        results[f"{name}: plain {part}"],
                        strict=True,
                    )
                ]
                print(line(f"{name}: {label} adds {part} the job", added))
    print(line("stepdoctor --version", results["stepdoctor --version"]))
    print(line("stepdoctor doctor", results["stepdoctor doctor"]))


if __name__ == "__main__":
    main()
