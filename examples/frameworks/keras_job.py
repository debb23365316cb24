"""A small Keras 3 job on the torch backend: an MLP on random features, with validation.

``KERAS_FAULT=batch``: ``batch_size=4`` (the planted tiny batch; the fixed job uses 256).
``KERAS_FAULT=float64``: ``keras.config.set_floatx("float64")`` before the model is built (the
fixed job keeps Keras's float32).
``KERAS_EPOCHS``: epochs (default 2).
"""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras
import numpy as np

FAULT = os.environ.get("KERAS_FAULT", "")
EPOCHS = int(os.environ.get("KERAS_EPOCHS", "2"))
FEATURES = 256


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
    model.fit(x, y, batch_size=batch, epochs=EPOCHS, validation_split=0.1, verbose=0)


if __name__ == "__main__":
    main()
