"""tf.data pipelines as the TensorFlow integrations read them: described stage by stage in
tf.data's terms, and each batch stamped as it is made, its elements untouched."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import pytest

from tests.marks import needs_module

pytestmark = needs_module("tensorflow", "tf.data")


@pytest.fixture(scope="module")
def tf() -> ModuleType:
    import tensorflow

    return tensorflow


@pytest.fixture(scope="module")
def tfdata() -> ModuleType:
    from stepdoctor.integrations import _tfdata

    return _tfdata


def _samples(tf: ModuleType) -> Any:
    x = np.arange(64 * 4, dtype="float32").reshape(64, 4)
    return tf.data.Dataset.from_tensor_slices((x, np.arange(64)))


def _in_python(v: Any) -> Any:
    return v


class Pair(NamedTuple):
    rows: Any
    labels: Any


def test_each_stage_is_named_as_tf_data_makes_it(tf: ModuleType, tfdata: ModuleType) -> None:
    samples = _samples(tf)

    def in_python(a: Any, b: Any) -> Any:
        return tf.py_function(_in_python, [a], tf.float32), b

    def generate() -> Any:
        yield np.zeros((8, 4), "float32"), np.zeros(8, "int64")

    slow = tfdata.describe(samples.map(in_python).batch(8))
    assert slow == {
        "pipeline": "from_tensor_slices > map (Python) > batch(8)",
        "pipeline_python": "map",
        "pipeline_sequential": "map",
        "pipeline_map_before_batch": True,
        "pipeline_cache": False,
        "pipeline_prefetch": False,
    }
    good = samples.batch(8).map(lambda a, b: (a * 2, b), num_parallel_calls=tf.data.AUTOTUNE)
    described = tfdata.describe(good.cache().prefetch(tf.data.AUTOTUNE))
    assert (
        described["pipeline"] == "from_tensor_slices > batch(8) > map (parallel) > cache > prefetch"
    )
    assert described["pipeline_python"] is None and described["pipeline_sequential"] is None
    assert described["pipeline_map_before_batch"] is False
    assert described["pipeline_cache"] is True and described["pipeline_prefetch"] is True
    spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None,), tf.int64))
    generated = tf.data.Dataset.from_generator(generate, output_signature=spec)
    assert tfdata.describe(generated)["pipeline"] == "from_generator"
    assert tfdata.describe(generated)["pipeline_python"] == "from_generator"
    numpy_map = samples.map(
        lambda a, b: (tf.numpy_function(_in_python, [a], tf.float32), b), num_parallel_calls=2
    )
    assert tfdata.describe(numpy_map)["pipeline"] == "from_tensor_slices > map (Python, parallel)"
    interleaved = tf.data.Dataset.range(2).interleave(lambda _: samples, cycle_length=2)
    assert tfdata.describe(interleaved)["pipeline_sequential"] == "interleave"


def test_the_batch_size_is_the_last_batch_stages(tf: ModuleType, tfdata: ModuleType) -> None:
    samples = _samples(tf)
    assert tfdata.batch_size(samples.batch(16).prefetch(2)) == 16
    assert tfdata.batch_size(samples.batch(16).unbatch()) is None
    assert tfdata.batch_size(samples) is None


@pytest.mark.parametrize("shape", ["tuple", "single", "dict", "one-tuple", "namedtuple"])
def test_stamps_leave_the_elements_as_they_were(
    tf: ModuleType, tfdata: ModuleType, shape: str
) -> None:
    x = np.arange(12, dtype="float32").reshape(6, 2)
    given: Any = {
        "tuple": (x, np.arange(6)),
        "single": x,
        "dict": {"a": x, "b": np.arange(6)},
        "one-tuple": (x,),
        "namedtuple": Pair(x, np.arange(6)),  # tf.data passes it whole, not unpacked
    }[shape]
    plain = tf.data.Dataset.from_tensor_slices(given).batch(2)
    arrivals = tfdata.Arrivals()
    stamped = arrivals.stamped(plain)
    assert stamped.element_spec == plain.element_spec
    before = time.perf_counter_ns()
    got = [tf.nest.map_structure(lambda t: t.numpy().tolist(), e) for e in stamped]
    after = time.perf_counter_ns()
    want = [tf.nest.map_structure(lambda t: t.numpy().tolist(), e) for e in plain]
    assert got == want
    stamps = arrivals.drain(time.perf_counter_ns)
    assert len(stamps) == 3 and stamps == sorted(stamps)
    # moved onto the other clock by the two clocks' difference read at the drain: off by no
    # more than the time between those two reads (a second: however loaded the machine)
    slack = 1_000_000_000
    assert before - slack <= stamps[0] and stamps[-1] <= after + slack
    assert arrivals.drain(time.perf_counter_ns) == []


def test_a_last_prefetch_stays_last_with_the_stamp_before_it(
    tf: ModuleType, tfdata: ModuleType
) -> None:
    """The stamp goes before the pipeline's last prefetch: each batch is stamped as it goes
    into the buffer, so one made ahead of its step shows no wait."""
    ahead = _samples(tf).batch(8).prefetch(tf.data.AUTOTUNE)
    arrivals = tfdata.Arrivals()
    stamped = arrivals.stamped(ahead)
    assert [m for m, _ in tfdata.stages(stamped)][-2:] == ["map", "prefetch"]
    iterator = iter(stamped)
    next(iterator)
    stamps: list[int] = []
    waited_until = time.monotonic() + 120
    # the prefetch thread makes (and stamps) the next batch before it is asked for; a stamp
    # after the prefetch would come only with the next ``next``
    while len(stamps) < 2 and time.monotonic() < waited_until:
        stamps += arrivals.drain(time.perf_counter_ns)
        time.sleep(0.01)
    assert len(stamps) >= 2, "the second batch was not stamped before it was asked for"
    asked = time.perf_counter_ns()
    next(iterator)
    assert stamps[1] < asked
