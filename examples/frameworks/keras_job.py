"""A small Keras 3 job on the torch backend: an MLP on random features, with validation.

``KERAS_FAULT=batch``: ``batch_size=4`` (the planted tiny batch; the fixed job uses 256).
``KERAS_FAULT=float64``: ``keras.config.set_floatx("float64")`` before the model is built (the
fixed job keeps Keras's float32).
``KERAS_FAULT=generator``: fit() reads the samples from a Python generator that reads each
batch slowly (``KERAS_READ_MS``, default 40 ms asleep, as from remote storage: slower than a
step computes, so prefetching cannot hide it) instead of from the arrays; with
``KERAS_READ_MS=4`` (the fixed job) prefetching hides the reads.
``KERAS_FAULT=pydataset``: fit() reads the samples from a ``keras.utils.PyDataset`` whose
``__getitem__`` reads each batch as slowly (``KERAS_READ_MS``), with Keras's default of one
worker; ``KERAS_READ_MS=4`` is its fixed twin.
``KERAS_FAULT=callback``: a callback that reads every weight back and sums it in Python after
each batch (the fixed job does it once an epoch).
``KERAS_DATA=tfdata`` (TensorFlow): fit() reads the samples from a tf.data pipeline that
batches them, scales each batch in TensorFlow ops (a map run in parallel) and prefetches;
``KERAS_FAULT=tfdata``: the pipeline's map is Python instead (``tf.py_function``, each sample
scaled with NumPy, one at a time before the batch, no prefetch: the planted slow stage).
``KERAS_EPOCHS``: epochs (default 2). ``KERAS_BACKEND``: ``torch`` unless set (``tensorflow``
runs it on TensorFlow).
"""

import os
import time

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras
import numpy as np

FAULT = os.environ.get("KERAS_FAULT", "")
DATA = "tfdata" if FAULT == "tfdata" else os.environ.get("KERAS_DATA", "arrays")
EPOCHS = int(os.environ.get("KERAS_EPOCHS", "2"))
READ_S = float(os.environ.get("KERAS_READ_MS", "40")) / 1000
FEATURES = 256


class WeightNorms(keras.callbacks.Callback):
    """Sums of squares of the model's weights, element by element in Python, after each batch
    (the planted slow callback)."""

    def on_train_batch_end(self, batch, logs=None):
        self.norms = [
            sum(float(v) ** 2 for v in keras.ops.convert_to_numpy(w).ravel()[:2000])
            for w in self.model.trainable_weights
        ]


def main() -> None:
    keras.utils.set_random_seed(0)
    if FAULT == "float64":
        keras.config.set_floatx("float64")
    batch = 4 if FAULT == "batch" else 256
    samples = 1024 if FAULT == "batch" else 16384  # 230 steps of 4, 116 of 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal((samples, FEATURES)).astype("float32")
    y = rng.integers(0, 10, samples)
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    callbacks = [WeightNorms()] if FAULT == "callback" else []
    if DATA == "tfdata":
        model.fit(pipeline(x, y, batch), epochs=EPOCHS, verbose=0, callbacks=callbacks)
        return
    if FAULT == "pydataset":
        model.fit(SlowBatches(x, y, batch), epochs=EPOCHS, verbose=0, callbacks=callbacks)
        return
    if FAULT == "generator":
        steps = samples // batch
        model.fit(
            batches(x, y, batch), steps_per_epoch=steps, epochs=EPOCHS, verbose=0,
            callbacks=callbacks,
        )  # fmt: skip
        return
    model.fit(
        x, y, batch_size=batch, epochs=EPOCHS, validation_split=0.1, verbose=0,
        callbacks=callbacks,
    )  # fmt: skip


def pipeline(x, y, batch):
    """A tf.data pipeline of ``x`` and ``y``: each sample scaled to zero mean and unit spread,
    in TensorFlow ops over whole batches, or (``KERAS_FAULT=tfdata``) in Python, sample by
    sample."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if FAULT != "tfdata":
        return (
            ds.batch(batch)
            .map(scale_batch, num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE)
        )

    def scale_sample(row, label):
        scaled = tf.py_function(lambda r: scaled_in_python(r.numpy()), [row], tf.float32)
        return tf.ensure_shape(scaled, (FEATURES,)), label

    return ds.map(scale_sample).batch(batch)


def scale_batch(rows, labels):
    import tensorflow as tf

    mean, var = tf.nn.moments(rows, axes=[1], keepdims=True)
    return (rows - mean) / (tf.sqrt(var) + 1e-6), labels


def scaled_in_python(row):
    """One sample scaled, in NumPy (the planted per-sample Python work)."""
    return ((row - row.mean()) / (row.std() + 1e-6)).astype("float32")


class SlowBatches(keras.utils.PyDataset):
    """Batches of ``x`` and ``y``, each read slowly (the planted input fault)."""

    def __init__(self, x, y, batch, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch = x, y, batch

    def __len__(self):
        return len(self.x) // self.batch

    def __getitem__(self, index):
        time.sleep(READ_S)
        rows = slice(index * self.batch, (index + 1) * self.batch)
        return self.x[rows], self.y[rows]


def batches(x, y, batch):
    """Batches of ``x`` and ``y`` forever, each read slowly (the planted input fault)."""
    while True:
        for start in range(0, len(x) - batch + 1, batch):
            time.sleep(READ_S)
            yield x[start : start + batch], y[start : start + batch]


if __name__ == "__main__":
    main()
