"""What watching a TensorFlow job costs its training: each job run plain (A) and under
``stepdoctor run`` (B), interleaved, repeated; the median ratio B/A of its training seconds
(timed inside the job, start-up left out) and the spread of the ratios.

Under ``run`` the job pays everything a user's would: the integrations' hooks on its thread
(Keras's callback and train-function wrapper, the stamp map in its tf.data pipeline; a
hand-written loop's ``tf.function``, iterator and optimizer hooks), the monitor thread and
the samplers.

    python benchmarks/tensorflow_overhead.py [--pairs 5] [--only fit-tf.data custom-loop]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "examples" / "frameworks"
#: The jobs timed: their module in examples/frameworks and its settings.
CASES = {
    "fit-tf.data": ("keras_job", {"KERAS_DATA": "tfdata", "KERAS_EPOCHS": "3"}),
    "fit-arrays": ("keras_job", {"KERAS_EPOCHS": "2"}),
    "custom-loop": ("tf_loop", {"TF_READ_MS": "0", "TF_EPOCHS": "4"}),
    "eager-loop": ("tf_loop", {"TF_READ_MS": "0", "TF_EPOCHS": "2", "TF_EAGER": "1"}),
}
#: The job's ``main()`` timed inside its process: start-up (imports) is no step's cost.
_TIMED = """
import sys, time
sys.path.insert(0, {jobs!r})
import {module} as job
began = time.perf_counter()
job.main()
print("TRAIN_SECONDS=%.4f" % (time.perf_counter() - began))
"""


def _seconds(module: str, env: dict[str, str], watched: bool, folder: Path) -> float:
    script = folder / f"timed_{module}.py"
    script.write_text(_TIMED.format(jobs=str(JOBS), module=module))
    command = [sys.executable, str(script)]
    if watched:
        command = [
            sys.executable, "-m", "stepdoctor", "run", "--no-report",
            "--out", str(folder / "run"), str(script),
        ]  # fmt: skip
    full = {
        **os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONWARNINGS": "ignore", **env,
    }  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, env=full, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("TRAIN_SECONDS="))
    return float(line.split("=", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), default=sorted(CASES))
    args = parser.parse_args()
    print(f"{'job':<14} {'plain s':>8} {'watched s':>10} {'ratio':>7}  spread of ratios")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            module, env = CASES[name]
            plain, watched, ratios = [], [], []
            for _ in range(args.pairs):
                a = _seconds(module, env, False, Path(tmp))
                b = _seconds(module, env, True, Path(tmp))
                plain.append(a)
                watched.append(b)
                ratios.append(b / a)
            print(
                f"{name:<14} {statistics.median(plain):>8.2f} {statistics.median(watched):>10.2f}"
                f" {statistics.median(ratios):>7.3f}  {min(ratios):.3f}-{max(ratios):.3f}"
            )


if __name__ == "__main__":
    main()
