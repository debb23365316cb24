"""What ``stepdoctor tune`` measures on the planted-fault scenarios, on this machine.

The figures the zoo's tests leave out (they move with the machine's other load): the speed-up
of DataLoader workers on the input-bound job (expected: workers recommended), on the healthy,
compute-bound job (expected: nothing recommended), and of a larger batch on the batch-of-one
job (expected: samples/s rising with the batch). Run it on a quiet machine.

    python benchmarks/zoo_tune.py [--repeats 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stepdoctor.experiments.tune import tune

ZOO = Path(__file__).resolve().parent.parent / "tests" / "scenarios"

#: (script, what is swept, steps a run, what a quiet machine should show)
CASES = (
    ("input_bound.py", "workers", 30, "num_workers recommended"),
    ("healthy_mlp.py", "workers", 40, "nothing recommended"),
    ("small_batch.py", "batch", 40, "samples/s rising with the batch; x4 recommended"),
)


def main() -> None:
    """Tune each case and print its trials' medians and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for script, only, steps, expected in CASES:
        result = tune(ZOO / script, steps=steps, repeats=args.repeats, only=(only,))
        base = result.baseline.median or 0.0
        print(f"{script} --only {only} (expected: {expected})")
        print(f"  baseline            {base:9.1f} {result.unit}")
        for trial in result.trials:
            ratio = (trial.median or 0.0) / base if base else 0.0
            label = f"{trial.change}={trial.value}"
            print(f"  {label:19} {trial.median or 0.0:9.1f} {result.unit}  {ratio:5.2f}x")
        print(f"  verdict: {result.reason}")


if __name__ == "__main__":
    main()
