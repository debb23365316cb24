"""The hand-written-loop hooks of ``integrations/tensorflow.py`` in this process, fed to a
session's buffers: what they put on TensorFlow's and Keras's classes, and that the undo puts
every one back as it was."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
import types
from typing import Any

from tests.marks import needs_module

pytestmark = needs_module("tensorflow", "TensorFlow's classes")


def _session() -> Any:
    from stepdoctor.collect.hooks.events import new_event_buffer

    steps: list[int | None] = []
    return types.SimpleNamespace(
        clock=time.perf_counter_ns, events=new_event_buffer(), hook_calls=collections.deque(),
        framework_facts=[], framework_models=[], step=steps.append, steps=steps,
    )  # fmt: skip


def _methods(tf: Any) -> dict[tuple[type, str], object]:
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    owners = [
        (polymorphic_function.Function, "__call__"),
        (iterator_ops.OwnedIterator, "__next__"),
        (tf.data.Dataset, "__iter__"),
        (tf.GradientTape, "gradient"),
    ]
    return {(o, n): vars(o).get(n) for o, n in owners}


def test_the_undo_puts_every_class_back_as_it_was() -> None:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import tensorflow as tf

    from stepdoctor.integrations import tensorflow as hooks

    before = _methods(tf)
    undo = hooks.install(_session())
    assert _methods(tf) != before  # wrapped
    undo()
    assert _methods(tf) == before


#: Run in a process of its own, with Keras on TensorFlow's backend (a test process may have
#: imported Keras on torch's already): a compiled step's calls counted by the hooks.
_COMPILED_STEPS = """
import collections, time, types
import keras, tensorflow as tf
from stepdoctor.collect.hooks.events import new_event_buffer
from stepdoctor.integrations import tensorflow as hooks

steps = []
session = types.SimpleNamespace(
    clock=time.perf_counter_ns, events=new_event_buffer(), hook_calls=collections.deque(),
    framework_facts=[], framework_models=[], step=steps.append,
)
undo = hooks.install(session)
weights = tf.Variable([1.0, 2.0])
optimizer = keras.optimizers.SGD(0.1)


@tf.function
def step(x):
    tf.debugging.assert_less(tf.reduce_sum(x), 100.0)  # a batch past it raises
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(weights * x)
    optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
    return loss


@tf.function
def score(x):
    return tf.reduce_sum(weights * x)


batch = tf.ones((4, 2))
for _ in range(3):
    step(batch)
score(batch)  # no gradients applied: no step
try:
    step(tf.fill((4, 2), 1000.0))
except tf.errors.InvalidArgumentError:
    print("raised")
undo()
print("steps", steps)
"""


def test_a_compiled_step_counts_where_it_returns_and_a_raising_one_does_not() -> None:
    """A tf.function whose trace applies gradients is a step each call that returns; a call
    that raises (the loop's last, past its data's end) is none; a tf.function that applies
    none is no step."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", _COMPILED_STEPS],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[-3:-1] == ["raised", "steps [4, 4, 4]"], proc.stdout
