"""The two stack samplers on the zoo's planted jobs: what each costs the job, what it costs a
core, and whether it names the planted function.

Each job runs in plain python and under ``stepdoctor run --stacks off``, ``--stacks thread``
(the in-process sampler, the default) and ``--stacks py-spy``, interleaved in rounds with the
order alternating; each run writes its own throughput after its warm-up (``ZOO_TIMING``).
Prints, per job and sampler:

- its throughput against ``--stacks off`` in the same round (the sampler's own cost; the rest
  of stepdoctor's is ``benchmarks/overhead.py``'s), median of the rounds;
- the sampler's CPU as a share of a core (``RunEnd.stacks_cpu_ns``: the thread's, or the
  py-spy process's, over the run's wall time);
- fidelity: for ``thread``, the planted finding's first site of the planted phase; for
  ``py-spy``, which has no phases, the function of the job's own code with the most samples
  over the whole run; "yes" when it is the planted function.

    python benchmarks/stacks.py [--rounds 3] [--only input_json.py,slow_callbacks.py]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ZOO))
from _catalog import FAULTS, PLANTED_CODE  # noqa: E402

from stepdoctor.record import load_run  # noqa: E402

#: Jobs whose planted fault is time in the job's own Python code (a phase's sites name it).
JOBS = tuple(s for s, (phase, _, _) in PLANTED_CODE.items() if phase not in ("gc", "tensors"))
MODES = ("plain", "off", "thread", "py-spy")
TIMEOUT_S = 300


def run(script: str, mode: str, tmp: Path) -> dict[str, object]:
    """One run of ``script``: its throughput and, under stepdoctor, its report and record."""
    timing = tmp / f"{script}-{mode}.json"
    out = tmp / f"{script}-{mode}"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "ZOO_FIXED": "0",
           "ZOO_MAGNITUDE": "strong", "ZOO_TIMING": str(timing)}  # fmt: skip
    if mode == "plain":
        cmd = [sys.executable, str(ZOO / script)]
    else:
        report = str(out / "report.json")
        cmd = [sys.executable, "-m", "stepdoctor", "run", "--stacks", mode, "--no-report",
               "--json", report, "--out", str(out), str(ZOO / script)]  # fmt: skip
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=ZOO
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{script} ({mode}) failed: {proc.stderr[-1500:]}")
    result: dict[str, object] = {"rate": json.loads(timing.read_text())["per_sec"]}
    if mode != "plain":
        result["report"] = json.loads((out / "report.json").read_text())
        record = load_run(out)
        wall = (record.end.t_ns - record.meta.clock_origin_ns) / 1e9 if record.end else 0.0
        if mode != "off" and record.end and record.end.stacks_cpu_ns is not None and wall:
            result["core"] = record.end.stacks_cpu_ns / 1e9 / wall
        result["named"] = named(script, mode, result["report"], record)
    return result


def named(script: str, mode: str, report: object, record: object) -> str:
    """The function the sampler names for the planted fault."""
    phase = PLANTED_CODE[script][0]
    if mode == "thread":
        rule = FAULTS[script]
        finding = next(f for f in report["findings"] if f["rule"] == rule)  # type: ignore[index]
        sites = [w for w in finding["where"] if w["phase"] == phase]
        return str(sites[0]["function"]) if sites else "-"
    frames = {f.id: f for f in record.frames}  # type: ignore[attr-defined]
    stacks = {s.id: s.frames for s in record.stacks}  # type: ignore[attr-defined]
    counts: Counter[str] = Counter()
    for sample in record.samples:  # type: ignore[attr-defined]
        user = [frames[i] for i in stacks.get(sample.stack, ()) if frames[i].user]
        if user and user[-1].function != "<module>":
            counts[user[-1].function] += 1
    return counts.most_common(1)[0][0] if counts else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated scripts")
    args = parser.parse_args()
    jobs = [j for j in JOBS if not args.only or j in args.only.split(",")]
    results: dict[tuple[str, str], list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for script in jobs:
                for mode in MODES if r % 2 == 0 else reversed(MODES):
                    results.setdefault((script, mode), []).append(run(script, mode, Path(tmp)))
    print(f"{args.rounds} rounds; throughput against --stacks off in the same round\n")
    print("| job | sampler | throughput vs off | CPU of a core | names | planted |")
    print("|---|---|---|---|---|---|")
    for script in jobs:
        planted = PLANTED_CODE[script][1]
        offs = [float(x["rate"]) for x in results[(script, "off")]]  # type: ignore[arg-type]
        for mode in ("thread", "py-spy"):
            runs = results[(script, mode)]
            ratio = statistics.median(float(x["rate"]) / o for x, o in zip(runs, offs, strict=True))  # type: ignore[arg-type]
            cores = [float(x["core"]) for x in runs if "core" in x]  # type: ignore[arg-type]
            core = f"{statistics.median(cores):.2%}" if cores else "n/a"
            names = Counter(str(x["named"]) for x in runs).most_common(1)[0][0]
            ok = "yes" if names == planted else "no"
            print(f"| {script} | {mode} | {ratio:.3f} | {core} | {names} | {ok} |")


if __name__ == "__main__":
    main()
