"""The hand-written-loop hooks of ``integrations/tensorflow.py`` in this process, fed to a
session's buffers: what they put on TensorFlow's and Keras's classes, and that the undo puts
every one back as it was."""

from __future__ import annotations

import collections
import os
import time
import types
from typing import Any

import pytest

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


def test_a_compiled_step_counts_where_it_returns_and_a_raising_one_does_not() -> None:
    """A tf.function whose trace applies gradients is a step each call that returns; a call
    that raises (the loop's last, past its data's end) is none; a tf.function that applies
    none is no step."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        pytest.skip("keras runs another backend")
    from stepdoctor.integrations import tensorflow as hooks

    session = _session()
    undo = hooks.install(session)
    try:
        weights = tf.Variable([1.0, 2.0])
        optimizer = keras.optimizers.SGD(0.1)

        @tf.function
        def step(x: Any) -> Any:
            tf.debugging.assert_less(tf.reduce_sum(x), 100.0)  # a batch past it raises
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(weights * x)
            optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            return loss

        @tf.function
        def score(x: Any) -> Any:
            return tf.reduce_sum(weights * x)

        batch = tf.ones((4, 2))
        for _ in range(3):
            step(batch)
        score(batch)  # no gradients applied: no step
        with pytest.raises(tf.errors.InvalidArgumentError):
            step(tf.fill((4, 2), 1000.0))
        assert session.steps == [4, 4, 4]
    finally:
        undo()
