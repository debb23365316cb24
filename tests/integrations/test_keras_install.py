"""Keras's ``fit`` given the callback under ``stepdoctor run`` (``install``), however ``fit``
is called, in this process on the torch backend."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

from stepdoctor.collect import Session  # noqa: E402
from stepdoctor.integrations.keras import install  # noqa: E402
from tests.collect.test_session import FixedReader  # noqa: E402


class _Seen(keras.callbacks.Callback):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch: int, logs: object = None) -> None:
        self.batches += 1


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="keras runs another backend")
def test_fit_called_with_its_callbacks_by_position_gets_ours_too(tmp_path: Path) -> None:
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((32, 4), "float32"), np.zeros((32, 2), "float32")
    seen = _Seen()
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


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="keras runs another backend")
def test_fit_given_one_callback_or_a_list_of_its_own_and_fit_that_raises(tmp_path: Path) -> None:
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
            single = _Seen()
            model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=single)
            assert single.batches == 4
            listed = keras.callbacks.CallbackList([_Seen()], model=model)
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
