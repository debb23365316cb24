"""Keras 3 (``model.fit``; on the torch backend torch's hooks see its forward and backward).

::

    model.fit(x, y, callbacks=[StepdoctorCallback()])   # or: stepdoctor run train.py

A step is one batch of ``fit`` (``on_train_batch_end``). The data wait is the time from a
batch's end to the next batch's begin (the epoch iterator fetching it); the train step's own
work besides the model's call and the backward (the loss, the metrics) is ``forward``, its
optimizer's ``apply`` ``optimizer``; validation inside
``fit`` (``on_test_begin`` to ``on_test_end``) is ``evaluation``. The callback notes ``fit``'s
settings; outside ``stepdoctor run`` it records a run of its own per ``fit`` and prints the
diagnosis at its end. Under ``stepdoctor run`` every ``fit`` gets one (``install``), which also
notes the ``batch_size`` given to ``fit``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from stepdoctor.collect.hooks.session import BaseSession
from stepdoctor.errors import UsageError
from stepdoctor.integrations._timing import FrameworkTimer, OwnSession, Setting, note_settings
from stepdoctor.model import Phase

try:
    import keras
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise UsageError("the Keras integration needs keras: pip install stepdoctor[keras]") from exc

__all__ = ["StepdoctorCallback", "install"]

_DATA_WAIT = Phase.DATA_WAIT.value
_EVALUATION = Phase.EVALUATION.value
_OPTIMIZER = Phase.OPTIMIZER.value
_FORWARD = Phase.FORWARD.value


class StepdoctorCallback(keras.callbacks.Callback):  # type: ignore[misc]
    """Watch a Keras ``fit``: one step per batch, the wait for the next batch as
    ``data_wait``, validation as ``evaluation``; a run of its own (with the diagnosis printed
    at the end of ``fit``) unless one is already running (``stepdoctor run``, ``watch()``).

    Args:
        **watch_options: for the run of its own (``stepdoctor.watch``'s: ``out_dir``,
            ``json_path``, ``report``...).
    """

    def __init__(self, *, fit_settings: dict[str, Setting] | None = None, **watch_options: Any):
        super().__init__()
        self._own = OwnSession(**watch_options)
        self._fit_settings = fit_settings or {}
        self._timer: FrameworkTimer | None = None
        self._waiting = False
        self._evaluating = False
        self._optimizer: Any = None

    def on_train_begin(self, logs: Any = None) -> None:
        """Join (or start) the session and note ``fit``'s settings."""
        session = self._own.open()
        self._timer = FrameworkTimer(session)
        model = self.model
        params = dict(getattr(self, "params", None) or {})
        settings: dict[str, Setting] = {
            "backend": keras.backend.backend(),
            "epochs": params.get("epochs"),
            "steps_per_epoch": params.get("steps"),
            "verbose": params.get("verbose"),
            "steps_per_execution": getattr(model, "steps_per_execution", None),
            "jit_compile": _setting(getattr(model, "jit_compile", None)),
            "run_eagerly": _setting(getattr(model, "run_eagerly", None)),
            **self._fit_settings,
        }
        note_settings(session, "keras", keras.__version__, settings)
        self._time_optimizer(model)
        self._time_train_step(model)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        """The next batch is here: the wait for it ends."""
        self._stop_waiting()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        """A step ends; the wait for the next batch begins."""
        timer = self._timer
        if timer is None:
            return
        timer.step()
        timer.enter(_DATA_WAIT)
        self._waiting = True

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        """The epoch's batches are done: no batch is waited for."""
        self._stop_waiting()

    def on_test_begin(self, logs: Any = None) -> None:
        """Validation inside ``fit`` begins (``evaluate`` called alone has no step)."""
        self._stop_waiting()
        if self._timer is not None and not self._evaluating:
            self._evaluating = True
            self._timer.enter(_EVALUATION)

    def on_test_end(self, logs: Any = None) -> None:
        """Validation ends."""
        if self._timer is not None and self._evaluating:
            self._evaluating = False
            self._timer.leave()

    def on_train_end(self, logs: Any = None) -> None:
        """End the run of its own (its report printed)."""
        self._stop_waiting()
        optimizer, self._optimizer = self._optimizer, None
        if optimizer is not None and "apply" in vars(optimizer):
            del optimizer.apply  # the class's own again
        model = self.model
        if model is not None and "train_step" in vars(model):
            del model.train_step
        self._timer = None
        self._own.close()

    def _time_train_step(self, model: Any) -> None:
        """Count the train step's own work outside the model's call and the backward (the
        loss, the metrics' update, ``zero_grad``) as ``forward``: Keras computes them in its
        step, where a plain loop's code would (looked up at each call: ``fit``'s train
        function calls ``self.train_step``)."""
        original = getattr(model, "train_step", None)
        timer = self._timer
        if original is None or timer is None or "train_step" in vars(model):
            return

        @functools.wraps(original)
        def train_step(*args: Any, **kwargs: Any) -> Any:
            timer.enter(_FORWARD)
            try:
                return original(*args, **kwargs)
            finally:
                timer.leave()

        setattr(model, "train_step", train_step)  # noqa: B010 (model: Any)

    def _time_optimizer(self, model: Any) -> None:
        """Time the model's optimizer's ``apply`` (the parameters' update: Keras's own
        optimizer, which torch's optimizer hooks do not see) as ``optimizer``."""
        optimizer = getattr(model, "optimizer", None)
        original = getattr(optimizer, "apply", None)
        timer = self._timer
        if original is None or timer is None or "apply" in vars(optimizer):
            return

        @functools.wraps(original)
        def apply(*args: Any, **kwargs: Any) -> Any:
            timer.enter(_OPTIMIZER)
            try:
                return original(*args, **kwargs)
            finally:
                timer.leave()

        setattr(optimizer, "apply", apply)  # noqa: B010 (optimizer: Any | None)
        self._optimizer = optimizer

    def _stop_waiting(self) -> None:
        if self._waiting and self._timer is not None:
            self._waiting = False
            self._timer.leave()


def _setting(value: object) -> Setting:
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def install(session: BaseSession) -> Callable[[], None]:
    """Give every ``fit`` from now on a ``StepdoctorCallback`` (which joins the running
    session) that also notes the ``batch_size`` given to ``fit``; return the undo."""
    model_cls = keras.Model
    original_fit = model_cls.fit

    signature = inspect.signature(original_fit)

    @functools.wraps(original_fit)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # Keras will say what is wrong with the call
            return original_fit(self, *args, **kwargs)
        given = list(bound.arguments.get("callbacks") or [])
        if not any(isinstance(c, StepdoctorCallback) for c in given):
            settings: dict[str, Setting] = {}
            for name in ("batch_size", "validation_freq"):
                if bound.arguments.get(name) is not None:
                    settings[name] = _setting(bound.arguments[name])
            bound.arguments["callbacks"] = [*given, StepdoctorCallback(fit_settings=settings)]
        return original_fit(*bound.args, **bound.kwargs)

    model_cls.fit = fit

    def uninstall() -> None:
        model_cls.fit = original_fit

    return uninstall
