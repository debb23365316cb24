"""Keras's ``fit`` given the callback under ``stepdoctor run`` (``install``), however ``fit``
is called, in this process on the torch backend."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from stepdoctor.collect import Session
from tests.collect.test_session import FixedReader

# keras is imported by the tests that use it, not when the tests are collected (~5 s a process)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="no keras")


@pytest.fixture(scope="module")
def keras() -> ModuleType:
    """Keras on the torch backend (skipped where an earlier import chose another)."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    if keras.backend.backend() != "torch":
        pytest.skip("keras runs another backend")
    return keras


def _seen(keras: ModuleType) -> Any:
    """A callback that counts the batches it saw."""

    class Seen(keras.callbacks.Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.batches = 0

        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            self.batches += 1

    return Seen()


def test_fit_called_with_its_callbacks_by_position_gets_ours_too(
    keras: ModuleType, tmp_path: Path
) -> None:
    from stepdoctor.integrations.keras import install

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((32, 4), "float32"), np.zeros((32, 2), "float32")
    seen = _seen(keras)
    original = keras.Model.fit
    with Session(tmp_path, readers=[FixedReader()], instrument_torch=False) as doc:
        undo = install(doc)
        try:
            # fit(x, y, batch_size, epochs, verbose, callbacks)
            model.fit(x, y, 8, 1, 0, [seen])
        finally:
            undo()
    rec = doc.record
    assert rec is not None
    assert seen.batches == 4 and len(rec.steps) == 4  # one step a batch, the user's callback kept
    assert rec.env_value("keras.batch_size") == 8
    assert "optimizer" in rec.steps[-1].phase_ns  # Keras's optimizer.apply
    assert keras.Model.fit is original and "train_step" not in vars(model)  # put back


def test_fit_given_one_callback_or_a_list_of_its_own_and_fit_that_raises(
    keras: ModuleType, tmp_path: Path
) -> None:
    from stepdoctor.integrations.keras import install

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((32, 4), "float32"), np.zeros((32, 2), "float32")

    class Boom(keras.callbacks.Callback):  # type: ignore[misc]
        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            if batch == 2:
                raise RuntimeError("the job's own error")

    with Session(tmp_path, readers=[FixedReader()], instrument_torch=False) as doc:
        undo = install(doc)
        try:
            single = _seen(keras)
            model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=single)
            assert single.batches == 4
            listed = keras.callbacks.CallbackList([_seen(keras)], model=model)
            model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=listed)
            assert listed.callbacks[0].batches == 4 and len(listed.callbacks) == 2
            with pytest.raises(RuntimeError, match="the job's own error"):
                model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[Boom()])
            # the fit that raised left nothing of ours on the model
            assert "train_step" not in vars(model) and "apply" not in vars(model.optimizer)
        finally:
            undo()
    rec = doc.record
    assert rec is not None and len(rec.steps) >= 8


def test_what_fit_was_given_is_named_in_the_fixes_words(keras: ModuleType) -> None:
    import torch

    from stepdoctor.integrations.keras import data_kind

    class Batches(keras.utils.PyDataset):  # type: ignore[name-defined,misc]
        def __len__(self) -> int:
            return 1

        def __getitem__(self, i: int) -> Any:
            return np.zeros((2, 3)), np.zeros(2)

    def gen() -> Any:
        yield np.zeros((2, 3)), np.zeros(2)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 3)))
    assert data_kind(np.zeros((4, 3))) == "arrays"
    assert data_kind({"a": np.zeros(3)}) == "arrays" and data_kind(torch.zeros(3)) == "arrays"
    assert data_kind(Batches()) == "PyDataset"
    assert data_kind(gen()) == "generator"
    assert data_kind(loader) == "DataLoader"
    assert data_kind(object()) == "object"


def test_a_keras_model_is_described_from_its_own_layers(keras: ModuleType) -> None:
    """The description the model rules read where torch's hooks see no model (Keras on
    TensorFlow or JAX): weights' count, bytes and dtypes; dense, conv, recurrent and
    embedding layers' sizes; others only counted."""
    from stepdoctor.integrations.keras import describe_model

    text = keras.Sequential([keras.Input((12,), dtype="int32"), keras.layers.Embedding(1000, 16),
                             keras.layers.LSTM(32), keras.layers.Dense(4)])  # fmt: skip
    info = describe_model(text)
    assert info is not None and info.param_dtypes == ("float32",)
    assert info.param_count == text.count_params() and info.param_bytes == 4 * info.param_count
    kinds = {layer.kind: layer for layer in info.layers}
    assert (kinds["embedding"].in_features, kinds["embedding"].out_features) == (16, 1000)
    assert (kinds["lstm"].in_features, kinds["lstm"].out_features) == (16, 32)
    assert (kinds["linear"].in_features, kinds["linear"].out_features) == (32, 4)
    layers = [keras.Input((8, 8, 3)), keras.layers.Conv2D(6, 3), keras.layers.Flatten()]
    image = keras.Sequential([*layers, keras.layers.Dense(2, dtype="float64")])
    info = describe_model(image)
    assert info is not None and info.param_dtypes == ("float32", "float64")
    (conv,) = [layer for layer in info.layers if layer.kind == "conv"]
    assert (conv.in_features, conv.out_features, conv.kernel) == (3, 6, (3, 3))
    assert info.kinds == {"conv": 1, "other": 1, "linear": 1}
