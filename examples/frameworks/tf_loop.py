"""A hand-written TensorFlow training loop (``tf.GradientTape``): an MLP on random features,
its batches from a tf.data pipeline that reads each batch from (simulated) storage.

``TF_READ_MS``: the time to read a batch (default 40 ms asleep, as from remote storage: slower
than a step computes, and read one batch at a time: the planted slow reader; the fixed job
reads in 3 ms). ``TF_EAGER=1``: the step runs eagerly, not as a ``tf.function``.
``TF_EPOCHS``: epochs (default 2).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np
import tensorflow as tf

READ_S = float(os.environ.get("TF_READ_MS", "40")) / 1000
EAGER = os.environ.get("TF_EAGER") == "1"
EPOCHS = int(os.environ.get("TF_EPOCHS", "2"))
FEATURES, BATCH, SAMPLES = 256, 256, 8192  # 32 steps an epoch


def read(rows):
    """A batch read from storage (the reader's wait)."""
    time.sleep(READ_S)
    return rows


def pipeline(x, y):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    return ds.map(
        lambda rows, labels: (
            tf.ensure_shape(tf.py_function(read, [rows], tf.float32), (None, FEATURES)),
            labels,
        )
    )


def main() -> None:
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype("float32")
    y = rng.integers(0, 10, SAMPLES)
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    optimizer = keras.optimizers.SGD(0.05)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(rows, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(rows, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
        return loss

    step = train_step if EAGER else tf.function(train_step)
    data = pipeline(x, y)
    for _ in range(EPOCHS):
        for rows, labels in data:
            step(rows, labels)


if __name__ == "__main__":
    main()
