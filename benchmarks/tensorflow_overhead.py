"""What watching a TensorFlow job costs its training, two ways.

1. The hooks on the job's thread, in one process (``--rounds``): the same steps with the hooks
   installed (B) and without (A), interleaved round by round, each round ``--steps`` steps;
   the median of the rounds' ratios B/A and their spread. A hand-written loop (a compiled
   step, and an eager one): the hooks of ``integrations/tensorflow.py`` fed to buffers, as
   under a session, without its monitor. A tf.data pipeline given to ``fit``: the stamp map
   (``_tfdata.Arrivals``), its batches taken by a compiled step.
2. Whole jobs (``--pairs``): each run plain and under ``stepdoctor run``, interleaved; the
   median ratio of its training seconds (timed inside the job, start-up left out), which
   adds the monitor thread and the samplers, and the spread: on a shared 2-core machine
   whole processes differ run to run by more than the hooks cost.

    python benchmarks/tensorflow_overhead.py [--rounds 15] [--steps 60] [--pairs 5]
    python benchmarks/tensorflow_overhead.py --pairs 0      # the hooks alone
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def _session() -> Any:
    """The parts of a session the hooks feed (buffers, clock), nothing running."""
    from stepdoctor.collect.hooks.events import new_event_buffer

    return types.SimpleNamespace(
        clock=time.perf_counter_ns,
        events=new_event_buffer(),
        hook_calls=collections.deque(),
        framework_facts=[],
        framework_models=[],
        step=lambda batch_size=None: None,
    )


def _loop_rounds(rounds: int, steps: int, eager: bool) -> list[float]:
    """Ratios B/A of a hand-written loop's seconds a step, hooks installed (B) or not (A)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import numpy as np
    import tensorflow as tf

    from stepdoctor.integrations import tensorflow as tf_hooks

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64 * steps, 256)).astype("float32")
    y = rng.integers(0, 10, 64 * steps)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).prefetch(tf.data.AUTOTUNE)
    model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(10)])  # fmt: skip
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(a: Any, b: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(b, model(a, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        return loss

    train = step if eager else tf.function(step)

    def epoch() -> float:
        began = time.perf_counter()
        for a, b in data:
            train(a, b)
        return (time.perf_counter() - began) / steps

    epoch()  # traced, warmed
    return _interleaved(rounds, epoch, lambda: tf_hooks.install(_session()))


def _pipeline_rounds(rounds: int, steps: int) -> list[float]:
    """Ratios B/A of a compiled step's seconds a batch taking its batches from a tf.data
    pipeline stamped (B) or not (A)."""
    import numpy as np
    import tensorflow as tf

    from stepdoctor.integrations._tfdata import Arrivals

    x = np.random.default_rng(0).standard_normal((64 * steps, 256)).astype("float32")
    plain = tf.data.Dataset.from_tensor_slices(x).batch(64).prefetch(tf.data.AUTOTUNE)
    arrivals = Arrivals()
    stamped = arrivals.stamped(plain)
    weights = tf.Variable(tf.random.normal((256, 256)))

    @tf.function
    def consume(batch: Any) -> Any:
        return tf.reduce_sum(tf.nn.relu(batch @ weights) @ weights)

    def epoch(data: Any) -> float:
        began = time.perf_counter()
        for batch in data:
            consume(batch)
        arrivals.drain(time.perf_counter_ns)  # as at an epoch's end
        return (time.perf_counter() - began) / steps

    epoch(plain), epoch(stamped)
    ratios = []
    for _ in range(rounds):
        a = epoch(plain)
        b = epoch(stamped)
        ratios.append(b / a)
    return ratios


def _interleaved(
    rounds: int, epoch: Callable[[], float], install: Callable[[], Callable[[], None]]
) -> list[float]:
    ratios = []
    for _ in range(rounds):
        a = epoch()
        undo = install()
        try:
            b = epoch()
        finally:
            undo()
        ratios.append(b / a)
    return ratios


def _per_call(rounds: int, calls: int = 3000) -> None:
    """The hooks' own cost per call of what a hand-written loop calls once a step: a tf.data
    iterator's ``next`` and a ``tf.function`` call, hooks installed or not, interleaved."""
    import numpy as np
    import tensorflow as tf

    from stepdoctor.integrations import tensorflow as tf_hooks

    @tf.function
    def add(value: Any) -> Any:
        return value + 1

    one = tf.constant(1.0)
    add(one)
    batches = iter(
        tf.data.Dataset.from_tensors(np.zeros((64, 256), "float32")).repeat().prefetch(8)
    )
    next(batches)

    def us(call: Callable[[], object]) -> float:
        began = time.perf_counter_ns()
        for _ in range(calls):
            call()
        return (time.perf_counter_ns() - began) / calls / 1000

    seen: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):
        seen["next, plain"].append(us(lambda: next(batches)))
        seen["tf.function call, plain"].append(us(lambda: add(one)))
        undo = tf_hooks.install(_session())
        try:
            seen["next, hooked"].append(us(lambda: next(batches)))
            seen["tf.function call, hooked"].append(us(lambda: add(one)))
        finally:
            undo()
    print(f"per call, {calls} calls, {rounds} interleaved rounds (median us):")
    for what in ("next", "tf.function call"):
        a = statistics.median(seen[f"{what}, plain"])
        b = statistics.median(seen[f"{what}, hooked"])
        print(f"  {what:<18} {a:8.1f} -> {b:8.1f}  (+{b - a:.1f} us)")


def _hooks(rounds: int, steps: int) -> None:
    _per_call(rounds)
    print(f"hooks on the job's thread: {rounds} interleaved rounds of {steps} steps")
    print(f"{'job':<28} {'ratio':>7}  spread of ratios")
    for name, ratios in (
        ("hand-written, compiled", _loop_rounds(rounds, steps, eager=False)),
        ("hand-written, eager", _loop_rounds(rounds, steps, eager=True)),
        ("fit's tf.data stamps", _pipeline_rounds(rounds, steps)),
    ):
        print(f"{name:<28} {statistics.median(ratios):>7.3f}  {min(ratios):.3f}-{max(ratios):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), default=sorted(CASES))
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.rounds:
        _hooks(args.rounds, args.steps)
    if not args.pairs:
        return
    print(f"whole jobs: {args.pairs} interleaved pairs, plain and under stepdoctor run")
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
